"""``kibitz report``: the paper-style figures of a whole dataset.

    kibitz report chess --features kibitz-out/features-chess --out kibitz-out/report-chess
    kibitz report go --aggregates kibitz-out/aggregates-go --meta kibitz-out/meta-go --out DIR

Draws prior_profile.png (geometric mean of priors per imitation level per rank group, 95 % CI),
loss_by_move_number.png (mean loss per move number, ±1 std band), sscore_by_rank_group.png
(when strength nets were extracted) and, with ``--meta``, one confusion matrix per meta-model.
``--features`` alone aggregates first (into OUT/aggregates).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.meta.aggregate import AggregateConfig, run_aggregate


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.meta.figures import write_report

    out = Path(args.out)
    train_out = Path(args.meta) if args.meta else None
    if args.aggregates:
        aggregates = Path(args.aggregates)
    elif args.features:
        aggregates = out / "aggregates"
        config = AggregateConfig(alpha=args.alpha, gamma=args.gamma)
        run_aggregate(Path(args.features), aggregates, config=config)
    else:
        raise SystemExit("kibitz report: give --features or --aggregates")
    written = write_report(aggregates, out, game=args.game, train_out=train_out)
    for path in written:
        print(path)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="draw paper-style figures (prior profiles, loss by move, s-scores, confusion matrices)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", choices=["chess", "go"])
    parser.add_argument("--features", help="features folder (aggregated into OUT/aggregates)")
    parser.add_argument("--aggregates", help="aggregates folder of `kibitz aggregate`")
    parser.add_argument("--meta", help="output folder of `kibitz train meta` (confusion matrices)")
    parser.add_argument("--out", required=True, help="folder for the PNGs")
    parser.add_argument(
        "--alpha", type=float, default=AggregateConfig().alpha, help="α when aggregating here"
    )
    parser.add_argument(
        "--gamma", type=float, default=AggregateConfig().gamma, help="γ when aggregating here"
    )
    parser.set_defaults(func=cmd_report)
