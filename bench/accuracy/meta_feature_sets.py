"""Feature sets of one aggregates folder against a baseline set, over re-drawn game splits.

A family of columns earns its place when the sets that add it beat the baseline by more than
the spread between splits: each split fits every set on the same training samples and scores
it on the same evaluation samples, so the paired difference of a split is the family's own,
and its spread over the splits says whether the mean is more than noise::

    python bench/accuracy/meta_feature_sets.py chess A-clock --splits 10 --n 1,5,20 \\
        --feature-sets full_dcloss,full_dcloss_clock,clock_only --baseline full_dcloss

Prints, per set and n, the rank-group accuracy (and ±1) as the mean over the splits, and the
paired difference to the baseline: mean, standard deviation and range over the splits.
"""

from __future__ import annotations

import numpy as np
from meta_bench import fitting, instance_tables, meta_parser, sample_sizes, split_salts

from pipeline.core.data_split import SplitConfig
from pipeline.meta.model import MetaConfig, MetaDataError, drop_empty_columns, instance_data
from pipeline.meta.paired import rank_group_accuracy


def main() -> None:
    parser = meta_parser(__doc__, default_n="1,5,20")
    parser.add_argument("--feature-sets", default="full_dcloss,full_dcloss_clock,clock_only")
    parser.add_argument("--baseline", default="full_dcloss", help="the set the others face")
    parser.add_argument("--splits", type=int, default=10, help="re-drawn game splits")
    args = parser.parse_args()
    sets = tuple(dict.fromkeys([args.baseline, *args.feature_sets.split(",")]))
    ns = sample_sizes(args.n)
    instances, groups = instance_tables(args.aggregates)
    figures: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for salt in split_salts(args.splits):
        split = SplitConfig(salt=salt)
        data = drop_empty_columns(instance_data(instances, groups, game=args.game, split=split))
        for n in ns:
            config = MetaConfig(ns=(n,), feature_sets=sets, split=split, **fitting(args))
            try:
                accuracy = rank_group_accuracy(data, n, config)
            except MetaDataError:
                continue  # a split with a group of fewer than n instances in one of its parts
            if args.baseline not in accuracy:
                continue
            for method in sets:
                if method in accuracy:
                    figures.setdefault((method, n), []).append(accuracy[method])
                else:  # the same columns as another set (not trained twice): no figure
                    figures.setdefault((method, n), []).append((np.nan, np.nan))
    print(f"rank-group accuracy % (±1 %), mean over {args.splits} splits; paired difference to "
          f"{args.baseline}: mean ± sd [min, max] over the splits")  # fmt: skip
    print("| method | " + " | ".join(f"n={n}" for n in ns) + " |")
    print("|---" * (len(ns) + 1) + "|")
    for method in sets:
        cells = []
        for n in ns:
            rows = np.array(figures.get((method, n), []), dtype=float)
            base = np.array(figures.get((args.baseline, n), []), dtype=float)
            if not len(rows) or np.isnan(rows).all():
                cells.append("–")
                continue
            accuracy, pm1 = np.nanmean(rows, axis=0).tolist()
            cell = f"{accuracy:.1f} ({pm1:.1f})"
            if method != args.baseline:
                gain = rows[:, 0] - base[:, 0]
                cell += (f", {np.nanmean(gain):+.1f} ± {np.nanstd(gain, ddof=1):.1f}"
                         f" [{np.nanmin(gain):+.1f}, {np.nanmax(gain):+.1f}]")  # fmt: skip
            cells.append(cell)
        print(f"| {method} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
