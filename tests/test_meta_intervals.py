"""Strength intervals of the meta-models (pipeline/meta/intervals.py): the conformal quantile
by hand, coverage at the nominal level on exchangeable samples, and the manifest round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.core.data_split import EVALUATION, TRAIN, VALIDATION, SplitConfig
from pipeline.meta.intervals import (
    LEVEL_GRID,
    LEVELS,
    conformal_folds,
    conformal_quantile,
    evaluate_strength,
    fit_strength_model,
    out_of_fold_errors,
)
from pipeline.meta.model import InstanceData, MetaConfig
from pipeline.meta.samples import rank_group_samples

COLUMNS = ["sscore_net_mean_all", "prior_net_geomean_all", "loss_mean_all"]


def test_conformal_quantile_by_hand():
    errors = np.arange(1.0, 10.0)  # 1 … 9, m = 9
    assert conformal_quantile(errors, 0.8) == 8.0  # ⌈10 · 0.8⌉ = 8th smallest
    assert conformal_quantile(errors, 0.5) == 5.0  # ⌈10 · 0.5⌉ = 5th
    assert math.isinf(conformal_quantile(errors, 0.95))  # ⌈9.5⌉ = 10 > m: no finite bound
    assert conformal_quantile(np.array([3.0, np.nan, 1.0, 2.0]), 0.5) == 2.0  # NaN ignored


def synthetic_instances(rows: int, seed: int) -> InstanceData:
    """Strength = 1000 + 200 · group + a feature-driven part + noise the features do not see."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 4, rows)
    signal = group + rng.normal(0, 0.3, rows)
    features = np.column_stack([signal, rng.normal(size=rows), signal + rng.normal(0, 1, rows)])
    strength = 1000 + 200 * signal + rng.normal(0, 80, rows)
    split = np.repeat(np.array([TRAIN, VALIDATION, EVALUATION], dtype=np.int8), rows // 3)
    return InstanceData(
        features, COLUMNS, group, split, np.arange(rows), np.char.add("g", np.arange(rows).astype(str)).astype(object),
        [f"g{k}" for k in range(4)], strength, "rating",
    )  # fmt: skip


def test_intervals_cover_at_the_nominal_level():
    """Fitted on one split's samples, calibrated on another's, measured on a third's:
    coverage within ±3 points of nominal, as split conformal promises."""
    data = synthetic_instances(30_000, seed=3)

    def samples(code: int, draws: int, purpose: int):
        part = data.subset(np.flatnonzero(data.split == code))
        return rank_group_samples(
            part.features, part.group, n=1, draws_per_group=draws,
            rng=np.random.default_rng([7, purpose]),
        ).with_strength(part.strength)  # fmt: skip

    train, calibration = samples(TRAIN, 1_000, 0), samples(VALIDATION, 2_000, 1)
    evaluation = samples(EVALUATION, 2_000, 2)
    model = fit_strength_model(COLUMNS, 1, "full", train, calibration, MetaConfig())
    row = evaluate_strength(model, COLUMNS, evaluation, "rank_group", baseline=1300.0)
    assert row["samples"] == 8_000
    assert abs(row["coverage_80"] - 0.80) <= 0.03
    assert abs(row["coverage_95"] - 0.95) <= 0.03
    assert row["width_80"] < row["width_95"]
    assert row["mae"] < row["mae_mean_predictor"] / 2  # the features carry the strength
    assert set(model.half_width) == set(LEVEL_GRID) >= set(LEVELS)


def test_sample_strength_is_the_mean_of_the_rated_members():
    data = synthetic_instances(30, seed=0)
    data.strength[1] = np.nan
    drawn = rank_group_samples(
        data.features, data.group, n=2, draws_per_group=3, rng=np.random.default_rng(0)
    ).with_strength(data.strength)
    for members, value in zip(drawn.members, drawn.strength, strict=True):
        assert value == pytest.approx(np.nanmean(data.strength[members]))


def test_folds_are_the_size_of_the_evaluation_split():
    assert conformal_folds(MetaConfig()) == 8  # 0.8 / 0.1
    assert conformal_folds(MetaConfig(split=SplitConfig(0.6, 0.2, 0.2))) == 3
    assert conformal_folds(MetaConfig(fit_split="validation")) == 2  # 0.1 / 0.1, at least 2
    assert conformal_folds(MetaConfig(split=SplitConfig(0.9, 0.1, 0.0))) == 2
    assert conformal_folds(MetaConfig(conformal_folds=5)) == 5  # set by hand


def test_out_of_fold_errors_cover_every_fold_of_the_fit_split():
    """Eight folds of the fit split's games (0.8 / 0.1), each scored by a model of the other
    seven: 8 folds × 4 groups × the validation draws per group, on the scale of held-out
    errors."""
    data = synthetic_instances(6_000, seed=5)
    config = MetaConfig(train_draws_per_group=300, validation_draws_per_group=50)
    errors = out_of_fold_errors(data, 1, "full", config)
    assert errors.shape == (8 * 4 * 50,)
    assert 40 < float(np.median(errors)) < 120  # the noise the features cannot see is σ = 80
    assert np.array_equal(errors, out_of_fold_errors(data, 1, "full", config))  # deterministic
