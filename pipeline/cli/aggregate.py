"""``kibitz aggregate``: per-move features → player-instance, player and rank-group tables (DuckDB).

    kibitz aggregate                                           # $KIBITZ_HOME/features-chess
    kibitz aggregate --features kibitz-out/features-go         # → kibitz-out/aggregates-go
    kibitz aggregate --features DIR --out DIR --alpha 0.2 --gamma 0.5
    kibitz aggregate --sql player_instance_features            # print one model's SQL
    kibitz aggregate --merge agg-part-0 agg-part-1 --out kibitz-out/aggregates-go
    kibitz aggregate --add-nets aggregates-chess agg-maia2200 --out aggregates-chess-10

Writes OUT/player_instance_features.parquet, OUT/player_features.parquet,
OUT/rank_groups.parquet, OUT/prior_profile.parquet and OUT/loss_by_move_number.parquet. OUT is
by default ``aggregates-<kind>`` beside the features folder, where the output home's catalog
sees it: ``duckdb kibitz-out/kibitz.duckdb`` then has the views ``chess_player_features`` …
(pipeline/core/catalog.py). The SQL is in sql/ (staging → marts → reports); see docs/guide/estimate.md.
``--merge`` joins the aggregates of runs over disjoint games (``kibitz extract --part K/N``)
into the folder one run over all of them would have written (pipeline/meta/aggregate_merge.py).
``--add-nets BASE OTHER`` adds the imitation nets that only OTHER's run of the same games
extracted to BASE's instances: a new level without extracting the others again
(pipeline/meta/aggregate_nets.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core import settings
from pipeline.core.catalog import aggregates_dir_for, load_models
from pipeline.meta.aggregate import AggregateConfig, run_aggregate
from pipeline.meta.aggregate_merge import merge_aggregates
from pipeline.meta.aggregate_nets import add_nets


def cmd_aggregate(args: argparse.Namespace) -> int:
    if args.sql:
        models = load_models()
        if args.sql not in models:
            raise SystemExit(f"no SQL model {args.sql!r}; known: {', '.join(sorted(models))}")
        print(models[args.sql].sql)
        return 0
    if args.merge:
        if not args.out:
            raise SystemExit("--merge needs --out")
        summary = merge_aggregates(args.merge, Path(args.out))
        rows = ", ".join(f"{name} {count:,}" for name, count in summary["rows"].items())
        print(f"merged {len(args.merge)} aggregates folders ({summary['moves']:,} moves):"
              f" {rows} in {args.out}")  # fmt: skip
        return 0
    if args.add_nets:
        if not args.out:
            raise SystemExit("--add-nets needs --out")
        summary = add_nets(*args.add_nets, Path(args.out))
        added = summary["nets_added_from"]
        print(f"added {', '.join(added['nets'])} ({len(added['columns'])} columns) to"
              f" {summary['rows']['player_instance_features']:,} instances in {args.out}")  # fmt: skip
        return 0
    features = Path(args.features)
    out = Path(args.out) if args.out else aggregates_dir_for(features)
    config = AggregateConfig(alpha=args.alpha, gamma=args.gamma)
    summary = run_aggregate(features, out, config=config)
    rows = ", ".join(f"{name} {count:,}" for name, count in summary["rows"].items())
    catalog = f"; catalog {summary['catalog']}" if summary["catalog"] else ""
    print(
        f"{summary['moves']:,} moves → {rows} in {summary['sql_s']:.2f} s "
        f"({summary['moves_per_s']:,.0f} moves/s); tables in {out}{catalog}"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    defaults = AggregateConfig()
    parser = subparsers.add_parser(
        "aggregate",
        help="aggregate the features table into player-instance and player tables (DuckDB SQL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--features",
        default=str(settings.home_dir() / "features-chess"),
        help="features folder written by `kibitz extract` (default: $KIBITZ_HOME/features-chess)",
    )
    parser.add_argument(
        "--out",
        help="output folder (default: aggregates-<kind> beside the features folder)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=defaults.alpha,
        help=f"α of (6.1)–(6.3) (default {defaults.alpha})",
    )
    parser.add_argument(
        "--gamma",
        type=float,
        default=defaults.gamma,
        help=f"γ of (6.3), (6.4) (default {defaults.gamma})",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="AGGREGATES",
        help="merge these aggregates folders of runs over disjoint games into --out instead",
    )
    parser.add_argument(
        "--add-nets",
        nargs=2,
        type=Path,
        metavar=("BASE", "OTHER"),
        help="write BASE's aggregates with the imitation nets only OTHER's extraction of the"
        " same games ran to --out instead",
    )
    parser.add_argument(
        "--sql",
        metavar="MODEL",
        help="print the SQL of one model under sql/ with its net-column patterns filled in"
        " (to run by hand), and exit",
    )
    parser.set_defaults(func=cmd_aggregate)
