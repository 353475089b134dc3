"""What ``kibitz serve`` keeps: every accepted game's player instances, in one DuckDB file.

A player's state is the rows of ``player_instance_features`` of their games (the aggregate
SQL's output, one row per player and game), kept as Arrow IPC in the order the games were
accepted. An estimate is the meta-model applied to them (``pipeline.jobs.estimate.
estimate_of_instances``), the same function on the same rows as ``kibitz estimate``, so the
service and the batch command agree; nothing derived is the state of record.

- A game is accepted in one transaction (its row in ``games`` and its players' rows in
  ``instances``), committed before the service answers: a killed process loses no accepted
  game (DuckDB replays its write-ahead log on the next open).
- ``games`` is keyed by (game kind, game id): a second post of a game changes nothing.
- ``estimates`` logs each estimate the service answered (``GET /v1/estimates``); it is
  trimmed to the newest ``keep_estimates`` rows.
- The file records the meta-models it was built with; opened with others, it is refused
  (their features differ), so that a model change never mixes two models' instances.

Every statement is a constant with ``?`` parameters: nothing a client sends becomes SQL.
One process writes the file (the ``State`` deployment, one replica); its calls are
serialised by a lock.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.core.errors import KibitzError

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS service (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "CREATE TABLE IF NOT EXISTS games (game VARCHAR, game_id VARCHAR, seq BIGINT,"
    " accepted_at DOUBLE, players VARCHAR[], PRIMARY KEY (game, game_id))",
    "CREATE TABLE IF NOT EXISTS instances (game VARCHAR, game_id VARCHAR, player VARCHAR,"
    " seq BIGINT, instance BLOB, PRIMARY KEY (game, game_id, player))",
    "CREATE TABLE IF NOT EXISTS estimates (seq BIGINT, game VARCHAR, player VARCHAR,"
    " answered_at DOUBLE, estimate VARCHAR)",
)


class StateMismatchError(KibitzError, ValueError):
    """A state file built with other meta-models than the service's."""


def player_key(name: str) -> str:
    """Players are matched case-folded, as ``kibitz estimate --player`` matches them."""
    return name.casefold()


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class StateStore:
    """The service's DuckDB file (see the module docstring)."""

    def __init__(self, path: Path, models: dict[str, str], *, keep_estimates: int = 10_000):
        """``models``: game kind → the meta-models' identity (name and manifest hash)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.keep_estimates = keep_estimates
        self.lock = threading.Lock()
        self.db = duckdb.connect(str(path))
        for statement in SCHEMA:
            self.db.execute(statement)
        for game, identity in models.items():
            row = self.db.execute(
                "SELECT value FROM service WHERE key = ?", [f"model:{game}"]
            ).fetchone()
            if row is None:
                self.db.execute("INSERT INTO service VALUES (?, ?)", [f"model:{game}", identity])
            elif row[0] != identity:
                raise StateMismatchError(
                    f"state file {str(path)!r} holds {game} instances of the meta-models"
                    f" {row[0]!r}, not {identity!r}: give the service another --state"
                )

    def has_game(self, game: str, game_id: str) -> bool:
        with self.lock:
            return (
                self.db.execute(
                    "SELECT 1 FROM games WHERE game = ? AND game_id = ?", [game, game_id]
                ).fetchone()
                is not None
            )

    def accept(self, game: str, game_id: str, instances: dict[str, pa.Table]) -> bool:
        """Store one game's instances (player name → its one-row table); False, changing
        nothing, when the game is there already. Committed when it returns."""
        with self.lock:
            self.db.execute("BEGIN TRANSACTION")
            try:
                seq = self.db.execute("SELECT coalesce(max(seq), 0) + 1 FROM games").fetchone()[0]
                inserted = self.db.execute(
                    "INSERT INTO games VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq",
                    [game, game_id, seq, time.time(), list(instances)],
                ).fetchall()
                if not inserted:
                    self.db.execute("ROLLBACK")
                    return False
                self.db.executemany(
                    "INSERT INTO instances VALUES (?, ?, ?, ?, ?)",
                    [
                        [game, game_id, player_key(name), seq, to_ipc(table)]
                        for name, table in instances.items()
                    ],
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            return True

    def instances(self, game: str, player: str) -> pa.Table | None:
        """The player's instances in the order their games were accepted; None: no game."""
        with self.lock:
            rows = self.db.execute(
                "SELECT instance FROM instances WHERE game = ? AND player = ? ORDER BY seq",
                [game, player_key(player)],
            ).fetchall()
        if not rows:
            return None
        return pa.concat_tables([from_ipc(row[0]) for row in rows], promote_options="default")

    def game_players(self, game: str, game_id: str) -> list[str]:
        """The names of the players of an accepted game who have instances."""
        with self.lock:
            row = self.db.execute(
                "SELECT players FROM games WHERE game = ? AND game_id = ?", [game, game_id]
            ).fetchone()
        return list(row[0]) if row else []

    def log_estimates(self, game: str, estimates: dict[str, dict]) -> None:
        with self.lock:
            seq = self.db.execute("SELECT coalesce(max(seq), 0) FROM estimates").fetchone()[0]
            self.db.executemany(
                "INSERT INTO estimates VALUES (?, ?, ?, ?, ?)",
                [
                    [seq + i + 1, game, player_key(name), time.time(), json.dumps(estimate)]
                    for i, (name, estimate) in enumerate(estimates.items())
                ],
            )
            self.db.execute(
                "DELETE FROM estimates WHERE seq <= (SELECT max(seq) FROM estimates) - ?",
                [self.keep_estimates],
            )

    def recent(self, game: str | None, limit: int) -> list[dict]:
        """The newest ``limit`` logged estimates, newest first (of one game kind, if given)."""
        with self.lock:
            rows = self.db.execute(
                "SELECT answered_at, estimate FROM estimates WHERE ? IS NULL OR game = ?"
                " ORDER BY seq DESC LIMIT ?",
                [game, game, limit],
            ).fetchall()
        return [{"at": at, "estimate": json.loads(text)} for at, text in rows]

    def counts(self) -> dict[str, int]:
        with self.lock:
            games, players = self.db.execute(
                "SELECT (SELECT count(*) FROM games),"
                " (SELECT count(DISTINCT (game, player)) FROM instances)"
            ).fetchone()
        return {"games": int(games), "players": int(players)}

    def close(self) -> None:
        self.db.close()
