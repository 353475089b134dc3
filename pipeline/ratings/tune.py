"""Empirical parameterisation of a rating system: pick the configuration whose pre-game rating
differences best predict results in a later period.

For each configuration of a grid:

1. replay the games in time order and take both players' ratings before every game;
2. on the training period fit a logistic regression ``P(White wins) = σ(a + b·(R_W − R_B))``;
3. on the later test period predict "White wins" when that probability is ≥ 0.5 and score F1
   (White wins as the positive class), accuracy, log-loss and Brier score.

The configuration with the best test F1 (then accuracy) is chosen; for it the report gives the
intercept and slope with standard errors, z ("t") statistics and p-values (statsmodels Logit)
and accuracy/F1 by absolute rating difference bin. Grid points are fitted by a compiled
two-parameter Newton method with the same Wald statistics (statsmodels would dominate the run
time on a 90-million-game month); the chosen one is refitted with statsmodels for the report.

Draws: the outcome is binary, so drawn games are left out of the regression and the scores
(their count is reported); they still update the ratings as half a point. Scoring a draw as
0.5 would need a fractional-response model, and F1 has no meaning for it.

Split: ``train_until`` (a date: games on or before it train) or ``train_frac`` (the first
fraction of games in replay order). Online systems (Elo, Glicko-2, TrueSkill) replay all games,
so a test game's rating uses only earlier games. TTT smooths (later games move earlier skills),
so it is fitted on the training games only: training features are each game's skills with that
game left out, test features the players' last training skills (the prior for new players).

Bins: Elo and Glicko-2 differences are in Elo points; TrueSkill/TTT differences are converted to
Elo-equivalent points through the fitted slope (b·Δ·400/ln 10), so bins mean the same odds.

Default grids: Elo K ∈ {(60,30,16), (30,30,30), (30,16,8), (100,50,25)} × (nc1, nc2) ∈
{(5,10), (q10+1, q25+1), (q25+1, q50+1)}, qk the k-th percentile of players' game counts;
Glicko-2 τ ∈ {0.3, 0.5, 0.8, 1.2}; TrueSkill β ∈ 25/6·{0.5, 1, 2} × τ ∈ 25/300·{0.5, 1, 2};
TTT γ ∈ {0.01, 0.03, 0.1}. A YAML grid file replaces them (see ``load_grid``).

Run: ``kibitz ratings tune --games DIR --system elo --train-frac 0.8``.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pyarrow as pa
import statsmodels.api as sm
import yaml
from scipy.stats import norm

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import RatedGames
from pipeline.ratings.systems import get_system, make_config

logger = logging.getLogger(__name__)

DIFF_BINS = (0.0, 30.0, 60.0, 100.0, 200.0, 500.0, math.inf)  # right-closed; [0, 30] first
BIN_LABELS = ("[0,30]", "(30,60]", "(60,100]", "(100,200]", "(200,500]", "(500,inf)")
ELO_LOGIT_PER_POINT = math.log(10.0) / 400.0  # slope of the Elo curve in logits per point
_PERCENTILE = re.compile(r"^q(\d+)([+-]\d+)?$")

DEFAULT_GRIDS: dict[str, dict[str, list[Any]]] = {
    "elo": {
        "k": [[60, 30, 16], [30, 30, 30], [30, 16, 8], [100, 50, 25]],
        "thresholds": [[5, 10], ["q10+1", "q25+1"], ["q25+1", "q50+1"]],
    },
    "glicko2": {"tau": [0.3, 0.5, 0.8, 1.2]},
    "trueskill": {
        "beta": [25 / 12, 25 / 6, 25 / 3],
        "tau": [25 / 600, 25 / 300, 25 / 150],
    },
    "ttt": {"gamma": [0.01, 0.03, 0.1]},
}


class GridError(KibitzError, ValueError):
    """A parameter grid that cannot be read or expanded."""


class SplitError(KibitzError, ValueError):
    """A train/test split that leaves one side without decided games."""


@dataclass(frozen=True)
class Split:
    n_train: int  # games [0, n_train) train, [n_train, G) test (games are in time order)
    description: str


@dataclass(frozen=True)
class LogitFit:
    intercept: float
    slope: float
    intercept_se: float
    slope_se: float
    intercept_z: float
    slope_z: float
    intercept_p: float
    slope_p: float
    n_train: int

    def predict(self, diff: np.ndarray) -> np.ndarray:
        """(N,) P(White wins) for rating differences R_W − R_B."""
        return 1.0 / (1.0 + np.exp(-(self.intercept + self.slope * diff)))


@dataclass(frozen=True)
class ConfigScore:
    params: dict[str, Any]  # the resolved parameters (percentiles replaced by numbers)
    fit: LogitFit
    metrics: dict[str, float]  # f1, accuracy, log_loss, brier, n_test, draws_left_out …
    bins: pa.Table  # accuracy/F1 by rating-difference bin on the test period


@dataclass(frozen=True)
class TuneResult:
    system: str
    split: Split
    scores: list[ConfigScore]
    best: int  # index into scores

    def table(self) -> pa.Table:
        """One row per configuration: parameters, fit and test metrics."""
        rows = []
        for i, s in enumerate(self.scores):
            row: dict[str, Any] = {"config": i}
            row.update({k: _flat(v) for k, v in s.params.items()})
            row.update({"intercept": s.fit.intercept, "slope": s.fit.slope})
            row.update(s.metrics)
            row["chosen"] = i == self.best
            rows.append(row)
        return pa.Table.from_pylist(rows)

    def report(self) -> str:
        """The human-readable regression report of the chosen configuration."""
        best = self.scores[self.best]
        fit = best.fit
        lines = [
            f"system: {self.system}    split: {self.split.description}",
            f"configurations: {len(self.scores)}    chosen: #{self.best} "
            + ", ".join(f"{k}={_flat(v)}" for k, v in best.params.items()),
            f"logistic regression on {fit.n_train} training games (draws left out):",
            "              coef        std err    z (t)       p",
            f"  intercept  {fit.intercept: .6e}  {fit.intercept_se:.3e}  {fit.intercept_z: 9.3f}  {fit.intercept_p:.3g}",
            f"  slope      {fit.slope: .6e}  {fit.slope_se:.3e}  {fit.slope_z: 9.3f}  {fit.slope_p:.3g}",
            "test period: "
            + ", ".join(
                f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in best.metrics.items()
            ),
            "by |rating difference| (Elo points):",
            "  bin          games  accuracy  f1      white_win_rate",
        ]
        for row in best.bins.to_pylist():
            lines.append(
                f"  {row['bin']:<11} {row['games']:>6}  {_fmt(row['accuracy'])}    {_fmt(row['f1'])}  {_fmt(row['white_win_rate'])}"
            )
        lines.append("all configurations (test period):")
        lines.append("  #   f1      accuracy  log_loss  brier   parameters")
        for i, s in enumerate(self.scores):
            m = s.metrics
            mark = "*" if i == self.best else " "
            lines.append(
                f" {mark}{i:<3} {m['f1']:.4f}  {m['accuracy']:.4f}    {m['log_loss']:.4f}    {m['brier']:.4f}  "
                + ", ".join(f"{k}={_flat(v)}" for k, v in s.params.items())
            )
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "  -   " if value is None or value != value else f"{value:.4f}"


def _flat(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return "(" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + ")"
    return value


def split_games(
    games: RatedGames, *, train_until: str | None = None, train_frac: float | None = None
) -> Split:
    """Where the training period ends (exactly one of the two options)."""
    if (train_until is None) == (train_frac is None):
        raise SplitError("give exactly one of train_until and train_frac")
    if train_until is not None:
        cut = np.datetime64(train_until, "D")
        n_train = int(np.searchsorted(games.dates(), cut, side="right"))
        description = f"train ≤ {train_until}"
    else:
        if not 0.0 < train_frac < 1.0:
            raise SplitError(f"train_frac must be in (0, 1), got {train_frac!r}")
        n_train = round(games.n_games * train_frac)
        description = f"train = first {train_frac:g} of games"
    decided = games.score != 0.5
    if not decided[:n_train].any() or not decided[n_train:].any():
        raise SplitError(
            f"split {description!r} leaves no decided games on one side "
            f"({n_train} train, {games.n_games - n_train} test)"
        )
    return Split(n_train, f"{description} ({n_train} train / {games.n_games - n_train} test games)")


def game_count_percentiles(games: RatedGames, qs: Sequence[int] = (10, 25, 50)) -> dict[int, float]:
    """Percentiles of the number of games each player played (for the threshold grid)."""
    counts = np.bincount(np.concatenate([games.white, games.black]), minlength=games.n_players)
    return {q: float(np.percentile(counts, q)) for q in qs}


def _resolve(value: Any, percentiles: Mapping[int, float]) -> Any:
    """Replace "q25+1"-style strings by int(percentile) + offset; recurse into lists."""
    if isinstance(value, list | tuple):
        return [_resolve(v, percentiles) for v in value]
    if isinstance(value, str):
        match = _PERCENTILE.match(value.replace(" ", ""))
        if not match:
            raise GridError(f"cannot read grid value {value!r} (numbers or 'q<k>+<n>')")
        q = int(match.group(1))
        offset = int(match.group(2) or 0)
        pct = percentiles.get(q)
        if pct is None:
            raise GridError(f"percentile q{q} not available in grid value {value!r}")
        return int(pct) + offset
    return value


def expand_grid(
    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]], games: RatedGames
) -> list[dict[str, Any]]:
    """Configurations of a grid: a mapping (cartesian product) or an explicit list of mappings."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        configs = [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*(grid[k] for k in keys))
        ]
    else:
        configs = [dict(c) for c in grid]
    if not configs:
        raise GridError("the grid has no configurations")
    needed = sorted({int(m.group(1)) for c in configs for m in _percentile_strings(c.values())})
    percentiles = game_count_percentiles(games, needed) if needed else {}
    return [{k: _resolve(v, percentiles) for k, v in c.items()} for c in configs]


def _percentile_strings(values: Any) -> list[re.Match[str]]:
    found = []
    for v in values:
        if isinstance(v, list | tuple):
            found.extend(_percentile_strings(v))
        elif isinstance(v, str) and (m := _PERCENTILE.match(v.replace(" ", ""))):
            found.append(m)
    return found


def load_grid(path: Path) -> Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]:
    """A YAML grid: ``{param: [values…]}`` (all combinations) or ``[{param: value}, …]``.

    Example (Elo)::

        k: [[60, 30, 16], [30, 30, 30]]
        thresholds: [[5, 10], [q25+1, q50+1]]
    """
    try:
        grid = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise GridError(f"cannot read grid file {str(path)!r}: {exc}") from exc
    if isinstance(grid, dict) and all(isinstance(v, list) for v in grid.values()):
        return grid
    if isinstance(grid, list) and all(isinstance(c, dict) for c in grid):
        return grid
    raise GridError(f"grid file {str(path)!r} must be a mapping of lists or a list of mappings")


@numba.njit(cache=True, nogil=True)
def _logit_sums(diff: np.ndarray, won: np.ndarray, a: float, b: float) -> tuple[float, ...]:
    """Gradient and Hessian (negated) of the log-likelihood of σ(a + b·diff), one pass."""
    g0 = g1 = h00 = h01 = h11 = 0.0
    for i in range(diff.shape[0]):
        x = diff[i]
        p = 1.0 / (1.0 + math.exp(-(a + b * x)))
        r = (1.0 if won[i] else 0.0) - p
        w = p * (1.0 - p)
        g0 += r
        g1 += r * x
        h00 += w
        h01 += w * x
        h11 += w * x * x
    return g0, g1, h00, h01, h11


def _newton_logit(diff: np.ndarray, won: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Maximum-likelihood (a, b) and their covariance, by Newton's method (2 parameters).

    The grid fits hundreds of millions of games: statsmodels' general Logit spends most of
    a tuning run in Python-level array passes, this is one compiled pass per iteration.
    """
    diff = np.ascontiguousarray(diff, dtype=np.float64)
    won = np.ascontiguousarray(won, dtype=np.bool_)
    a = b = 0.0
    for _ in range(100):
        g0, g1, h00, h01, h11 = _logit_sums(diff, won, a, b)
        det = h00 * h11 - h01 * h01
        step_a = (h11 * g0 - h01 * g1) / det
        step_b = (h00 * g1 - h01 * g0) / det
        a += step_a
        b += step_b
        if abs(step_a) < 1e-12 * (1 + abs(a)) and abs(step_b) < 1e-12 * (1 + abs(b)):
            break
    _, _, h00, h01, h11 = _logit_sums(diff, won, a, b)
    cov = np.linalg.inv(np.array([[h00, h01], [h01, h11]]))  # (2, 2)
    return a, b, cov


def fit_logit(
    diff: np.ndarray, white_won: np.ndarray, *, with_statsmodels: bool = False
) -> LogitFit:
    """Logistic regression of White winning on the rating difference (maximum likelihood).

    Wald statistics: se = √diag(H⁻¹), z = coef/se, p = 2·(1 − Φ(|z|)) — what statsmodels' Logit
    reports; ``with_statsmodels`` fits with statsmodels itself (the chosen configuration's report;
    the tests check both give the same numbers).
    """
    if diff.size < 2 or np.ptp(diff) == 0.0:
        raise SplitError(
            f"cannot fit: the {diff.size} training games have no spread in rating difference "
            "(too few games per player before the test period?)"
        )
    if with_statsmodels:
        exog = np.column_stack([np.ones_like(diff), diff])  # (N, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter on degenerate grids
            result = sm.Logit(white_won.astype(np.float64), exog).fit(disp=0, maxiter=100)
        params, se, z, p = result.params, result.bse, result.tvalues, result.pvalues
    else:
        a, b, cov = _newton_logit(diff, white_won)
        params = np.array([a, b])
        se = np.sqrt(np.diag(cov))
        z = params / se
        p = 2.0 * norm.sf(np.abs(z))
    return LogitFit(
        float(params[0]), float(params[1]), float(se[0]), float(se[1]),
        float(z[0]), float(z[1]), float(p[0]), float(p[1]), int(diff.shape[0]),
    )  # fmt: skip


def classification_scores(prob: np.ndarray, white_won: np.ndarray) -> dict[str, float]:
    """F1 (White wins positive), accuracy, log-loss and Brier score of probabilities."""
    n = white_won.shape[0]
    if n == 0:
        return {"f1": math.nan, "accuracy": math.nan, "log_loss": math.nan, "brier": math.nan}
    predicted = prob >= 0.5
    tp = float(np.sum(predicted & white_won))
    fp = float(np.sum(predicted & ~white_won))
    fn = float(np.sum(~predicted & white_won))
    f1 = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) > 0 else 0.0
    clipped = np.clip(prob, 1e-15, 1 - 1e-15)
    log_loss = -np.mean(np.where(white_won, np.log(clipped), np.log1p(-clipped)))
    return {
        "f1": f1,
        "accuracy": float(np.mean(predicted == white_won)),
        "log_loss": float(log_loss),
        "brier": float(np.mean((prob - white_won) ** 2)),
    }


def bin_scores(elo_diff: np.ndarray, prob: np.ndarray, white_won: np.ndarray) -> pa.Table:
    """Accuracy and F1 by |rating difference| bin; the ``games`` column sums to len(prob)."""
    which = np.digitize(np.abs(elo_diff), DIFF_BINS[1:-1], right=True)  # 0..5
    rows = []
    for i, label in enumerate(BIN_LABELS):
        mask = which == i
        scores = classification_scores(prob[mask], white_won[mask])
        rows.append(
            {
                "bin": label,
                "games": int(mask.sum()),
                "accuracy": scores["accuracy"],
                "f1": scores["f1"],
                "white_win_rate": float(white_won[mask].mean()) if mask.any() else math.nan,
            }
        )
    return pa.Table.from_pylist(rows)


def pregame_ratings(
    system: str, games: RatedGames, config: Any, split: Split
) -> tuple[np.ndarray, np.ndarray]:
    """Both players' ratings before every game, with no test result leaking into a test feature."""
    spec = get_system(system)
    if not spec.smoothing:
        run = spec.run(games, config)
        return run.white_before, run.black_before
    train = spec.run(games.head(split.n_train), config)
    final = next(iter(train.final.values()))  # (P,) last training skill (prior if unseen)
    white = np.concatenate([train.white_before, final[games.white[split.n_train :]]])
    black = np.concatenate([train.black_before, final[games.black[split.n_train :]]])
    return white, black


def score_config(
    system: str,
    games: RatedGames,
    params: Mapping[str, Any],
    split: Split,
    *,
    with_statsmodels: bool = False,
) -> ConfigScore:
    """Replay, fit on the training period, score on the test period."""
    config = make_config(system, params)
    white, black = pregame_ratings(system, games, config, split)
    diff = white - black  # (G,)
    decided = games.score != 0.5
    white_won = games.score == 1.0
    train = decided.copy()
    train[split.n_train :] = False
    test = decided.copy()
    test[: split.n_train] = False
    fit = fit_logit(diff[train], white_won[train], with_statsmodels=with_statsmodels)
    prob = fit.predict(diff[test])
    metrics = classification_scores(prob, white_won[test])
    metrics.update(
        {
            "n_train": int(train.sum()),
            "n_test": int(test.sum()),
            "test_draws_left_out": int(np.sum(~decided[split.n_train :])),
        }
    )
    per_point = 1.0 if get_system(system).on_elo_scale else fit.slope / ELO_LOGIT_PER_POINT
    bins = bin_scores(diff[test] * per_point, prob, white_won[test])
    return ConfigScore(dict(params), fit, metrics, bins)


def tune(
    system: str,
    games: RatedGames,
    split: Split,
    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]] | None = None,
) -> TuneResult:
    """Score every configuration of ``grid`` (the system's default grid when None)."""
    configs = expand_grid(DEFAULT_GRIDS[get_system(system).name] if grid is None else grid, games)
    scores = []
    for i, params in enumerate(configs):
        score = score_config(system, games, params, split)
        logger.info("config %d/%d %r: f1 %.4f", i + 1, len(configs), params, score.metrics["f1"])
        scores.append(score)
    best = max(
        range(len(scores)),
        key=lambda i: (
            _nan_low(scores[i].metrics["f1"]),
            _nan_low(scores[i].metrics["accuracy"]),
            -i,
        ),
    )
    # The chosen configuration's reported regression comes from statsmodels itself.
    scores[best] = score_config(system, games, configs[best], split, with_statsmodels=True)
    return TuneResult(system, split, scores, best)


def _nan_low(value: float) -> float:
    return -math.inf if value != value else value
