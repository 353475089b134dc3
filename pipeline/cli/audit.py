"""``kibitz audit``: per player, strength estimated from the moves against the rated strength.

    kibitz audit chess                                    # $KIBITZ_HOME/aggregates-chess
    kibitz audit go --aggregates kibitz-out/aggregates-go --alpha 0.05
    kibitz audit chess --features kibitz-out/features-chess --model kibitz-out/meta-chess

Averages each player's instances, estimates their strength with the meta-models' strength model
(the shipped ``kibitz-meta-GAME`` unless ``--model``), and flags players whose gap to their
rating has a conformal p-value ≤ ``--alpha`` (the false-positive rate for unaltered players).
Writes ``audit-GAME/audit.parquet`` (DuckDB view ``GAME_audit`` in the home's catalog) and
``audit.png``, logs an MLflow run (experiment ``kibitz-audit-GAME``) and prints the flagged
players, most surprising first. See docs/guide/estimate.md (Audit).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core import settings


def cmd_audit(args: argparse.Namespace) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pipeline.core.catalog import aggregates_dir_for
    from pipeline.kinds import game_kind
    from pipeline.meta.aggregate import run_aggregate
    from pipeline.meta.audit import run_audit
    from pipeline.meta.registered import resolve_meta_models

    models = resolve_meta_models(args.model, args.game)
    if args.features:
        aggregates = (
            Path(args.aggregates) if args.aggregates else aggregates_dir_for(Path(args.features))
        )
        run_aggregate(Path(args.features), aggregates)
    else:
        aggregates = (
            Path(args.aggregates) if args.aggregates else settings.aggregates_dir(args.game)
        )
    out = Path(args.out) if args.out else settings.audit_dir(args.game)
    summary = run_audit(
        models,
        aggregates,
        out,
        alpha=args.alpha,
        tracking_uri=settings.tracking_uri(args.tracking_uri),
    )
    table = pq.read_table(summary["table"])
    flagged = table.filter(pc.equal(table["flagged"], True))
    label = game_kind(args.game).strength_label
    print(
        f"{summary['players']:,} players audited, {summary['flagged']:,} flagged at p ≤ {args.alpha:g}"
        f" ({100 * (summary['flagged_rate'] or 0):.1f} %); model {summary['model']}"
    )
    for row in flagged.slice(0, args.show).to_pylist():
        side = "stronger" if row["gap"] > 0 else "weaker"
        print(
            f"  {row['player']}: rated {label(row['rated'])}, plays like {label(row['estimate'])}"
            f" ({side}; p = {row['p_value']:.2f}, z = {row['z']:+.1f}, {row['games']} game(s))"
        )
    catalog = f"; view {args.game}_audit in {summary['catalog']}" if summary["catalog"] else ""
    print(f"table {summary['table']}; figure {summary['figure']}{catalog}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="flag players whose moves do not match their rating (strength vs rated strength)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", choices=["chess", "go"])
    parser.add_argument(
        "--aggregates", help="aggregates folder (default: $KIBITZ_HOME/aggregates-GAME)"
    )
    parser.add_argument("--features", help="features folder: aggregated first")
    parser.add_argument(
        "--model",
        help="meta-models: a registry name or a `kibitz train meta` folder"
        " (default: the shipped kibitz-meta-GAME)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="false-positive rate: flag p ≤ alpha (default 0.01)",
    )
    parser.add_argument("--out", help="output folder (default: $KIBITZ_HOME/audit-GAME)")
    parser.add_argument("--show", type=int, default=20, help="flagged players printed (default 20)")
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///$KIBITZ_HOME/mlflow.db)",
    )
    parser.set_defaults(func=cmd_audit)
