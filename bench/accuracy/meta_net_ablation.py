"""What each net adds to a meta-model: the full feature set refitted without one net at a time.

The feature-set ablations of Table 2 drop a whole family (every s-score, every prior, the
loss). This script drops one net's columns at a time (one Maia level's priors, one strength
net's s-scores, the evaluator's losses) from the full set, on the same split and evaluation
games, so a net whose removal costs nothing is a net a swap cannot be expected to help much,
and one that costs many points is where a better net would pay::

    python bench/accuracy/meta_net_ablation.py chess models/kibitz-meta-chess/aggregates --n 20
    python bench/accuracy/meta_net_ablation.py go models/kibitz-meta-go/aggregates --n 10
    python bench/accuracy/meta_net_ablation.py chess models/kibitz-meta-chess/aggregates --n 20 \
        --splits 5 --only kibitz_sscore_chess

Prints one line per variant: the rank-group accuracy of ``--feature-set`` (``full``) at each n,
and the paired change against all nets (mean ± sd over the splits); ``--by-group`` adds the
accuracy per true rank group with and without the net (the paper's Table 5 in shape). With
``--splits K`` each figure is the mean over K re-drawn game splits (the same fractions, another
salt each): one evaluation split's figure moves by a few points with the split alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from meta_bench import (
    fitting,
    instance_tables,
    meta_parser,
    paired_cell,
    sample_sizes,
    split_salts,
)

from pipeline.core.data_split import SplitConfig
from pipeline.meta.model import (
    FAMILIES,
    FEATURE_SETS,
    InstanceData,
    MetaConfig,
    MetaDataError,
    drop_empty_columns,
    instance_data,
    train_and_evaluate,
)

# One net's instance columns: <family>_<net slug>_<statistic>_<cut> (features_schema.instance_column)
NET_COLUMN = re.compile(r"^(prior|sscore)_(.+)_(?:geomean|mean|median|std)_(?:k25|k50|all)$")
EVALUATOR = "evaluator (loss)"


def net_of(column: str) -> str | None:
    """The net a full-set column comes from: its slug, or the evaluator for the losses."""
    if FAMILIES["loss"].match(column):
        return EVALUATOR
    match = NET_COLUMN.match(column)
    return match.group(2) if match else None


@dataclass
class SplitData:
    """The instances split with one salt."""

    salt: str
    instances: InstanceData


@dataclass
class Figures:
    """One variant's rank-group figures at one n, one entry per split whose evaluation part
    holds n instances in every group: accuracy %, ±1 %, and accuracy % per true group."""

    accuracy: list[float]
    pm1: list[float]
    by_group: list[np.ndarray]


def figures(
    splits: list[SplitData], n: int, keep: np.ndarray, feature_set: str, fit: dict
) -> Figures:
    """``feature_set`` at ``n`` on the columns at ``keep``, fitted (``fit``: MetaConfig fields)
    and evaluated on each split (NaN for a split whose evaluation part has a group of fewer
    than n instances)."""
    out = Figures([], [], [])
    for data in splits:
        config = MetaConfig(
            ns=(n,), feature_sets=(feature_set,), split=SplitConfig(salt=data.salt), **fit
        )
        try:
            result = train_and_evaluate(data.instances.with_columns(keep), n, config)
        except MetaDataError:
            out.accuracy.append(math.nan)
            out.pm1.append(math.nan)
            continue
        e = next(
            e for e in result.evaluations if e.method == feature_set and e.sampling == "rank_group"
        )
        out.accuracy.append(100 * e.accuracy)
        out.pm1.append(100 * e.accuracy_pm1)
        hit = e.predicted == e.label
        out.by_group.append(
            np.array(
                [
                    100 * hit[e.label == g].mean() if (e.label == g).any() else math.nan
                    for g in range(e.groups)
                ]
            )
        )
    return out


def main() -> None:
    parser = meta_parser(__doc__, default_n="20")
    parser.add_argument("--splits", type=int, default=1, help="1: the models' own split")
    parser.add_argument("--only", help="the nets to drop, comma-separated (default: each)")
    parser.add_argument("--feature-set", default="full", help="the set the nets are dropped from")
    parser.add_argument("--by-group", action="store_true", help="also the accuracy per rank group")
    args = parser.parse_args()
    instances, rank_groups = instance_tables(args.aggregates)
    salts = split_salts(args.splits)
    splits = [
        SplitData(
            salt,
            drop_empty_columns(
                instance_data(instances, rank_groups, game=args.game, split=SplitConfig(salt=salt))
            ),
        )
        for salt in salts
    ]
    columns = splits[0].instances.columns
    families = FEATURE_SETS[args.feature_set]
    used = [c for c in columns if any(FAMILIES[f].match(c) for f in families)]
    nets = sorted({net_of(c) for c in used} - {None})
    if args.only:
        nets = [net for net in nets if net in args.only.split(",")]
    ns = sample_sizes(args.n)
    every = np.arange(len(columns))
    base = {n: figures(splits, n, every, args.feature_set, fitting(args)) for n in ns}
    print(f"{args.feature_set}, mean over {len(salts)} split(s) (the paired difference to all"
          " nets: mean ± sd over the splits)")  # fmt: skip
    print("all nets: " + "; ".join(
        f"n={n} {paired_cell(f.accuracy, None, 1)} (±1 {paired_cell(f.pm1, None, 1)})"
        for n, f in base.items()), flush=True)  # fmt: skip
    names = splits[0].instances.group_names if args.by_group else []
    for net in nets:
        keep = np.flatnonzero([net_of(c) != net for c in columns])
        cells = []
        for n in ns:
            f = figures(splits, n, keep, args.feature_set, fitting(args))
            cells.append(f"n={n} {paired_cell(f.accuracy, base[n].accuracy, 1)}")
            if names and f.by_group:
                with_net, without = (np.nanmean(b.by_group, axis=0) for b in (base[n], f))
                cells.append("by group " + ", ".join(
                    f"{g} {a:.0f} → {b:.0f}" for g, a, b in zip(names, with_net, without, strict=True)))  # fmt: skip
        print(f"without {net}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
