"""``kibitz train``: train Kibitz's models; one sub-command per trainer.

    kibitz train meta chess --features kibitz-out/features-chess --out kibitz-out/meta-chess
    kibitz train meta go --aggregates kibitz-out/aggregates-go --out kibitz-out/meta-go \\
        --player-aggregates kibitz-out/aggregates-go-by-player --n 5,10,15,20

``train meta`` trains the LightGBM rank-estimation meta-models of Kuboki et al. (2025) on the
player-instance aggregates (``kibitz aggregate``; built into OUT/aggregates when only
``--features`` is given), evaluates them with rank-group and player-specific sampling and
tracks every model as an MLflow run (see docs/guide/estimate.md). Each trainer adds its own sub-parser
in this module (``_add_<trainer>_parser``).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli.invocation import command_line
from pipeline.core import settings
from pipeline.core.data_split import SplitConfig
from pipeline.kinds import game_kind
from pipeline.meta.aggregate import AggregateConfig
from pipeline.meta.model import DEFAULT_NS, FEATURE_SETS, FIT_SPLITS, MetaConfig

log = logging.getLogger(__name__)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every n must be ≥ 1, got {text!r}")
    return values


def _feature_sets(text: str) -> tuple[str, ...]:
    names = tuple(x for x in text.split(",") if x)
    unknown = [x for x in names if x not in FEATURE_SETS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown feature sets {unknown!r}; known: {','.join(FEATURE_SETS)}"
        )
    return names


def _split(text: str) -> SplitConfig:
    try:
        return SplitConfig.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def shipped_derivation_check() -> dict | None:
    """How the derived player intervals held on the default Go model's ``by-player`` players,
    for a model whose data have no player-specific set (chess) to quote; None without it."""
    from pipeline.core.errors import KibitzError
    from pipeline.meta.player_variance import derivation_check
    from pipeline.meta.registered import resolve_meta_models

    try:
        return derivation_check(resolve_meta_models(None, "go").manifest)
    except (KibitzError, OSError) as exc:
        log.warning("no derivation check to record (the default Go model: %s)", exc)
        return None


def cmd_train_meta(args: argparse.Namespace) -> int:
    from pipeline.meta.report import markdown_table
    from pipeline.meta.train import TrainMetaRun, run_train_meta

    config = MetaConfig(
        ns=args.n,
        feature_sets=args.feature_sets,
        split=args.split,
        train_draws_per_group=args.train_draws,
        eval_draws_per_group=args.eval_draws,
        player_repeats=args.player_repeats,
        player_unit_draws=args.player_unit_draws,
        seed=args.seed,
        fit_split=args.fit_split,
        sscore_nets=args.sscore_nets,
        ordinal_ns=game_kind(args.game).ordinal_ns if args.ordinal_n is None else args.ordinal_n,
    )
    run = TrainMetaRun(
        game=args.game,
        out_dir=Path(args.out) if args.out else settings.meta_dir(args.game),
        features_dir=Path(args.features) if args.features else None,
        aggregates_dir=Path(args.aggregates) if args.aggregates else None,
        player_aggregates_dir=Path(args.player_aggregates) if args.player_aggregates else None,
        tracking_uri=settings.tracking_uri(args.tracking_uri),
        aggregate=AggregateConfig(alpha=args.alpha, gamma=args.gamma),
        command=command_line(),
        derivation_check=None if args.player_aggregates else shipped_derivation_check(),
    )
    manifest = run_train_meta(run, config)
    from pipeline.meta.report import load_results

    results = load_results(run.out_dir)
    for sampling in ("rank_group", "player"):
        print(markdown_table(results, sampling), end="\n\n")
    print(
        f"instances {manifest['instances']}; models in {run.out_dir}; MLflow {manifest['tracking_uri']}"
        f" (parent run {manifest['mlflow_parent_run_id']}); {manifest['seconds']} s"
    )
    if args.register:
        from pipeline.meta.registered import register_meta_models

        root = Path(args.models_root) if args.models_root else settings.models_dir()
        target = register_meta_models(run.out_dir, args.register, models_root=root)
        print(f"registered {args.register!r}: {target} (card {target / 'MODEL_CARD.md'})")
    return 0


def _add_meta_parser(trainers: argparse._SubParsersAction) -> None:
    defaults = MetaConfig()
    parser = trainers.add_parser(
        "meta",
        help="LightGBM rank-estimation meta-models on the player-instance aggregates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", choices=["chess", "go"])
    parser.add_argument("--features", help="features folder of `kibitz extract` (aggregated first)")
    parser.add_argument(
        "--aggregates", help="aggregates folder of `kibitz aggregate` (reused if present)"
    )
    parser.add_argument(
        "--player-aggregates",
        help="aggregates of other games for the player-specific protocol (e.g. Fox by-player);"
        " default: the evaluation split",
    )
    parser.add_argument(
        "--out", help="output folder (default: $KIBITZ_HOME/meta-GAME, where estimate looks)"
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///$KIBITZ_HOME/mlflow.db)",
    )
    parser.add_argument(
        "--register",
        metavar="NAME",
        help="ship the models as registry entry NAME (kibitz-meta-GAME is what estimate uses by"
        " default): models, aggregates, tables, card",
    )
    parser.add_argument(
        "--models-root", help="where --register puts them (default: $KIBITZ_MODELS_DIR)"
    )
    parser.add_argument(
        "--n",
        type=_int_list,
        default=DEFAULT_NS,
        help="instances per sample (default 1,5,10,15,20)",
    )
    parser.add_argument(
        "--feature-sets",
        type=_feature_sets,
        default=tuple(FEATURE_SETS),
        help=f"comma-separated, of {','.join(FEATURE_SETS)} (default: all)",
    )
    parser.add_argument(
        "--split",
        type=_split,
        default=defaults.split,
        help="train,validation,evaluation fractions of games (default 0.8,0.1,0.1)",
    )
    parser.add_argument(
        "--fit-split",
        choices=FIT_SPLITS,
        default=defaults.fit_split,
        help="split the meta-models are fitted on; the other of train/validation monitors"
        " (validation: free of the train games Kibitz's s-score / Go policy nets saw, with an"
        " eighth of the games)",
    )
    parser.add_argument(
        "--sscore-nets",
        type=lambda text: tuple(x for x in text.split(",") if x),
        default=defaults.sscore_nets,
        help="comma-separated strength nets (extraction config names) whose s-scores the"
        " models use (default: every one in the aggregates)",
    )
    parser.add_argument(
        "--train-draws",
        type=int,
        default=defaults.train_draws_per_group,
        help="training samples per rank group and n",
    )
    parser.add_argument(
        "--eval-draws",
        type=int,
        default=defaults.eval_draws_per_group,
        help="evaluation samples per rank group (paper: 500)",
    )
    parser.add_argument(
        "--player-repeats",
        type=int,
        default=defaults.player_repeats,
        help="player-specific repeats (paper: 5)",
    )
    parser.add_argument(
        "--player-unit-draws",
        type=int,
        default=defaults.player_unit_draws,
        help="samples of n games of each --player-aggregates player added to the training of the"
        " model an estimate of one player applies (0: no such model)",
    )
    parser.add_argument(
        "--ordinal-n",
        type=lambda text: () if text == "none" else _int_list(text),
        help="the n whose models name the rank group by an ordinal model beside the regressor,"
        " comma-separated, or none; the others round (default: the game's, chess 1, Go none:"
        " docs/research/results.md)",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--alpha", type=float, default=AggregateConfig().alpha, help="α when aggregating here"
    )
    parser.add_argument(
        "--gamma", type=float, default=AggregateConfig().gamma, help="γ when aggregating here"
    )
    parser.set_defaults(func=cmd_train_meta)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train Kibitz's models (meta: LightGBM rank estimators; sscore, policy: nets)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trainers = parser.add_subparsers(dest="trainer", metavar="TRAINER", required=True)
    _add_meta_parser(trainers)
    from pipeline.cli.train_nets import add_parsers  # sscore, policy (helper TRAIN)

    add_parsers(trainers)
