"""The part of an estimate's error that one player's games share, and intervals derived from it.

An interval calibrated on samples of n different players' games is too narrow for n games of
one player: each game's error is the player's own offset from the rated strength (shared by
all their games) plus the game's own noise, and only the noise averages away. Where a data set
has players with many games at a rank (Fox ``by-player``), the player intervals are calibrated
on their samples (:func:`pipeline.meta.intervals.calibrate_on_players`). Chess in ``../shared``
has no such players (none with 5 games in one band), but it has thousands with two or more
games: enough to measure the share ρ of the per-game error variance that a player's games
share, the intra-class correlation of one-game residuals, each game judged against the rating
it was played at.

With that share, the variance of the mean error of n games is the rank-group one times the
design effect 1 + (n − 1)·ρ (Kish 1965): n games of one player carry the information of
n / (1 + (n − 1)·ρ) games of different players. The derived player half-widths are the
rank-group ones times √(1 + (n − 1)·ρ). The derivation is checked on Go, where the answer is
known: ρ from the testing split alone, the widths it derives against the ``by-player`` players'
own calibration (``bench/accuracy/derived_calibration.py``).

    residual = out_of_fold_residuals(data, "full_dcloss", config)   # (N,) prediction − rating
    rho, players = shared_share(residual, data.unit_player[data.unit], data.group)
    widths = derived_half_widths(rank_group_widths, rho, n=20)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.core.data_split import game_unit
from pipeline.meta.intervals import StrengthAtN, interval_figures, rated_rows, widths_json
from pipeline.meta.model import (
    InstanceData,
    MetaConfig,
    feature_set_columns,
    fit_and_monitor_splits,
)
from pipeline.meta.samples import Samples, rank_group_samples

FOLDS = 5  # folds of the players for the out-of-fold residuals
FOLD_SALT = "kibitz-player-variance-v1"


def centred_within(residual: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``residual`` minus the mean of its rank ``group``'s finite residuals (NaN stays NaN): what
    is left once the regression's pull on each group, shared by whoever plays in it, is out."""
    residual = np.array(residual, np.float64)
    group = np.asarray(group)
    finite = np.isfinite(residual)
    for g in np.unique(group[finite]):
        rows = finite & (group == g)
        residual[rows] -= residual[rows].mean()
    return residual


def shared_share(residual: np.ndarray, player: np.ndarray, group: np.ndarray) -> tuple[float, int]:
    """(ρ, players): the share of the residuals' variance that lies between players, over the
    players with two or more finite residuals: the one-way random-effects ANOVA estimate
    (Searle et al. 1992, unbalanced groups), clipped to [0, 1]; (nan, players) when fewer than
    two such players.

    Residuals are first centred within each rank ``group``: a group's mean residual is the
    regression's pull toward the middle, which every sample of that group shares whoever
    played it, and which the rank-group widths hold already; what is left shared by one
    player's games is their own offset from the group."""
    keep = np.isfinite(residual) & (np.asarray(player).astype(str) != "")  # "": no name
    residual = centred_within(np.where(keep, residual, np.nan), group)
    _, member, counts = np.unique(np.asarray(player)[keep], return_inverse=True,
                                  return_counts=True)  # fmt: skip
    several = counts[member] >= 2
    residual, member = residual[keep][several], member[several]
    _, member, k = np.unique(member, return_inverse=True, return_counts=True)
    a, total = k.size, residual.size
    if a < 2:
        return math.nan, int(a)
    means = np.bincount(member, weights=residual) / k  # (a,)
    grand = residual.mean()
    within = np.sum((residual - means[member]) ** 2) / (total - a)
    between = np.sum(k * (means - grand) ** 2) / (a - 1)
    k0 = (total - np.sum(k**2) / total) / (a - 1)
    shared = max(0.0, (between - within) / k0)
    return float(min(1.0, shared / (shared + within))) if shared + within > 0 else 0.0, int(a)


def design_effect(rho: float, n: int) -> float:
    """How much wider one player's n-game interval is than n different players': √(1 + (n−1)ρ)."""
    return math.sqrt(1.0 + (n - 1) * rho)


def derived_half_widths(rank_group: dict[float, float], rho: float, n: int) -> dict[float, float]:
    """Player half-widths at each level: the rank-group ones times :func:`design_effect`."""
    scale = design_effect(rho, n)
    return {level: width * scale for level, width in rank_group.items()}


def out_of_fold_residuals(
    data: InstanceData, feature_set: str, config: MetaConfig, *, n: int = 1, folds: int = FOLDS
) -> np.ndarray:
    """(N,) each rated instance's one-game strength prediction minus its rated strength (NaN
    where unrated), from a regressor fitted on the other folds' players (a hash of the name):
    no player's games are predicted by a model that saw any of them. ``n`` > 1: the regressor
    is fitted on rank-group samples of n instances (``config.train_draws_per_group`` a group),
    as the n-game strength model is, and still applied to single games."""
    import lightgbm as lgb  # here, not at the top: the CLI parses options without it

    residual = np.full(len(data.group), np.nan)
    if data.strength is None or data.unit_player is None:
        return residual
    chosen = feature_set_columns(data.columns, feature_set)
    x = data.features[:, [data.columns.index(c) for c in chosen]]
    players = data.unit_player[data.unit]  # (N,)
    names, member = np.unique(players.astype(str), return_inverse=True)
    fold = np.minimum((game_unit(names.tolist(), FOLD_SALT) * folds).astype(np.int64), folds - 1)
    fold = fold[member]  # (N,)
    rated = np.isfinite(data.strength)
    params = config.lightgbm_params()
    for k in range(folds):
        fit = np.flatnonzero(rated & (fold != k))
        held = np.flatnonzero(rated & (fold == k))
        if fit.size == 0 or held.size == 0:
            continue
        features, label = x[fit], data.strength[fit]
        if n > 1:
            samples = rank_group_samples(
                features, data.group[fit], n=n, draws_per_group=config.train_draws_per_group,
                rng=np.random.default_rng([config.seed, n, k]),
            ).with_strength(label)  # fmt: skip
            features, label = samples.features, samples.strength
        booster = lgb.train(params, lgb.Dataset(features, label=label))
        residual[held] = booster.predict(x[held]) - data.strength[held]
    return residual


@dataclass
class DerivedCalibration:
    """Player half-widths derived from ρ at each n, and their coverage on one player's games
    where the data hold such samples (the check: Go's ``by-player`` players)."""

    rho: float
    players: int  # players with two or more games that ρ rests on
    half_width: dict[int, dict[float, float]]  # n → level of LEVEL_GRID → ± half-width
    rows: list[dict]  # figures per n (sampling "player", calibration "derived")


def derive_player_calibration(
    data: InstanceData,
    fits: dict[int, StrengthAtN],
    player_samples: dict[int, Samples | None],
    config: MetaConfig,
) -> DerivedCalibration | None:
    """ρ from ``data``'s players with two or more games (out-of-fold one-game residuals of the
    strength models' feature set) and the widths it derives at each n of ``fits``; judged on
    ``player_samples[n]`` (one player's n games the strength model was not fitted on) where
    there are any. None without rated strengths or fits."""
    if not fits or data.strength is None or data.unit_player is None:
        return None
    feature_set = next(iter(fits.values())).model.feature_set
    residual = out_of_fold_residuals(data, feature_set, config)
    rho, players = shared_share(residual, data.unit_player[data.unit], data.group)
    if not math.isfinite(rho):
        return None
    fit = fit_and_monitor_splits(config)[0]
    baseline = float(np.nanmean(data.strength[data.split == fit]))
    widths, rows = {}, []
    for n, at_n in fits.items():
        if n < 2:  # one game is one player's and n players' alike: the rank-group widths
            continue
        widths[n] = derived_half_widths(at_n.model.half_width, rho, n)
        samples = player_samples.get(n)
        keep = rated_rows(samples) if samples is not None else np.empty(0, np.int64)
        if keep.size == 0:
            continue
        model = at_n.model
        pick = [data.columns.index(c) for c in model.columns]
        error = np.abs(model.predict(samples.features[keep][:, pick]) - samples.strength[keep])
        row = {"n": n, "sampling": "player", "calibration": "derived", "samples": int(keep.size)}
        rows.append(
            row | interval_figures(error, widths[n], widths[n], samples.strength[keep], baseline)
        )
    return DerivedCalibration(rho, players, widths, rows)


def derived_manifest(derived: DerivedCalibration, check: dict | None) -> dict:
    """The strength record's ``derived_player_calibration``: ρ, the players it rests on, the
    half-widths at each n ≥ 2 (at n = 1 they are the rank-group ones), and ``check``: the
    derivation's coverage where the answer is known (:func:`derivation_check` of a model with
    a player-specific set), so an estimate can say how far the derivation held."""
    record = {
        "rho": round(derived.rho, 4),
        "players": derived.players,
        "half_width": {str(n): widths_json(w) for n, w in derived.half_width.items()},
    }
    if check:
        record["check"] = check
    return record


def derivation_check(manifest: dict) -> dict | None:
    """How the derived widths held on one player's own n games in a model that has both the
    derived and the measured player calibration (Go): {"model", "coverage": {n: [80 %, 95 %]}};
    None where the model has no such figures."""
    rows = [
        r for r in (manifest.get("strength") or {}).get("results", [])
        if r.get("calibration") == "derived" and r["sampling"] == "player" and "coverage_80" in r
    ]  # fmt: skip
    if not rows:
        return None
    coverage = {str(r["n"]): [r["coverage_80"], r["coverage_95"]] for r in rows}
    return {"model": manifest.get("name"), "coverage": coverage}
