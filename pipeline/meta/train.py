"""``kibitz train meta``: train and evaluate the meta-models, track them in MLflow, save them.

One call is one MLflow parent run (experiment ``kibitz-meta-<game>``); under it, one child run
per (feature set or baseline, n, sampling) with the parameters feature_set, n, sampling,
split_hash, the nets' sha256 and the aggregation's α, γ; metrics accuracy, accuracy_pm1,
samples; artifacts: confusion-matrix and calibration PNGs and, on the rank-group child, the
LightGBM model file. The parent holds the Table 2 / Tables 6-7 shaped tables, the feature
importances and the accuracy-vs-n plots, so feature sets compare side by side in the MLflow UI.

Output folder (what ``kibitz estimate`` loads, see :func:`load_meta_models`)::

    OUT/meta_models.json              manifest: game, rank groups, columns per feature set, n, …
    OUT/models/<feature_set>/n<n>.txt LightGBM models
    OUT/tables/results.{csv,parquet}  long results; table2_rank_group.md, table67_player.md
    OUT/tables/importance.{csv,parquet}, confusion.{csv,parquet} (non-zero cells)
    OUT/plots/*.png
    OUT/mlflow.db, OUT/mlartifacts/   the embedded MLflow store (unless --tracking-uri)

Run: ``kibitz train meta chess --features kibitz-out/features-chess --out kibitz-out/meta-chess``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from pipeline.core.data_split import EVALUATION, TRAIN, VALIDATION, SplitConfig, assign_splits
from pipeline.core.tracking import (
    default_tracking_uri,
    log_file,
    log_metrics,
    log_table,
    tracked_run,
)
from pipeline.meta import report as meta_report
from pipeline.meta.aggregate import (
    AggregateConfig,
    aggregated_features_config,
    load_mart,
    load_summary,
    run_aggregate,
)
from pipeline.meta.decision import ordinal_file
from pipeline.meta.intervals import (
    SavedStrength,
    StrengthAtN,
    saved_strength,
    strength_at_n,
    strength_manifest,
    strength_markdown,
    strength_model_path,
)
from pipeline.meta.model import (
    Evaluation,
    InstanceData,
    MetaConfig,
    MetaDataError,
    NResult,
    applied_sets,
    chen_group_means,
    decide,
    drop_empty_columns,
    feature_set_columns,
    importance_table,
    instance_data,
    keep_sscore_nets,
    nearest_n,
    preferred_set,
    results_table,
    time_controls,
    train_and_evaluate,
    unseen_instances,
)
from pipeline.meta.player_training import PLAYER_MODEL, train_player_models
from pipeline.meta.player_variance import derive_player_calibration, derived_manifest

log = logging.getLogger(__name__)

MANIFEST_FILE = "meta_models.json"
EXPERIMENT = "kibitz-meta-{game}"


class MetaModelsNotFoundError(FileNotFoundError):
    """A folder without the manifest of ``kibitz train meta``."""


def feature_nets(run_config: dict[str, Any]) -> list[dict]:
    """The imitation and strength nets of a features run (its ``_config.yaml`` record)."""
    config = run_config.get("config", {})
    return config.get("imitation_nets", []) + config.get("strength_nets", [])


def _registry_entry(model: str) -> Any:
    """The registry entry of ``model``; None for a path or a name the registry lacks."""
    from pipeline.nets.registry import ModelNotFoundError, find_entry

    try:
        return find_entry(model)
    except (ModelNotFoundError, KeyError, ValueError):
        return None


def net_hashes(run_config: dict[str, Any]) -> dict[str, str]:
    """sha256 of each net of a features run (its ``_config.yaml`` record), by column name part.

    The sha256 ``kibitz extract`` recorded (the weights the features came from); for features
    written before it recorded them, the registry's current entry, and ``"unregistered"`` for
    nets given as paths or missing from the registry.
    """
    recorded = run_config.get("nets") or {}
    hashes = {}
    for net in feature_nets(run_config):
        sha = recorded.get(net["model"])
        if not sha:
            entry = _registry_entry(net["model"])
            sha = entry.sha256 if entry is not None else "unregistered"
        hashes[net["name"]] = sha
    value = run_config.get("config", {}).get("value", {})
    if value.get("evaluator") == "stockfish":
        hashes["value"] = f"stockfish nodes={value.get('nodes')}"
    return hashes


def kibitz_trained_nets(run_config: dict[str, Any]) -> list[str]:
    """The nets of a features run that ``kibitz train`` made (formats ``kibitz-sscore``,
    ``kibitz-sscore-levels`` and ``kibitz-go-policy``, by registry entry or ``.kibitz.pt``
    file): Kibitz trains them on the train split of its one game split (``pipeline.core.data_split``)."""
    found = []
    for net in feature_nets(run_config):
        model = str(net["model"])
        if model.endswith(".kibitz.pt"):
            fmt = "kibitz"
        else:
            entry = _registry_entry(model)
            fmt = entry.format if entry is not None else ""
        if fmt.startswith("kibitz") and model not in found:
            found.append(model)
    return found


def warn_in_sample(config: MetaConfig, trained: list[str]) -> None:
    """Say when a feature net has seen the games the meta-models are fitted on.

    A net trained on the train split scores those games better than new ones (the s-score's
    Spearman correlation with the band: 0.716 on train-split instances, 0.626 on validation
    ones and 0.593 on evaluation ones in docs/guide/estimate.md), so its features are in-sample for a
    meta-model fitted there. Fitting on the validation split avoids it but has an eighth of
    the games, and on the chess run of docs/guide/estimate.md fitted worse models; so the choice is the
    user's (``--fit-split``).
    """
    if trained and config.fit_split == "train":
        log.warning(
            "%s trained on the train split's games: their features are in-sample for meta-models"
            " fitted there (compare the no_sscore set, or fit with --fit-split validation)",
            ", ".join(trained),
        )


def _figure(value: float) -> float | None:
    """An accuracy for the manifest: 6 decimals, so that the card's per cent figures (one
    decimal, rendered from the manifest) are the tables' (at 4, 0.739455 was stored as 0.7395
    and printed 74.0 beside the table's 73.9); None when nothing was evaluated (not NaN, which
    JSON lacks)."""
    return None if np.isnan(value) else round(float(value), 6)


def _write_table(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path.with_suffix(".parquet"))
    pa_csv.write_csv(table, path.with_suffix(".csv"))


def _save_figure(fig: Any, path: Path) -> None:
    """Save a PNG to the output folder, then log that file as an artifact of the active run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    log_file(path, artifact_path="plots")


@dataclass
class TrainMetaRun:
    """Inputs of one ``kibitz train meta`` call."""

    game: str
    out_dir: Path
    features_dir: Path | None = None
    aggregates_dir: Path | None = None  # default: OUT/aggregates, built from features_dir
    player_aggregates_dir: Path | None = None  # player-specific protocol on other instances
    tracking_uri: str | None = None  # default: the embedded store in out_dir
    aggregate: AggregateConfig = field(default_factory=AggregateConfig)
    command: str | None = None  # the command line, for the manifest and a shipped model's card
    # How the derived player intervals held where the answer is known (the default Go model's
    # figures: player_variance.derivation_check); recorded for a model without a player set.
    derivation_check: dict | None = None


def prepare_aggregates(run: TrainMetaRun) -> Path:
    """The aggregates folder to read, building it from the features when needed."""
    if (
        run.aggregates_dir is not None
        and (run.aggregates_dir / "player_instance_features.parquet").is_file()
    ):
        return run.aggregates_dir
    if run.features_dir is None:
        raise MetaDataError("give --features (to aggregate) or an existing --aggregates folder")
    target = run.aggregates_dir or run.out_dir / "aggregates"
    summary = run_aggregate(run.features_dir, target, config=run.aggregate)
    log.info("aggregated %s moves into %s in %.2f s", summary["moves"], target, summary["sql_s"])
    return target


def _player_data(run: TrainMetaRun, data: InstanceData, config: MetaConfig) -> InstanceData | None:
    """Instances of a separate player-specific set, minus any game the meta-model trained on."""
    if run.player_aggregates_dir is None:
        return None
    other = instance_data(
        load_mart(run.player_aggregates_dir, "player_instance_features"),
        load_mart(run.aggregates_dir or run.out_dir / "aggregates", "rank_groups"),
        game=run.game,
        split=config.split,
    )
    other = keep_sscore_nets(other, config.sscore_nets)
    if set(data.columns) <= set(other.columns):  # the columns training kept (drop_empty_columns)
        other = other.with_columns([other.columns.index(c) for c in data.columns])
    try:
        return unseen_instances(other, data)
    except MetaDataError as exc:
        raise MetaDataError(f"{str(run.player_aggregates_dir)!r}: {exc}") from exc


def _child(
    evaluation: Evaluation,
    *,
    run: TrainMetaRun,
    tracking_uri: str,
    parent_id: str,
    base_params: dict[str, Any],
    group_names: Sequence[str],
    model: Any,
) -> None:
    params = {
        **base_params,
        "feature_set": evaluation.method,
        "n": evaluation.n,
        "sampling": evaluation.sampling,
    }
    name = f"{evaluation.method} n={evaluation.n} {evaluation.sampling}"
    with tracked_run(
        EXPERIMENT.format(game=run.game), run_name=name, tracking_uri=tracking_uri,
        params=params, parent_run_id=parent_id,
    ):  # fmt: skip
        log_metrics(
            {
                "accuracy": evaluation.accuracy,
                "accuracy_pm1": evaluation.accuracy_pm1,
                "samples": evaluation.samples,
            }
        )
        if evaluation.samples == 0:
            return
        stem = f"{evaluation.method}_n{evaluation.n}_{evaluation.sampling}"
        plots = run.out_dir / "plots"
        _save_figure(
            meta_report.confusion_figure(evaluation, group_names), plots / f"confusion_{stem}.png"
        )
        if not evaluation.method.startswith("chen_"):
            _save_figure(
                meta_report.calibration_figure(evaluation, group_names),
                plots / f"calibration_{stem}.png",
            )
        if model is not None and evaluation.sampling == "rank_group":
            log_file(
                run.out_dir / "models" / evaluation.method / f"n{evaluation.n}.txt",
                artifact_path="model",
            )
            log_metrics({"validation_l2": model.validation_l2})


def run_train_meta(run: TrainMetaRun, config: MetaConfig) -> dict[str, Any]:
    """Train, evaluate, track and save every meta-model of ``config``; return the manifest."""
    started = time.perf_counter()
    run.out_dir.mkdir(parents=True, exist_ok=True)
    aggregates = prepare_aggregates(run)
    run.aggregates_dir = aggregates
    agg_summary = load_summary(aggregates)
    # None for merged aggregates (`kibitz aggregate --merge`): their summary lists the parts
    recorded = agg_summary.get("features_dir")
    features_dir = run.features_dir or (Path(recorded) if recorded else None)
    run_config = aggregated_features_config(agg_summary)
    instances = load_mart(aggregates, "player_instance_features")
    data = instance_data(
        instances,
        load_mart(aggregates, "rank_groups"),
        game=run.game,
        split=config.split,
    )
    data = drop_empty_columns(keep_sscore_nets(data, config.sscore_nets))
    trained = kibitz_trained_nets(run_config)
    warn_in_sample(config, trained)
    player_data = _player_data(run, data, config)
    tracking_uri = run.tracking_uri or default_tracking_uri(run.out_dir)
    hashes = net_hashes(run_config)
    splits = (("train", TRAIN), ("validation", VALIDATION), ("evaluation", EVALUATION))
    counts = {name: int(np.sum(data.split == code)) for name, code in splits}
    games = {name: int(np.unique(data.game_id[data.split == code]).size) for name, code in splits}
    base_params = {
        "game": run.game,
        "split_hash": config.split.split_hash(),
        "seed": config.seed,
        "fit_split": config.fit_split,
        "sscore_nets": ",".join(config.sscore_nets) or "all",
        "nets_trained_on_train_split": ",".join(trained) or "none",
        "alpha": agg_summary["parameters"]["alpha"],
        "gamma": agg_summary["parameters"]["gamma"],
        "features_config_hash": agg_summary.get("features_config_hash"),
        **{f"net_{k}": v for k, v in hashes.items()},
    }
    parent_params = {
        **base_params,
        "ns": ",".join(map(str, config.ns)),
        "feature_sets": ",".join(config.feature_sets),
        "split": json.dumps(asdict(config.split)),
        "train_draws_per_group": config.train_draws_per_group,  # as runs before it logged it
        "lightgbm_params": json.dumps(config.fitting_record()["lightgbm"], sort_keys=True),
        "validation_draws_per_group": config.validation_draws_per_group,
        "eval_draws_per_group": config.eval_draws_per_group,
        "player_repeats": config.player_repeats,
        "player_unit_draws": config.player_unit_draws,
        "instances_train": counts["train"],
        "instances_validation": counts["validation"],
        "instances_evaluation": counts["evaluation"],
        "rank_groups": ",".join(data.group_names),
    }
    results: list[NResult] = []
    # feature set → n → file of the model fitted for one player's games (player_training.py)
    player_models: dict[str, dict[str, str]] = {}
    # feature set → n → its strength model (model.applied_sets)
    strength_fits: dict[str, dict[int, StrengthAtN]] = {}
    experiment = EXPERIMENT.format(game=run.game)
    with tracked_run(
        experiment,
        run_name=f"train meta {run.game}",
        tracking_uri=tracking_uri,
        params=parent_params,
    ) as parent:
        parent_id = parent.info.run_id
        for n in config.ns:
            log.info("n=%d: training %d feature sets", n, len(config.feature_sets))
            result = train_and_evaluate(data, n, config, player_data=player_data)
            results.append(result)
            for model in result.models.values():
                model.save(run.out_dir / "models" / model.feature_set / f"n{n}.txt")
            applied = applied_sets(list(result.models))
            # the set every game can use: its strength model is the one every estimate can apply
            primary = preferred_set(list(result.models), clock=False)
            if player_data is not None:
                trained = train_player_models(
                    data, player_data, n, applied, result.samples, result.samples["player"],
                    config,
                )  # fmt: skip
                if trained is not None:
                    result.evaluations += trained.evaluations
                    for fs, model in trained.models.items():
                        model.save(run.out_dir / PLAYER_MODEL.format(feature_set=fs, n=n))
                        player_models.setdefault(fs, {})[str(n)] = PLAYER_MODEL.format(
                            feature_set=fs, n=n
                        )
            for feature_set in applied:
                fit = strength_at_n(data, result, config, feature_set=feature_set)
                if fit is None:
                    continue
                is_primary = feature_set == primary
                fit.model.save(
                    run.out_dir / strength_model_path(feature_set, n, primary=is_primary)
                )
                strength_fits.setdefault(feature_set, {})[n] = fit
                prefix = "strength" if is_primary else f"strength_{feature_set}"
                log_metrics(
                    {
                        f"{prefix}_{r['sampling']}_{r['calibration']}_{key}_n{n}": v
                        for r in fit.rows
                        for key, v in r.items()
                        if key.startswith(("coverage", "mae"))
                    }
                )
            for evaluation in result.evaluations:
                _child(
                    evaluation, run=run, tracking_uri=tracking_uri, parent_id=parent_id,
                    base_params=base_params, group_names=data.group_names,
                    model=result.models.get(evaluation.method),
                )  # fmt: skip
        evaluations = [e for r in results for e in r.evaluations]
        table = results_table(evaluations)
        importance = importance_table(
            {f"{m.feature_set}/{m.n}": m for r in results for m in r.models.values()}
        )
        tables = run.out_dir / "tables"
        _write_table(table, tables / "results")
        _write_table(importance, tables / "importance")
        _write_table(meta_report.confusion_table(evaluations), tables / "confusion")
        log_table(table, "results")
        log_table(importance, "importance")
        for sampling, filename in (
            ("rank_group", "table2_rank_group.md"),
            ("player", "table67_player.md"),
        ):
            text = meta_report.markdown_table(table, sampling)
            (tables / filename).write_text(text + "\n")
            log_file(tables / filename, artifact_path="tables")
            _save_figure(
                meta_report.accuracy_figure(table, sampling),
                run.out_dir / "plots" / f"accuracy_{sampling}.png",
            )
        # feature set → its strength record; the primary one reads no clock (every game can use it)
        strength_records: dict[str, dict] = {}
        strength_rows: list[dict] = []
        for feature_set, fits in strength_fits.items():
            derived = derive_player_calibration(
                data, fits, {r.n: r.samples.get("player") for r in results}, config
            )
            more = derived.rows if derived is not None else []
            strength_records[feature_set] = strength_manifest(
                fits, data.strength_scale, primary=feature_set == primary, more_rows=more,
                derived=derived_manifest(derived, run.derivation_check) if derived else None,
            )  # fmt: skip
            strength_rows += [
                {"feature_set": feature_set, **row}
                for row in [*(row for fit in fits.values() for row in fit.rows), *more]
            ]
        if strength_rows:
            strength_table = pa.Table.from_pylist(strength_rows)
            _write_table(strength_table, tables / "strength")
            (tables / "strength.md").write_text(
                strength_markdown(strength_rows, data.strength_scale) + "\n"
            )
            log_file(tables / "strength.md", artifact_path="tables")
        best = {f"accuracy_{e.sampling}_{e.method}_n{e.n}": e.accuracy for e in evaluations}
        log_metrics(best)
        manifest = {
            "game": run.game,
            "rank_groups": data.group_names,
            "columns": data.columns,
            "feature_sets": {
                fs: feature_set_columns(data.columns, fs)
                for fs in config.feature_sets
                if fs in results[0].models
            },
            "ns": list(config.ns),
            "models": {
                fs: {str(r.n): f"models/{fs}/n{r.n}.txt" for r in results if fs in r.models}
                for fs in config.feature_sets
                if fs in results[0].models
            },
            # The models an estimate of one player applies, fitted with that player-specific
            # set's samples of one player's games (absent: none; the rank-group models apply).
            "player_models": player_models,
            "chen_group_means": {
                net: means.tolist() for net, means in chen_group_means(data, config).items()
            },
            "split": asdict(config.split),
            "split_hash": config.split.split_hash(),
            "fit_split": config.fit_split,
            # The strength nets whose s-scores the models use (empty: every one): a refit from
            # the shipped aggregates passes them as --sscore-nets.
            "sscore_nets": list(config.sscore_nets),
            "seed": config.seed,
            # How the regressors were fitted (the card prints it; MetaConfig's defaults change)
            "fitting": config.fitting_record(),
            # The n whose models name the group by an ordinal model beside the regressor (the
            # others round the regressor's output)
            "ordinal_ns": list(config.ordinal_ns),
            "aggregate": agg_summary["parameters"],
            "features_config_hash": agg_summary.get("features_config_hash"),
            "features_dir": str(features_dir.resolve()) if features_dir else None,
            "aggregates_dir": str(aggregates.resolve()),  # a relative path: inside the folder
            # The other games of the player-specific protocol (Fox by-player), if any: a shipped
            # model keeps their instances, so its player rows are refitted like the others.
            "player_aggregates_dir": (
                str(run.player_aggregates_dir.resolve()) if run.player_aggregates_dir else None
            ),
            # What the features were extracted with (nets, their sha256, settings): `kibitz
            # estimate` extracts a player's games the same way, and checks the nets' sha256.
            "features_config": run_config,
            "nets": hashes,
            "instances": counts,
            "games": games,
            # The time controls of the games the clock features were learnt on: an estimate
            # from games of another applies the model that reads no clock, and says so.
            "time_controls": time_controls(instances),
            "results": [
                {
                    "method": e.method,
                    "n": e.n,
                    "sampling": e.sampling,
                    "accuracy": _figure(e.accuracy),
                    "accuracy_pm1": _figure(e.accuracy_pm1),
                    "samples": e.samples,
                }
                for e in evaluations
            ],
            "command": run.command,
            # the strength model of the set that reads no clock, and those of the others an
            # estimate applies (the clock set, for games with one)
            "strength": strength_records.get(primary),
            "strength_sets": {fs: r for fs, r in strength_records.items() if fs != primary},
            "tracking_uri": tracking_uri,
            "mlflow_parent_run_id": parent_id,
            "seconds": round(time.perf_counter() - started, 1),
        }
        manifest_path = run.out_dir / MANIFEST_FILE
        manifest_path.write_text(json.dumps(manifest, indent=1))
        log_file(manifest_path)
    return manifest


@dataclass
class MetaModels:
    """Trained meta-models loaded from a ``kibitz train meta`` output folder."""

    root: Path
    manifest: dict[str, Any]

    @property
    def group_names(self) -> list[str]:
        return list(self.manifest["rank_groups"])

    @property
    def ns(self) -> list[int]:
        return [int(n) for n in self.manifest["ns"]]

    def nearest_n(self, games: int) -> int:
        """The trained n closest to ``games`` (:func:`pipeline.meta.model.nearest_n`)."""
        return nearest_n(self.ns, games)

    def feature_set(self) -> str:
        """The feature set an estimate applies (:func:`pipeline.meta.model.preferred_set`)."""
        return preferred_set(list(self.manifest["models"]))

    def _folder(self, named: str) -> Path:
        """A folder the manifest names: a shipped model's are inside it, named relatively."""
        path = Path(named)
        return path if path.is_absolute() else self.root / path

    @property
    def aggregates_dir(self) -> Path:
        """The training aggregates."""
        return self._folder(self.manifest.get("aggregates_dir", "aggregates"))

    @property
    def player_aggregates_dir(self) -> Path | None:
        """The player-specific protocol's own aggregates (``--player-aggregates``), if used."""
        named = self.manifest.get("player_aggregates_dir")
        return self._folder(named) if named else None

    def player_instances(self) -> pa.Table:
        """The player-specific set's instances: players with many games of their own, none of
        them fitted on by the rank-group models (what a check of those on one player's games
        must use); the models fitted for one player's games were fitted on all of them, and
        their figures come from two halves of the players (``pipeline/meta/player_training.py``)."""
        if self.player_aggregates_dir is None:
            raise MetaDataError(
                f"{str(self.root)!r} has no player-specific set (--player-aggregates)"
            )
        return load_mart(self.player_aggregates_dir, "player_instance_features")

    def evaluation_instances(self) -> pa.Table:
        """The training aggregates' instances of evaluation-split games: never fitted on nor
        calibrated on, what a held-out check of these models (an audit's false-positive rate)
        must use."""
        instances = load_mart(self.aggregates_dir, "player_instance_features")
        split = SplitConfig(**self.manifest["split"])
        codes = assign_splits(instances["game_id"].to_pylist(), split)
        return instances.filter(pa.array(codes == EVALUATION))

    def accuracy(self, feature_set: str, n: int, sampling: str = "rank_group") -> dict | None:
        """The model's own figures on the evaluation games at ``n`` (accuracy, accuracy_pm1,
        samples), as measured by ``kibitz train meta``; None for manifests without them."""
        for row in self.manifest.get("results", []):
            if (row["method"], row["n"], row["sampling"]) == (feature_set, n, sampling):
                return row
        return None

    def strength(self, feature_set: str | None = None) -> SavedStrength | None:
        """The continuous strength model with its calibrated intervals, if trained: the one of
        ``feature_set`` where the model has one (the clock set's, for games with a clock), else
        the one that reads no clock, which holds for every game."""
        record = (self.manifest.get("strength_sets") or {}).get(feature_set or "")
        if record:
            return SavedStrength(self.root, record)
        return saved_strength(self.root, self.manifest)

    def player_trained(self, feature_set: str, n: int) -> bool:
        """Whether the model of ``feature_set`` at ``n`` has a sibling fitted for one player's
        own games (``pipeline/meta/player_training.py``), the one an estimate applies."""
        return str(n) in self.manifest.get("player_models", {}).get(feature_set, {})

    def ordinal(self, n: int) -> bool:
        """Whether the models at ``n`` name the group by an ordinal model beside the regressor
        (``pipeline/meta/decision.py``), not by rounding its output (every n of a manifest
        before the ordinal decision)."""
        return n in self.manifest.get("ordinal_ns", [])

    def model_files(self, feature_set: str, n: int, *, player: bool = False) -> list[str]:
        """The files of the model of ``feature_set`` at ``n``: the regressor's, then its ordinal
        model's if it has one; ``player``: its sibling fitted for one player's games where it
        has one."""
        files = self.manifest["models"][feature_set]
        if player and self.player_trained(feature_set, n):
            files = self.manifest["player_models"][feature_set]
        regressor = files[str(n)]
        return [regressor, ordinal_file(regressor)] if self.ordinal(n) else [regressor]

    def predict(
        self,
        features: np.ndarray,
        columns: Sequence[str],
        feature_set: str,
        n: int,
        *,
        player: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(continuous output, group index) for rows of ``features`` (named by ``columns``);
        ``player``: the rows are one player's own games (:meth:`booster`)."""
        wanted = self.manifest["feature_sets"][feature_set]
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise MetaDataError(
                f"the player's features lack columns the model was trained on: {missing[:5]!r}"
                " (extract with the same nets as the training features)"
            )
        pick = [list(columns).index(c) for c in wanted]
        regressor, *ordinal = (
            lgb.Booster(model_file=str(self.root / f))
            for f in self.model_files(feature_set, n, player=player)
        )
        return decide(
            regressor, next(iter(ordinal), None), features[:, pick], len(self.group_names)
        )


def load_meta_models(root: Path) -> MetaModels:
    """Read the manifest of a ``kibitz train meta`` output folder."""
    path = Path(root) / MANIFEST_FILE
    if not path.is_file():
        raise MetaModelsNotFoundError(
            f"no {MANIFEST_FILE} in {str(root)!r} (train one with `kibitz train meta`)"
        )
    return MetaModels(Path(root), json.loads(path.read_text()))
