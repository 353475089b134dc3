"""Rounding against cut points: how a meta-model's output becomes a rank group, per group.

The same models decide both ways (``pipeline/meta/decision.py``): rounded to the nearest group
as the paper does, or cut at thresholds fitted on the monitoring samples. Each of ``--splits``
re-drawn game splits fits ``--feature-set`` once per n and scores both decisions on the same
evaluation samples, so each split's difference is the decision's own::

    python bench/accuracy/meta_decision.py chess models/kibitz-meta-chess/aggregates --splits 10
    python bench/accuracy/meta_decision.py go models/kibitz-meta-go/aggregates --splits 10

``--ordinal`` adds a third decision that replaces the regression instead of cutting it: G − 1
binary models of P(group > k) fitted on the same training samples with the same fitting (Frank
& Hall 2001), the group their distribution's median::

    python bench/accuracy/meta_decision.py chess models/kibitz-meta-chess/aggregates --splits 5 \
        --n 5,20 --feature-set full_dcloss_clock --ordinal

Prints, per n, the accuracy (and ±1) of each decision, mean over the splits, the paired
difference to rounding (mean ± sd [min, max]), and the accuracy of each rank group under each.
"""

from __future__ import annotations

import numpy as np
from meta_bench import fitting, instance_tables, meta_parser, sample_sizes, split_salts

from pipeline.core.data_split import SplitConfig
from pipeline.meta.decision import (
    DECISIONS,
    apply_cut_points,
    extended_above,
    fit_cut_points,
    fit_extended_ordinal,
    fit_ordinal,
    ordinal_above,
    ordinal_groups,
)
from pipeline.meta.model import (
    MetaConfig,
    MetaDataError,
    build_samples,
    drop_empty_columns,
    fit_model,
    instance_data,
    round_to_group,
)


def main() -> None:
    parser = meta_parser(__doc__, default_n="1,5,20")
    parser.add_argument("--feature-set", default="full_dcloss")
    parser.add_argument("--splits", type=int, default=10, help="re-drawn game splits")
    parser.add_argument(
        "--ordinal", action="store_true",
        help="also an ordinal decision: G - 1 binary models of P(group > k) (Frank & Hall 2001)",
    )  # fmt: skip
    parser.add_argument(
        "--ordinal-one", action="store_true",
        help="also an ordinal decision of one model of P(group > k) with k as a feature (Li & Lin"
        " 2007): the one the chess meta-models ship",
    )  # fmt: skip
    args = parser.parse_args()
    instances, groups = instance_tables(args.aggregates)
    names: list[str] = []
    # (n, decision) -> per split: (accuracy, ±1 accuracy, per-group accuracy (G,))
    figures: dict[tuple[int, str], list[tuple[float, float, np.ndarray]]] = {}
    for salt in split_salts(args.splits):
        split = SplitConfig(salt=salt)
        data = drop_empty_columns(instance_data(instances, groups, game=args.game, split=split))
        names = data.group_names
        for n in sample_sizes(args.n):
            config = MetaConfig(
                ns=(n,), feature_sets=(args.feature_set,), split=split, **fitting(args)
            )
            try:
                samples = build_samples(data, n, config)
            except MetaDataError:
                continue  # a group of fewer than n instances in one of this split's parts
            train, monitor, evaluation = (samples[k] for k in ("train", "validation", "evaluation"))
            model = fit_model(data.columns, args.feature_set, n, train, monitor,
                              groups=data.groups, config=config)  # fmt: skip
            pick = [data.columns.index(c) for c in model.columns]
            cuts = fit_cut_points(
                model.booster.predict(monitor.features[:, pick]), monitor.label, data.groups
            )
            raw = model.booster.predict(evaluation.features[:, pick])
            decisions = [
                ("rounding", round_to_group(raw, data.groups)),
                ("cuts", apply_cut_points(raw, cuts)),
            ]
            if args.ordinal:
                above = fit_ordinal(train.features[:, pick], train.label, data.groups,
                                    config.lightgbm_params())  # fmt: skip
                above = ordinal_above(above, evaluation.features[:, pick])
                decisions.append(("ordinal", ordinal_groups(above)))
            if args.ordinal_one:
                one = fit_extended_ordinal(train.features[:, pick], train.label, data.groups,
                                           config.lightgbm_params())  # fmt: skip
                above = extended_above(one, evaluation.features[:, pick], data.groups)
                decisions.append(("ordinal-one", ordinal_groups(above)))
            for decision, predicted in decisions:
                right = predicted == evaluation.label
                near = np.abs(predicted - evaluation.label) <= 1
                per_group = np.array(
                    [right[evaluation.label == g].mean() for g in range(data.groups)]
                )
                figures.setdefault((n, decision), []).append(
                    (100 * right.mean(), 100 * near.mean(), 100 * per_group)
                )
    print(f"{args.game} {args.feature_set}: rank-group accuracy % (±1 %), mean over the splits")
    for n in sample_sizes(args.n):
        rows = {d: figures.get((n, d), []) for d in (*DECISIONS, "ordinal-one") if figures.get((n, d))}
        if "rounding" not in rows:  # no split held enough instances at this n
            continue
        acc = {d: np.array([r[0] for r in v]) for d, v in rows.items()}
        pm1 = {d: np.array([r[1] for r in v]) for d, v in rows.items()}
        print(f"n={n} ({len(acc['rounding'])} splits): rounding {acc['rounding'].mean():.1f} "
              f"({pm1['rounding'].mean():.1f})")  # fmt: skip
        for d in list(rows)[1:]:
            gain = acc[d] - acc["rounding"]
            print(f"  {d} {acc[d].mean():.1f} ({pm1[d].mean():.1f}); {d} - rounding"
                  f" {gain.mean():+.1f} ± {gain.std(ddof=1):.1f}"
                  f" [{gain.min():+.1f}, {gain.max():+.1f}]")  # fmt: skip
        by_group = {d: np.mean([r[2] for r in v], axis=0) for d, v in rows.items()}
        print("| group | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for d in rows:
            print(f"| {d} | " + " | ".join(f"{x:.1f}" for x in by_group[d]) + " |")


if __name__ == "__main__":
    main()
