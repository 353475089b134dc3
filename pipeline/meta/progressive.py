"""An estimate after each of a player's games, and how many more games would settle it.

Two questions a single estimate leaves open (issue "Beyond a point estimate"): how the estimate
moves as games come in, and how many further games make it trustworthy. Both come from what
``kibitz train meta`` measured, with no new fitting:

- :func:`running_means`: the mean instance features after game 1, 2, …, K (NaN-aware, one
  cumulative sum, no loop over games); each row is then scored by the models of the trained n
  nearest to its game count.
- :func:`games_for_confidence`: the smallest number of games at which the rank-group model's
  measured accuracy (±1 group, or exact) on evaluation games reaches a stated confidence,
  interpolated linearly between the trained n; None when the largest trained n falls short.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.meta.intervals import LEVELS
from pipeline.meta.train import MetaModels


def running_means(features: np.ndarray) -> np.ndarray:
    """(K, F) mean of rows 0..k of ``features`` (K, F) for each k, ignoring NaN per feature."""
    finite = np.isfinite(features)
    sums = np.cumsum(np.where(finite, features, 0.0), axis=0)
    counts = np.cumsum(finite, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def games_for_confidence(
    ns: Sequence[int], accuracies: Sequence[float | None], confidence: float
) -> float | None:
    """Games at which the measured accuracy first reaches ``confidence``.

    ``accuracies[i]`` is the accuracy at ``ns[i]`` (None: not measured). Between two trained n
    the accuracy is taken as linear in n; below the smallest n nothing is assumed (its n is
    the answer when it already reaches the confidence).

    >>> round(games_for_confidence([1, 5, 10], [0.5, 0.7, 0.9], 0.8), 6)
    7.5
    >>> games_for_confidence([1, 5], [0.5, 0.7], 0.9) is None
    True
    """
    points = sorted((n, a) for n, a in zip(ns, accuracies, strict=True) if a is not None)
    for i, (n, a) in enumerate(points):
        if a >= confidence:
            if i == 0:
                return float(n)
            n0, a0 = points[i - 1]
            return n0 + (confidence - a0) * (n - n0) / (a - a0)
    return None


def further_games(needed: float | None, played: int) -> int | None:
    """Whole games still to play to reach ``needed`` (0 when already there; None: unknown)."""
    return None if needed is None else max(0, math.ceil(needed - 1e-9) - played)


@dataclass
class Step:
    """The estimate after the first ``games`` games."""

    games: int
    n_model: int
    rank_group_index: int
    prediction: float  # the rank-group regressor's output (group index scale)
    strength: float | None = None
    interval_80: list[float] | None = None
    interval_95: list[float] | None = None


def score_steps(
    models: MetaModels, features: np.ndarray, columns: Sequence[str], feature_set: str
) -> list[Step]:
    """One :class:`Step` per prefix of ``features`` (K, F), one player's instances in game
    order; each scored by the models of the trained n nearest to its game count (one call per
    n), those fitted for one player's games where the model has them."""
    means = running_means(features)  # (K, F)
    games = np.arange(1, means.shape[0] + 1)
    nearest = np.array([models.nearest_n(int(k)) for k in games])
    raw = np.empty(games.size)
    index = np.empty(games.size, dtype=np.int64)
    for n in np.unique(nearest):
        rows = np.flatnonzero(nearest == n)
        raw[rows], index[rows] = models.predict(
            means[rows], columns, feature_set, int(n), player=True
        )
    steps = [
        Step(int(k), int(n), int(i), float(r))
        for k, n, i, r in zip(games, nearest, index, raw, strict=True)
    ]
    strength = models.strength(feature_set)
    if strength is None:
        return steps
    near_s = np.array([strength.nearest_n(int(k)) for k in games])
    for n in np.unique(near_s):
        rows = np.flatnonzero(near_s == n)
        point = strength.predict(means[rows], columns, int(n))
        bounds = {lv: strength.interval(point, int(n), lv) for lv in LEVELS}
        for j, row in enumerate(rows):
            steps[row].strength = float(point[j])
            steps[row].interval_80 = bounds[0.8][j].tolist()
            steps[row].interval_95 = bounds[0.95][j].tolist()
    return steps
