"""Add an imitation net's columns to aggregates from an extraction of the same games with it.

A level added to a chess or Go model (Maia-2200 beside Maia-1's nine) changes only the columns
that name it: a net's ``prior_<net>_geomean_<k>`` and ``top1_<net>_rate_<k>`` read the positions,
the played moves and that net, nothing else (``sql/marts/player_instance_features.sql``). So a
run of the new net alone over the same games (``bench/configs/extract-chess-maia2200-only.yaml``:
no Stockfish, no other level, a fraction of the positions' cost) gives exactly the columns a run
of the whole config would have; they are joined to the base's instances by (game_id, colour)
and the tables that read only the instances (``rank_groups``, ``prior_profile``, …) rebuilt by
the same SQL. The extraction record becomes the base's with the new nets appended to its
imitation nets: what ``kibitz estimate`` and ``kibitz serve`` extract for the refitted model::

    kibitz aggregate --add-nets kibitz-out/aggregates kibitz-out/agg-maia2200 --out kibitz-out/aggregates-10
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.errors import KibitzError
from pipeline.core.features_schema import column_slug
from pipeline.meta.aggregate import INSTANCES, load_mart, load_summary
from pipeline.meta.aggregate_merge import (
    LOSS_REPORT,
    save_summary,
    save_tables,
    tables_of_instances,
)

KEY = ["game_id", "colour"]


class AddNetsError(KibitzError, ValueError):
    """Aggregates whose nets cannot be joined: other games, other settings, no new net."""


def join_columns(instances: pa.Table, other: pa.Table, columns: list[str]) -> pa.Table:
    """``instances`` with ``columns`` taken from ``other``'s instance of the same (game_id,
    colour), replacing any of that name and appended otherwise; an instance ``other`` lacks gets
    nulls there, never the base's value. The row order stays the base's."""
    missing = [c for c in columns if c not in other.column_names]
    if missing:
        raise AddNetsError(f"the other aggregates lack {missing[:4]}: same SQL, please")
    keys = other.select(KEY).group_by(KEY).aggregate([([], "count_all")])
    twice = keys.filter(pc.greater(keys["count_all"], 1))
    if twice.num_rows:
        raise AddNetsError(
            f"{twice.num_rows:,} (game_id, colour) pair(s) twice in the other aggregates, e.g."
            f" {twice.slice(0, 1).select(KEY).to_pylist()[0]}: one row per instance, please"
        )
    kept = [c for c in instances.column_names if c not in columns]
    rows = pa.array(range(instances.num_rows))
    with duckdb.connect() as con:
        con.register("base", instances.select(kept).append_column("_row", rows))
        con.register("other", other.select([*KEY, *columns]))
        table = con.sql(
            "select base.*, other.* exclude (game_id, colour) from base"
            " left join other using (game_id, colour) order by _row"
        ).to_arrow_table()
    # the base's columns in their order (a replaced one in its place), then the new ones
    base = instances.column_names
    return table.select([*base, *(c for c in columns if c not in base)])


def add_nets(base: Path, other: Path, out_dir: Path) -> dict[str, Any]:
    """Write ``out_dir``: ``base``'s aggregates with the imitation nets that only ``other``'s
    extraction ran (its columns joined by game and colour). Return (and save) the summary."""
    started = time.perf_counter()
    base, other, out_dir = Path(base), Path(other), Path(out_dir)
    record, extra = (load_summary(p) for p in (base, other))
    if record.get("parameters") != extra.get("parameters"):
        raise AddNetsError(
            f"{str(base)!r} and {str(other)!r} were aggregated with other α, γ:"
            f" {record.get('parameters')} against {extra.get('parameters')}"
        )
    base_config = record["features_config"]["config"]
    other_config = extra["features_config"]["config"]
    # what decides the positions a net sees and the numbers it gives (Go: the rules and komi)
    for key in ("game", "backend", "precision", "go_rules", "go_komi"):
        if base_config.get(key) != other_config.get(key):
            raise AddNetsError(
                f"{key} differs: {base_config.get(key)!r} in {str(base)!r},"
                f" {other_config.get(key)!r} in {str(other)!r}"
            )
    have = {n["name"] for n in base_config["imitation_nets"]}
    new = [n for n in other_config["imitation_nets"] if n["name"] not in have]
    if not new:
        raise AddNetsError(f"{str(other)!r} ran no imitation net that {str(base)!r} lacks")
    instances, extra_instances = load_mart(base, INSTANCES), load_mart(other, INSTANCES)
    unmatched = instances.select(KEY).join(extra_instances.select(KEY), KEY, join_type="left anti")
    if unmatched.num_rows:
        raise AddNetsError(
            f"{unmatched.num_rows:,} instance(s) of {str(base)!r} have no (game_id, colour) in"
            f" {str(other)!r}, e.g. {unmatched.slice(0, 1).to_pylist()[0]}: extract the new"
            " nets on every game of the base"
        )
    # The new nets' columns of the families the base's SQL made for its own nets (a base
    # aggregated before top-1 rates existed gets none for the new net either).
    slugs = [column_slug(name) for name in sorted(have)]
    columns = []
    for net in new:
        slug = f"_{column_slug(net['name'])}_"
        columns += [
            c for c in extra_instances.column_names
            if slug in c and any(c.replace(slug, f"_{s}_") in instances.column_names for s in slugs)
        ]  # fmt: skip
    joined = join_columns(instances, extra_instances, columns)
    from pipeline.extract.config import config_from_dict  # the extraction record's hash

    config = dict(base_config, imitation_nets=[*base_config["imitation_nets"], *new])
    config_hash = config_from_dict(config).config_hash()
    nets = dict(record["features_config"].get("nets") or {})
    for net in new:
        nets[net["model"]] = extra["features_config"]["nets"][net["model"]]

    out_dir.mkdir(parents=True, exist_ok=True)
    con, tables = tables_of_instances(joined, record["parameters"])
    rows = save_tables(con, tables, out_dir)
    con.close()
    if (base / f"{LOSS_REPORT}.parquet").is_file():  # the loss: the base's evaluator, unchanged
        shutil.copy(base / f"{LOSS_REPORT}.parquet", out_dir / f"{LOSS_REPORT}.parquet")
        rows[LOSS_REPORT] = pq.read_metadata(out_dir / f"{LOSS_REPORT}.parquet").num_rows
    summary = {
        **record,
        "features_config_hash": config_hash,
        "features_config": {
            **record["features_config"],
            "config_hash": config_hash,
            "config": config,
            "nets": nets,
        },
        "features_dir": None,
        "nets_added_from": {
            "aggregates_dir": str(other.resolve()),
            "features_dir": extra.get("features_dir"),
            "nets": [n["name"] for n in new],
            "columns": columns,
        },
        "rows": rows,
        "add_nets_s": round(time.perf_counter() - started, 3),
    }
    return save_summary(summary, out_dir)
