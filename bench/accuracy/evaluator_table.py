"""What each chess evaluator buys: the meta-model with its loss columns from another evaluator.

The loss is the feature the chess model leans on most, and the evaluator behind it is the
dearest part of an extraction (Stockfish at 2,000 nodes holds a GPU node to a few hundred
positions a second). Every other column stays: the loss-only extraction of each evaluator
(``bench/configs/extract-chess-loss-*.yaml``, the same games) replaces the columns that read
the loss (the ``loss`` and ``dcloss`` families and the clock columns of the loss in time trouble
and of think time against the loss) in the base aggregates' instances, so a row differs from
the base in the evaluator only. Each of ``--splits`` re-drawn game splits fits every row on the
same samples::

    kibitz extract chess --games games-testing --out F-sf100 --config bench/configs/extract-chess-loss-sf100.yaml
    kibitz aggregate --features F-sf100 --out A-sf100
    python bench/accuracy/evaluator_table.py chess A-testing --evaluator "Stockfish 100 nodes=A-sf100" \\
        --evaluator "Maia-1900 value head=A-maia1900-value" --splits 10

An evaluator extracted on part of the games (``--part K/N``) is compared on the games every
evaluator holds: the table says how many. ``--write NAME=DIR`` also writes a row's instances as
an aggregates folder whose extraction record is the base's with that evaluator's value
settings: what one extraction with that config would have written, so ``kibitz train meta
chess --aggregates DIR`` fits meta-models that ``kibitz estimate`` and ``kibitz serve`` apply
with that evaluator.

Prints, per evaluator, the rank-group accuracy at each n (mean over the splits and the paired
difference to the base's Stockfish at 2,000 nodes) and the strength MAE from one game. The cost
per position comes from ``bench/speed/bench_extract.py --config`` (the same configs).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
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
from pipeline.meta.aggregate import INSTANCES, SUMMARY_FILE, load_summary
from pipeline.meta.aggregate_merge import LOSS_REPORT
from pipeline.meta.aggregate_nets import join_columns
from pipeline.meta.model import MetaConfig, drop_empty_columns, instance_data

# The instance columns an evaluator decides: the loss and its difficulty-corrected means, and
# the clock columns that read the loss (sql/intermediate/int_instance_time_usage.sql).
READS_LOSS = re.compile(r"^(loss_|moves_with_loss_|clock_trouble_loss_|clock_think_e?loss_corr_)")
BASE = "Stockfish 2,000 nodes (the preset)"


def with_loss_of(instances: pa.Table, other: pa.Table) -> pa.Table:
    """``instances`` with every column that reads the loss taken from ``other``'s instances of
    the same (game, colour); an instance ``other`` lacks keeps nulls there, never the base's."""
    swapped = [c for c in instances.column_names if READS_LOSS.match(c)]
    return join_columns(instances, other, swapped)


def of_common_games(instances: pa.Table, others) -> pa.Table:
    """The base's instances of the games that every evaluator's aggregates hold: an evaluator
    extracted on part of the games (``--part K/N``, a few parts of the dearest) is compared
    with the others on those games only, every row on the same instances."""
    common = instances
    for other in others:
        common = common.filter(pc.is_in(common["game_id"], other["game_id"].unique()))
    print(
        f"{pc.count_distinct(common['game_id']).as_py():,} games in every evaluator's"
        f" aggregates ({pc.count_distinct(instances['game_id']).as_py():,} in the base)"
    )
    return common


def write_aggregates(instances: pa.Table, base: Path, evaluator: Path, out: Path) -> str:
    """``instances`` (the base's with ``evaluator``'s loss columns) as an aggregates folder:
    the base's rank groups and prior profile, the evaluator's loss by move number, and an
    extraction record whose value settings are the evaluator's. Each column keeps the base's
    type (a slimmed base's float32 loss columns stay float32). Returns its config hash."""
    from pipeline.extract.config import config_from_dict

    instances = instances.cast(pq.read_schema(base / f"{INSTANCES}.parquet"))
    summary = load_summary(base)
    record = summary["features_config"]
    value = load_summary(evaluator)["features_config"]["config"]["value"]
    config = dict(record["config"], value=value)
    config_hash = config_from_dict(config).config_hash()
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(instances, out / f"{INSTANCES}.parquet")
    for name, source in (("rank_groups", base), ("prior_profile", base),
                         (LOSS_REPORT, evaluator)):  # fmt: skip
        if (source / f"{name}.parquet").is_file():
            shutil.copy(source / f"{name}.parquet", out / f"{name}.parquet")
    summary = {
        **summary,
        "features_config_hash": config_hash,
        "features_config": {**record, "config_hash": config_hash, "config": config},
        "features_dir": None,
        "loss_columns_from": str(evaluator.resolve()),
        "rows": {INSTANCES: instances.num_rows},
    }
    summary.pop("merged_from", None)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return config_hash


def main() -> None:
    parser = meta_parser(__doc__, default_n="5,20")
    parser.add_argument(
        "--evaluator", action="append", default=[], metavar="NAME=AGGREGATES",
        help="an evaluator's loss-only aggregates of the same games (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--write", action="append", default=[], metavar="NAME=DIR",
        help="write evaluator NAME's row as an aggregates folder DIR (repeatable)",
    )  # fmt: skip
    parser.add_argument("--feature-set", default="full_dcloss_clock")
    parser.add_argument("--splits", type=int, default=10, help="re-drawn game splits")
    args = parser.parse_args()
    ns = sample_sizes(args.n)
    instances, groups = instance_tables(args.aggregates)
    others, folders = {}, {}
    for spec in args.evaluator:
        name, _, folder = spec.partition("=")
        folders[name] = Path(folder)
        others[name] = instance_tables(folders[name])[0]
    instances = of_common_games(instances, others.values())
    rows = {BASE: instances} | {name: with_loss_of(instances, o) for name, o in others.items()}
    for spec in args.write:
        name, _, folder = spec.partition("=")
        if name not in others:
            parser.error(f"--write {name!r}: no --evaluator of that name")
        config_hash = write_aggregates(rows[name], args.aggregates, folders[name], Path(folder))
        print(f"{name}: aggregates in {folder} (extraction config {config_hash})")
    # evaluator -> n -> per split accuracy; evaluator -> per split MAE from one game
    accuracy: dict[str, dict[int, list[float]]] = {name: {} for name in rows}
    mae: dict[str, list[float]] = {name: [] for name in rows}
    for salt in split_salts(args.splits):
        config = MetaConfig(split=SplitConfig(salt=salt), **fitting(args))
        for name, table in rows.items():
            data = drop_empty_columns(
                instance_data(table, groups, game=args.game, split=config.split)
            )
            at_n, one_game = split_figures(data, ns, args.feature_set, config)
            for n in ns:
                accuracy[name].setdefault(n, []).append(at_n[n])
            mae[name].append(one_game)
        print(f"split {salt} done", flush=True)
    print(f"\n{args.feature_set}: rank-group accuracy %, mean over {args.splits} splits (paired"
          f" difference to {BASE}: mean ± sd); strength MAE from one game")  # fmt: skip
    print("| evaluator | " + " | ".join(f"n = {n}" for n in ns) + " | MAE, n = 1 |")
    print("|---" * (len(ns) + 2) + "|")
    for name in rows:
        base = None if name == BASE else BASE
        cells = [paired_cell(accuracy[name][n], base and accuracy[base][n], 1) for n in ns]
        print(f"| {name} | " + " | ".join(cells) + f" | {np.nanmean(mae[name]):.0f} |")


if __name__ == "__main__":
    main()
