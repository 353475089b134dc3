"""Positions after moves: a chunk's second net pass, encoded outside the net actor.

Some features need the value of positions that have no row of their own:

- chess with a value net: each game's final position (after its last move) and, for expected
  loss, the position after each likely move other than the played one;
- Go with expected loss: the position after each likely move other than the played one.

Which moves are likely is known only after the imitation net's pass, so a chunk takes two calls
of the net actor with a CPU task between them (``actors/extract_tasks.children_task``) that
encodes these positions. The actor runs other chunks' passes meanwhile instead of waiting for
Python: on an H100 the chess value-net path spent 10.6 s of a 32 s run encoding children inside
the actor (docs/guide/gpu.md).

The game-specific encoders are ``extract_chess.encode_chess_children`` and
``extract_go.encode_go_children``; each net step's ``evaluate_children`` values them through
:func:`value_children`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.core.packed_planes import PackedPlanes, concat_packed, pack_planes
from pipeline.extract.expected_loss import LikelyMoves

if TYPE_CHECKING:  # the CPU tasks that encode children never load torch
    from pipeline.nets.net_bank import NetBank, NetJob

ENCODE_ROWS = 1024  # children encoded per call: 29 MB (chess) / 33 MB (Go) of float planes


@dataclass
class ChildPositions:
    """The encoded children of one chunk, rows ``[0, n_final)`` games' final positions (chess)
    and then one row per likely move that was not played."""

    inputs: dict[str, Any]  # net input name → (C, ...) array or PackedPlanes
    after: np.ndarray  # (C,) chess: int8 outcome of the game there; Go: bool Black to move
    n_final: int
    rows: np.ndarray  # (C − n_final,) int64 row of each likely-move child in the (M, k) table
    cols: np.ndarray  # (C − n_final,) int64 its column
    seconds: float = 0.0

    def __len__(self) -> int:
        return len(self.after)


@dataclass
class ChildValues:
    """The value net's output for every child, laid out as its ChildPositions."""

    value: np.ndarray  # (C,) float64 chess: win rate of the side to move; Go: White's lead
    n_final: int
    rows: np.ndarray
    cols: np.ndarray
    encode_seconds: float = 0.0
    seconds: float = 0.0
    net_seconds: float = 0.0

    def likely_table(self, shape: tuple[int, int]) -> np.ndarray:
        """(M, k) float64 values of the likely moves' children; NaN where none was needed
        (the played move, whose child is the next row, and moves not kept)."""
        table = np.full(shape, np.nan)
        table[self.rows, self.cols] = self.value[self.n_final :]
        return table


def unplayed_likely(likely: LikelyMoves, played: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the kept likely moves that differ from the played move ``played`` (M,)
    (same numbering as ``likely.index``): the played move's child is the game's next row."""
    need = likely.keep & (likely.index != played[:, None])  # (M, k)
    rows, cols = np.nonzero(need)
    return rows.astype(np.int64), cols.astype(np.int64)


def encode_packed(
    count: int, encode: Callable[[int, int], tuple[np.ndarray, ...]]
) -> tuple[PackedPlanes, list[np.ndarray]]:
    """Encode ``count`` children ``ENCODE_ROWS`` at a time and pack each batch's planes, so a
    chunk's children never exist as float planes all at once.

    ``encode(start, stop)`` returns the planes of children ``[start, stop)`` followed by any
    per-row arrays; those come back concatenated, in order.
    """
    packs, rows = [], []
    for start in range(0, max(count, 1), ENCODE_ROWS):  # one empty batch when count is 0
        planes, *per_row = encode(start, min(start + ENCODE_ROWS, count))
        packs.append(pack_planes(planes))
        rows.append(per_row)
    return concat_packed(packs), [np.concatenate(column) for column in zip(*rows, strict=True)]


def value_children(
    bank: NetBank,
    job: NetJob,
    kids: ChildPositions,
    to_value: Callable[[dict[str, np.ndarray]], np.ndarray],
) -> ChildValues:
    """Run ``job`` over every child in the bank's batches; ``to_value`` turns the job's
    outputs (C rows) into the value column. Seconds: this call's and the nets' own."""
    t0 = time.perf_counter()
    net_before = bank.timer.net_s

    def source(start: int, stop: int) -> dict[str, Any]:
        return {
            name: rows.rows(start, stop) if isinstance(rows, PackedPlanes) else rows[start:stop]
            for name, rows in kids.inputs.items()
        }

    value = to_value(bank.run([job], source, len(kids))[job.key])
    return ChildValues(
        value, kids.n_final, kids.rows, kids.cols, kids.seconds,
        time.perf_counter() - t0, bank.timer.net_s - net_before,
    )  # fmt: skip
