"""Position difficulty: the expected loss of a move drawn from an imitation net's likely moves.

``E[loss] = Σ prior(a) · loss(a) / Σ prior(a)`` over the moves ``a`` that the chosen net finds
most likely: the top moves in order of prior until they cover ``prior_share`` of the prior mass,
never more than ``max_moves``. Each of those moves costs one evaluation of its resulting position,
so the cap bounds the evaluator work per position. Everything here is vectorised over all
positions of a chunk (no per-position loop).

    >>> import numpy as np
    >>> m = select_likely(np.array([[4, 0, 7]]), np.array([[0.6, 0.3, 0.1]]), prior_share=0.85)
    >>> m.index.tolist(), m.keep.tolist()
    ([[4, 0, 7]], [[True, True, False]])
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


def select_likely(order: np.ndarray, prior: np.ndarray, *, prior_share: float) -> LikelyMoves:
    """The likely moves of each row from its top moves sorted by prior, ``order`` and
    ``prior`` (N, k) (the net bank's policy statistics, ``pipeline.nets.policy_stats``, sort them
    where the net ran, ties by move index).

    A move is kept while the mass of the moves ranked above it is still below the share, so the
    most likely move is always kept; moves of zero probability (illegal, padding) never are.
    """
    prior = prior.astype(np.float32)
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
