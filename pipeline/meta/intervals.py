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
mean predictor's) on games used by neither; `bench/accuracy/conformal_coverage.py` measures it over many
re-drawn splits, since one split's figure moves by several points with the split alone.

One player's own games are not such a sample: they share the player's offset from the rank
group, which does not average away as n grows, so intervals calibrated on samples of n different
players' games cover one player's n games less often (59.8 % for the 80 % interval at n = 20 on
Fox ``by-player`` players: the shipped Go model's card). Where the model has a player-specific
set (``kibitz train meta --player-aggregates``), :func:`calibrate_on_players` calibrates a
second set of half-widths on that set's player samples, the one an estimate of one player
applies: each player weighs the same (:func:`grouped_conformal_quantile`), and the coverage is
measured by calibrating on one half of the players (a hash of the name, :func:`player_halves`)
and judging the other half, both ways.
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
PLAYER_SALT = "kibitz-player-halves-v1"  # which half of the players calibrates, which judges
# Fewest players in each half for a player calibration at an n: below it the 95 % half-width
# has no finite bound or rests on a handful of players.
MIN_PLAYERS = 20
STRENGTH_MODEL = "models/strength/n{n}.txt"  # in a `kibitz train meta` output folder
# the strength models of a set that reads the clock (games with one), beside the one that reads
# none (every game)
CLOCK_STRENGTH_MODEL = "models/strength-{feature_set}/n{n}.txt"


def strength_model_path(feature_set: str, n: int, *, primary: bool) -> str:
    """Where the strength model of ``feature_set`` at ``n`` lives in an output folder: the one
    every game can use (``primary``) at :data:`STRENGTH_MODEL`, another beside it."""
    if primary:
        return STRENGTH_MODEL.format(n=n)
    return CLOCK_STRENGTH_MODEL.format(feature_set=feature_set, n=n)


def conformal_quantile(errors: np.ndarray, level: float) -> float:
    """The ⌈(m + 1)·level⌉-th smallest of m absolute errors (inf when m is too small)."""
    errors = np.sort(errors[np.isfinite(errors)])
    rank = math.ceil((errors.size + 1) * level)
    return float(errors[rank - 1]) if rank <= errors.size else math.inf


def grouped_conformal_quantile(errors: np.ndarray, groups: np.ndarray, level: float) -> float:
    """The conformal quantile of errors that come in groups (one player's samples).

    Samples of one player are not exchangeable with each other, players are: each of the m
    groups weighs 1, shared equally by its errors (the pooled CDF of Dunn, Wasserman & Ramdas
    2023, "Distribution-free prediction sets for two-layer hierarchical models"), and the
    quantile is the smallest error whose cumulative weight reaches ⌈(m + 1)·level⌉; inf when
    that exceeds m. With one error per group this is :func:`conformal_quantile`.
    """
    keep = np.isfinite(errors)
    errors, groups = errors[keep], np.asarray(groups)[keep]
    _, member, counts = np.unique(groups, return_inverse=True, return_counts=True)
    need = math.ceil((counts.size + 1) * level)
    if need > counts.size:
        return math.inf
    order = np.argsort(errors, kind="stable")
    weight = np.cumsum(1.0 / counts[member[order]])  # reaches m at the end
    return float(errors[order][np.searchsorted(weight, need - 1e-9)])


def player_halves(players: Sequence[str], salt: str = PLAYER_SALT) -> np.ndarray:
    """(P,) 0 or 1: the half of the players each name falls in, by a hash of the name, so a
    player lands in the same half at every n, in each of their rank groups, on any machine."""
    return (game_unit(players, salt) >= 0.5).astype(np.int64)


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
    keep = rated_rows(samples)
    return samples.features[keep], samples.strength[keep] if keep.size else np.empty(0)


def rated_rows(samples: Samples) -> np.ndarray:
    """Indices of the samples with a rated strength."""
    if samples.strength is None:
        return np.empty(0, np.int64)
    return np.flatnonzero(np.isfinite(samples.strength))


def _fit(
    columns: Sequence[str], chosen: Sequence[str], samples: Samples, n: int, config: MetaConfig
) -> lgb.Booster:
    import lightgbm as lgb  # here, not at the top: the CLI parses options without it

    x, y = _rated(samples)
    if y.size == 0:
        raise MetaDataError(f"n={n}: no training sample has a rated strength")
    pick = [list(columns).index(c) for c in chosen]
    params = config.lightgbm_params()
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
    coverage is measured on (`python bench/accuracy/conformal_coverage.py`, docs/guide/estimate.md).
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
    row: dict[str, float | int | str] = {
        "n": model.n, "sampling": sampling, "calibration": "rank_group", "samples": int(y.size)
    }  # fmt: skip
    if y.size == 0:
        return row
    pick = [list(columns).index(c) for c in model.columns]
    error = np.abs(model.predict(x[:, pick]) - y)
    return row | interval_figures(error, model.half_width, model.half_width, y, baseline)


def interval_figures(
    error: np.ndarray,
    judged_by: dict[float, float] | np.ndarray,
    shipped: dict[float, float],
    truth: np.ndarray,
    baseline: float,
) -> dict[str, float]:
    """Coverage of each reported level (``error`` ≤ ``judged_by``: one half-width per level,
    or one per error), the widths that ship, the MAE and the mean predictor's MAE."""
    row: dict[str, float] = {}
    for level in LEVELS:
        half = judged_by[level]
        row[f"coverage_{round(100 * level)}"] = round(float(np.mean(error <= half)), 4)
        row[f"width_{round(100 * level)}"] = round(float(2 * shipped[level]), 2)
    row["mae"] = round(float(np.mean(error)), 2)
    row["mae_mean_predictor"] = round(float(np.mean(np.abs(baseline - truth))), 2)
    return row


@dataclass
class PlayerCalibration:
    """Half-widths calibrated on one player's own n games (player-specific samples).

    ``half_width`` comes from every player's samples and is what an estimate applies;
    ``fold_half_width[h]`` from the players of half ``h`` only (:func:`player_halves`), so that
    the players of the other half can be judged by widths that never saw them (the coverage
    this model reports, and ``bench/accuracy/audit_held_out.py --player-set``).
    """

    n: int
    half_width: dict[float, float]  # level of LEVEL_GRID → ± half-width
    fold_half_width: tuple[dict[float, float], dict[float, float]]
    players: int
    errors: int
    salt: str = PLAYER_SALT


def calibrate_on_players(
    model: StrengthModel,
    columns: Sequence[str],
    samples: Samples,
    unit_player: np.ndarray,
    baseline: float,
    *,
    salt: str = PLAYER_SALT,
) -> tuple[PlayerCalibration | None, dict]:
    """The player calibration of ``model`` at its n and its figures row: each player's samples
    judged by the half-widths of the other half's players, both ways (cross-conformal over two
    halves), the widths that ship from all of them. (None, the row without figures) when a half
    has fewer than :data:`MIN_PLAYERS` rated players."""
    rows = rated_rows(samples)
    players = unit_player[samples.unit[rows]]  # (S,) the player of each rated sample
    half = player_halves(unit_player.tolist(), salt)[samples.unit[rows]]  # (S,) one hash a unit
    row: dict = {"n": model.n, "sampling": "player", "calibration": "player",
                 "samples": int(rows.size)}  # fmt: skip
    counts = [np.unique(players[half == h]).size for h in (0, 1)]
    if min(counts) < MIN_PLAYERS:
        log.warning("n=%d: %s players in the two halves, fewer than %d: no player calibration",
                    model.n, counts, MIN_PLAYERS)  # fmt: skip
        return None, row
    x, y = samples.features[rows], samples.strength[rows]
    pick = [list(columns).index(c) for c in model.columns]
    error = np.abs(model.predict(x[:, pick]) - y)

    def widths(keep: np.ndarray) -> dict[float, float]:
        return {lv: grouped_conformal_quantile(error[keep], players[keep], lv) for lv in LEVEL_GRID}

    folds = (widths(half == 0), widths(half == 1))
    shipped = widths(np.ones(error.size, dtype=bool))
    judged_by = {lv: np.where(half == 0, folds[1][lv], folds[0][lv]) for lv in LEVELS}
    row |= {"players": int(np.unique(players).size)}
    row |= interval_figures(error, judged_by, shipped, y, baseline)
    calibration = PlayerCalibration(
        model.n, shipped, folds, int(np.unique(players).size), int(error.size), salt
    )
    return calibration, row


@dataclass
class StrengthAtN:
    """What ``kibitz train meta`` keeps of the strength intervals at one n."""

    model: StrengthModel
    players: PlayerCalibration | None  # None: no player-specific set, or too few players
    rows: list[dict]  # figures per (sampling, calibration)


def strength_at_n(
    data: InstanceData,
    result: NResult,
    config: MetaConfig,
    *,
    feature_set: str | None = None,
    player_salt: str = PLAYER_SALT,
) -> StrengthAtN | None:
    """The strength model of one n of ``kibitz train meta`` on ``feature_set`` (default: the
    set an estimate applies to games without a clock, whose intervals hold for every game), its
    player calibration where the player samples allow, and its figures, on the samples the
    rank-group models used; None when the data cannot support it (no rated instances, no
    monitoring samples to calibrate on)."""
    feature_set = feature_set or preferred_set(list(result.models), clock=False)
    calibration = result.samples.get("validation")
    if data.strength is None or feature_set is None or calibration is None:
        log.warning("n=%d: no strength intervals (no rated strength or no monitoring samples)",
                    result.n)  # fmt: skip
        return None
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
    players = None
    if result.samples.get("player") is not None and result.player_units is not None:
        players, row = calibrate_on_players(
            model, data.columns, result.samples["player"], result.player_units, baseline,
            salt=player_salt,
        )  # fmt: skip
        rows.append(row)
    return StrengthAtN(model, players, rows)


def widths_json(half_width: dict[float, float]) -> list[float | None]:
    """Half-widths at each level of LEVEL_GRID, rounded; None where no finite bound."""
    return [
        None if math.isinf(half_width[level]) else round(half_width[level], 4)
        for level in LEVEL_GRID
    ]


def strength_manifest(
    fits: dict[int, StrengthAtN],
    scale: str | None,
    *,
    derived: dict | None = None,
    more_rows: Sequence[dict] = (),
    primary: bool = True,
) -> dict | None:
    """The manifest's ``strength`` record: scale, columns, model files, half-widths of each
    calibration (``derived``: the derived player calibration's record), figures (the fits'
    and ``more_rows``)."""
    if not fits:
        return None
    first = next(iter(fits.values())).model
    players = {n: fit.players for n, fit in fits.items() if fit.players is not None}
    record = {
        "scale": scale,
        "feature_set": first.feature_set,
        "columns": first.columns,
        "levels": list(LEVELS),
        "level_grid": list(LEVEL_GRID),
        "calibration_errors": {str(n): fit.model.calibration_errors for n, fit in fits.items()},
        "models": {
            str(n): strength_model_path(first.feature_set, n, primary=primary) for n in fits
        },
        # per n, the half-width at each level of level_grid (None: no finite bound)
        "half_width": {str(n): widths_json(fit.model.half_width) for n, fit in fits.items()},
        "results": [row for fit in fits.values() for row in fit.rows] + list(more_rows),
    }
    if derived:
        record["derived_player_calibration"] = derived
    if players:
        record["player_calibration"] = {
            "salt": next(iter(players.values())).salt,
            "players": {str(n): c.players for n, c in players.items()},
            "errors": {str(n): c.errors for n, c in players.items()},
            "half_width": {str(n): widths_json(c.half_width) for n, c in players.items()},
            # per n, [half 0's widths, half 1's]: each judges the other half's players
            "fold_half_width": {
                str(n): [widths_json(w) for w in c.fold_half_width] for n, c in players.items()
            },
        }
    return record


def strength_markdown(rows: list[dict], scale: str | None) -> str:
    """The figures as a Markdown table: coverage of each interval, widths, MAE vs the mean."""
    by_set = any("feature_set" in r for r in rows)  # a table of several strength models
    lines = [
        f"strength on the {scale} scale: coverage of the conformal intervals and MAE",
        f"| {'feature set | ' if by_set else ''}sampling | calibrated on | n | samples"
        " | coverage 80 % | coverage 95 % | width 80 % | width 95 % | MAE"
        " | MAE of the mean predictor |",
        "|---" * (11 if by_set else 10) + "|",
    ]
    for r in rows:
        if "mae" not in r:
            continue
        lines.append(
            f"| {r['feature_set'] + ' | ' if by_set else ''}{r['sampling']}"
            f" | {_CALIBRATED_ON[r['calibration']]} | {r['n']}"
            f" | {r['samples']:,} | {100 * r['coverage_80']:.1f} | {100 * r['coverage_95']:.1f}"
            f" | {r['width_80']:g} | {r['width_95']:g} | {r['mae']:g}"
            f" | {r['mae_mean_predictor']:g} |"
        )
    return "\n".join(lines)


_CALIBRATED_ON = {
    "rank_group": "samples of n players",
    "player": "one player's n games (other half of the players)",
    "derived": "derived from ρ (the error one player's games share)",
}


@dataclass
class SavedStrength:
    """The strength part of a meta-models folder (its manifest's ``strength`` record).

    An estimate of one player from their own games applies the player calibration where the
    model has one at that n, else the derived one, else the rank-group one (:meth:`calibration`).
    """

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

    def calibration(self, n: int) -> str:
        """What the half-widths applied at trained ``n`` were calibrated on: ``player`` (one
        player's own n games) where the model has that calibration at n; else ``derived`` (the
        rank-group widths widened by the share of the error one player's games share:
        ``pipeline/meta/player_variance.py``) where it has that; else ``rank_group``."""
        if str(n) in self.record.get("player_calibration", {}).get("half_width", {}):
            return "player"
        if str(n) in self.derived.get("half_width", {}):
            return "derived"
        return "rank_group"

    @property
    def derived(self) -> dict:
        """The manifest's ``derived_player_calibration`` record ({} where none)."""
        return self.record.get("derived_player_calibration") or {}

    def derivation_check(self, n: int) -> tuple[str, list[float]] | None:
        """(model, [coverage 80 %, 95 %]) of the derivation on one player's own ``n`` games in
        a model where the answer is known (Go's ``by-player`` players); None where not checked."""
        check = self.derived.get("check") or {}
        coverage = check.get("coverage", {}).get(str(n))
        return (check.get("model"), coverage) if coverage else None

    def coverage(self, n: int, sampling: str) -> tuple[float, float] | None:
        """The measured coverage of the 80 % and 95 % intervals applied at trained ``n``
        (:meth:`calibration`) with ``sampling`` (``rank_group`` or ``player``: n games of one
        player), as ``kibitz train meta`` measured it on games and players the intervals were
        not calibrated on; None where not measured."""
        calibration = self.calibration(n)
        for row in self.record.get("results", []):
            same = (row["n"], row["sampling"], row.get("calibration", "rank_group"))
            if same == (n, sampling, calibration) and "coverage_80" in row:
                return row["coverage_80"], row["coverage_95"]
        return None

    def half_widths(self, n: int) -> np.ndarray:
        """(len(LEVEL_GRID),) half-widths applied at trained ``n`` (inf: unbounded)."""
        if self.calibration(n) == "player":
            widths = self.record["player_calibration"]["half_width"][str(n)]
        elif self.calibration(n) == "derived":
            widths = self.derived["half_width"][str(n)]
        else:
            widths = self.record["half_width"][str(n)]
        return np.array([math.inf if w is None else w for w in widths], dtype=np.float64)

    def held_out(self, half: int) -> SavedStrength:
        """This model as the players of ``half`` (:func:`player_halves`) see it when held out:
        the player calibration of the other half only, so that a measurement on the
        player-specific set's own players (``bench/accuracy/audit_held_out.py --player-set``) judges
        each player by widths that never saw them."""
        players = self.record.get("player_calibration")
        if players is None:
            return self
        folds = players["fold_half_width"]
        other = {n: widths[1 - half] for n, widths in folds.items()}
        return SavedStrength(
            self.root, {**self.record, "player_calibration": {**players, "half_width": other}}
        )

    def player_halves(self, players: Sequence[str]) -> np.ndarray:
        """(P,) the half of each player name under this model's player calibration."""
        salt = self.record.get("player_calibration", {}).get("salt", PLAYER_SALT)
        return player_halves(players, salt)

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
