"""The meta-models' fitting parameters (LightGBM's, the training draws), compared over re-drawn splits.

The meta-models are LightGBM regressors (``pipeline/meta/model.py``: ``FITTING``, slower and
bagged, on 6,000 training samples a group). The paper does not say how it tuned them, and the
sample of one chess game is noisy. Each ``--params NAME=JSON`` is laid over the defaults
(``--lightgbm-defaults``: over LightGBM's own, 100 trees, 31 leaves, learning rate 0.1, on
2,000 samples, as the fitting was chosen): a key that is a ``MetaConfig`` field
(``train_draws_per_group``) sets it, the others are LightGBM's; every variant is fitted on each
re-drawn split (the models' own split first) and judged on its evaluation games::

    python bench/accuracy/meta_params.py chess models/kibitz-meta-chess/aggregates --splits 5 \\
        --lightgbm-defaults \\
        --params 'slow={"learning_rate": 0.03, "num_iterations": 400, "min_data_in_leaf": 50}' \\
        --params 'draws={"train_draws_per_group": 6000}'

Prints, per variant, the rank-group accuracy at each n and the strength MAE from one game (mean
over the splits, and the paired difference to the defaults: mean ± sd over the splits).
"""

from __future__ import annotations

import json
from dataclasses import fields, replace

import numpy as np
from meta_bench import (
    fitting,
    instance_tables,
    meta_parser,
    paired_cell,
    sample_sizes,
    split_figures,
    split_salts,
)

from pipeline.core.data_split import SplitConfig
from pipeline.meta.model import MetaConfig, drop_empty_columns, instance_data

DEFAULTS = "defaults"
CONFIG_FIELDS = {f.name for f in fields(MetaConfig)} - {"lgbm_params", "ns", "split"}


def main() -> None:
    parser = meta_parser(__doc__, default_n="5,20")
    parser.add_argument(
        "--params", action="append", default=[], metavar="NAME=JSON",
        help="MetaConfig fields and LightGBM parameters laid over the defaults (repeatable)",
    )  # fmt: skip
    parser.add_argument("--feature-set", default="full_dcloss_clock")
    parser.add_argument("--splits", type=int, default=5, help="re-drawn game splits")
    args = parser.parse_args()
    ns = sample_sizes(args.n)
    variants = {DEFAULTS: {}}
    for spec in args.params:
        name, _, text = spec.partition("=")
        variants[name] = json.loads(text)
    instances, groups = instance_tables(args.aggregates)
    accuracy = {name: {n: [] for n in ns} for name in variants}
    mae: dict[str, list[float]] = {name: [] for name in variants}
    for salt in split_salts(args.splits):
        split = SplitConfig(salt=salt)
        data = drop_empty_columns(instance_data(instances, groups, game=args.game, split=split))
        for name, params in variants.items():
            base = MetaConfig(split=split, **fitting(args))
            settings = {k: v for k, v in params.items() if k in CONFIG_FIELDS}
            lgbm = base.lgbm_params | {k: v for k, v in params.items() if k not in CONFIG_FIELDS}
            config = replace(base, lgbm_params=lgbm, **settings)
            at_n, one_game = split_figures(data, ns, args.feature_set, config)
            for n in ns:
                accuracy[name][n].append(at_n[n])
            mae[name].append(one_game)
        print(f"split {salt} done", flush=True)
    print(f"\n{args.feature_set}: rank-group accuracy %, strength MAE from one game; mean over"
          f" {args.splits} splits (paired difference to the defaults: mean ± sd)")  # fmt: skip
    print("| parameters | " + " | ".join(f"n = {n}" for n in ns) + " | MAE, n = 1 |")
    print("|---" * (len(ns) + 2) + "|")
    for name, params in variants.items():
        base = None if name == DEFAULTS else DEFAULTS
        cells = [paired_cell(accuracy[name][n], base and accuracy[base][n], 1) for n in ns]
        digits = 0 if np.nanmean(mae[DEFAULTS]) >= 10 else 2  # rating points, or rank steps
        cells.append(paired_cell(mae[name], base and mae[base], digits))
        label = name if not params else f"{name} `{json.dumps(params)}`"
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
