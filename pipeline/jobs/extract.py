"""``kibitz extract``: the games table → the per-move features table, exactly once.

Run::

    kibitz extract chess --games kibitz-out/games --out kibitz-out/features
    kibitz extract go --games kibitz-out/games --out kibitz-out/features-go --max-games 100

Read top to bottom, a run:

1. resolves the config (preset or ``--config``), refuses an output folder written with another
   config or other net weights (its ``_config.yaml`` hash or a net's sha256 differs) unless
   ``--force``, and saves ``_config.yaml``;
2. plans chunks: every games file under ``GAMES/game=<kind>/`` cut into row ranges of
   ``games_per_chunk``; a chunk id is blake2b(config hash, games file, row range), so a changed
   config or games table never reuses old output;
3. deletes files of chunks a killed run left without a marker, skips chunks already committed;
4. runs the remaining chunks through the Ray stages (``actors/extract_runner.py``) with at most
   ``max_in_flight`` in flight, committing each through :class:`ChunkStore` as it completes;
5. failure path: a part that fails (a crashed actor, a dead engine twice, a bad game) is retried
   once; a chunk failing twice is retried game by game, and a game failing twice is
   quarantined (``_quarantine``) with its reason while the job goes on;
6. writes ``_summary.json``: games, positions, stage seconds, throughput, quarantined games.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pipeline.core.catalog import refresh_home_of
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import PARTITION_COLUMNS
from pipeline.core.games_schema import GROUP_COLUMN
from pipeline.core.progress import Progress
from pipeline.extract.config import ExtractConfig
from pipeline.extract.steps import (
    QUARANTINE_SCHEMA,
    GamesTableError,
    Part,
    PartResult,
    quarantine_rows,
    read_games_rows,
)

log = logging.getLogger(__name__)

CONFIG_FILE = "_config.yaml"
SUMMARY_FILE = "_summary.json"
# Fault injection for the exactly-once tests: SIGKILL the driver after this many commits.
CRASH_AFTER_ENV = "KIBITZ_EXTRACT_KILL_AFTER_COMMITS"
ATTEMPTS = 2  # a part is tried this many times before it is split / quarantined
# Resends after "actor restarting" per chunk; bounded, so an actor that never comes back still
# ends in the attempts above instead of a loop.
MAX_RESTART_WAITS = 8


class PartError(KibitzError, ValueError):
    """A ``--part`` that is not K/N with 0 ≤ K < N."""


class ConfigMismatchError(KibitzError, ValueError):
    """The output folder holds features extracted with a different config."""


class SkipDoneError(KibitzError, ValueError):
    """``--skip-done`` aggregates that did not come from this config over this games table."""


@dataclass(frozen=True)
class ExtractChunk:
    """One commit unit: rows [start, stop) of one games file."""

    chunk_id: str
    part: Part


@dataclass
class ChunkState:
    """A chunk in flight: its parts (one, or one per game after two failures) and results."""

    chunk: ExtractChunk
    parts: list[Part]
    results: dict[Part, PartResult] = field(default_factory=dict)
    quarantined: list[pa.Table] = field(default_factory=list)
    failures: dict[Part, int] = field(default_factory=dict)
    restarts: int = 0  # resends after "actor restarting" (MAX_RESTART_WAITS)

    @property
    def complete(self) -> bool:
        return all(p in self.results or self.failures.get(p, 0) >= ATTEMPTS for p in self.parts)


# -- planning ------------------------------------------------------------------------------


def chunk_id(config_hash: str, games_file: str, start: int, stop: int) -> str:
    """16 hex chars: the same config over the same games rows always gets the same id."""
    key = f"{config_hash}\x00{games_file}\x00{start}\x00{stop}".encode()
    return hashlib.blake2b(key, digest_size=8).hexdigest()


def games_files(games_root: Path, game: str) -> list[str]:
    """Games Parquet files of one game kind, relative to the root, in a stable order."""
    base = games_root / f"game={game}"
    if not base.is_dir():
        raise GamesTableError(
            f"no {game} games under {str(games_root)!r} (expected a game={game}/ folder that"
            " `kibitz ingest` writes)"
        )
    return sorted(
        p.relative_to(games_root).as_posix()
        for p in base.rglob("*.parquet")
        if not any(part.startswith("_") for part in p.relative_to(games_root).parts)
    )


def _file_group(path: Path) -> str:
    """The rank group of a games file's first game ("" when it has none): ingest writes a file
    per input file, month and chunk, so for a dump cut by band or rank group it is the file's."""
    games = pq.ParquetFile(path)
    if GROUP_COLUMN not in games.schema_arrow.names or games.metadata.num_rows == 0:
        return ""  # a games table written without groups: one pool
    column = games.read_row_group(0, columns=[GROUP_COLUMN]).column(0)
    return (column[0].as_py() if len(column) else None) or ""


def parse_part(text: str) -> tuple[int, int]:
    """``"K/N"`` → (K, N) with 0 ≤ K < N: part K of a run split N ways (``--part``)."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise PartError(f"--part takes K/N (e.g. 0/4), got {text!r}") from None
    if not 0 <= k < n:
        raise PartError(f"--part {text}: K must be in 0 … N − 1")
    return k, n


def in_part(chunk: str, part: tuple[int, int]) -> bool:
    """Whether the chunk with id ``chunk`` (16 hex chars, already a hash) falls in ``part``."""
    k, n = part
    return int(chunk, 16) % n == k


def plan_chunks(
    games_root: Path,
    config: ExtractConfig,
    *,
    max_games: int | None = None,
    part: tuple[int, int] | None = None,
    skip: Callable[[Part], bool] | None = None,
) -> list[ExtractChunk]:
    """Every games file cut into ``games_per_chunk`` row ranges, ordered so that any prefix is
    balanced over rank groups.

    ``part`` (K, N) keeps the chunks of part K of N (by chunk id: disjoint games, the N parts
    together are the whole plan), so that a run too long for one machine or one call is split
    over several, each part's aggregates merged afterwards (``kibitz aggregate --merge``);
    ``max_games`` then counts the part's games. ``skip`` drops planned row ranges before the
    budget counts them (:class:`AggregatedGames`: chunks an earlier run already extracted).

    The next chunk always comes from the rank group with the fewest games planned so far (ties:
    the group name), each group's files in path order. A run stopped part-way, or cut by
    ``max_games`` (which keeps the first games of this order), then holds about as many games
    of every band or group, not the first files' months (Fox's 9d games fill the early ones).
    Chunk ids do not depend on the order, so a resume under another order is still exact.
    """
    digest = config.config_hash()
    queues: dict[str, deque[tuple[str, int, int]]] = {}
    for rel in games_files(games_root, config.game):
        path = games_root / rel
        rows = pq.ParquetFile(path).metadata.num_rows
        if rows == 0:
            continue
        queue = queues.setdefault(_file_group(path), deque())
        for start in range(0, rows, config.games_per_chunk):
            queue.append((rel, start, min(start + config.games_per_chunk, rows)))
    heap = [(0, group) for group in sorted(queues)]
    chunks = []
    budget = max_games if max_games is not None else float("inf")
    while heap and budget > 0:
        planned, group = heapq.heappop(heap)
        rel, start, stop = queues[group].popleft()
        wanted = part is None or in_part(chunk_id(digest, rel, start, stop), part)
        if wanted and not (skip is not None and skip(Part(rel, start, stop))):  # planned rows
            stop = int(min(stop, start + budget))
            budget -= stop - start
            chunks.append(ExtractChunk(chunk_id(digest, rel, start, stop), Part(rel, start, stop)))
        if queues[group]:
            heapq.heappush(heap, (planned + stop - start, group))
    return chunks


class AggregatedGames:
    """Games that earlier runs' aggregates already hold: a ``plan_chunks`` filter.

    A long extraction's features may be lost with a machine while its small aggregates were
    kept (committed, as docs/guide/gpu.md asks). Chunks commit whole, so a chunk with any game among
    the aggregates' instances was extracted entirely (its other games quarantined): skipping it
    leaves exactly the games still to do, and ``kibitz aggregate --merge`` then joins the old
    aggregates with this run's. Aggregates of another config (their features config hash), or
    holding games this games table does not plan, are refused: their games would not be the
    ones skipped here.
    """

    def __init__(self, games_root: Path, config: ExtractConfig, aggregates: list[Path]) -> None:
        # Imported here: the aggregates stage sits above extraction; only this option reads it.
        from pipeline.meta.aggregate import INSTANCES, load_mart, load_summary

        self.games_root = games_root
        self.aggregates = aggregates
        self.chunks = self.games = 0
        self._ids: dict[str, list[str]] = {}
        digest = config.config_hash()
        self.done: set[str] = set()
        for folder in aggregates:
            theirs = load_summary(folder).get("features_config_hash")
            if theirs != digest:
                raise SkipDoneError(
                    f"--skip-done {str(folder)!r}: its features were extracted with config"
                    f" {theirs}, this run's is {digest}; its games would stay in another config"
                )
            self.done.update(load_mart(folder, INSTANCES)["game_id"].to_pylist())
        planned = {g for c in plan_chunks(games_root, config) for g in self._games(c.part)}
        stray = self.done - planned
        if stray:
            raise SkipDoneError(
                f"--skip-done: {len(stray):,} of the aggregates' {len(self.done):,} games are not"
                f" in {str(games_root)!r} (e.g. {sorted(stray)[0]!r}): another games table's"
            )

    def _games(self, part: Part) -> list[str]:
        if part.games_file not in self._ids:
            table = pq.read_table(self.games_root / part.games_file, columns=["game_id"])
            self._ids[part.games_file] = table["game_id"].to_pylist()
        return self._ids[part.games_file][part.start : part.stop]

    def __call__(self, part: Part) -> bool:
        """Whether the planned rows ``part`` were extracted already (and counts them if so)."""
        if self.done.isdisjoint(self._games(part)):
            return False
        self.chunks += 1
        self.games += part.stop - part.start
        return True

    def record(self) -> dict[str, Any]:
        """What was skipped, for ``_summary.json``."""
        folders = [str(a) for a in self.aggregates]
        return {"aggregates": folders, "chunks": self.chunks, "games": self.games}


def net_hashes(config: ExtractConfig) -> dict[str, str]:
    """sha256 of the weights of every net the config names, by model (registry name or path).

    The config names nets, not weights: a retrained ``kibitz-sscore-chess`` keeps its name, so
    without these a resumed run once mixed s-scores of two different nets in one features table.
    """
    from pipeline.nets.registry import model_sha256  # imports torch: only when extracting

    models = [n.model for n in (*config.imitation_nets, *config.strength_nets)]
    if config.value.evaluator == "net" and config.value.model:
        models.append(config.value.model)
    return {model: model_sha256(model) for model in dict.fromkeys(models)}


def check_output_config(
    out_root: Path, config: ExtractConfig, nets: dict[str, str] | None = None
) -> None:
    """Refuse to add to an output folder that was written with another config or other weights.

    ``nets`` (default: :func:`net_hashes`) is compared with the folder's record; a folder
    written before Kibitz recorded the weights cannot be checked and is only warned about.
    """
    path = out_root / CONFIG_FILE
    if not path.is_file():
        return
    old = yaml.safe_load(path.read_text()) or {}
    if old.get("config_hash") != config.config_hash():
        raise ConfigMismatchError(
            f"{str(out_root)!r} holds features of config {old.get('config_hash')!r}, this run's"
            f" config is {config.config_hash()!r}; use --force to replace them or another --out"
        )
    if "nets" not in old:
        log.warning("%s records no net sha256 (written by an older Kibitz): weights unchecked",
                    path)  # fmt: skip
        return
    nets = net_hashes(config) if nets is None else nets
    changed = {m: (old["nets"].get(m), h) for m, h in nets.items() if old["nets"].get(m) != h}
    if changed:
        detail = "; ".join(f"{m}: {a} then, {b} now" for m, (a, b) in changed.items())
        raise ConfigMismatchError(
            f"{str(out_root)!r} holds features of other net weights ({detail}); use --force to"
            " replace them or another --out"
        )


def save_config(
    out_root: Path, config: ExtractConfig, games_root: Path, nets: dict[str, str]
) -> None:
    record = {
        "config_hash": config.config_hash(),
        "nets": nets,
        "games": str(games_root),
        "config": config.to_dict(),
    }
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = out_root / (CONFIG_FILE + ".tmp")
    tmp.write_text(yaml.safe_dump(record, sort_keys=False))
    os.replace(tmp, out_root / CONFIG_FILE)


# -- committing ----------------------------------------------------------------------------


def commit_chunk(store: ChunkStore, state: ChunkState, config: ExtractConfig) -> dict[str, Any]:
    """Write one chunk's features and quarantine (parts in row order), then its marker."""
    done = [state.results[p] for p in sorted(state.results, key=lambda p: p.start)]
    schema = config.schema()
    features = pa.concat_tables([r.features for r in done]) if done else schema.empty_table()
    quarantine = [r.quarantine for r in done] + state.quarantined
    quarantine = pa.concat_tables(quarantine) if quarantine else QUARANTINE_SCHEMA.empty_table()
    part = state.chunk.part
    meta = {
        "games_file": part.games_file,
        "start": part.start,
        "stop": part.stop,
        "config_hash": config.config_hash(),
        "positions": features.num_rows,
        "quarantined": quarantine.num_rows,
        "split_by_game": len(state.parts) > 1,
    }
    store.commit(state.chunk.chunk_id, {"": features, "_quarantine": quarantine}, meta)
    return meta


# -- the run -------------------------------------------------------------------------------


@dataclass
class RunStats:
    games: int = 0
    positions: int = 0
    searches: int = 0
    stage_s: dict[str, float] = field(default_factory=dict)
    net_s: float = 0.0
    retries: int = 0
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    # Seconds from the run's start to its first and last part result, and the positions of the
    # first: the steady rate between them leaves out Ray's, the actors' and the nets' start-up.
    first_s: float | None = None
    first_positions: int = 0
    last_s: float = 0.0

    def add(self, result: PartResult, at_s: float) -> None:
        self.positions += result.positions
        self.searches += result.searches
        self.net_s += result.net_s
        for stage, seconds in result.stage_s.items():
            self.stage_s[stage] = self.stage_s.get(stage, 0.0) + seconds
        if self.first_s is None:
            self.first_s, self.first_positions = at_s, self.positions
        self.last_s = at_s

    def steady_positions_per_s(self) -> float | None:
        """Positions/s after the first part result: start-up excluded (None before two)."""
        if self.first_s is None or self.last_s <= self.first_s:
            return None
        return (self.positions - self.first_positions) / (self.last_s - self.first_s)


def run_extract(
    config: ExtractConfig,
    games_root: Path,
    out_root: Path,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    max_games: int | None = None,
    part: tuple[int, int] | None = None,
    skip_done: list[Path] | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run (or resume) one extraction; return the summary, also written to ``_summary.json``.

    ``skip_done``: aggregates folders of earlier runs of this config over these games (see
    :class:`AggregatedGames`); their chunks are left out of the plan."""
    # Imported here: `pipeline` stays importable without Ray; this is where the driver
    # crosses into `actors`.
    from actors.extract_runner import ACTOR_RESTARTING, RAY_ERRORS, ExtractRunner, task_failure

    games_root, out_root = Path(games_root), Path(out_root)
    store = ChunkStore(out_root, PARTITION_COLUMNS)
    if force:
        store.reset()
        (out_root / CONFIG_FILE).unlink(missing_ok=True)
    nets = net_hashes(config)
    check_output_config(out_root, config, nets)
    skip = AggregatedGames(games_root, config, [Path(a) for a in skip_done]) if skip_done else None
    chunks = plan_chunks(games_root, config, max_games=max_games, part=part, skip=skip)
    save_config(out_root, config, games_root, nets)
    removed = store.clean_partial()
    if removed:
        log.info("removed %d files of chunks a killed run left unfinished", removed)
    done = store.done_ids()
    todo = deque(c for c in chunks if c.chunk_id not in done)
    crash_after = int(os.environ.get(CRASH_AFTER_ENV, "0"))
    stats = RunStats()
    commits = 0
    total_games = sum(c.part.stop - c.part.start for c in todo)
    progress = Progress(total=total_games, desc=f"extract {config.game}", unit=" games",
                    disable=not show_progress, mininterval=1.0)  # fmt: skip
    started = time.perf_counter()
    with ExtractRunner(config, str(games_root), address=address, num_cpus=num_cpus) as runner:
        in_flight: dict[Any, tuple[ChunkState, Part]] = {}
        states: deque[tuple[ChunkState, Part]] = deque()

        def submit(state: ChunkState, part: Part) -> None:
            in_flight[runner.submit(part)] = (state, part)

        while todo or in_flight or states:
            chunks_open = {id(s) for s, _ in in_flight.values()}
            while todo and len(chunks_open) < config.max_in_flight:
                chunk = todo.popleft()
                state = ChunkState(chunk, [chunk.part])
                submit(state, chunk.part)
                chunks_open.add(id(state))
            ref = runner.wait_one(list(in_flight))
            state, part = in_flight.pop(ref)
            try:
                result = runner.get(ref)
            except RAY_ERRORS as exc:
                if isinstance(exc, ACTOR_RESTARTING) and state.restarts < MAX_RESTART_WAITS:
                    # Sent while an actor restarted: wait for it, resend, count no attempt.
                    state.restarts += 1
                    stats.retries += 1
                    log.warning("part %s hit a restarting actor; waiting for it", part)
                    runner.wait_ready()
                    submit(state, part)
                    continue
                failures = state.failures.get(part, 0) + 1
                state.failures[part] = failures
                stats.retries += 1
                error_type, reason = task_failure(exc)
                log.warning("part %s failed (%d/%d): %s", part, failures, ATTEMPTS, reason)
                if failures < ATTEMPTS:
                    submit(state, part)
                elif part.stop - part.start > 1:
                    state.parts.remove(part)
                    singles = [
                        Part(part.games_file, r, r + 1) for r in range(part.start, part.stop)
                    ]
                    state.parts.extend(singles)
                    for single in singles:
                        submit(state, single)
                else:
                    games = read_games_rows(games_root, part)
                    state.quarantined.append(quarantine_rows(games, part, {0: reason}, error_type))
            else:
                state.results[part] = result
                stats.add(result, time.perf_counter() - started)
                progress.update(part.stop - part.start)
                progress.set_postfix(
                    pos_s=f"{stats.positions / (time.perf_counter() - started):.0f}"
                )
            if any(s is state for s, _ in in_flight.values()) or not state.complete:
                continue
            meta = commit_chunk(store, state, config)
            stats.games += state.chunk.part.stop - state.chunk.part.start
            for q in state.quarantined + [r.quarantine for r in state.results.values()]:
                stats.quarantined += q.select(
                    ["games_file", "row", "game_id", "reason"]
                ).to_pylist()
            commits += 1
            log.debug("committed chunk %s: %s", state.chunk.chunk_id, meta)
            if crash_after and commits >= crash_after:
                os.kill(os.getpid(), signal.SIGKILL)
    progress.close()
    wall_s = time.perf_counter() - started
    summary = build_summary(config, chunks, store, stats, wall_s, games_root, out_root)
    if skip is not None:
        summary["skipped_done"] = skip.record()
    (out_root / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, sort_keys=True))
    refresh_home_of(out_root)  # the home's kibitz.duckdb: <kind>_features views
    return summary


def build_summary(
    config: ExtractConfig,
    chunks: list[ExtractChunk],
    store: ChunkStore,
    stats: RunStats,
    wall_s: float,
    games_root: Path,
    out_root: Path,
) -> dict[str, Any]:
    """Counts over the whole output (every committed chunk) and this run's timings."""
    markers = store.markers()
    planned = {c.chunk_id for c in chunks}
    committed = [m for cid, m in markers.items() if cid in planned]
    nets_s = stats.stage_s.get("nets", 0.0)
    steady = stats.steady_positions_per_s()
    return {
        "game": config.game,
        "games_dir": str(games_root),
        "out_dir": str(out_root),
        "config_hash": config.config_hash(),
        "chunks": {"planned": len(chunks), "committed": len(committed)},
        "games": sum(m["meta"]["stop"] - m["meta"]["start"] for m in committed),
        "positions": sum(m["meta"]["positions"] for m in committed),
        "quarantined_games": sum(m["meta"]["quarantined"] for m in committed),
        "this_run": {
            "games": stats.games,
            "positions": stats.positions,
            "wall_s": round(wall_s, 3),
            "positions_per_s": round(stats.positions / wall_s, 1) if wall_s else None,
            "first_result_s": None if stats.first_s is None else round(stats.first_s, 3),
            "steady_positions_per_s": None if steady is None else round(steady, 1),
            "stage_s": {k: round(v, 3) for k, v in sorted(stats.stage_s.items())},
            "net_s": round(stats.net_s, 3),
            "net_share_of_net_stage": round(stats.net_s / nets_s, 3) if nets_s else None,
            "stockfish_searches": stats.searches,
            "retries": stats.retries,
            "quarantined": stats.quarantined,
        },
    }
