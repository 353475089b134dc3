"""How much a meta-model's accuracy depends on which games it was fitted on.

``kibitz train meta --fit-split train|validation`` compares two training sets that differ in
two ways at once: the train split's games were seen by Kibitz's strength nets, and they are
other games. This script separates the second from the first: it cuts each split's instances
into ``--parts`` disjoint parts by game (md5 of the game id), fits the meta-models on each part
alone and evaluates every fit on the same evaluation-split instances, so the spread between
parts of one split is what the choice of games alone moves the accuracy::

    python bench/accuracy/fit_split_spread.py chess kibitz-out/eval-meta-chess/aggregates --parts 4
    python bench/accuracy/fit_split_spread.py chess AGGREGATES --parts 2 --sscore-nets kibitz-sscore-chess-levels

Prints one line per (split, part): rank-group accuracy at ``--n`` of each feature set and of
the Chen et al. baseline, then each split's mean.
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
from meta_bench import add_fitting_option, fitting

from pipeline.core.data_split import EVALUATION, SPLITS, TRAIN, VALIDATION
from pipeline.meta.aggregate import load_mart
from pipeline.meta.model import MetaConfig, instance_data, keep_sscore_nets, train_and_evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("aggregates", type=Path, help="a kibitz aggregate output folder")
    parser.add_argument("--parts", type=int, default=4, help="disjoint parts per split")
    parser.add_argument("--n", type=int, default=20, help="instances per sample")
    parser.add_argument("--feature-sets", default="full,no_sscore")
    parser.add_argument(
        "--sscore-nets", default="", help="strength nets whose s-scores to keep (default: all)"
    )
    add_fitting_option(parser)
    args = parser.parse_args()

    data = instance_data(
        load_mart(args.aggregates, "player_instance_features"),
        load_mart(args.aggregates, "rank_groups"),
        game=args.game,
    )
    data = keep_sscore_nets(data, [net for net in args.sscore_nets.split(",") if net])
    part = np.array([hashlib.md5(g.encode()).digest()[0] % args.parts for g in data.game_id])
    config = MetaConfig(
        ns=(args.n,), feature_sets=tuple(args.feature_sets.split(",")), **fitting(args)
    )
    means: dict[str, list[dict[str, float]]] = {}
    for code in (TRAIN, VALIDATION):
        name = SPLITS[code]
        for p in range(args.parts):
            keep = (data.split == EVALUATION) | ((data.split == code) & (part == p))
            result = train_and_evaluate(
                data.subset(np.flatnonzero(keep)), args.n, replace(config, fit_split=name)
            )
            accuracy = {
                e.method: 100 * e.accuracy for e in result.evaluations if e.sampling == "rank_group"
            }
            means.setdefault(name, []).append(accuracy)
            games = len(set(data.game_id[(data.split == code) & (part == p)]))
            cells = ", ".join(f"{m} {a:.1f}" for m, a in accuracy.items())
            print(f"fit on {name} part {p} ({games} games): {cells}", flush=True)
    for name, rows in means.items():
        cells = ", ".join(f"{m} {np.mean([r[m] for r in rows]):.1f}" for m in rows[0])
        print(f"mean over the {name} parts: {cells}")


if __name__ == "__main__":
    main()
