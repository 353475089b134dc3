"""Meta-models fitted for one player's own games (pipeline/meta/player_training.py): the
cross-fitted halves never fit and judge one player, and on a hand-made set whose players share
a known offset from their group the player-trained model reads them better than the rank-group
model, measured on players it never saw."""

from __future__ import annotations

import numpy as np

from pipeline.core.data_split import EVALUATION, TRAIN, VALIDATION
from pipeline.meta.intervals import player_halves
from pipeline.meta.model import InstanceData, MetaConfig, build_samples, fit_model
from pipeline.meta.player_training import (
    cross_fit_units,
    player_method,
    train_player_models,
    unit_halves,
)
from pipeline.meta.samples import player_samples

COLUMNS = ["sscore_net_mean_all", "prior_net_geomean_all", "loss_mean_all"]
GROUPS = 4


def rank_group_data(rows: int, seed: int) -> InstanceData:
    """Instances of different players: feature 0 = group + noise."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, GROUPS, rows)
    signal = group + rng.normal(0, 0.6, rows)
    features = np.column_stack([signal, rng.normal(size=rows), signal + rng.normal(0, 1, rows)])
    split = np.repeat(np.array([TRAIN, VALIDATION, EVALUATION], dtype=np.int8), rows // 3)
    ids = np.char.add("g", np.arange(rows).astype(str)).astype(object)
    names = [f"r{k}" for k in range(GROUPS)]
    return InstanceData(features, COLUMNS, group, split, np.arange(rows), ids, names)


def player_set(players: int, games: int, offset: float, seed: int) -> InstanceData:
    """``games`` instances of each of ``players`` players, each in two rank groups (two units a
    player); every player's games share ``offset`` plus a player's own N(0, 0.3) in feature 0:
    players who play many games at a rank read below it."""
    rng = np.random.default_rng(seed)
    player = np.repeat(np.arange(players), 2 * games)  # (N,)
    group = np.tile(np.repeat([0, 2], games), players) + (player % 2)  # two groups a player
    unit_of = np.unique(player * GROUPS + group, return_inverse=True)[1]
    own = rng.normal(0, 0.3, players)[player]
    signal = group + offset + own + rng.normal(0, 0.6, player.size)
    features = np.column_stack(
        [signal, rng.normal(size=player.size), signal + rng.normal(0, 1, player.size)]
    )
    keys = np.unique(player * GROUPS + group)
    unit_player = np.array([f"p{k // GROUPS}" for k in keys], dtype=object)
    ids = np.char.add("q", np.arange(player.size).astype(str)).astype(object)
    split = np.full(player.size, EVALUATION, dtype=np.int8)
    names = [f"r{k}" for k in range(GROUPS)]
    return InstanceData(features, COLUMNS, group, split, unit_of, ids, names,
                        unit_player=unit_player)  # fmt: skip


def test_no_player_is_both_fitted_and_judged():
    players = player_set(players=120, games=6, offset=0.0, seed=1)
    plan = cross_fit_units(players, n=5)
    assert plan is not None
    every = np.unique(players.unit)
    for fitted, judged in plan:
        assert not set(players.unit_player[fitted]) & set(players.unit_player[judged])
        assert sorted([*fitted, *judged]) == every.tolist()  # every unit is judged once
    assert sorted([*plan[0][1], *plan[1][1]]) == every.tolist()
    # a player's two units (two rank groups) fall in one half, the name's hash
    halves = unit_halves(players)
    assert np.array_equal(halves, player_halves(players.unit_player.tolist()))
    for name in np.unique(players.unit_player):
        assert np.unique(halves[players.unit_player == name]).size == 1
    # units with fewer than n games are not drawn; too few players leaves no model
    assert cross_fit_units(players, n=7) is None  # 6 games a unit
    assert cross_fit_units(player_set(players=30, games=6, offset=0.0, seed=1), n=5) is None


def test_player_trained_model_reads_a_known_player_offset():
    """Players of the set read 0.45 groups low; the rank-group model, fitted on different
    players' games, misses them; the player-trained model, judged by halves, does not."""
    data = rank_group_data(9_000, seed=2)
    players = player_set(players=160, games=8, offset=-0.45, seed=3)
    config = MetaConfig(ns=(5,), feature_sets=("full",), train_draws_per_group=500,
                        validation_draws_per_group=100, eval_draws_per_group=200,
                        player_unit_draws=20)  # fmt: skip
    samples = build_samples(data, 5, config)
    judged = player_samples(players.features, players.unit, players.group, n=5, repeats=5,
                            rng=np.random.default_rng(4))  # fmt: skip
    trained = train_player_models(data, players, 5, ["full"], samples, judged, config)
    assert trained is not None and set(trained.models) == {"full"}
    rows = {(e.method, e.sampling): e for e in trained.evaluations}
    assert set(rows) == {(player_method("full"), "player"), (player_method("full"), "rank_group")}
    cross = rows[(player_method("full"), "player")]
    assert cross.samples == len(judged) == 320 * 5 and np.isfinite(cross.raw).all()
    base = fit_model(COLUMNS, "full", 5, samples["train"], samples["validation"],
                     groups=GROUPS, config=config)  # fmt: skip
    base_raw = base.booster.predict(judged.features)
    # the rank-group model reads the set's players ~0.45 groups low; the player model does not
    assert np.mean(base_raw - judged.label) < -0.3
    assert abs(np.mean(cross.raw - judged.label)) < 0.15
    base_accuracy = np.mean(np.clip(np.rint(base_raw), 0, GROUPS - 1) == judged.label)
    assert cross.accuracy > base_accuracy + 0.1
    # on different players' games, which carry no such offset, it pays for it: why the
    # rank-group models keep their own figures and an estimate of one player applies this one
    rank = rows[(player_method("full"), "rank_group")]
    base_rank = np.mean(
        np.clip(np.rint(base.booster.predict(samples["evaluation"].features)), 0, GROUPS - 1)
        == samples["evaluation"].label
    )
    assert rank.samples == len(samples["evaluation"]) and rank.accuracy < base_rank
    # off when asked
    off = MetaConfig(ns=(5,), feature_sets=("full",), player_unit_draws=0)
    assert train_player_models(data, players, 5, ["full"], samples, judged, off) is None
