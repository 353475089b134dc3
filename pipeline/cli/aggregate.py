"""``kibitz aggregate``: per-move features → player-instance, player and rank-group tables (DuckDB).

    kibitz aggregate --features kibitz-out/features-chess --out kibitz-out/aggregates-chess
    kibitz aggregate --features DIR --out DIR --alpha 0.2 --gamma 0.5

Writes OUT/player_instance_features.parquet, OUT/player_features.parquet,
OUT/rank_groups.parquet and the same tables in OUT/kibitz.duckdb (open it with
``duckdb OUT/kibitz.duckdb``). The SQL is in sql/marts/; see docs/meta.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core import settings
from pipeline.meta.aggregate import AggregateConfig, FeaturesNotFoundError, run_aggregate


def cmd_aggregate(args: argparse.Namespace) -> int:
    config = AggregateConfig(alpha=args.alpha, gamma=args.gamma)
    try:
        summary = run_aggregate(Path(args.features), Path(args.out), config=config)
    except FeaturesNotFoundError as exc:
        raise SystemExit(f"kibitz aggregate: {exc}") from exc
    rows = ", ".join(f"{name} {count:,}" for name, count in summary["rows"].items())
    print(
        f"{summary['moves']:,} moves → {rows} in {summary['sql_s']:.2f} s "
        f"({summary['moves_per_s']:,.0f} moves/s); database {summary['database']}"
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
        default=str(settings.home_dir() / "aggregates"),
        help="output folder (default: $KIBITZ_HOME/aggregates)",
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
    parser.set_defaults(func=cmd_aggregate)
