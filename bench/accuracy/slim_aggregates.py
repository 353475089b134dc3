"""An aggregates folder cut to what the meta-models read, small enough to commit.

A comparison worth rerunning (``bench/accuracy/meta_compare.py``) needs the per-player-instance features
of an extraction that took hours; the folder ``kibitz aggregate`` writes is a few MB more than
the GPU kit's 64 MiB call can spare (docs/guide/gpu.md). This keeps the instance table's key, rank and
count columns and the feature columns of the meta-models' families (s-score, priors, loss,
difficulty-corrected loss) as float32 — the per-move features were float32 to begin with — with
zstd, plus the rank groups and the run's ``_aggregate.json``::

    python bench/accuracy/slim_aggregates.py AGGREGATES bench/aggregates/go-g170-levels

About 0.3 kB a player instance against 0.6 kB: 1.76 MB for the 5,780 Go instances of
``bench/aggregates/go-g170-levels``, whose shipped twin is 3.39 MB.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.meta.aggregate import INSTANCES, SUMMARY_FILE, load_mart
from pipeline.meta.model import FAMILIES

READ_FAMILIES = ("sscore", "prior", "loss", "dcloss")


def slim_instances(instances: pa.Table) -> pa.Table:
    """The non-float columns and the float features of :data:`READ_FAMILIES`, as float32."""
    columns = {}
    for name in instances.column_names:
        column = instances[name]
        if any(FAMILIES[f].match(name) for f in READ_FAMILIES):
            columns[name] = pc.cast(column, pa.float32())
        elif column.type != pa.float64():
            columns[name] = column
    return pa.table(columns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("aggregates", type=Path, help="a kibitz aggregate output folder")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    instances = slim_instances(load_mart(args.aggregates, INSTANCES))
    pq.write_table(
        instances, args.out / f"{INSTANCES}.parquet", compression="zstd", compression_level=19
    )
    pq.write_table(load_mart(args.aggregates, "rank_groups"), args.out / "rank_groups.parquet")
    shutil.copy(args.aggregates / SUMMARY_FILE, args.out / SUMMARY_FILE)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{instances.num_rows:,} instances, {instances.num_columns} columns: {size:,} bytes")


if __name__ == "__main__":
    main()
