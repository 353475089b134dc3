"""Strength intervals of the meta-models (pipeline/meta/intervals.py): the conformal quantiles
by hand, coverage at the nominal level on exchangeable samples and on one player's own games,
and the saved record's choice of calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.core.data_split import EVALUATION, TRAIN, VALIDATION, SplitConfig
from pipeline.meta.intervals import (
    LEVEL_GRID,
    LEVELS,
    SavedStrength,
    calibrate_on_players,
    conformal_folds,
    conformal_quantile,
    evaluate_strength,
    fit_strength_model,
    grouped_conformal_quantile,
    out_of_fold_errors,
    player_halves,
)
from pipeline.meta.model import InstanceData, MetaConfig
from pipeline.meta.samples import player_samples, rank_group_samples

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


def test_grouped_conformal_quantile_by_hand():
    """Each player weighs 1, shared by their errors; one error each is the plain quantile."""
    errors = np.arange(1.0, 10.0)
    assert grouped_conformal_quantile(errors, np.arange(9), 0.8) == conformal_quantile(errors, 0.8)
    # 4 players × 2 errors: weights ½ each; ⌈5 · 0.6⌉ = 3 players' worth of weight is reached
    # at the 6th smallest error
    errors = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    players = np.array(["a", "a", "b", "b", "c", "c", "d", "d"])
    assert grouped_conformal_quantile(errors, players, 0.6) == 6.0
    # a player with many samples weighs no more than one with a single sample: ⌈4 · 0.5⌉ = 2
    # players' weight is reached only at the lone players' larger error (the 2nd player)
    errors = np.array([1.0, 1.0, 1.0, 1.0, 5.0, 9.0])
    players = np.array(["a", "a", "a", "a", "b", "c"])
    assert grouped_conformal_quantile(errors, players, 0.5) == 5.0
    assert math.isinf(grouped_conformal_quantile(errors, players, 0.8))  # ⌈3.2⌉ = 4 > 3 players


def test_players_split_into_stable_halves():
    halves = player_halves([f"p{k}" for k in range(2_000)])
    assert set(halves.tolist()) == {0, 1} and abs(halves.mean() - 0.5) < 0.03
    assert np.array_equal(halves[:10], player_halves([f"p{k}" for k in range(10)]))


def synthetic_players(players: int, games: int, seed: int) -> InstanceData:
    """Players whose skill the features see game by game, and a rating offset they never see
    (σ = 60, the same in all of a player's games: it does not average away over n games)."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0, 4, players)
    offset = rng.normal(0, 60, players)
    player = np.repeat(np.arange(players), games)
    signal = skill[player] + rng.normal(0, 0.75, player.size)
    features = np.column_stack(
        [signal, rng.normal(size=player.size), signal + rng.normal(0, 1, player.size)]
    )
    return InstanceData(
        features, COLUMNS, np.minimum(skill.astype(int), 3)[player],
        np.full(player.size, EVALUATION, np.int8), player,
        np.char.add("g", np.arange(player.size).astype(str)).astype(object),
        [f"g{k}" for k in range(4)], 1000 + 200 * skill[player] + offset[player], "rating",
        np.char.add("player", np.arange(players).astype(str)).astype(object),
    )  # fmt: skip


def test_player_calibration_covers_one_players_own_games():
    """At n = 20, widths calibrated on samples of 20 different players cover one player's 20
    games far less than 80 %: their rating offsets average away across players, not within one.
    Calibrated on one half of the players' own samples and judged on the other half, both
    ways, the coverage is within ±3 points of nominal; the shipped widths (all players) are
    between the two halves'."""
    n = 20
    train = synthetic_players(3_000, n, seed=1)
    fit = rank_group_samples(train.features, train.group, n=n, draws_per_group=1_000,
                             rng=np.random.default_rng(0)).with_strength(train.strength)  # fmt: skip
    calibration = rank_group_samples(train.features, train.group, n=n, draws_per_group=1_000,
                                     rng=np.random.default_rng(1)).with_strength(train.strength)  # fmt: skip
    model = fit_strength_model(COLUMNS, n, "full", fit, calibration, MetaConfig())
    held = synthetic_players(2_000, n, seed=2)
    own = player_samples(held.features, held.unit, held.group, n=n, repeats=5,
                         rng=np.random.default_rng(3)).with_strength(held.strength)  # fmt: skip
    before = evaluate_strength(model, COLUMNS, own, "player", baseline=1400.0)
    assert before["coverage_80"] < 0.6 and before["coverage_95"] < 0.8
    players, row = calibrate_on_players(model, COLUMNS, own, held.unit_player, 1400.0)
    assert row["players"] == players.players == 2_000 and row["samples"] == players.errors == 10_000
    assert row["calibration"] == "player" and row["mae"] == before["mae"]
    assert abs(row["coverage_80"] - 0.80) <= 0.03 and abs(row["coverage_95"] - 0.95) <= 0.03
    for level in LEVELS:
        folds = sorted(w[level] for w in players.fold_half_width)
        assert folds[0] <= players.half_width[level] <= folds[1]
        assert players.half_width[level] > model.half_width[level]
    assert row["width_80"] == round(2 * players.half_width[0.8], 2)


def test_too_few_players_give_no_player_calibration():
    held = synthetic_players(30, 5, seed=4)  # about 15 a half, fewer than MIN_PLAYERS
    own = player_samples(held.features, held.unit, held.group, n=5, repeats=5,
                         rng=np.random.default_rng(0)).with_strength(held.strength)  # fmt: skip
    train = synthetic_instances(3_000, seed=5)
    samples = rank_group_samples(train.features, train.group, n=5, draws_per_group=200,
                                 rng=np.random.default_rng(0)).with_strength(train.strength)  # fmt: skip
    model = fit_strength_model(COLUMNS, 5, "full", samples, samples, MetaConfig())
    players, row = calibrate_on_players(model, COLUMNS, own, held.unit_player, 1400.0)
    assert players is None and "coverage_80" not in row and row["samples"] == 150


def test_saved_strength_applies_the_player_calibration_where_it_has_one(tmp_path):
    """At an n with a player calibration, intervals, p-values and the reported coverage use it;
    at an n without, the rank-group one; held out, a half sees the other half's widths."""
    grid = list(LEVEL_GRID)
    ramp = [round(0.1 * (k + 1), 4) for k in range(len(grid))]
    record = {
        "scale": "rank", "columns": COLUMNS, "level_grid": grid, "models": {"1": "", "5": ""},
        "half_width": {"1": ramp, "5": ramp},
        "player_calibration": {
            "salt": "s", "half_width": {"5": [2 * w for w in ramp]},
            "fold_half_width": {"5": [[3 * w for w in ramp], [4 * w for w in ramp]]},
        },
        "results": [
            {"n": 5, "sampling": "player", "calibration": "rank_group", "coverage_80": 0.7,
             "coverage_95": 0.88},
            {"n": 5, "sampling": "player", "calibration": "player", "coverage_80": 0.79,
             "coverage_95": 0.96},
            {"n": 1, "sampling": "player", "coverage_80": 0.82, "coverage_95": 0.97},
        ],
    }  # fmt: skip
    strength = SavedStrength(tmp_path, record)
    assert (strength.calibration(5), strength.calibration(1)) == ("player", "rank_group")
    point = np.array([0.0])
    assert strength.interval(point, 5, 0.8)[0, 1] == pytest.approx(2 * ramp[79])
    assert strength.interval(point, 1, 0.8)[0, 1] == pytest.approx(ramp[79])
    assert strength.coverage(5, "player") == (0.79, 0.96)
    assert strength.coverage(1, "player") == (0.82, 0.97)  # a row from before calibrations
    # a gap just over the player 80 % width: p = 0.2 at n = 5; far inside it at n = 1
    assert strength.p_value(np.array([2 * ramp[79] + 1e-6]), 5)[0] == pytest.approx(0.2)
    assert strength.held_out(0).interval(point, 5, 0.8)[0, 1] == pytest.approx(4 * ramp[79])
    assert strength.held_out(1).interval(point, 5, 0.8)[0, 1] == pytest.approx(3 * ramp[79])
    assert np.array_equal(strength.player_halves(["a", "b"]), player_halves(["a", "b"], "s"))
