"""How meta-model accuracy grows with the games it is fitted on: a learning curve.

Kibitz's meta-models are fitted on what the CPU could extract, a share of the testing split's
training part; the paper fitted on all of it. This script keeps the evaluation games fixed and
fits on growing shares of the training games (nested: each share holds the smaller ones, cut
by a hash of the game id), so the curve says how much of the gap to the published accuracy
more extraction would close::

    python bench/accuracy/meta_learning_curve.py chess models/kibitz-meta-chess/aggregates
    python bench/accuracy/meta_learning_curve.py go models/kibitz-meta-go/aggregates --n 5,20

Prints one line per share: training games, then rank-group accuracy (and ±1) at each n of
each feature set and of the Chen et al. baseline.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
from meta_bench import fitting, instance_tables, meta_parser, sample_sizes

from pipeline.core.data_split import EVALUATION, TRAIN
from pipeline.meta.model import MetaConfig, MetaDataError, instance_data, train_and_evaluate


def main() -> None:
    parser = meta_parser(__doc__, default_n="20")
    parser.add_argument("--shares", default="0.125,0.25,0.5,1", help="shares of training games")
    parser.add_argument("--feature-sets", default="full")
    args = parser.parse_args()

    data = instance_data(*instance_tables(args.aggregates), game=args.game)
    # One uniform number per game, independent of the split's own hash: nested shares.
    u = np.array([hashlib.md5(g.encode()).digest()[0] / 256 for g in data.game_id])
    ns = sample_sizes(args.n)
    config = MetaConfig(
        ns=tuple(ns), feature_sets=tuple(args.feature_sets.split(",")), **fitting(args)
    )
    for share in (float(x) for x in args.shares.split(",")):
        keep = (data.split != TRAIN) | (u < share)
        subset = data.subset(np.flatnonzero(keep))
        games = len(set(subset.game_id[subset.split == TRAIN]))
        cells = []
        for n in ns:
            try:
                result = train_and_evaluate(subset, n, replace(config, ns=(n,)))
            except MetaDataError as exc:
                cells.append(f"n={n}: too few games ({exc})")
                continue
            cells += [
                f"{e.method} n={n} {100 * e.accuracy:.1f} ({100 * e.accuracy_pm1:.1f})"
                for e in result.evaluations
                if e.sampling == "rank_group"
            ]
        evaluation = len(set(data.game_id[data.split == EVALUATION]))
        print(f"share {share:g}: {games} training games, {evaluation} evaluation games: "
              + "; ".join(cells), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
