"""The game-independent face of the extraction steps: read a part of a games file, encode it,
hold its nets, encode the positions after moves its features need, assemble its features and
its quarantined games. Ray tasks and actors (``actors/``) call these; so do ``kibitz estimate``
and tests, without Ray.

What differs between chess and Go is an :class:`Extraction` (``pipeline.extract.chess`` /
``pipeline.extract.go`` wired by the game kind, ``pipeline.kinds``: ``kind.extraction``) that
the caller hands in; nothing here branches on the game's name.

A *part* is rows [start, stop) of one games Parquet file: a whole chunk normally, one game
when a chunk failed twice and is retried game by game.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import KibitzError
from pipeline.extract.child_positions import ChildPositions, ChildValues
from pipeline.extract.config import ExtractConfig
from pipeline.extract.features_rows import GAMES_COLUMNS

if TYPE_CHECKING:
    from pipeline.nets.stockfish import StockfishSettings

# Games that extraction could not turn into features, with why (``_quarantine`` sub-table).
QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("game", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("month", pa.string(), nullable=False),
        pa.field("game_id", pa.string()),
        pa.field("games_file", pa.string(), nullable=False),  # relative to --games
        pa.field("row", pa.int64(), nullable=False),  # row inside games_file
        pa.field("error_type", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
    ]
)


class GamesTableError(KibitzError, ValueError):
    """A games folder or file that is not the games table ``kibitz ingest`` writes."""


class NetStep(Protocol):
    """Every net of a run, loaded once (``ChessNetStep`` / ``GoNetStep``; the Ray net actor
    holds one)."""

    def __call__(self, work: Any) -> Any:
        """A part's encoded positions → the per-net result (``ChessNetResult`` / ``GoNetResult``)."""
        ...

    def evaluate_children(self, kids: ChildPositions) -> ChildValues:
        """The positions after moves of a part (:meth:`Extraction.encode_children`) → values."""
        ...


class Extraction(Protocol):
    """The kind-specific half of extraction: one object per game kind (``kind.extraction``).

    The steps below, the Ray tasks and actors and ``kibitz estimate`` call these methods instead
    of asking ``config.game`` which module to use, so adding a kind touches its own object
    only. ``work`` and ``nets`` are the kind's own types (``ChessWork`` / ``GoWork``,
    ``ChessNetResult`` / ``GoNetResult``): generic code only passes them on.
    """

    def compile_encoders(self) -> None:
        """Compile the encoders' numba kernels in this process, writing numba's on-disk cache,
        so that the workers the driver then starts load them instead of each compiling them."""
        ...

    def encode(self, config: ExtractConfig, games: pa.Table) -> Any:
        """The encoded positions of a part's games (``ChessWork`` / ``GoWork``)."""
        ...

    def net_step(self, config: ExtractConfig, *, device: str | None = None) -> NetStep:
        """Every net of the run, loaded once on ``device`` (None: the config's)."""
        ...

    def needs_children(self, config: ExtractConfig) -> bool:
        """Whether a part takes a second net pass over positions after moves
        (``pipeline/extract/child_positions.py``)."""
        ...

    def encode_children(self, work: Any, nets: Any, states: Any) -> ChildPositions:
        """The positions after moves of one part; ``states`` is the second half of
        :func:`split_states`."""
        ...

    def features(
        self,
        config: ExtractConfig,
        work: Any,
        nets: Any,
        values: list,
        kids: ChildValues | None,
    ) -> pa.Table:
        """The features rows of one part (schema ``config.schema()``)."""
        ...

    def engine(self, config: ExtractConfig) -> StockfishSettings | None:
        """The search engine that values positions outside the net actor (chess with
        ``value.evaluator: stockfish``), or None when the nets value them."""
        ...

    def value_step(self, config: ExtractConfig) -> ValueStep | None:
        """One engine valuing games in this process (``kibitz estimate``, ``kibitz serve``),
        started once and kept for every call; None when :meth:`engine` is None."""
        ...


class ValueStep(Protocol):
    """An engine valuing the positions of games ``[lo, hi)`` of a work unit (chess: Stockfish,
    ``pipeline.extract.chess.ChessValueStep``)."""

    def __call__(self, work: Any, nets: Any, lo: int, hi: int) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Part:
    """Rows [start, stop) of one games file (path relative to the games root)."""

    games_file: str
    start: int
    stop: int


@dataclass
class PartResult:
    """What one part produced: features rows, quarantined games, and stage seconds."""

    features: pa.Table
    quarantine: pa.Table
    positions: int
    stage_s: dict[str, float] = field(default_factory=dict)
    net_s: float = 0.0
    searches: int = 0


def partition_values(games_file: str) -> dict[str, str]:
    """``game=chess/source=lichess/month=2024-02/part-x.parquet`` → the hive key/values."""
    values = {}
    for segment in Path(games_file).parts[:-1]:
        if "=" in segment:
            key, value = segment.split("=", 1)
            values[key] = value
    return values


def read_games_rows(games_root: str | Path, part: Part) -> pa.Table:
    """The games rows of ``part`` with the partition columns restored from the path."""
    path = Path(games_root) / part.games_file
    try:
        table = pq.read_table(
            path, columns=[c for c in GAMES_COLUMNS if c not in ("game", "source", "month")]
        )
    except (OSError, pa.ArrowInvalid) as exc:
        raise GamesTableError(f"cannot read games file {str(path)!r}: {exc}") from exc
    table = table.slice(part.start, part.stop - part.start)
    values = partition_values(part.games_file)
    for key in ("game", "source", "month"):
        if key not in values:
            raise GamesTableError(f"games file {part.games_file!r} has no {key}=… folder")
        table = table.append_column(key, pa.array([values[key]] * table.num_rows, pa.string()))
    return table


def split_states(work: Any) -> tuple[Any, Any]:
    """(what the net actor reads, what only the children encoder reads besides it).

    Go with expected loss keeps every position's board state (~0.8 kB a position) for
    ``Extraction.encode_children``; the Ray runner ships it as an object of its own so that it
    never travels to the net actor's node. Otherwise the second part is None.
    """
    states = getattr(work, "states", None)  # GoWork only
    if states is None:
        return work, None
    return dataclasses.replace(work, states=None), states


def run_nets(
    extraction: Extraction, config: ExtractConfig, step: NetStep, work: Any
) -> tuple[Any, ChildValues | None]:
    """Both net passes of a chunk in one process (``kibitz estimate``, tests): what the Ray
    runner chains as ``evaluate`` → ``children_task`` → ``evaluate_children``."""
    work, states = split_states(work)
    nets = step(work)
    if not extraction.needs_children(config):
        return nets, None
    return nets, step.evaluate_children(extraction.encode_children(work, nets, states))


def quarantine_rows(games: pa.Table, part: Part, rows: dict[int, str], error_type: str) -> pa.Table:
    """Quarantine table rows for games ``rows`` (row in the part → reason)."""
    idx = sorted(rows)
    take = games.take(pa.array(idx, pa.int64())) if idx else games.slice(0, 0)
    return pa.table(
        {
            "game": take["game"],
            "source": take["source"],
            "month": take["month"],
            "game_id": take["game_id"],
            "games_file": pa.array([part.games_file] * len(idx), pa.string()),
            "row": pa.array([part.start + i for i in idx], pa.int64()),
            "error_type": pa.array([error_type] * len(idx), pa.string()),
            "reason": pa.array(
                [f"{part.games_file!r} row {part.start + i}: {rows[i]}" for i in idx], pa.string()
            ),
        },
        schema=QUARANTINE_SCHEMA,
    )


def assemble(
    extraction: Extraction,
    config: ExtractConfig,
    part: Part,
    work: Any,
    nets: Any,
    values: list,
    kids: ChildValues | None = None,
) -> PartResult:
    """Features of one part from its encoded work, net results, engine values (chess with
    Stockfish) and the values of its positions after moves (``needs_children``)."""
    t0 = time.perf_counter()
    features = extraction.features(config, work, nets, values, kids)
    stage_s = {"encode": work.seconds, "nets": nets.seconds}
    net_s = nets.net_seconds
    if kids is not None:  # a CPU task, then the nets' second call
        stage_s["encode_after_moves"] = kids.encode_seconds
        stage_s["nets"] += kids.seconds
        net_s += kids.net_seconds
    if values:
        stage_s["stockfish"] = float(sum(v.seconds for v in values))
    stage_s["assemble"] = time.perf_counter() - t0
    return PartResult(
        features=features,
        quarantine=quarantine_rows(work.games, part, work.failed, "IllegalMoveError"),
        positions=features.num_rows,
        stage_s=stage_s,
        net_s=net_s,
        searches=int(sum(v.searches for v in values)),
    )


def game_ranges_for(n_games: int, pieces: int) -> list[tuple[int, int]]:
    """Cut ``n_games`` rows into at most ``pieces`` contiguous, nearly equal ranges."""
    pieces = max(1, min(pieces, n_games))
    bounds = np.linspace(0, n_games, pieces + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]
