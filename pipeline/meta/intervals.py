"""A continuous strength estimate with calibrated 80 % and 95 % intervals (split conformal).

The rank-group meta-models answer "which group"; users also ask "how strong, and how sure". At
each n, one more LightGBM regressor maps the same averaged features to the mean rated strength
of the sample's instances, on the data's own scale: the Lichess rating for chess, Kibitz's
numeric rank for Go (``1k`` = 0, ``n k`` = 1 − n, ``n d`` = n; ``pipeline.go_game.ranks``).

The interval is split conformal (Vovk et al.; Lei et al. 2018): the regressor is fitted on the
fit split's samples only, its absolute errors are taken on games it never saw (the monitoring
split's samples, plus cross-fitted errors on the fit split's own games: :func:`out_of_fold_errors`),
and the interval at level 1 − α is the prediction ± the ⌈(m + 1)(1 − α)⌉-th smallest of those m
errors. For a new sample exchangeable with the calibration samples the interval covers the truth
with probability ≥ 1 − α, by construction, whatever the regressor's quality; a worse regressor
only makes it wider. The evaluation split then measures the coverage (and the MAE beside the
mean predictor's) on games used by neither; `bench/conformal_coverage.py` measures it over many
re-drawn splits, since one split's figure moves by several points with the split alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipeline.core.data_split import game_unit
from pipeline.meta.model import (
    InstanceData,
    MetaConfig,
    MetaDataError,
    NResult,
    feature_set_columns,
    fit_and_monitor_splits,
    nearest_n,
    preferred_set,
)
from pipeline.meta.samples import Samples, SamplingError, rank_group_samples

if TYPE_CHECKING:
    import lightgbm as lgb

log = logging.getLogger(__name__)

LEVELS = (0.8, 0.95)  # the intervals an estimate reports: 80 % and 95 %
# Every level calibrated and saved: the reported ones, and the grid a conformal p-value of an
# observed gap is read from (``kibitz audit``), at a resolution of 0.01.
LEVEL_GRID = tuple(round(k / 100, 2) for k in range(1, 100))
FOLD_SALT = "kibitz-conformal-folds-v1"
STRENGTH_MODEL = "models/strength/n{n}.txt"  # in a `kibitz train meta` output folder


def conformal_quantile(errors: np.ndarray, level: float) -> float:
    """The ⌈(m + 1)·level⌉-th smallest of m absolute errors (inf when m is too small)."""
    errors = np.sort(errors[np.isfinite(errors)])
    rank = math.ceil((errors.size + 1) * level)
    return float(errors[rank - 1]) if rank <= errors.size else math.inf


@dataclass
class StrengthModel:
    """The strength regressor at one n and its conformal half-widths per level."""

    n: int
    feature_set: str
    columns: list[str]
    booster: lgb.Booster
    half_width: dict[float, float]  # level of LEVEL_GRID → ± half-width on the strength scale
    calibration_errors: int  # how many held-out errors the half-widths come from

    def predict(self, features: np.ndarray) -> np.ndarray:
        """(S,) point estimates for rows of ``features`` in ``columns`` order."""
        return self.booster.predict(features)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(path))


def _rated(samples: Samples) -> tuple[np.ndarray, np.ndarray]:
    """(features, strength) of the samples with a rated strength."""
    if samples.strength is None:
        return samples.features[:0], np.empty(0)
    keep = np.isfinite(samples.strength)
    return samples.features[keep], samples.strength[keep]


def _fit(
    columns: Sequence[str], chosen: Sequence[str], samples: Samples, n: int, config: MetaConfig
) -> lgb.Booster:
    import lightgbm as lgb  # here, not at the top: the CLI parses options without it

    x, y = _rated(samples)
    if y.size == 0:
        raise MetaDataError(f"n={n}: no training sample has a rated strength")
    pick = [list(columns).index(c) for c in chosen]
    params = {"objective": "regression", "seed": config.seed, **config.lgbm_params}
    return lgb.train(params, lgb.Dataset(x[:, pick], label=y, feature_name=list(chosen)))


def _errors(
    booster: lgb.Booster, columns: Sequence[str], chosen: Sequence[str], samples: Samples
) -> np.ndarray:
    """|prediction − strength| of the rated samples."""
    x, y = _rated(samples)
    if y.size == 0:
        return np.empty(0)
    return np.abs(booster.predict(x[:, [list(columns).index(c) for c in chosen]]) - y)


def fit_strength_model(
    columns: Sequence[str],
    n: int,
    feature_set: str,
    train: Samples,
    calibration: Samples,
    config: MetaConfig,
    *,
    more_errors: np.ndarray | None = None,
) -> StrengthModel:
    """Fit on ``train`` samples; the half-widths from the errors on ``calibration`` samples
    (held-out games) and ``more_errors`` (:func:`out_of_fold_errors`). The samples carry their
    mean strength (:meth:`Samples.with_strength`)."""
    chosen = feature_set_columns(columns, feature_set)
    booster = _fit(columns, chosen, train, n, config)
    errors = _errors(booster, columns, chosen, calibration)
    if more_errors is not None:
        errors = np.concatenate([errors, more_errors])
    half = {level: conformal_quantile(errors, level) for level in LEVEL_GRID}
    return StrengthModel(n, feature_set, chosen, booster, half, int(errors.size))


def conformal_folds(config: MetaConfig) -> int:
    """Cross-fitting folds of the fit split: as many as make a held-out fold the size of the
    evaluation split (fit fraction / evaluation fraction, 8 for the default 0.8 / 0.1), at
    least 2.

    A rank-group sample of n instances is drawn from one split's pool of each group; at large n
    its error is mostly the pool's own deviation, which shrinks with the pool's size. Folds the
    size of the evaluation split draw calibration samples from pools as large as the ones the
    coverage is measured on (`python bench/conformal_coverage.py`, docs/meta.md).
    ``config.conformal_folds`` > 0 sets the number instead.
    """
    if config.conformal_folds > 0:
        return config.conformal_folds
    fit = config.split.train if config.fit_split == "train" else config.split.validation
    if config.split.evaluation <= 0:
        return 2
    return max(2, round(fit / config.split.evaluation))


def out_of_fold_errors(
    data: InstanceData, n: int, feature_set: str, config: MetaConfig
) -> np.ndarray:
    """Errors on the fit split's own games, each fold scored by a model fitted on the others.

    The monitoring split alone is a tenth of the games: at n = 20 its samples reuse the same
    few instances of each group, and a quantile of their errors says little about new
    players. Cross-fitting over :func:`conformal_folds` folds of the fit split's games (cut by
    a hash of the game id) adds errors on every fit game, each from a model that never saw it
    (CV+, Barber et al. 2021); those models see (k − 1)/k of the games, so their errors lean
    wide. A fold whose groups are too small for n is skipped.
    """
    chosen = feature_set_columns(data.columns, feature_set)
    fit = data.subset(np.flatnonzero(data.split == fit_and_monitor_splits(config)[0]))
    folds = conformal_folds(config)
    fold = np.minimum(
        (game_unit(fit.game_id.tolist(), FOLD_SALT) * folds).astype(np.int64), folds - 1
    )
    errors = []
    for k in range(folds):
        inner, outer = fit.subset(np.flatnonzero(fold != k)), fit.subset(np.flatnonzero(fold == k))
        rng = np.random.default_rng([config.seed, n, 10 + k])
        try:
            train = rank_group_samples(inner.features, inner.group, n=n,
                                       draws_per_group=config.train_draws_per_group, rng=rng)  # fmt: skip
            held = rank_group_samples(outer.features, outer.group, n=n,
                                      draws_per_group=config.validation_draws_per_group, rng=rng)  # fmt: skip
        except SamplingError:
            log.info("n=%d: fold %d too small for out-of-fold errors; skipped", n, k)
            continue
        booster = _fit(data.columns, chosen, train.with_strength(inner.strength), n, config)
        errors.append(_errors(booster, data.columns, chosen, held.with_strength(outer.strength)))
    return np.concatenate(errors) if errors else np.empty(0)


def evaluate_strength(
    model: StrengthModel,
    columns: Sequence[str],
    samples: Samples,
    sampling: str,
    baseline: float,
) -> dict[str, float | int | str]:
    """Coverage of each interval, MAE, and the MAE of always predicting ``baseline`` (the fit
    split's mean strength) on the rated ``samples``."""
    x, y = _rated(samples)
    row: dict[str, float | int | str] = {"n": model.n, "sampling": sampling, "samples": int(y.size)}
    if y.size == 0:
        return row
    pick = [list(columns).index(c) for c in model.columns]
    error = np.abs(model.predict(x[:, pick]) - y)
    for level in LEVELS:
        row[f"coverage_{round(100 * level)}"] = round(
            float(np.mean(error <= model.half_width[level])), 4
        )
        row[f"width_{round(100 * level)}"] = round(float(2 * model.half_width[level]), 2)
    row["mae"] = round(float(np.mean(error)), 2)
    row["mae_mean_predictor"] = round(float(np.mean(np.abs(baseline - y))), 2)
    return row


def strength_at_n(
    data: InstanceData, result: NResult, config: MetaConfig
) -> tuple[StrengthModel | None, list[dict]]:
    """The strength model of one n of ``kibitz train meta`` (on the feature set an estimate
    applies) and its figures per sampling, on
    the samples the rank-group models used; (None, []) when the data cannot support it (no
    rated instances, no monitoring samples to calibrate on)."""
    feature_set = preferred_set(list(result.models))
    calibration = result.samples.get("validation")
    if data.strength is None or feature_set is None or calibration is None:
        log.warning("n=%d: no strength intervals (no rated strength or no monitoring samples)",
                    result.n)  # fmt: skip
        return None, []
    model = fit_strength_model(
        data.columns, result.n, feature_set, result.samples["train"], calibration, config,
        more_errors=out_of_fold_errors(data, result.n, feature_set, config),
    )  # fmt: skip
    fit = fit_and_monitor_splits(config)[0]
    baseline = float(np.nanmean(data.strength[data.split == fit]))
    rows = [
        evaluate_strength(model, data.columns, result.samples[name], sampling, baseline)
        for name, sampling in (("evaluation", "rank_group"), ("player", "player"))
        if result.samples.get(name) is not None
    ]
    return model, rows


def strength_manifest(
    models: dict[int, StrengthModel], rows: list[dict], scale: str | None
) -> dict | None:
    """The manifest's ``strength`` record: scale, columns, model files, half-widths, figures."""
    if not models:
        return None
    first = next(iter(models.values()))
    return {
        "scale": scale,
        "feature_set": first.feature_set,
        "columns": first.columns,
        "levels": list(LEVELS),
        "level_grid": list(LEVEL_GRID),
        "calibration_errors": {str(n): m.calibration_errors for n, m in models.items()},
        "models": {str(n): STRENGTH_MODEL.format(n=n) for n in models},
        # per n, the half-width at each level of level_grid (None: no finite bound)
        "half_width": {
            str(n): [
                None if math.isinf(m.half_width[level]) else round(m.half_width[level], 4)
                for level in LEVEL_GRID
            ]
            for n, m in models.items()
        },
        "results": rows,
    }


def strength_markdown(rows: list[dict], scale: str | None) -> str:
    """The figures as a Markdown table: coverage of each interval, widths, MAE vs the mean."""
    lines = [
        f"strength on the {scale} scale: coverage of the conformal intervals and MAE",
        "| sampling | n | samples | coverage 80 % | coverage 95 % | width 80 % | width 95 %"
        " | MAE | MAE of the mean predictor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "mae" not in r:
            continue
        lines.append(
            f"| {r['sampling']} | {r['n']} | {r['samples']:,} | {100 * r['coverage_80']:.1f}"
            f" | {100 * r['coverage_95']:.1f} | {r['width_80']:g} | {r['width_95']:g}"
            f" | {r['mae']:g} | {r['mae_mean_predictor']:g} |"
        )
    return "\n".join(lines)


@dataclass
class SavedStrength:
    """The strength part of a meta-models folder (its manifest's ``strength`` record)."""

    root: Path
    record: dict

    @property
    def scale(self) -> str:
        return self.record["scale"]

    @property
    def ns(self) -> list[int]:
        return sorted(int(k) for k in self.record["models"])

    def nearest_n(self, games: int) -> int:
        """The trained n closest to ``games`` (:func:`pipeline.meta.model.nearest_n`)."""
        return nearest_n(self.ns, games)

    def predict(self, features: np.ndarray, columns: Sequence[str], n: int) -> np.ndarray:
        """(S,) point estimates of the model at trained ``n`` for rows named by ``columns``."""
        import lightgbm as lgb

        pick = [list(columns).index(c) for c in self.record["columns"]]
        path = self.root / self.record["models"][str(n)]
        return lgb.Booster(model_file=str(path)).predict(features[:, pick])

    def coverage(self, n: int, sampling: str) -> tuple[float, float] | None:
        """The measured coverage of the 80 % and 95 % intervals at trained ``n`` with
        ``sampling`` (``rank_group`` or ``player``: n games of one player), as ``kibitz train
        meta`` measured it on evaluation games; None where not measured (no such samples)."""
        for row in self.record.get("results", []):
            if (row["n"], row["sampling"]) == (n, sampling) and "coverage_80" in row:
                return row["coverage_80"], row["coverage_95"]
        return None

    def half_widths(self, n: int) -> np.ndarray:
        """(len(LEVEL_GRID),) half-widths of the model at trained ``n`` (inf: unbounded)."""
        widths = self.record["half_width"][str(n)]
        return np.array([math.inf if w is None else w for w in widths], dtype=np.float64)

    def interval(self, point: np.ndarray, n: int, level: float) -> np.ndarray:
        """(S, 2) [low, high] at ``level`` (one of ``level_grid``) around ``point``."""
        grid = [round(x, 2) for x in self.record["level_grid"]]
        if round(level, 2) not in grid:
            raise MetaDataError(f"level {level} was not calibrated (levels 0.01 … 0.99)")
        width = self.half_widths(n)[grid.index(round(level, 2))]
        return np.stack([point - width, point + width], axis=-1)

    def p_value(self, gap: np.ndarray, n: int) -> np.ndarray:
        """Conformal p-value of each |gap| between estimate and truth: 1 − the largest level
        whose half-width it exceeds (1 when it exceeds none); resolution 0.01.

        Under exchangeability with the calibration samples, P(p ≤ α) ≤ α (up to the grid's
        resolution): flagging p ≤ α flags an unaltered player at most α of the time.
        """
        widths = self.half_widths(n)  # non-decreasing in the level
        levels = np.asarray(self.record["level_grid"], dtype=np.float64)
        exceeded = np.searchsorted(widths, np.abs(gap), side="left")  # levels with width < |gap|
        top = np.where(exceeded > 0, levels[np.maximum(exceeded - 1, 0)], 0.0)
        return np.round(1.0 - top, 2)


def saved_strength(root: Path, manifest: dict) -> SavedStrength | None:
    """The strength part of a meta-models manifest, or None when it has none."""
    record = manifest.get("strength")
    return SavedStrength(Path(root), record) if record and record.get("models") else None
