"""Position difficulty: the expected loss of a move drawn from an imitation net's likely moves.

``E[loss] = Σ prior(a) · loss(a) / Σ prior(a)`` over the moves ``a`` that the chosen net finds
most likely: the top moves in order of prior until they cover ``prior_share`` of the prior mass,
never more than ``max_moves``. Each of those moves costs one evaluation of its resulting position,
so the cap bounds the evaluator work per position. Everything here is vectorised over all
positions of a chunk (no per-position loop).

    >>> import numpy as np
    >>> m = likely_moves(np.array([[0.6, 0.3, 0.1]]), prior_share=0.85, max_moves=5)
    >>> m.index.tolist(), m.keep.tolist()
    ([[0, 1, 2]], [[True, True, False]])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LikelyMoves:
    """The selected moves per position, padded to ``k`` columns."""

    index: np.ndarray  # (N, k) int32: move index in the position's move list / policy
    prior: np.ndarray  # (N, k) float32: the net's prior of each move (0 where not kept)
    keep: np.ndarray  # (N, k) bool: selected

    @property
    def count(self) -> np.ndarray:
        """(N,) int16 moves selected per position."""
        return self.keep.sum(axis=1).astype(np.int16)


def csr_to_dense(values: np.ndarray, offsets: np.ndarray, *, fill: float) -> np.ndarray:
    """A ragged (CSR) list per row as a (N, max_len) array padded with ``fill``."""
    lengths = np.diff(offsets)  # (N,)
    n, width = len(lengths), int(lengths.max(initial=0))
    dense = np.full((n, width), fill, dtype=values.dtype)  # (N, max_len)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
    dense[rows, cols] = values
    return dense


def likely_moves(probs: np.ndarray, *, prior_share: float, max_moves: int) -> LikelyMoves:
    """Top moves of each row of ``probs`` (N, M) covering ``prior_share``, at most ``max_moves``.

    A move is kept while the mass of the moves ranked above it is still below the share, so the
    most likely move is always kept; moves of zero probability (illegal, padding) never are.
    Ties are broken by move index (stable sort), so the selection is deterministic.
    """
    k = min(max_moves, probs.shape[1])
    order = np.argsort(-probs, axis=1, kind="stable")[:, :k]  # (N, k)
    prior = np.take_along_axis(probs, order, axis=1).astype(np.float32)  # (N, k)
    before = np.cumsum(prior, axis=1) - prior  # mass ranked above each move
    keep = (before < prior_share) & (prior > 0)
    return LikelyMoves(order.astype(np.int32), np.where(keep, prior, 0).astype(np.float32), keep)


def expected_loss(
    v_before: np.ndarray, v_after_moves: np.ndarray, moves: LikelyMoves
) -> np.ndarray:
    """(N,) float32 ``Σ prior·(v_before − v_after(a)) / Σ prior`` over the kept moves.

    ``v_after_moves`` (N, k) is the mover's value after each selected move (any value where not
    kept). Positions with no kept move (no legal move) give NaN, written as null.
    """
    loss = v_before[:, None] - v_after_moves  # (N, k)
    mass = moves.prior.sum(axis=1)  # (N,)
    total = np.where(moves.keep, moves.prior * loss, 0).sum(axis=1)  # (N,)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mass > 0, total / mass, np.nan).astype(np.float32)
