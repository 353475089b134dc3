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
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import PARTITION_COLUMNS, instance_column
from pipeline.estimate.result import Estimate, estimate_of_instances
from pipeline.kinds import game_kind
from pipeline.meta.aggregate import (
    AggregateConfig,
    AggregatesNotFoundError,
    load_mart,
    run_aggregate,
)
from pipeline.meta.model import MetaDataError
from pipeline.meta.progressive import Step
from pipeline.meta.registered import check_nets
from pipeline.meta.train import MetaModels

log = logging.getLogger(__name__)


class NoGamesOfPlayerError(KibitzError, LookupError):
    """None of the input games was played by the named player."""


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
    # numba, torch: extracting
    from pipeline.estimate.in_process import (
        extract_in_process,
        extraction_config,
        trained_precision,
    )

    games, _ = read_player_games(game, sources, player)
    config = extraction_config(models, config_path, nodes)
    trained = trained_precision(models)
    features, dropped = extract_in_process(config, games)
    write_features(features, work_dir / "features")
    agg = models.manifest.get("aggregate", {})
    run_aggregate(work_dir / "features", work_dir / "aggregates", config=AggregateConfig(**agg))
    instances = player_instances(work_dir / "aggregates", player)
    if instances.num_rows == 0:
        raise NoGamesOfPlayerError(
            f"no moves of player {player!r} survived extraction ({dropped} games dropped)"
        )
    instances = in_game_order(instances, games)
    estimate = estimate_of_instances(
        models, player, instances,
        games_found=games.num_rows,
        precision=config.precision,
        precision_trained=trained or config.precision,
        feature_set=feature_set,
        progressive=progressive,
        confidence=confidence,
    )  # fmt: skip
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", player)
    steps = [Step(**step) for step in estimate.steps] if estimate.steps else None
    report = draw_report(
        models, instances, features, player, work_dir / f"estimate_{safe}.png", steps=steps
    )
    estimate.report = str(report)
    estimate.seconds = round(time.perf_counter() - started, 2)
    return estimate
