"""The games table as the rating systems see it: time-ordered, integer-coded arrays.

Every rating system in Kibitz (``ratings_elo``, ``ratings_glicko2``, ``ratings_trueskill``,
``ratings_ttt``) replays the same arrays, so the order of games and the coding of players are
decided once, here.

Order: the games table keeps only the ``date`` of a game (not the Lichess UTCTime), so games are
replayed in ``(date, source_file, source_member, source_index)`` order: by day, then in the order
the games appear in their source (archive members by name: raw Fox members are named by their
timestamp). Lichess monthly dumps are written in time order, so within one file this is the real
order; across files of one day it is the file-name order.

Excluded games are counted by reason (``RatedGames.excluded``), never dropped silently: no date,
unknown result (``winner`` null), a missing player name, or a player playing themself.

Players are keyed by name within one (game, source) pair: a Lichess "abc" and a Fox "abc" are
different people, so a table with several pairs must be narrowed with ``game=`` / ``source=``.

Run: ``python -c "from pipeline.ratings.data import load_games; print(load_games('games'))"``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from pipeline.core.errors import KibitzError

logger = logging.getLogger(__name__)

# Columns the rating systems read; partition columns ``game`` and ``source`` come from the path.
_COLUMNS = (
    "game_id", "white", "black", "winner", "date", "source_file", "source_member", "source_index",
)  # fmt: skip
_SCORE_OF_WINNER = {"white": 1.0, "black": 0.0, "draw": 0.5}
_EPOCH = np.datetime64("1970-01-01", "D")


class GamesTableError(KibitzError, ValueError):
    """The games folder is missing, empty or mixes games that cannot share one rating pool."""


@dataclass(frozen=True)
class RatedGames:
    """Games in replay order with players coded ``0..n_players-1`` (``players[code]`` = name)."""

    white: np.ndarray  # (G,) int32 player code of White
    black: np.ndarray  # (G,) int32 player code of Black
    score: np.ndarray  # (G,) float64 White's score: 1 win, 0.5 draw, 0 loss
    day: np.ndarray  # (G,) int32 days since 1970-01-01, non-decreasing
    game_id: np.ndarray  # (G,) object game_id strings
    players: np.ndarray  # (P,) object player names
    excluded: dict[str, int] = field(default_factory=dict)  # reason → games left out

    @property
    def n_games(self) -> int:
        return int(self.white.shape[0])

    @property
    def n_players(self) -> int:
        return int(self.players.shape[0])

    def dates(self) -> np.ndarray:
        """(G,) numpy datetime64[D] of every game."""
        return _EPOCH + self.day.astype("timedelta64[D]")

    def head(self, n: int) -> RatedGames:
        """The first ``n`` games (the players table is kept whole, so codes stay valid)."""
        return RatedGames(
            self.white[:n],
            self.black[:n],
            self.score[:n],
            self.day[:n],
            self.game_id[:n],
            self.players,
            dict(self.excluded),
        )


def from_table(table: pa.Table) -> RatedGames:
    """Code and order a games table (any table with the columns ``_COLUMNS``)."""
    excluded: dict[str, int] = {}

    def keep(mask: pa.ChunkedArray | pa.Array, reason: str) -> None:
        nonlocal table
        mask = pc.fill_null(mask, False)
        dropped = table.num_rows - pc.sum(mask).as_py() if table.num_rows else 0
        if dropped:
            excluded[reason] = int(dropped)
            table = table.filter(mask)

    keep(pc.is_valid(table["date"]), "no date")
    keep(pc.is_in(table["winner"], pa.array(list(_SCORE_OF_WINNER))), "unknown result")
    keep(
        pc.and_(
            pc.and_(pc.is_valid(table["white"]), pc.is_valid(table["black"])),
            pc.and_(pc.not_equal(table["white"], ""), pc.not_equal(table["black"], "")),
        ),
        "missing player name",
    )
    keep(pc.not_equal(table["white"], table["black"]), "player against themself")
    for reason, count in excluded.items():
        logger.warning("left out %d games: %s", count, reason)

    table = table.sort_by(
        [
            ("date", "ascending"),
            ("source_file", "ascending"),
            ("source_member", "ascending"),
            ("source_index", "ascending"),
        ]
    )
    n = table.num_rows
    names = pa.concat_arrays(
        [table["white"].combine_chunks(), table["black"].combine_chunks()]
    ).dictionary_encode()
    codes = names.indices.to_numpy(zero_copy_only=False).astype(np.int32)  # (2G,)
    winner = table["winner"].to_numpy(zero_copy_only=False)
    score = np.select(
        [winner == "white", winner == "draw"], [1.0, 0.5], default=0.0
    )  # (G,) float64
    day = table["date"].cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int32)
    return RatedGames(
        white=codes[:n],
        black=codes[n:],
        score=score,
        day=day,
        game_id=table["game_id"].to_numpy(zero_copy_only=False),
        players=names.dictionary.to_numpy(zero_copy_only=False),
        excluded=excluded,
    )


def _parquet_files(games_dir: Path) -> list[str]:
    """Committed part files of the main table (``_quarantine``, ``_chunks`` and ``*.tmp`` skipped)."""
    return sorted(str(p) for p in games_dir.glob("game=*/**/*.parquet"))


def read_games_table(
    games_dir: Path | str,
    *,
    game: str | None = None,
    source: str | None = None,
    columns: tuple[str, ...] = _COLUMNS,
) -> pa.Table:
    """``columns`` of one player pool, plus ``game`` and ``source`` from the partitions."""
    games_dir = Path(games_dir)
    files = _parquet_files(games_dir)
    if not files:
        raise GamesTableError(
            f"no games table under {str(games_dir)!r} (expected game=*/source=*/month=*/*.parquet;"
            " write one with `kibitz ingest`)"
        )
    dataset = ds.dataset(
        files,
        format="parquet",
        partitioning=ds.partitioning(
            pa.schema([("game", pa.string()), ("source", pa.string()), ("month", pa.string())]),
            flavor="hive",
        ),
        partition_base_dir=str(games_dir),
    )
    condition = None
    for column, value in (("game", game), ("source", source)):
        if value is not None:
            term = ds.field(column) == value
            condition = term if condition is None else condition & term
    table = dataset.to_table(columns=[*columns, "game", "source"], filter=condition)
    pools = sorted(
        (row["game"], row["source"])
        for row in table.select(["game", "source"])
        .group_by(["game", "source"])
        .aggregate([])
        .to_pylist()
    )
    if not pools:
        raise GamesTableError(f"no games in {str(games_dir)!r} for game={game!r} source={source!r}")
    if len(pools) > 1:
        raise GamesTableError(
            f"{str(games_dir)!r} holds games of several player pools {pools!r}; "
            "choose one with --game and --source"
        )
    return table


def load_games(
    games_dir: Path | str, *, game: str | None = None, source: str | None = None
) -> RatedGames:
    """Read, filter, order and code the games of one player pool."""
    return from_table(read_games_table(games_dir, game=game, source=source))


def games_played_before(games: RatedGames) -> tuple[np.ndarray, np.ndarray]:
    """(G,) int64 each for White and Black: games the player finished before this one."""
    players = np.concatenate([games.white, games.black])  # (2G,) side-major
    slot = np.concatenate([np.arange(games.n_games) * 2, np.arange(games.n_games) * 2 + 1])
    order = np.lexsort((slot, players))  # by player, then by game
    sorted_players = players[order]
    starts = np.flatnonzero(np.r_[True, sorted_players[1:] != sorted_players[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, players.size]))
    count = np.empty(players.size, dtype=np.int64)
    count[order] = np.arange(players.size) - run_start
    return count[: games.n_games], count[games.n_games :]


def history_table(games: RatedGames, columns: dict[str, tuple[np.ndarray, np.ndarray]]) -> pa.Table:
    """One row per player per game (pre-game values), in replay order.

    ``columns`` maps an output column (``rating``, ``rd``, …) to its White and Black arrays.
    """
    n = games.n_games
    before_white, before_black = games_played_before(games)
    order = np.argsort(np.r_[np.arange(n) * 2, np.arange(n) * 2 + 1], kind="stable")  # interleave
    player = np.concatenate([games.white, games.black])[order]
    data: dict[str, pa.Array | np.ndarray] = {
        "player": pa.array(games.players[player], pa.string()),
        "game_id": pa.array(np.concatenate([games.game_id, games.game_id])[order], pa.string()),
        "date": pa.array(np.concatenate([games.dates(), games.dates()])[order], pa.date32()),
        "side": pa.array(np.repeat(np.array(["white", "black"]), n)[order], pa.string()),
        "score": np.concatenate([games.score, 1.0 - games.score])[order],
        "games_before": np.concatenate([before_white, before_black])[order],
    }
    for name, (white, black) in columns.items():
        data[f"{name}_before"] = np.concatenate([white, black])[order]
    return pa.table(data)


def final_table(games: RatedGames, columns: dict[str, np.ndarray]) -> pa.Table:
    """One row per player: the state after the last game, sorted by the first column, best first."""
    played = np.bincount(
        np.concatenate([games.white, games.black]), minlength=games.n_players
    ).astype(np.int64)
    first = next(iter(columns.values()))
    order = np.argsort(-first, kind="stable")
    data: dict[str, pa.Array | np.ndarray] = {
        "player": pa.array(games.players[order], pa.string()),
        "games": played[order],
    }
    for name, values in columns.items():
        data[name] = values[order]
    return pa.table(data)
