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

Prints one line per variant: the rank-group accuracy (and ±1) of ``full`` at each n, and the
change against all nets. With ``--splits K`` each figure is the mean over K re-drawn game
splits (the same fractions, another salt each): one evaluation split's figure moves by a few
points with the split alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from meta_bench import instance_tables, meta_parser, sample_sizes, split_salts

from pipeline.core.data_split import SplitConfig
from pipeline.meta.model import (
    FAMILIES,
    FEATURE_SETS,
    InstanceData,
    MetaConfig,
    MetaDataError,
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


def accuracy(splits: list[SplitData], n: int, keep: np.ndarray) -> tuple[float, float, int]:
    """Rank-group accuracy and ±1 accuracy of the full set at n on the columns at ``keep``,
    the mean over the ``splits`` (the same instances, split with different salts) whose groups
    hold n instances, and how many those were."""
    figures = []
    for data in splits:
        config = MetaConfig(ns=(n,), feature_sets=("full",), split=SplitConfig(salt=data.salt))
        try:
            result = train_and_evaluate(data.instances.with_columns(keep), n, config)
        except MetaDataError:
            continue  # a split whose evaluation part has a group of fewer than n instances
        full = next(
            e for e in result.evaluations if e.method == "full" and e.sampling == "rank_group"
        )
        figures.append((100 * full.accuracy, 100 * full.accuracy_pm1))
    if not figures:
        return math.nan, math.nan, 0
    a, b = np.mean(figures, axis=0).tolist()
    return a, b, len(figures)


def main() -> None:
    parser = meta_parser(__doc__, default_n="20")
    parser.add_argument("--splits", type=int, default=1, help="1: the models' own split")
    parser.add_argument("--only", help="the nets to drop, comma-separated (default: each)")
    args = parser.parse_args()
    instances, rank_groups = instance_tables(args.aggregates)
    salts = split_salts(args.splits)
    splits = [
        SplitData(
            salt,
            instance_data(instances, rank_groups, game=args.game, split=SplitConfig(salt=salt)),
        )
        for salt in salts
    ]
    columns = splits[0].instances.columns
    full = [c for c in columns if any(FAMILIES[f].match(c) for f in FEATURE_SETS["full"])]
    nets = sorted({net_of(c) for c in full} - {None})
    if args.only:
        nets = [net for net in nets if net in args.only.split(",")]
    ns = sample_sizes(args.n)
    every = np.arange(len(columns))
    base = {n: accuracy(splits, n, every) for n in ns}
    print("all nets: " + "; ".join(f"n={n} {a:.1f} ({b:.1f}) over {k} split(s)"
                                   for n, (a, b, k) in base.items()), flush=True)  # fmt: skip
    for net in nets:
        keep = np.flatnonzero([net_of(c) != net for c in columns])
        cells = []
        for n in ns:
            a, b, k = accuracy(splits, n, keep)
            cells.append(f"n={n} {a:.1f} ({b:.1f}), {a - base[n][0]:+.1f} over {k} split(s)")
        print(f"without {net}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
