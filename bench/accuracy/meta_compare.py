"""Two extractions of the same games, compared through the meta-models they train.

A net swapped for another (issue #28: the Go skill levels of ``kibitz-go-policy-4x32`` against
those of the policies on KataGo's trunk that led to ``kibitz-go-policy``) is judged by what it
does to rank estimation, not only by its own move matching. This script takes two aggregates folders of ``kibitz aggregate`` whose features
came from two extraction configs, keeps the games and the feature columns both have
(:mod:`pipeline.meta.paired`), and fits and evaluates Table 2's meta-models on each with the same
split, seeds and samples, so that each difference comes from the features alone::

    python bench/accuracy/meta_compare.py go bench/aggregates/go-g170-levels-testing \\
        models/kibitz-meta-go/aggregates --sscore-nets kibitz-sscore-go --n 1,5,10,15,20

Prints, per feature set and n, the rank-group accuracy (and ±1) of each and the change; with
``--splits K`` each figure is the mean over K re-drawn game splits (the same fractions, another
salt each), since one evaluation split's figure moves by a few points with the split alone; a
split is left out at an n where one of its parts has a group of fewer than n instances.
A feature set that does not read the swapped columns (``no_prior`` when the levels are swapped)
must come out about the same on both: the check that the two extractions agree elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from meta_bench import fitting, meta_parser, sample_sizes, split_salts

from pipeline.core.data_split import SplitConfig
from pipeline.meta.model import FIT_SPLITS, MetaConfig, MetaDataError
from pipeline.meta.paired import paired_instances, rank_group_accuracy


def main() -> None:
    parser = meta_parser(__doc__, default_n="1,5,10,15,20")
    parser.add_argument("other", type=Path, help="the second aggregates folder")
    parser.add_argument("--feature-sets", default="full,no_sscore,no_prior,no_loss")
    parser.add_argument("--sscore-nets", default="", help="strength nets kept (default: all)")
    parser.add_argument("--splits", type=int, default=1, help="1: the models' own split")
    parser.add_argument(
        "--fit-split", choices=FIT_SPLITS, default="train",
        help="fit on validation games: out of sample for nets trained on the train split",
    )  # fmt: skip
    args = parser.parse_args()
    sets = tuple(args.feature_sets.split(","))
    nets = tuple(x for x in args.sscore_nets.split(",") if x)
    ns = sample_sizes(args.n)
    figures: dict[tuple[str, int], list[tuple[float, float, float, float]]] = {}
    for salt in split_salts(args.splits):
        split = SplitConfig(salt=salt)
        pair = paired_instances(
            args.aggregates, args.other, game=args.game, split=split, sscore_nets=nets
        )
        if salt == SplitConfig().salt:
            games = len(set(pair[0].game_id.tolist()))
            print(f"{len(pair[0].group):,} instances of {games:,} shared games, "
                  f"{len(pair[0].columns)} shared feature columns")  # fmt: skip
        for n in ns:
            config = MetaConfig(
                ns=(n,), feature_sets=sets, split=split, fit_split=args.fit_split, **fitting(args)
            )
            try:
                first, second = (rank_group_accuracy(d, n, config) for d in pair)
            except MetaDataError:
                continue  # a split with a group of fewer than n instances in one of its parts
            for method in sets:
                if method in first and method in second:
                    figures.setdefault((method, n), []).append((*first[method], *second[method]))
    if not figures:
        raise SystemExit("no split had enough instances in every group for any n")
    print("rank-group accuracy % (±1 %), first → second, mean over the splits whose groups all")
    print("had n fitting, monitoring and evaluation instances (their number in the header)")
    used = {n: max((len(v) for (_, m), v in figures.items() if m == n), default=0) for n in ns}
    print("| method | " + " | ".join(f"n={n} ({used[n]})" for n in ns) + " |")
    print("|---" * (len(ns) + 1) + "|")
    for method in sets:
        cells = []
        for n in ns:
            rows = figures.get((method, n))
            if not rows:
                cells.append("–")
                continue
            a1, a2, b1, b2 = np.mean(rows, axis=0).tolist()
            cells.append(f"{a1:.1f} ({a2:.1f}) → {b1:.1f} ({b2:.1f}), {b1 - a1:+.1f}")
        print(f"| {method} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
