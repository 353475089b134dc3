"""Skill depth (after Goodman et al.): how much a step up in "budget" is worth, and how that
advantage fades as the budget grows.

Input is a grid of results between skill levels: for every pair of levels (i weaker, j stronger)
the stronger side's mean score p_ij (draws count ½) over n_ij games. We model the net score
S = 2p − 1 ∈ [−1, 1] as a function of x = log2(b_j / b_i), the log budget ratio:

- model 1: ``S = M·(1 − 2/(1 + e^{r·x}))`` — M is the largest net advantage any budget gap can
  buy (M = 1: the stronger side eventually always wins), r how fast it is bought per doubling.
  With M = 1 this is exactly the Bradley–Terry / logistic model p = σ(r·x).
- model 2: ``S = M·(1 − 2/(1 + e^{r·x·2^{−β·y}}))`` with y = log2(b_i / b_min), the weaker side's
  budget in doublings above the lowest level. β > 0 means each doubling of the base budget
  shrinks the value of a further doubling by the factor 2^{−β} (diminishing returns; β = 0 gives
  model 1). The exact model 2 of the paper could not be consulted while writing this module, so
  this is Kibitz's own statement of "model 1 with a β term for the base budget"; the formula
  above is what is fitted and reported.

Fit: weighted least squares (weights n_ij) plus a light L2 penalty λ·(M² + r² + β²), λ = 1e-5,
by scipy.optimize (L-BFGS-B, M ∈ (0, 1], r ≥ 0). The Skill Trace is S of one doubling (x = 1) as
a function of the base level: observed on adjacent level pairs, and model 2's curve 2·σ-shape
``M·(1 − 2/(1 + e^{r·2^{−β·y}}))``.

Levels from the games table (``kibitz ratings depth``): the rank groups of cross-group games.
A chess band "1400-1600" has budget 1500 (its midpoint rating); a Go group has budget
2^(midpoint rank number), rank numbers as in the games table (1k = 0, n k = 1 − n, n d = n,
pro = 10), so one Go rank step counts as one doubling, e.g. "3-5k" → 2^−3, "1d" → 2^1.

Run: ``kibitz ratings depth --games DIR``.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.optimize import minimize

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import read_games_table

logger = logging.getLogger(__name__)

L2_PENALTY = 1e-5  # λ: keeps M, r, β finite on grids that cannot pin them down
_CHESS_BAND = re.compile(r"^(\d+)-(\d+)$")
_GO_GROUP = re.compile(r"^(\d+)(?:-(\d+))?([kd])$")


class SkillDepthError(KibitzError, ValueError):
    """A level label that has no budget, or a grid too small to fit."""


@dataclass(frozen=True)
class DepthGrid:
    """Results between levels: one entry per (weaker, stronger) pair that met."""

    levels: list[str]  # level labels, weakest first
    budgets: np.ndarray  # (L,) float64 budget of each level
    weak: np.ndarray  # (K,) int64 index of the weaker level of each pair
    strong: np.ndarray  # (K,) int64
    score: np.ndarray  # (K,) float64 mean score of the stronger level
    games: np.ndarray  # (K,) int64

    @property
    def x(self) -> np.ndarray:
        return np.log2(self.budgets[self.strong] / self.budgets[self.weak])

    @property
    def y(self) -> np.ndarray:
        return np.log2(self.budgets[self.weak] / self.budgets.min())

    def table(self) -> pa.Table:
        return pa.table(
            {
                "weak_level": [self.levels[i] for i in self.weak],
                "strong_level": [self.levels[i] for i in self.strong],
                "x_log2_budget_ratio": self.x,
                "y_log2_base_budget": self.y,
                "games": self.games,
                "strong_score": self.score,
                "net_score": 2.0 * self.score - 1.0,
            }
        )


@dataclass(frozen=True)
class DepthFit:
    model: int  # 1 or 2
    m: float
    r: float
    beta: float  # 0 for model 1
    rmse: float  # weighted RMS error of S

    def predict(self, x: np.ndarray, y: np.ndarray | float = 0.0) -> np.ndarray:
        return model_s(x, y, self.m, self.r, self.beta)


def model_s(x: np.ndarray, y: np.ndarray | float, m: float, r: float, beta: float) -> np.ndarray:
    """Net score S of model 2 (model 1 when beta = 0); see the module docstring."""
    slope = r * np.power(2.0, -beta * np.asarray(y, dtype=np.float64))
    return m * (1.0 - 2.0 / (1.0 + np.exp(slope * np.asarray(x, dtype=np.float64))))


def fit_model(grid: DepthGrid, model: int) -> DepthFit:
    """Weighted least squares with a light L2 penalty (model 1: β fixed at 0)."""
    if grid.games.size < (2 if model == 1 else 3):
        raise SkillDepthError(
            f"model {model} needs more level pairs than the {grid.games.size} in the grid"
        )
    x, y = grid.x, grid.y
    s = 2.0 * grid.score - 1.0
    w = grid.games / grid.games.sum()

    def loss(theta: np.ndarray) -> float:
        m, r = theta[0], theta[1]
        beta = theta[2] if model == 2 else 0.0
        resid = model_s(x, y, m, r, beta) - s
        return float(np.sum(w * resid**2) + L2_PENALTY * np.sum(theta**2))

    start = np.array([0.9, 1.0, 0.1] if model == 2 else [0.9, 1.0])
    bounds = [(1e-6, 1.0), (0.0, None)] + ([(-10.0, 10.0)] if model == 2 else [])
    result = minimize(loss, start, method="L-BFGS-B", bounds=bounds)
    m, r = float(result.x[0]), float(result.x[1])
    beta = float(result.x[2]) if model == 2 else 0.0
    rmse = float(np.sqrt(np.sum(w * (model_s(x, y, m, r, beta) - s) ** 2)))
    return DepthFit(model, m, r, beta, rmse)


def skill_trace(grid: DepthGrid, fit: DepthFit) -> pa.Table:
    """One doubling's worth at each base level: observed on adjacent pairs, and the model's."""
    rows = []
    for k in range(len(grid.levels) - 1):
        match = np.flatnonzero((grid.weak == k) & (grid.strong == k + 1))
        y = math.log2(grid.budgets[k] / grid.budgets.min())
        x = math.log2(grid.budgets[k + 1] / grid.budgets[k])
        rows.append(
            {
                "weak_level": grid.levels[k],
                "strong_level": grid.levels[k + 1],
                "y_log2_base_budget": y,
                "x_log2_budget_ratio": x,
                "games": int(grid.games[match[0]]) if match.size else 0,
                "observed_net_score": float(2 * grid.score[match[0]] - 1)
                if match.size
                else math.nan,
                "model_net_score": float(fit.predict(np.array([x]), y)[0]),
                "model_net_score_per_doubling": float(fit.predict(np.array([1.0]), y)[0]),
            }
        )
    return pa.Table.from_pylist(rows)


def level_budget(label: str, game: str) -> float:
    """The budget of a rank group label (see the module docstring)."""
    if game == "chess":
        match = _CHESS_BAND.match(label)
        if match:
            return (float(match.group(1)) + float(match.group(2))) / 2.0
    elif game == "go":
        if label == "pro":
            return 2.0**10
        match = _GO_GROUP.match(label)
        if match:
            lo = int(match.group(1))
            hi = int(match.group(2) or lo)
            ranks = [1 - n if match.group(3) == "k" else n for n in (lo, hi)]
            return 2.0 ** (sum(ranks) / 2.0)
    raise SkillDepthError(f"no budget for {game} level {label!r}")


def grid_from_table(table: pa.Table, game: str) -> DepthGrid:
    """Aggregate cross-group games (``white_rank_group`` ≠ ``black_rank_group``) into a grid."""
    wg, bg, winner = table["white_rank_group"], table["black_rank_group"], table["winner"]
    keep = pc.and_(
        pc.and_(pc.is_valid(wg), pc.is_valid(bg)),
        pc.and_(pc.not_equal(wg, bg), pc.is_in(winner, pa.array(["white", "black", "draw"]))),
    )
    table = table.filter(pc.fill_null(keep, False))
    if table.num_rows == 0:
        raise SkillDepthError("no decided games between different rank groups")
    white_group = np.asarray(table["white_rank_group"].to_pylist(), dtype=object)
    black_group = np.asarray(table["black_rank_group"].to_pylist(), dtype=object)
    winner = np.asarray(table["winner"].to_pylist(), dtype=object)
    labels = sorted(set(white_group) | set(black_group), key=lambda lab: level_budget(lab, game))
    budgets = np.array([level_budget(lab, game) for lab in labels])
    index = {lab: i for i, lab in enumerate(labels)}
    wi = np.array([index[g] for g in white_group])
    bi = np.array([index[g] for g in black_group])
    white_score = np.select([winner == "white", winner == "draw"], [1.0, 0.5], 0.0)
    strong = np.maximum(wi, bi)
    weak = np.minimum(wi, bi)
    strong_score = np.where(wi > bi, white_score, 1.0 - white_score)
    pair = weak * len(labels) + strong
    keys, inverse = np.unique(pair, return_inverse=True)
    games = np.bincount(inverse)
    score = np.bincount(inverse, weights=strong_score) / games
    return DepthGrid(labels, budgets, keys // len(labels), keys % len(labels), score, games)


def load_depth_grid(
    games_dir: Path, *, game: str | None = None, source: str | None = None
) -> DepthGrid:
    """The level grid of a games table's cross-group games."""
    table = read_games_table(
        games_dir,
        game=game,
        source=source,
        columns=("white_rank_group", "black_rank_group", "winner"),
    )
    return grid_from_table(table, table["game"][0].as_py())
