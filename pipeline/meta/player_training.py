"""Meta-models fitted for one player's own games: the model ``kibitz estimate`` applies.

The rank-group models are fitted on means of n instances of n different players of a group
(Kuboki et al. 2025); an estimate reads n games of one player, whose games share the player's
offset from the group. On Fox ``by-player`` players that offset leans one way (players who play
many games at a rank sit low in it: docs/research/log-meta.md), and the rank-group model reads
them about 0.2 groups low. A player-trained model is fitted on the same rank-group samples plus
``MetaConfig.player_unit_draws`` samples of n games of each player unit of a player-specific set
(``kibitz train meta --player-aggregates``): samples that look like what it is applied to.

Its figures on one player's games are cross-fitted over two halves of the players (a hash of the
name, :func:`pipeline.meta.intervals.player_halves`, the halves the player intervals are
calibrated on): each half is judged by a model fitted on the other half's player samples only,
so no player's games of the set are both fitted and judged (on Fox, a quarter of the set's
players also have a game or two among the rank-group fit games, which every model sees, one
game in a mean of n players'). The model that ships is fitted on every player unit; its rank-group
figures are on the evaluation split, beside the rank-group model's. Measured against the other
ways tried (a constant shift, cut points fitted on players, player samples only):
``bench/accuracy/player_training.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from pipeline.meta.intervals import MIN_PLAYERS, player_halves
from pipeline.meta.model import (
    Evaluation,
    InstanceData,
    MetaConfig,
    MetaDataError,
    TrainedModel,
    evaluate_model,
    fit_model,
)
from pipeline.meta.samples import Samples, player_samples

log = logging.getLogger(__name__)

PLAYER_SUFFIX = "-players"  # results name a player-trained model "<feature set>-players"
PLAYER_MODEL = "models/player/{feature_set}/n{n}.txt"  # in a `kibitz train meta` output folder


def player_method(feature_set: str) -> str:
    """The results' name of the model of ``feature_set`` fitted for one player's games."""
    return f"{feature_set}{PLAYER_SUFFIX}"


def with_player_samples(train: Samples, extra: Samples) -> Samples:
    """The rank-group training samples and the player samples in one training set, for a fit,
    which reads features and labels only (members and unit ids keep their own tables' meaning,
    so the result is not for :meth:`Samples.with_strength`)."""
    return Samples(
        np.vstack([train.features, extra.features]),
        np.concatenate([train.label, extra.label]),
        np.vstack([train.members, extra.members]),
        np.concatenate([train.unit, extra.unit]),
    )


def unit_halves(players: InstanceData) -> np.ndarray:
    """(U,) the half (0 or 1) of each unit id of ``players``: one hash of the player's name, so
    a player's units (one per rank group) fall in the same half."""
    return player_halves(players.unit_player.tolist())


def cross_fit_units(
    players: InstanceData, n: int
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
    """The two folds of the cross-fitted figures at ``n``: (units fitted on, units judged),
    over the units with at least ``n`` instances; a player's units are all in one half, so no
    player is both fitted and judged. None when a half has fewer than
    :data:`~pipeline.meta.intervals.MIN_PLAYERS` such players."""
    units, counts = np.unique(players.unit, return_counts=True)
    units = units[counts >= n]
    half = unit_halves(players)[units]
    sizes = [np.unique(players.unit_player[units[half == h]]).size for h in (0, 1)]
    if min(sizes) < MIN_PLAYERS:
        log.info("n=%d: %s players with %d games in the two halves: no player-trained model",
                 n, sizes, n)  # fmt: skip
        return None
    return (units[half == 1], units[half == 0]), (units[half == 0], units[half == 1])


@dataclass
class PlayerTrained:
    """The player-trained models of one n and their evaluations (both protocols)."""

    models: dict[str, TrainedModel]  # feature set → the model fitted on every player unit
    evaluations: list[Evaluation]


def _fit(
    data: InstanceData,
    players: InstanceData,
    units: np.ndarray,
    feature_set: str,
    n: int,
    train: Samples,
    monitor: Samples | None,
    config: MetaConfig,
    purpose: int,
) -> TrainedModel:
    """The rank-group training samples plus those of the player ``units`` of ``players``."""
    part = players.subset(np.flatnonzero(np.isin(players.unit, units)))
    extra = player_samples(
        part.features, part.unit, part.group, n=n, repeats=config.player_unit_draws,
        rng=np.random.default_rng([config.seed, n, purpose]),
    )  # fmt: skip
    return fit_model(
        data.columns, feature_set, n, with_player_samples(train, extra), monitor,
        groups=data.groups, config=config,
    )  # fmt: skip


def train_player_models(
    data: InstanceData,
    players: InstanceData,
    n: int,
    feature_sets: Sequence[str],
    samples: dict[str, Samples | None],
    player_eval: Samples,
    config: MetaConfig,
) -> PlayerTrained | None:
    """Player-trained models of ``feature_sets`` at ``n``: cross-fitted figures on one player's
    games (``player_eval``: samples of ``players``' units, the units their ``unit`` names), and
    the model fitted on every unit with its rank-group figures on ``samples["evaluation"]``.

    None when ``config.player_unit_draws`` is 0 or a half has fewer than
    :data:`~pipeline.meta.intervals.MIN_PLAYERS` players with ``n`` games at a rank."""
    if config.player_unit_draws <= 0 or players.unit_player is None:
        return None
    plan = cross_fit_units(players, n)
    if plan is None:
        return None
    train, monitor = samples["train"], samples["validation"]
    judged = np.full(len(player_eval), -1)  # (S,) which fold judges each sample
    for k, (_, units_judged) in enumerate(plan):
        judged[np.isin(player_eval.unit, units_judged)] = k
    if np.any(judged < 0):  # samples of a unit the plan does not hold: drawn another way
        raise MetaDataError(f"n={n}: {int(np.sum(judged < 0))} player samples in no fold")
    models: dict[str, TrainedModel] = {}
    evaluations: list[Evaluation] = []
    for feature_set in feature_sets:
        method = player_method(feature_set)
        raw = np.full(len(player_eval), np.nan)  # every sample is judged by one fold
        predicted = np.zeros(len(player_eval), dtype=np.int64)
        for k, (units_fitted, _) in enumerate(plan):
            model = _fit(data, players, units_fitted, feature_set, n, train, monitor, config,
                         purpose=20 + k)  # fmt: skip
            rows = np.flatnonzero(judged == k)
            pick = [data.columns.index(c) for c in model.columns]
            raw[rows], predicted[rows] = model.predict(player_eval.features[rows][:, pick])
        cross = Evaluation(method, "player", n, player_eval.label, raw, predicted, data.groups)
        every = np.concatenate(plan[0])
        model = _fit(data, players, every, feature_set, n, train, monitor, config, purpose=22)
        models[feature_set] = model
        rank = evaluate_model(model, data.columns, samples["evaluation"], "rank_group", data.groups)
        rank = replace(rank, method=method)
        evaluations += [rank, cross]
    return PlayerTrained(models, evaluations)
