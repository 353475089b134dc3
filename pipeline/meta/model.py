"""The rank-estimation meta-models of Kuboki et al. (2025) and the Chen et al. baseline.

Protocol (one call of :func:`train_and_evaluate` per sample size n):

1. instances (rows of ``player_instance_features``) are split by game with
   :mod:`pipeline.core.data_split` (default 80 / 10 / 10): training samples come from the train games,
   validation samples from the validation games (so no game feeds both, which a random 80:20
   split of averaged samples would allow), evaluation samples from the evaluation games.
   With ``MetaConfig.fit_split = "validation"`` the first two swap, for features of a net
   trained on the train games, which scores them better than new games (on the chess subset of
   docs/guide/estimate.md the Spearman correlation of mean s-score with rank group is 0.716 on
   train-split instances against 0.593 on evaluation ones);
2. a sample is the mean features of n instances (:mod:`pipeline.meta.samples`); the target is
   the rank group index, 0 = weakest (``rank_groups.group_index``);
3. one LightGBM regressor per (feature set, n) with LightGBM's default parameters and a fixed
   seed; a prediction is the regression output rounded and clipped to a valid group;
4. evaluation with both protocols: rank-group sampling (500 draws per group) and
   player-specific sampling (n of one player's own instances, 5 repeats). Every feature set and
   the baseline see the same evaluation draws.

The Chen, Shih & Wu (2025) baseline predicts the group whose mean s-score over the training
instances is nearest to the sample's mean s-score (one baseline per strength net).

Feature sets are unions of column families (:data:`FAMILIES`): the paper's full set is s-score +
priors + loss; the ablations drop one family or add the difficulty-corrected losses.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.data_split import (
    EVALUATION,
    SPLITS,
    TRAIN,
    VALIDATION,
    SplitConfig,
    assign_splits,
)
from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import column_slug, instance_column
from pipeline.meta.aggregate import feature_columns
from pipeline.meta.decision import (
    extended_above,
    fit_extended_ordinal,
    ordinal_file,
    ordinal_groups,
)
from pipeline.meta.samples import Samples, player_samples, rank_group_samples

if TYPE_CHECKING:
    import lightgbm as lgb

log = logging.getLogger(__name__)

SAMPLINGS = ("rank_group", "player")
DEFAULT_NS = (1, 5, 10, 15, 20)

# Column families of sql/marts/player_instance_features.sql.
FAMILIES: dict[str, re.Pattern[str]] = {
    "sscore": re.compile(r"^sscore_(.+)_(?:mean|median|std)_(?:k25|k50|all)$"),  # (1): net
    "prior": re.compile(r"^prior_.+_geomean_(k25|k50|all)$"),
    "loss": re.compile(r"^loss_(mean|median|std)_(k25|k50|all)$"),
    "dcloss": re.compile(r"^loss_c6[1-4]_mean_(k25|k50|all)$"),
    "top1": re.compile(r"^top1_.+_rate_(k25|k50|all)$"),
    # how the player spent their clock (sql/intermediate/int_instance_time_usage.sql): chess
    "clock": re.compile(r"^clock_.+_(k25|k50|all)$"),
}
# The paper's full set and its ablations (Table 2); top-1 rates are available but not in it.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "full": ("sscore", "prior", "loss"),
    "no_sscore": ("prior", "loss"),
    "no_prior": ("sscore", "loss"),
    "no_loss": ("sscore", "prior"),
    "full_dcloss": ("sscore", "prior", "loss", "dcloss"),
    # Beyond the paper: the clock of every Lichess game (#65); games without one (Fox SGFs,
    # over-the-board PGN) leave these columns empty and the sets are not trained.
    "full_dcloss_clock": ("sscore", "prior", "loss", "dcloss", "clock"),
    "clock_only": ("clock",),
}
CHEN_PREFIX = "chen_sscore_"  # method name of the baseline: chen_sscore_<net>
# The feature sets an estimate uses, first trained first: the paper's full set, with the
# difficulty-corrected losses and the clock when they were trained. A game without a clock, or
# of a time control the training games never had, takes the first of them that reads no clock.
PREFERRED_SETS = ("full_dcloss_clock", "full_dcloss", "full")
CLOCK_FAMILY = "clock"
# Instance columns holding a rated strength, tried in order: a game kind's data carry one of them
# (Lichess a rating; Fox a rank, which the staging SQL places on Kibitz's numeric rank scale).
STRENGTH_COLUMNS = ("rating", "rank_num")
# The instance columns of a game's time control (sql/marts/player_instance_features.sql).
TIME_CONTROL_COLUMNS = ("tc_base_s", "tc_increment_s")


# What makes a LightGBM run repeatable: one thread (the same models on any machine, as a refit
# of a shipped model must be; and on a busy 2-core machine two threads wait on each other and
# train far slower than one).
REPEATABLE = {"deterministic": True, "force_row_wise": True, "num_threads": 1, "verbose": -1}
# The meta-models' fitting: slower than LightGBM's defaults (learning rate 0.03, 400 trees),
# leaves of at least 50 samples, bagged (70 % of the columns and 80 % of the rows a tree, λ₂ 1),
# on 6,000 training samples a group and n. A sample of one chess game is noisy and the default
# 100 trees at 0.1 fit part of that noise: chess `full_dcloss_clock` +2.1 ± 0.6 / +1.4 ± 0.6
# points at n = 5 / 20 and −5 ± 2 rating points of MAE from one game, paired over 5 re-drawn
# splits (bench/accuracy/meta_params.py; docs/research/results.md, the fitting).
FITTING = {
    "learning_rate": 0.03,
    "num_iterations": 400,
    "min_data_in_leaf": 50,
    "feature_fraction": 0.7,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
}
TRAIN_DRAWS = 6000
# LightGBM's own defaults (100 trees, 31 leaves, learning rate 0.1) on 2,000 training samples a
# group: the fitting of the figures measured before 3 December 2026 (a bench's
# --lightgbm-defaults reruns them), and a quick one where both sides of a comparison share it.
LIGHTGBM_DEFAULTS = {"train_draws_per_group": 2000, "lgbm_params": dict(REPEATABLE)}


class MetaDataError(KibitzError, ValueError):
    """Instance tables that cannot train or evaluate a meta-model."""


FIT_SPLITS = ("train", "validation")


@dataclass
class MetaConfig:
    """Everything that decides a meta-model's numbers; logged as MLflow parameters."""

    ns: tuple[int, ...] = DEFAULT_NS
    feature_sets: tuple[str, ...] = tuple(FEATURE_SETS)
    split: SplitConfig = field(default_factory=SplitConfig)
    train_draws_per_group: int = TRAIN_DRAWS  # training samples per rank group and n
    validation_draws_per_group: int = 500
    eval_draws_per_group: int = 500  # the paper's rank-group protocol
    player_repeats: int = 5  # the paper's player-specific protocol
    # Samples of n games of each player unit of a player-specific set added to the training of
    # the model an estimate of one player applies (pipeline/meta/player_training.py); 0: none.
    player_unit_draws: int = 60
    seed: int = 0
    # The split whose instances the meta-models (and the Chen baseline's group means) are
    # fitted on; the other of train / validation monitors the fit. "validation" keeps the
    # features of nets trained on the train split (Kibitz's s-score and Go policy nets) out of
    # sample, with an eighth of the games (docs/guide/estimate.md measures both).
    fit_split: str = "train"
    # The strength nets (extraction config names) whose s-scores the models may use; empty:
    # every one in the features (the chess preset extracts two).
    sscore_nets: tuple[str, ...] = ()
    # Cross-fitting folds of the strength intervals' calibration errors; 0: as many as make a
    # fold the size of the evaluation split (pipeline/meta/intervals.py:conformal_folds).
    conformal_folds: int = 0
    lgbm_params: dict = field(default_factory=lambda: REPEATABLE | FITTING)
    # The n whose models name the rank group by an ordinal model beside the regressor, where
    # it gains over rounding (pipeline/meta/decision.py); the other n round. `kibitz train meta`
    # takes the game kind's default (pipeline/kinds/).
    ordinal_ns: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.lgbm_params = dict(self.lgbm_params)  # a config's own: callers lay theirs over it

    def fitting_record(self) -> dict:
        """How the regressors are fitted, as a manifest records it: the training draws and
        LightGBM's parameters beyond the library's defaults."""
        return {
            "train_draws_per_group": self.train_draws_per_group,
            "lightgbm": dict(self.lgbm_params),
        }

    def lightgbm_params(self) -> dict:
        """The parameters of every LightGBM regressor this config fits (the meta-models, the
        strength models, the player-offset folds): one objective, one seed."""
        return {"objective": "regression", "seed": self.seed, **self.lgbm_params}


@dataclass
class InstanceData:
    """The instance table as arrays, with rank groups ordered weakest → strongest."""

    features: np.ndarray  # (N, F) float64
    columns: list[str]  # F feature column names
    group: np.ndarray  # (N,) int64 rank group index
    split: np.ndarray  # (N,) int8 TRAIN / VALIDATION / EVALUATION
    unit: np.ndarray  # (N,) int64 (player, rank group) id for player-specific sampling
    game_id: np.ndarray  # (N,) object
    group_names: list[str]  # index → rank group label
    # (N,) rated strength on the data's scale (NaN: unrated), and that scale's column name
    # (:data:`STRENGTH_COLUMNS`); None where the table had none (the intervals need it).
    strength: np.ndarray | None = None
    strength_scale: str | None = None
    # (U,) the player of each unit id (``unit`` indexes it): the strength intervals calibrated
    # on one player's own games split players, not units, into halves; None where unknown.
    unit_player: np.ndarray | None = None

    @property
    def groups(self) -> int:
        return len(self.group_names)

    def subset(self, rows: np.ndarray) -> InstanceData:
        """The instances at ``rows``; unit ids keep their meaning (``unit_player`` stays)."""
        return replace(
            self, features=self.features[rows], group=self.group[rows], split=self.split[rows],
            unit=self.unit[rows], game_id=self.game_id[rows],
            strength=None if self.strength is None else self.strength[rows],
        )  # fmt: skip

    def with_columns(self, keep: Sequence[int]) -> InstanceData:
        """The same instances with only the feature columns at ``keep``."""
        return replace(
            self, features=self.features[:, list(keep)], columns=[self.columns[i] for i in keep]
        )


@dataclass
class Evaluation:
    """One method evaluated on one protocol at one n."""

    method: str  # feature set name or chen_sscore_<net>
    sampling: str  # "rank_group" | "player"
    n: int
    label: np.ndarray  # (S,) true group index
    raw: np.ndarray  # (S,) continuous prediction (meta-model) or predicted index (baseline)
    predicted: np.ndarray  # (S,) group index
    groups: int

    @property
    def samples(self) -> int:
        return int(self.label.shape[0])

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.predicted == self.label)) if self.samples else float("nan")

    @property
    def accuracy_pm1(self) -> float:
        """Share of samples whose predicted group is the true one or a neighbour."""
        if not self.samples:
            return float("nan")
        return float(np.mean(np.abs(self.predicted - self.label) <= 1))

    def confusion(self) -> np.ndarray:
        """(G, G) counts: row = true group, column = predicted group."""
        g = self.groups
        return np.bincount(self.label * g + self.predicted, minlength=g * g).reshape(g, g)


@dataclass
class TrainedModel:
    """One LightGBM regressor of one feature set at one n."""

    feature_set: str
    n: int
    columns: list[str]
    booster: lgb.Booster
    groups: int
    importance: dict[str, float]  # total gain per column
    validation_l2: float
    # The model of P(group > k) that names the group at the config's ordinal n
    # (pipeline/meta/decision.py); None: the regression output is rounded.
    ordinal: lgb.Booster | None = None

    def predict(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(continuous output, group index) for rows of ``features`` in ``columns`` order."""
        return decide(self.booster, self.ordinal, features, self.groups)

    def save(self, path: Path) -> None:
        """The regressor at ``path``, its ordinal model beside it (:func:`ordinal_file`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(path))
        if self.ordinal is not None:
            self.ordinal.save_model(str(path.with_name(ordinal_file(path.name))))


def decide(
    booster: lgb.Booster, ordinal: lgb.Booster | None, features: np.ndarray, groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """(continuous output, group index) of a regressor and its decision: the ordinal model's
    median group where there is one, else the rounded output."""
    if len(features) == 0:
        return np.empty(0), np.empty(0, dtype=np.int64)
    raw = booster.predict(features)
    if ordinal is not None:
        return raw, ordinal_groups(extended_above(ordinal, features, groups))
    return raw, round_to_group(raw, groups)


def preferred_set(trained: Sequence[str], *, clock: bool = True) -> str | None:
    """The feature set an estimate applies: the first of :data:`PREFERRED_SETS` among the
    ``trained`` ones, else the first trained (None: none); ``clock=False``: the first of them
    that reads no clock (for games without one)."""
    usable = [fs for fs in trained if clock or not reads_clock(fs)]
    return next((fs for fs in PREFERRED_SETS if fs in usable), next(iter(usable), None))


def applied_sets(trained: Sequence[str]) -> list[str]:
    """The feature sets an estimate applies: its first choice (:func:`preferred_set`) and, for
    games without a clock, the first that reads none, once each (one set where the first choice
    reads no clock); what ships of a trained model, and what gets a player-trained and a
    strength model."""
    sets = [preferred_set(trained), preferred_set(trained, clock=False)]
    return list(dict.fromkeys(fs for fs in sets if fs is not None))


def time_controls(instances: pa.Table) -> list[str]:
    """The distinct time controls of ``instances`` as Lichess names them ("300+3"), sorted by
    base and increment; [] when the table has no time control (aggregates written before the
    columns existed, or games without one)."""
    if not set(TIME_CONTROL_COLUMNS) <= set(instances.column_names):
        return []
    pairs = (
        instances.select(list(TIME_CONTROL_COLUMNS))
        .drop_null()
        .group_by(list(TIME_CONTROL_COLUMNS))
        .aggregate([])
    )
    rows = sorted(zip(*(pairs[c].to_pylist() for c in TIME_CONTROL_COLUMNS), strict=True))
    return [f"{base}+{increment}" for base, increment in rows]


def reads_clock(feature_set: str) -> bool:
    """Whether a feature set reads the clock family (:data:`FEATURE_SETS`)."""
    return CLOCK_FAMILY in FEATURE_SETS.get(feature_set, ())


def drop_empty_columns(data: InstanceData) -> InstanceData:
    """``data`` without the feature columns that have no value in any instance: the clock
    family of games that carry no clock (Fox SGFs), which no model can learn from; a feature
    set left with no column of its own is then not trained (:func:`train_and_evaluate`)."""
    keep = np.flatnonzero(~np.all(np.isnan(data.features), axis=0))
    if len(keep) < len(data.columns):
        empty = sorted(set(data.columns) - {data.columns[i] for i in keep})
        log.info("%d feature columns have no value in any instance: %s …", len(empty), empty[:3])
    return data.with_columns(keep)


def nearest_n(ns: Sequence[int], games: int) -> int:
    """The trained n closest to ``games`` (ties → the smaller n, the more cautious model)."""
    return min(ns, key=lambda n: (abs(n - games), n))


def round_to_group(raw: np.ndarray, groups: int) -> np.ndarray:
    """Regression output → the nearest valid group index (round, then clip)."""
    return np.clip(np.rint(raw), 0, groups - 1).astype(np.int64)


def family_columns(columns: Sequence[str], families: Sequence[str]) -> list[str]:
    """The columns of ``columns`` in any of ``families``, in table order."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise MetaDataError(f"unknown feature families {unknown!r}; known: {sorted(FAMILIES)}")
    return [c for c in columns if any(FAMILIES[f].match(c) for f in families)]


def keep_sscore_nets(data: InstanceData, nets: Sequence[str]) -> InstanceData:
    """``data`` with the s-score columns of the strength nets ``nets`` only (their extraction
    config names); all of them when ``nets`` is empty. A features table has one s-score per
    strength net of its extraction, and which of them helps a meta-model is the user's to ask."""
    if not nets:
        return data
    wanted = {column_slug(net) for net in nets}
    net_of = [FAMILIES["sscore"].match(c) for c in data.columns]
    present = {m.group(1) for m in net_of if m}
    if wanted - present:
        raise MetaDataError(
            f"no s-score columns of strength nets {sorted(wanted - present)}; the aggregates"
            f" have {sorted(present) or 'none'}"
        )
    keep = [i for i, m in enumerate(net_of) if m is None or m.group(1) in wanted]
    return data.with_columns(keep)


def feature_set_columns(columns: Sequence[str], feature_set: str) -> list[str]:
    """The columns of a named feature set (:data:`FEATURE_SETS`)."""
    if feature_set not in FEATURE_SETS:
        raise MetaDataError(f"unknown feature set {feature_set!r}; known: {sorted(FEATURE_SETS)}")
    return family_columns(columns, FEATURE_SETS[feature_set])


def instance_data(
    instances: pa.Table,
    rank_groups: pa.Table,
    *,
    game: str,
    split: SplitConfig | None = None,
) -> InstanceData:
    """Arrays of one game kind's instances that have a rank group known to ``rank_groups``."""
    split = split or SplitConfig()
    instances = instances.filter(pc.equal(instances["game"], game))
    groups = rank_groups.filter(pc.equal(rank_groups["game"], game)).sort_by("group_index")
    names = groups["rank_group"].to_pylist()
    if not names:
        raise MetaDataError(f"no {game!r} rank groups in the aggregates")
    index = pc.index_in(instances["rank_group"], value_set=pa.array(names))
    keep = pc.is_valid(index)
    instances, index = instances.filter(keep), index.filter(keep)
    if instances.num_rows == 0:
        raise MetaDataError(f"no {game!r} player instances with a rank group")
    columns = feature_columns(instances.column_names)
    features = np.column_stack(
        [instances[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in columns]
    )  # (N, F)
    group = index.to_numpy(zero_copy_only=False).astype(np.int64)
    game_id = np.asarray(instances["game_id"].to_pylist(), dtype=object)
    unique_games, game_row = np.unique(game_id, return_inverse=True)
    split_codes = assign_splits(unique_games.tolist(), split)[game_row]
    players = pc.fill_null(instances["player"], "").to_numpy(zero_copy_only=False)
    # one unit per (player, rank group): a code pair, not a joined string that two names
    # could share ("ab" in group 12 and "ab1" in group 2)
    player_names, player_code = np.unique(players.astype(str), return_inverse=True)
    unit_keys, unit = np.unique(player_code * len(names) + group, return_inverse=True)
    unit_player = player_names[unit_keys // len(names)].astype(object)  # (U,)
    strength, scale = _strength(instances)
    return InstanceData(
        features, columns, group, split_codes, unit.astype(np.int64), game_id, names, strength,
        scale, unit_player,
    )  # fmt: skip


def unseen_instances(other: InstanceData, data: InstanceData) -> InstanceData:
    """The instances of ``other`` (a player-specific set) minus any game ``data``'s models are
    fitted or monitored on: only evaluation games may be shared."""
    if other.columns != data.columns:
        raise MetaDataError(
            "the player-specific instances have other feature columns than the training ones"
            " (extract both with the same config)"
        )
    seen = set(data.game_id[data.split != EVALUATION].tolist())
    keep = np.fromiter((g not in seen for g in other.game_id), dtype=bool, count=len(other.game_id))
    return other.subset(np.flatnonzero(keep))


def _strength(instances: pa.Table) -> tuple[np.ndarray | None, str | None]:
    """The first of :data:`STRENGTH_COLUMNS` with a rated instance, as float64 (NaN: unrated)."""
    for name in STRENGTH_COLUMNS:
        if name in instances.column_names and instances[name].null_count < instances.num_rows:
            values = pc.cast(instances[name], pa.float64()).to_numpy(zero_copy_only=False)
            return np.asarray(values, dtype=np.float64), name
    return None, None


def _rng(seed: int, n: int, purpose: int) -> np.random.Generator:
    """One generator per (seed, n, purpose): draws do not depend on what ran before."""
    return np.random.default_rng([seed, n, purpose])


def _check_groups(data: InstanceData, n: int, what: str) -> None:
    counts = np.bincount(data.group, minlength=data.groups)
    small = [data.group_names[g] for g in np.flatnonzero(counts < n)]
    if small:
        raise MetaDataError(
            f"{what}: rank groups {small!r} have fewer than n={n} instances"
            f" (counts {dict(zip(data.group_names, counts.tolist(), strict=True))})"
        )


def fit_and_monitor_splits(config: MetaConfig) -> tuple[int, int]:
    """The split codes the meta-models are fitted on and monitored with."""
    if config.fit_split not in FIT_SPLITS:
        raise MetaDataError(f"fit_split must be one of {FIT_SPLITS!r}, got {config.fit_split!r}")
    return (TRAIN, VALIDATION) if config.fit_split == "train" else (VALIDATION, TRAIN)


def build_samples(data: InstanceData, n: int, config: MetaConfig) -> dict[str, Samples | None]:
    """Train, validation and evaluation samples of one n, all feature columns.

    "train" samples come from ``config.fit_split``'s instances, "validation" ones from the
    other split. Validation only monitors the fit (LightGBM defaults, no early stopping), so a
    validation split too small for n is skipped with a warning (``None``); train and
    evaluation are not.
    """
    fit, monitor = fit_and_monitor_splits(config)
    parts = {
        "train": data.subset(np.flatnonzero(data.split == fit)),
        "validation": data.subset(np.flatnonzero(data.split == monitor)),
        "evaluation": data.subset(np.flatnonzero(data.split == EVALUATION)),
    }
    draws = {
        "train": config.train_draws_per_group,
        "validation": config.validation_draws_per_group,
        "evaluation": config.eval_draws_per_group,
    }
    labels = {  # what an error calls each part
        "train": f"fit split ({SPLITS[fit]}; --fit-split chooses it)",
        "validation": f"monitoring split ({SPLITS[monitor]})",
        "evaluation": "evaluation split",
    }
    out = {}
    for purpose, (name, part) in enumerate(parts.items()):
        try:
            _check_groups(part, n, labels[name])
        except MetaDataError as exc:
            if name != "validation":
                raise
            log.warning("n=%d: no validation samples: %s", n, exc)
            out[name] = None
            continue
        out[name] = rank_group_samples(
            part.features, part.group, n=n, draws_per_group=draws[name],
            rng=_rng(config.seed, n, purpose),
        ).with_strength(part.strength)  # fmt: skip
    return out


def player_eval_samples(data: InstanceData, n: int, config: MetaConfig) -> Samples:
    """Player-specific samples of ``data`` (already restricted to evaluation instances)."""
    return player_samples(
        data.features, data.unit, data.group, n=n, repeats=config.player_repeats,
        rng=_rng(config.seed, n, 3),
    ).with_strength(data.strength)  # fmt: skip


def fit_model(
    columns: Sequence[str],
    feature_set: str,
    n: int,
    train: Samples,
    validation: Samples | None,
    *,
    groups: int,
    config: MetaConfig,
) -> TrainedModel:
    """One LightGBM regressor on the ``feature_set`` columns of the samples."""
    chosen = feature_set_columns(columns, feature_set)
    if not chosen:
        raise MetaDataError(f"feature set {feature_set!r} has no columns in the aggregates")
    pick = [columns.index(c) for c in chosen]
    params = config.lightgbm_params()
    import lightgbm as lgb  # here, not at the top: the CLI parses options without it

    train_set = lgb.Dataset(train.features[:, pick], label=train.label, feature_name=chosen)
    record: dict = {}
    valid_sets = []
    if validation is not None:
        valid_sets = [
            lgb.Dataset(validation.features[:, pick], label=validation.label, reference=train_set)
        ]
    booster = lgb.train(
        params, train_set, valid_sets=valid_sets, valid_names=["validation"][: len(valid_sets)],
        callbacks=[lgb.record_evaluation(record)],
    )  # fmt: skip
    gains = booster.feature_importance(importance_type="gain")
    l2 = record.get("validation", {}).get("l2", [float("nan")])[-1]
    importance = dict(zip(chosen, gains.tolist(), strict=True))
    ordinal = None
    if n in config.ordinal_ns:
        ordinal = fit_extended_ordinal(train.features[:, pick], train.label, groups, params)
    return TrainedModel(feature_set, n, chosen, booster, groups, importance, l2, ordinal)


def evaluate_model(
    model: TrainedModel, columns: Sequence[str], samples: Samples, sampling: str, groups: int
) -> Evaluation:
    pick = [columns.index(c) for c in model.columns]
    raw, predicted = model.predict(samples.features[:, pick])
    return Evaluation(model.feature_set, sampling, model.n, samples.label, raw, predicted, groups)


def chen_group_means(data: InstanceData, config: MetaConfig) -> dict[str, np.ndarray]:
    """Per strength net: mean s-score of each rank group over the instances of the fit split
    (``config.fit_split``), (G,)."""
    train = data.subset(np.flatnonzero(data.split == fit_and_monitor_splits(config)[0]))
    means = {}
    for column in data.columns:
        match = re.match(r"^sscore_(.+)_mean_all$", column)
        if not match:
            continue
        values = train.features[:, data.columns.index(column)]
        ok = np.isfinite(values)
        sums = np.bincount(train.group[ok], weights=values[ok], minlength=data.groups)
        counts = np.bincount(train.group[ok], minlength=data.groups)
        with np.errstate(invalid="ignore"):
            means[match.group(1)] = sums / counts
    return means


def chen_predict(sample_sscore: np.ndarray, group_means: np.ndarray) -> np.ndarray:
    """The group whose mean s-score is nearest (Chen, Shih & Wu 2025); ties → weaker group."""
    distance = np.abs(sample_sscore[:, None] - group_means[None, :])  # (S, G)
    distance = np.where(np.isfinite(distance), distance, np.inf)
    return np.argmin(distance, axis=1).astype(np.int64)


def evaluate_chen(
    net: str,
    group_means: np.ndarray,
    columns: Sequence[str],
    samples: Samples,
    sampling: str,
    n: int,
) -> Evaluation:
    sscore = samples.features[:, columns.index(instance_column("sscore", net, "mean"))]
    predicted = chen_predict(sscore, group_means)
    return Evaluation(
        f"{CHEN_PREFIX}{net}",
        sampling,
        n,
        samples.label,
        predicted.astype(np.float64),
        predicted,
        len(group_means),
    )


@dataclass
class NResult:
    """Everything trained and measured at one n."""

    n: int
    models: dict[str, TrainedModel]
    evaluations: list[Evaluation]
    # The samples they were fitted and measured on, by name ("train", "validation",
    # "evaluation", "player"): the strength intervals (pipeline/meta/intervals.py) reuse them.
    samples: dict[str, Samples | None] = field(default_factory=dict)
    # (U,) the player of each unit id of ``samples["player"]`` (None: unknown), so that its
    # intervals can be calibrated on one half of the players and measured on the other.
    player_units: np.ndarray | None = None


def train_and_evaluate(
    data: InstanceData,
    n: int,
    config: MetaConfig,
    *,
    player_data: InstanceData | None = None,
) -> NResult:
    """Train every feature set at sample size ``n`` and evaluate it and the baseline.

    ``player_data``: instances for the player-specific protocol (default: the evaluation
    split of ``data``); e.g. Fox's by-player games, which are not in the rank-group data.
    """
    samples = build_samples(data, n, config)
    if player_data is None:
        player_data = data.subset(np.flatnonzero(data.split == EVALUATION))
    if player_data.columns != data.columns:
        raise MetaDataError("player-specific instances have other feature columns than training")
    per_sampling = {
        "rank_group": samples["evaluation"],
        "player": player_eval_samples(player_data, n, config),
    }
    models: dict[str, TrainedModel] = {}
    evaluations: list[Evaluation] = []
    trained_columns: dict[tuple[str, ...], str] = {}
    for feature_set in config.feature_sets:
        columns = tuple(feature_set_columns(data.columns, feature_set))
        if not columns or columns in trained_columns:
            # e.g. no strength net extracted: "no_sscore" is "full"; train it once
            log.info("feature set %s: same columns as %s, not trained again", feature_set,
                     trained_columns.get(columns, "none"))  # fmt: skip
            continue
        trained_columns[columns] = feature_set
        model = fit_model(
            data.columns, feature_set, n, samples["train"], samples["validation"],
            groups=data.groups, config=config,
        )  # fmt: skip
        models[feature_set] = model
        for sampling, eval_samples in per_sampling.items():
            evaluations.append(
                evaluate_model(model, data.columns, eval_samples, sampling, data.groups)
            )
    for net, means in chen_group_means(data, config).items():
        for sampling, eval_samples in per_sampling.items():
            evaluations.append(evaluate_chen(net, means, data.columns, eval_samples, sampling, n))
    return NResult(
        n, models, evaluations, {**samples, "player": per_sampling["player"]},
        player_data.unit_player,
    )  # fmt: skip


def results_table(evaluations: Sequence[Evaluation]) -> pa.Table:
    """Long table: method, sampling, n, samples, accuracy, accuracy_pm1."""
    return pa.table(
        {
            "method": [e.method for e in evaluations],
            "sampling": [e.sampling for e in evaluations],
            "n": pa.array([e.n for e in evaluations], pa.int32()),
            "samples": pa.array([e.samples for e in evaluations], pa.int64()),
            "accuracy": pa.array([e.accuracy for e in evaluations], pa.float64()),
            "accuracy_pm1": pa.array([e.accuracy_pm1 for e in evaluations], pa.float64()),
        }
    )


def importance_table(models: Mapping[str, TrainedModel]) -> pa.Table:
    """Gain importance per (feature set, n, column), largest first within each model."""
    rows = [
        (m.feature_set, m.n, column, gain)
        for m in models.values()
        for column, gain in sorted(m.importance.items(), key=lambda kv: -kv[1])
    ]
    names = ("feature_set", "n", "column", "gain")
    return pa.table({k: [r[i] for r in rows] for i, k in enumerate(names)})
