"""The clock family of an aggregates folder's instances, from their games table alone.

Aggregates written before the time-usage columns existed (the shipped ``kibitz-meta-chess``'s)
can gain the part of them that needs only the clocks and the time control, without extracting
again: this reads the games' ``%clk`` lists, runs ``sql/intermediate/int_instance_time_usage.sql``
on them (the same SQL an aggregation runs, with no loss column, so the loss-dependent clock
columns stay empty and the meta-models leave them out), and writes a copy of the aggregates with
the clock columns and the game's time control joined to each instance::

    kibitz ingest chess ../shared/data/chess/lichess-2024-02-blitz/testing --out games-testing
    python bench/accuracy/clock_of_aggregates.py models/kibitz-meta-chess/aggregates games-testing A-clock
    python bench/accuracy/meta_feature_sets.py chess A-clock --splits 10 --n 1,5,20

Prints the instances written and how many had no clock.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.catalog import load_models
from pipeline.jobs.extract import games_files
from pipeline.meta.aggregate import INSTANCES

TIME_USAGE = "int_instance_time_usage"
TIME_CONTROL = ("tc_base_s", "tc_increment_s")  # the game's, beside the instance (its mart's)


def clock_moves(games: pa.Table) -> pa.Table:
    """One row per move with a clock (the columns the time-usage SQL reads), no loss."""
    lengths = pc.fill_null(pc.list_value_length(games["clocks_s"]), 0).to_numpy()
    game = np.repeat(np.arange(games.num_rows), lengths)
    ply = np.concatenate([np.arange(k) for k in lengths]) if len(lengths) else np.empty(0, int)
    pick = pa.array(game)
    return pa.table(
        {
            "game_id": games["game_id"].take(pick),
            "colour": pa.array(np.where(ply % 2 == 0, "white", "black")),
            "ply": pa.array(ply.astype(np.int32)),
            "move_number": pa.array((ply // 2 + 1).astype(np.int32)),
            "clock_s": pc.list_flatten(games["clocks_s"]),
            "tc_base_s": games["tc_base_s"].take(pick),
            "tc_increment_s": games["tc_increment_s"].take(pick),
            "loss": pa.nulls(len(ply), pa.float32()),
            "expected_loss": pa.nulls(len(ply), pa.float32()),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("aggregates", type=Path, help="aggregates folder (kibitz aggregate)")
    parser.add_argument("games", type=Path, help="the games table its features came from")
    parser.add_argument("out", type=Path, help="aggregates folder to write")
    args = parser.parse_args()
    instances = pq.read_table(args.aggregates / f"{INSTANCES}.parquet")
    wanted = pc.unique(instances["game_id"])
    tables = []
    for relative in games_files(args.games, "chess"):
        table = pq.read_table(
            args.games / relative, columns=["game_id", "clocks_s", "tc_base_s", "tc_increment_s"]
        )
        tables.append(table.filter(pc.is_in(table["game_id"], value_set=wanted)))
    games = pa.concat_tables(tables)
    con = duckdb.connect()
    con.register("stg_moves", clock_moves(games))
    usage = con.sql(load_models()[TIME_USAGE].sql).to_arrow_table()
    # a second run's clock columns, and the time control, which comes from the games here
    again = [c for c in instances.column_names if c.startswith("clock_") or c in TIME_CONTROL]
    con.register("instances", instances.drop_columns(again))
    con.register("usage", usage)
    con.register("controls", games.select(["game_id", *TIME_CONTROL]))
    joined = con.sql(
        "select instances.*, controls.* exclude (game_id), usage.* exclude (game_id, colour)"
        " from instances left join controls using (game_id)"
        " left join usage using (game_id, colour) order by game, source, game_id, colour"
    ).to_arrow_table()
    shutil.copytree(args.aggregates, args.out, dirs_exist_ok=True)
    pq.write_table(joined, args.out / f"{INSTANCES}.parquet")
    timed = pc.sum(pc.is_valid(joined["clock_spent_share_all"])).as_py()
    print(f"{joined.num_rows:,} instances written to {args.out}; "
          f"{joined.num_rows - timed:,} without a clock")  # fmt: skip


if __name__ == "__main__":
    main()
