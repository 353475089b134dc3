"""``kibitz estimate``: a player's rank group from a handful of their games, end to end.

The whole Kibitz path on a small scale, in this process (no Ray: a few games do not pay for a
cluster start-up):

1. read the files with the game kind's ingestion reader (``pipeline.kinds``), keep every
   readable game (preset ``all``) and then only the games the player played;
2. extract their per-move features with the game kind's extraction steps (same nets and
   settings as the features the meta-models were trained on: the training features'
   ``_config.yaml``), written as a features table under the work folder;
3. aggregate them with the same SQL as training (``kibitz aggregate``);
4. average the player's instances and apply the meta-model of the trained n nearest to the
   number of games; print the rank group, its ±1 band and how many games were used;
5. draw a report PNG: the player's prior profile next to each rank group's (the paper's Fig. 3)
   and their loss by move number (Fig. 4).

The meta-models are the game's shipped default ``kibitz-meta-<game>`` (``models/``, resolved and
verified through the registry by :mod:`pipeline.meta.registered`) unless ``--model`` names
another registry entry or a ``kibitz train meta`` folder; before extracting anything the nets
are checked against the sha256 the model's training features recorded.

Run: ``kibitz estimate chess games.pgn --player NAME [--model kibitz-out/meta-chess] [--json]``.
"""

from __future__ import annotations

import logging
import math
import re
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import PARTITION_COLUMNS, instance_column
from pipeline.extract.config import CPU_BATCH, ExtractConfig, config_from_dict, preset
from pipeline.kinds import game_kind
from pipeline.meta.aggregate import (
    AggregateConfig,
    AggregatesNotFoundError,
    feature_columns,
    features_run_config,
    load_mart,
    run_aggregate,
)
from pipeline.meta.intervals import SavedStrength
from pipeline.meta.model import MetaDataError, preferred_set, reads_clock, time_controls
from pipeline.meta.player_training import player_method
from pipeline.meta.progressive import Step, further_games, games_for_confidence, score_steps
from pipeline.meta.registered import check_nets
from pipeline.meta.train import MetaModels

log = logging.getLogger(__name__)


# An instance column that holds a value exactly when its game has a clock.
CLOCK_PRESENT = "clock_spent_share_all"


class NoGamesOfPlayerError(KibitzError, LookupError):
    """None of the input games was played by the named player."""


@dataclass
class Estimate:
    """What ``kibitz estimate`` reports (``--json`` prints it as is)."""

    player: str
    game: str
    games_found: int  # games of the player in the files
    games_used: int  # of those, games with features (readable and legal)
    moves_used: int
    model: str  # the meta-models applied: registry name or folder
    n_model: int  # the trained n whose model was applied
    feature_set: str
    # Why ``feature_set`` is not the model's first choice, or what in the games it did not know
    # (a game without a clock, a time control the clock model never saw); None: nothing to say.
    feature_set_note: str | None
    # What the applied model at n_model was fitted on: "player" (rank-group samples and samples
    # of one player's own games: pipeline/meta/player_training.py) or "rank_group".
    model_training: str
    # That model's own figures at n_model as `kibitz train meta` measured them, on one player's
    # own games, none of them fitted on (model_sampling "player") where measured, else on
    # rank-group samples of the evaluation games: how far to trust this estimate. None if not
    # recorded.
    model_sampling: str | None
    model_accuracy: float | None
    model_accuracy_pm1: float | None
    model_samples: int | None
    # The continuous estimate on the data's scale (chess rating, Go numeric rank) with its
    # conformal 80 % and 95 % intervals ([low, high]); None where the model has no strength part.
    strength_scale: str | None
    # The features the strength model read: the clock set's for games with a clock (where the
    # model has one), else the set that reads none.
    strength_feature_set: str | None
    strength: float | None
    interval_80: list[float] | None
    interval_95: list[float] | None
    # What the intervals were calibrated on: "player" (one player's own n_model games, where the
    # model has a player-specific set), "derived" (the rank-group widths widened by rho, the
    # share of one game's error that a player's games share, measured on players with two or
    # more games: chess, whose data hold no player with many games in one band;
    # pipeline/meta/player_variance.py) or "rank_group" (samples of n_model different players,
    # which cover one player's own games less from about 10 games on: docs/guide/estimate.md).
    interval_calibration: str | None
    # How often those intervals held on one player's own n_model games, measured on players
    # they were not calibrated on ([80 %, 95 %]); None where not measured.
    interval_coverage_player: list[float] | None
    # "derived" only: rho and the players it rests on, and how the same derivation held where
    # the answer is known ({"model": the Go model, "coverage": [80 %, 95 %]} at n_model).
    interval_rho: float | None
    interval_rho_players: int | None
    interval_check: dict | None
    # Games at which the model's measured ±1-group accuracy reaches `confidence` (trained n
    # interpolated), and how many more than `games_used` that is; None: not reached.
    confidence: float
    games_needed: int | None
    further_games: int | None
    rank_group: str
    rank_group_index: int
    prediction: float  # the regressor's output before rounding (group index scale)
    band: list[str]  # the group and its neighbours (the ±1 band)
    rank_groups: list[str]  # every group, weakest first
    n_trained: list[int]  # the n the meta-models were trained at
    # The nets' number format here and in the training features' extraction: they differ where
    # this machine lacks the training's arithmetic (FP16 of a GPU, BF16 of a bfloat16 CPU), and
    # the nets then run FP32 (pipeline.nets.evaluator.runnable_precision; docs/guide/estimate.md).
    precision: str
    precision_trained: str
    rated_rank_groups: list[str]  # the player's own groups according to the files, if any
    report: str | None
    steps: list[dict] | None  # --progressive: the estimate after each game (progressive.Step)
    seconds: float

    def to_text(self) -> str:
        rated = (
            f"; rated in the files: {', '.join(self.rated_rank_groups)}"
            if self.rated_rank_groups
            else ""
        )
        games = "one game" if self.n_model == 1 else f"{self.n_model} games"
        on = {
            "player": f"samples of {games} of one player, none of them fitted on",
            "rank_group": "evaluation samples"
            + ("" if self.n_model == 1 else f" of {self.n_model} different players' games"),
        }
        trust = (
            f"; at n={self.n_model} it is right {100 * self.model_accuracy:.1f} % of the time"
            f" (±1 group: {100 * self.model_accuracy_pm1:.1f} %) on {self.model_samples:,}"
            f" {on[self.model_sampling]}"
            if self.model_accuracy is not None and self.model_accuracy_pm1 is not None
            else f"; no accuracy recorded for n={self.n_model}"
        )
        fitted = ", fitted for one player's games" if self.model_training == "player" else ""
        return (
            f"{self._steps_text()}"
            f"{self.player}: estimated rank group {self.rank_group} (±1 band {self.band[0]} … {self.band[-1]})"
            f" from {self.games_used} game(s), {self.moves_used} moves{rated}\n"
            f"{self._strength_text()}"
            f"model: {self.model} ({self.feature_set}, n={self.n_model}{fitted}){trust}\n"
            f"{f'note: {self.feature_set_note}' + chr(10) if self.feature_set_note else ''}"
            f"{self._precision_text()}"
            f"{self._needed_text()}"
            f"report: {self.report}"
        )

    def _precision_text(self) -> str:
        if self.precision == self.precision_trained:
            return ""
        return (
            f"nets run at {self.precision} here; the model's features were extracted at "
            f"{self.precision_trained}, which this machine lacks (docs/guide/estimate.md: what it changes)\n"
        )

    def _needed_text(self) -> str:
        target = f"{100 * self.confidence:.0f} % right within ±1 group"
        if self.games_needed is None:
            return f"games for {target}: more than the model's largest n ({max(self.n_trained)})\n"
        more = f"{self.further_games} more" if self.further_games else "reached"
        return f"games for {target}: {self.games_needed} ({more})\n"

    def _steps_text(self) -> str:
        if not self.steps:
            return ""
        label = game_kind(self.game).strength_label
        lines = ["after game | rank group | strength (80 %)"]
        for step in self.steps:
            strength = (
                f"{label(step['strength'])} ({label(step['interval_80'][0])} …"
                f" {label(step['interval_80'][1])})"
                if step["strength"] is not None
                else "–"
            )
            group = self.rank_groups[step["rank_group_index"]]
            lines.append(f"{step['games']:>10} | {group:>10} | {strength}")
        return "\n".join(lines) + "\n"

    def _different_players(self) -> str:
        """What rank-group samples of n_model are, in words."""
        if self.n_model == 1:
            return "single games of different players"
        return f"{self.n_model} different players' games"

    def _strength_text(self) -> str:
        if self.strength is None:
            return ""
        label = game_kind(self.game).strength_label
        bands = [
            f"{level}: {label(iv[0])} … {label(iv[1])}"
            for level, iv in (("80 %", self.interval_80), ("95 %", self.interval_95))
            if iv is not None
        ]
        calibrated = {
            "player": f"; calibrated on one player's own {self.n_model} game(s)",
            "rank_group": f"; calibrated on {self._different_players()}",
            "derived": (
                f"; derived for one player's own {self.n_model} game(s) from the share of the"
                f" error one player's games share (ρ = {self.interval_rho},"
                f" {self.interval_rho_players or 0:,} players with 2+ games)"
            ),
        }.get(self.interval_calibration or "", "")
        if self.interval_check is not None:
            low, high = (100 * c for c in self.interval_check["coverage"])
            calibrated += (
                f"; on Go, where one player's games are known ({self.interval_check['model']}),"
                f" the same derivation held {low:.1f} / {high:.1f} % of the time"
            )
        held = (
            f"; on other players' own {self.n_model} game(s) the model measured these intervals"
            f" to hold {100 * self.interval_coverage_player[0]:.1f} / "
            f"{100 * self.interval_coverage_player[1]:.1f} % of the time"
            if self.interval_coverage_player is not None
            else ""
        )
        bands_text = "; ".join(bands)
        return f"strength ({self.strength_scale}): {label(self.strength)} ({bands_text}){calibrated}{held}\n"


def read_player_games(game: str, sources: list[str], player: str) -> tuple[pa.Table, int]:
    """Every readable game of ``sources`` that ``player`` played (names compared case-folded).

    When there is none but the player's name is in games the reader set aside (a Chess960 game,
    an illegal move), the error gives those games and their reasons: a file whose only game of
    ``alice`` is Chess960 says so, not that ``alice`` plays in none of its games."""
    from pipeline.ingest.selection import apply_selection, load_preset
    from pipeline.ingest.work import IngestConfig, resolve_sources, work_items

    reader = game_kind(game).reader
    rules = load_preset("all")
    config = IngestConfig(
        game=game, sources=resolve_sources(sources), out_dir=Path("."), rules=rules
    )
    tables, quarantined, set_aside = [], 0, []
    named = re.compile(rf"(?<![\w-]){re.escape(player)}(?![\w-])", re.IGNORECASE)
    for item in work_items(config, reader):
        result = reader.read_chunk(item)
        kept, _ = apply_selection(result.games, rules)
        quarantined += result.quarantine.num_rows
        set_aside += [
            reason
            for raw, reason in zip(
                result.quarantine["raw"].to_pylist(),
                result.quarantine["reason"].to_pylist(),
                strict=True,
            )
            if raw and named.search(raw)
        ]
        name = player.casefold()
        mine = pc.or_(
            pc.equal(pc.utf8_lower(pc.fill_null(kept["white"], "")), name),
            pc.equal(pc.utf8_lower(pc.fill_null(kept["black"], "")), name),
        )
        tables.append(kept.filter(mine))
    games = pa.concat_tables(tables) if tables else None
    if games is None or games.num_rows == 0:
        if set_aside:
            more = f" (and {len(set_aside) - 3} more)" if len(set_aside) > 3 else ""
            raise NoGamesOfPlayerError(
                f"no game of player {player!r} in {sources!r} that Kibitz can read: "
                + "; ".join(set_aside[:3])
                + more
            )
        raise NoGamesOfPlayerError(f"no game of player {player!r} in {sources!r}")
    return games, quarantined


def extraction_config(
    models: MetaModels, config_path: Path | None, nodes: int | None
) -> ExtractConfig:
    """The training features' extraction config (so the columns match): the copy in the
    manifest, else (manifests written before it) the features folder's, else the preset; its
    precision the nearest this machine runs natively (FP32 for FP16 without a GPU, for BF16
    without AVX-512 BF16, AMX or a GPU), and without a GPU its batch at most ``CPU_BATCH``, so a
    model fitted on a GPU's features estimates on a laptop (a GPU batch of 4,096 took 6.1 GB
    there); the saved config's nets run uncompiled (``config_path``'s run as it says)."""
    if config_path is not None:
        from pipeline.extract.config import load_config

        config = load_config(config_path)
    else:
        saved = (models.manifest.get("features_config") or {}).get("config")
        features_dir = models.manifest.get("features_dir")
        if not saved and features_dir:
            saved = features_run_config(Path(features_dir)).get("config")
        config = config_from_dict(saved) if saved else preset(models.manifest["game"])
        # How the training run's nets ran, not what they computed: compiling costs tens of
        # seconds and a C++ compiler against a few games' positions (the values agree to the
        # number format's rounding, docs/guide/extract.md), and CUDA graphs need a GPU.
        config.compile = config.cuda_graphs = False
    if nodes:
        config.value.nodes = nodes
    from pipeline.nets.evaluator import default_device, runnable_precision  # torch: extracting

    config.precision = runnable_precision(config.precision)
    if default_device() == "cpu":
        config.batch_sizes[config.backend] = min(config.batch_size, CPU_BATCH)
    return config.validate()


def extract_in_process(config: ExtractConfig, games: pa.Table) -> tuple[pa.Table, int]:
    """Features of ``games`` with the game kind's extraction steps, an engine (chess with
    Stockfish) in this process; (features, games dropped)."""
    from pipeline.extract.steps import Part, assemble, run_nets

    extraction = game_kind(config.game).extraction
    work = extraction.encode(config, games)
    nets, kids = run_nets(extraction, config, extraction.net_step(config), work)
    values = extraction.engine_values(config, work, nets)
    part = Part("estimate", 0, games.num_rows)
    result = assemble(extraction, config, part, work, nets, values, kids)
    return result.features, result.quarantine.num_rows


def write_features(features: pa.Table, root: Path) -> None:
    """The features table in the hive layout ``kibitz aggregate`` reads (one file per partition)."""
    import pyarrow.dataset as ds

    ds.write_dataset(
        features,
        root,
        format="parquet",
        partitioning=ds.partitioning(
            pa.schema([features.schema.field(c) for c in PARTITION_COLUMNS]), flavor="hive"
        ),
        basename_template="part-estimate-{i}.parquet",
        existing_data_behavior="delete_matching",
    )


def _band(groups: list[str], index: int) -> list[str]:
    return groups[max(index - 1, 0) : index + 2]


def _player_coverage(strength: SavedStrength | None, n: int) -> list[float] | None:
    """The strength intervals' measured coverage on one player's own ``n`` games, if any."""
    measured = strength.coverage(n, "player") if strength is not None else None
    return list(measured) if measured is not None else None


def _derivation(strength: SavedStrength | None, n: int) -> dict:
    """The Estimate's interval_rho, interval_rho_players and interval_check at trained ``n``:
    set where the applied intervals are derived (SavedStrength.calibration)."""
    if strength is None or strength.calibration(n) != "derived":
        return {"interval_rho": None, "interval_rho_players": None, "interval_check": None}
    check = strength.derivation_check(n)
    return {
        "interval_rho": strength.derived.get("rho"),
        "interval_rho_players": strength.derived.get("players"),
        "interval_check": {"model": check[0], "coverage": check[1]} if check else None,
    }


def player_instances(aggregates: Path, player: str) -> pa.Table:
    instances = load_mart(aggregates, "player_instance_features")
    mine = pc.equal(pc.utf8_lower(pc.fill_null(instances["player"], "")), player.casefold())
    return instances.filter(mine)


def in_game_order(instances: pa.Table, games: pa.Table) -> pa.Table:
    """The player's instances in the order their games come in the files (a dump or an
    export lists games by time), so that "after game k" means the first k games."""
    position = pc.index_in(instances["game_id"], value_set=games["game_id"])
    return instances.take(pc.sort_indices(pa.table({"p": position}), [("p", "ascending")]))


def own_loss_by_move(features: pa.Table, player: str) -> pa.Table:
    """(move_number, loss_mean) of the player's own moves."""
    mine = pc.and_(
        pc.equal(pc.utf8_lower(pc.fill_null(features["player"], "")), player.casefold()),
        pc.is_valid(features["loss"]),
    )
    table = features.filter(mine).group_by("move_number").aggregate([("loss", "mean")])
    return table.rename_columns(["move_number", "loss_mean"]).sort_by("move_number")


def draw_report(
    models: MetaModels,
    instances: pa.Table,
    features: pa.Table,
    player: str,
    path: Path,
    *,
    steps: list[Step] | None = None,
) -> Path:
    """One PNG: the player's prior profile (Fig. 3) and loss by move number (Fig. 4) against
    each rank group of the meta-models' training aggregates; with ``steps``, a third panel: the
    estimate and its intervals after each game."""
    from matplotlib.figure import Figure

    from pipeline.meta.figures import (
        draw_loss_by_move,
        draw_prior_profile,
        draw_progression,
        net_order,
    )

    nets = net_order(instances.column_names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a net with no value stays NaN
        mine = {
            n: float(
                np.nanmean(
                    instances[instance_column("prior", n, "geomean")].to_numpy(zero_copy_only=False)
                )
            )
            for n in nets
        }
    trained = models.aggregates_dir
    try:
        profile = load_mart(trained, "prior_profile")
        by_move = load_mart(trained, "loss_by_move_number")
    except AggregatesNotFoundError:
        log.warning("training aggregates %s not found: the report shows the player only", trained)
        profile = pa.table(
            {"rank_group": pa.array([], pa.string()), "net": pa.array([], pa.string())}
        )
        by_move = pa.table({"rank_group": pa.array([], pa.string())})
    game = models.manifest["game"]
    if profile.num_rows:
        profile = profile.filter(pc.equal(profile["game"], game))
        by_move = by_move.filter(pc.equal(by_move["game"], game))
    panels = 3 if steps else 2
    fig = Figure(figsize=(6.5 * panels, 4.2))
    axes = fig.subplots(1, panels)
    left, right = axes[0], axes[1]
    if steps:
        strength = models.strength()
        draw_progression(
            axes[2], steps, models.group_names,
            label=game_kind(game).strength_label,
            scale=strength.scale if strength is not None else None,
        )  # fmt: skip
    draw_prior_profile(left, profile, models.group_names, nets, player=mine, player_label=player)
    draw_loss_by_move(
        right,
        by_move,
        models.group_names,
        player=own_loss_by_move(features, player),
        player_label=player,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def applied_feature_set(
    models: MetaModels, instances: pa.Table, requested: str | None
) -> tuple[str, str | None]:
    """The feature set an estimate applies to these instances, and a note when it is not the
    model's first choice or the games hold what its training games did not.

    The clock features were learnt on the time controls of the training games: a game without
    a clock (an over-the-board PGN, a chess.com export without ``%clk``) or of another time
    control takes the set that reads no clock, shipped beside it, and the note names why."""
    chosen = requested or models.feature_set()
    if not reads_clock(chosen):
        return chosen, None
    trained_list = models.manifest.get("time_controls") or []  # sorted by base, increment
    trained_controls = set(trained_list)
    clocked = pc.is_valid(instances[CLOCK_PRESENT]).to_numpy(zero_copy_only=False)
    unseen = sorted(set(time_controls(instances)) - trained_controls)
    problems = []
    if not clocked.all():
        problems.append(f"{int((~clocked).sum())} of {len(clocked)} game(s) have no clock")
    if unseen and not trained_list:  # aggregates without the time control (written before it)
        problems.append("the clock model records no time control of its training games")
    elif unseen:
        problems.append(
            f"time control {', '.join(unseen)} is not among the {len(trained_controls)} of the"
            f" clock model's training games ({', '.join(trained_list[:4])} …)"
        )
    if not problems:
        return chosen, None
    if requested:  # the user's choice stands; the note says what it does not know
        return chosen, "; ".join(problems) + f": {chosen} reads the clock all the same"
    fallback = preferred_set(list(models.manifest["models"]), clock=False)
    if fallback is None:  # trained with clock sets only (--feature-sets)
        note = f": {chosen} reads the clock all the same (the model has no set that reads none)"
        return chosen, "; ".join(problems) + note
    return fallback, "; ".join(problems) + f", so the model that reads no clock ({fallback})"


def applied_figures(models: MetaModels, feature_set: str, n: int) -> tuple[str | None, dict]:
    """(sampling, figures row) of the model an estimate of one player applies at ``n``: its
    sibling fitted for one player's games where it has one, measured on other players' own
    games; else the rank-group model, on one player's games where the model has a
    player-specific set, else on rank-group samples. (None, {}) where nothing was recorded."""
    method = player_method(feature_set) if models.player_trained(feature_set, n) else feature_set
    with_players = models.player_aggregates_dir is not None  # else few players, in one split
    for sampling in ("player", "rank_group") if with_players else ("rank_group",):
        row = models.accuracy(method, n, sampling)
        if row is not None and row.get("samples"):
            return sampling, row
    return None, {}


def run_estimate(
    game: str,
    sources: list[str],
    player: str,
    models: MetaModels,
    work_dir: Path,
    *,
    config_path: Path | None = None,
    nodes: int | None = None,
    feature_set: str | None = None,
    progressive: bool = False,
    confidence: float = 0.9,
) -> Estimate:
    """Read → extract → aggregate → predict → report for one player's games.

    ``progressive``: also the estimate after each game (in the files' order), in the result
    and the report. ``confidence``: the ±1-group accuracy the games-needed figure aims at.
    """
    started = time.perf_counter()
    if models.manifest["game"] != game:
        raise MetaDataError(
            f"meta-models in {str(models.root)!r} are for {models.manifest['game']!r}, not {game!r}"
        )
    if config_path is None:
        check_nets(models)
    games, _ = read_player_games(game, sources, player)
    config = extraction_config(models, config_path, nodes)
    trained = (models.manifest.get("features_config") or {}).get("config", {}).get("precision")
    features, dropped = extract_in_process(config, games)
    write_features(features, work_dir / "features")
    agg = models.manifest.get("aggregate", {})
    run_aggregate(work_dir / "features", work_dir / "aggregates", config=AggregateConfig(**agg))
    instances = player_instances(work_dir / "aggregates", player)
    if instances.num_rows == 0:
        raise NoGamesOfPlayerError(
            f"no moves of player {player!r} survived extraction ({dropped} games dropped)"
        )
    columns = feature_columns(instances.column_names)
    instances = in_game_order(instances, games)
    matrix = np.column_stack(
        [instances[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in columns]
    )  # (K, F) the player's instances, game by game
    chosen, note = applied_feature_set(models, instances, feature_set)
    steps = score_steps(models, matrix, columns, chosen)
    last = steps[-1]  # every game: the estimate
    groups = models.group_names
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", player)
    report = draw_report(
        models, instances, features, player, work_dir / f"estimate_{safe}.png",
        steps=steps if progressive else None,
    )  # fmt: skip
    rated = sorted(set(instances["rank_group"].drop_null().to_pylist()))
    sampling, measured = applied_figures(models, chosen, last.n_model)
    pm1 = [applied_figures(models, chosen, n)[1].get("accuracy_pm1") for n in models.ns]
    needed = games_for_confidence(models.ns, pm1, confidence)
    strength = models.strength(chosen)
    return Estimate(
        player=player,
        game=game,
        games_found=games.num_rows,
        games_used=instances.num_rows,
        moves_used=int(pc.sum(instances["moves_all"]).as_py()),
        model=models.manifest.get("name") or str(models.root),
        n_model=last.n_model,
        feature_set=chosen,
        feature_set_note=note,
        model_training="player" if models.player_trained(chosen, last.n_model) else "rank_group",
        model_sampling=sampling,
        model_accuracy=measured.get("accuracy"),
        model_accuracy_pm1=measured.get("accuracy_pm1"),
        model_samples=measured.get("samples"),
        strength_scale=strength.scale if strength is not None else None,
        strength_feature_set=strength.record["feature_set"] if strength is not None else None,
        strength=last.strength,
        interval_80=last.interval_80,
        interval_95=last.interval_95,
        interval_calibration=strength.calibration(last.n_model) if strength is not None else None,
        interval_coverage_player=_player_coverage(strength, last.n_model),
        **_derivation(strength, last.n_model),
        confidence=confidence,
        games_needed=None if needed is None else math.ceil(needed - 1e-9),
        further_games=further_games(needed, instances.num_rows),
        rank_group=groups[last.rank_group_index],
        rank_group_index=last.rank_group_index,
        prediction=last.prediction,
        band=_band(groups, last.rank_group_index),
        rank_groups=groups,
        n_trained=models.ns,
        precision=config.precision,
        precision_trained=trained or config.precision,
        rated_rank_groups=rated,
        report=str(report),
        steps=[asdict(step) for step in steps] if progressive else None,
        seconds=round(time.perf_counter() - started, 2),
    )
