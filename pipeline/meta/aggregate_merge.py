"""Merge the aggregates of extraction runs over disjoint games into one aggregates folder.

A dump too large for one call, one lease or one machine is extracted in parts (disjoint games:
``kibitz extract --part K/N``), and a machine that did a part may be gone before the rest is
done: what outlasts it is the part's aggregates, a few MB. Per-instance aggregates have no
cross-game terms (``sql/marts/player_instance_features.sql``), so the parts' instance tables
concatenate into the one a single run would have written; the tables that read only those
instances (``rank_groups``, ``player_features``, ``prior_profile``) are rebuilt from the
concatenation by the same SQL, and ``loss_by_move_number`` (a mean, a sample standard deviation
and a count per move number) is pooled exactly from the parts' own. A part that lacks a table
(a player-specific set ships only its instances) leaves that table out of the merge; every
source must come from the same extraction config and α, γ, and no game may be in two parts::

    kibitz aggregate --merge kibitz-out/agg-part-0 kibitz-out/agg-part-1 --out kibitz-out/aggregates-go
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.catalog import (
    SOURCES,
    SqlModel,
    create_model,
    load_models,
    refresh_home_of,
    run_order,
)
from pipeline.core.errors import KibitzError
from pipeline.meta.aggregate import (
    INSTANCES,
    SUMMARY_FILE,
    AggregateConfig,
    load_mart,
    load_summary,
    set_parameters,
)

LOSS_REPORT = "loss_by_move_number"
# The pooled mean and sample variance of parts with counts n_i, means m_i, deviations s_i:
# M = Σ n_i m_i / N and S² = (Σ (n_i − 1) s_i² + Σ n_i (m_i − M)²) / (N − 1).
# The columns and their order are those of sql/reports/loss_by_move_number.sql.
POOLED_LOSS_SQL = """
with parts as (select * from loss_parts),
means as (
    select game, rank_group, move_number, sum(moves) as total,
        sum(moves * loss_mean) / sum(moves) as pooled_mean
    from parts group by game, rank_group, move_number
),
final as (
    select p.game, p.rank_group, p.move_number, any_value(m.pooled_mean) as loss_mean,
        case when any_value(m.total) > 1 then sqrt(
            sum(coalesce((p.moves - 1) * p.loss_std * p.loss_std, 0.0)
                + p.moves * (p.loss_mean - m.pooled_mean) * (p.loss_mean - m.pooled_mean))
            / (any_value(m.total) - 1)) end as loss_std,
        any_value(m.total) as moves
    from parts p join means m using (game, rank_group, move_number)
    group by p.game, p.rank_group, p.move_number
)
select * from final order by game, rank_group, move_number
"""


class MergeError(KibitzError, ValueError):
    """Aggregates that cannot be merged: other configs, or a game in two of them."""


def tables_from_instances(models: Mapping[str, SqlModel]) -> list[str]:
    """The tables rebuilt from the instances: every model whose reads all lead to
    ``player_instance_features`` (none to a source), in run order."""

    def reads_only_instances(name: str) -> bool:
        refs = models[name].refs
        return bool(refs) and all(
            ref == INSTANCES or (ref in models and ref not in SOURCES and reads_only_instances(ref))
            for ref in refs
        )

    return [
        name
        for name in run_order(models)
        if name != INSTANCES
        and models[name].materialization == "table"
        and reads_only_instances(name)
    ]


def tables_of_instances(
    instances: pa.Table, parameters: dict[str, Any]
) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """A DuckDB connection holding ``instances`` and the tables that read only them, rebuilt by
    the same SQL with the aggregation's α, γ; and those tables' names, the instances first."""
    models = load_models()
    con = duckdb.connect()
    set_parameters(con, AggregateConfig(**parameters))
    con.register("given_instances", instances)
    con.execute(f"create table {INSTANCES} as select * from given_instances")
    tables = [INSTANCES]
    for name in tables_from_instances(models):
        create_model(con, models[name])
        tables.append(name)
    return con, tables


def save_tables(con: duckdb.DuckDBPyConnection, tables: list[str], out_dir: Path) -> dict[str, int]:
    """Write each of ``tables`` as ``out_dir/<name>.parquet``; their row counts."""
    rows = {}
    for name in tables:
        table = con.sql(f"select * from {name}").to_arrow_table()
        pq.write_table(table, out_dir / f"{name}.parquet")
        rows[name] = table.num_rows
    return rows


def save_summary(summary: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Register ``out_dir`` in its output home's catalog and write ``summary`` (with the
    catalog's path) as its ``_aggregate.json``; return it."""
    catalog = refresh_home_of(out_dir)
    summary["catalog"] = str(catalog) if catalog else None
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return summary


def _check(sources: Sequence[Path], summaries: list[dict[str, Any]]) -> None:
    for key in ("features_config_hash", "parameters"):
        values = {json.dumps(s.get(key), sort_keys=True) for s in summaries}
        if len(values) > 1:
            raise MergeError(
                f"the aggregates differ in {key} ({', '.join(sorted(values))}): {list(map(str, sources))}"
            )


def merge_aggregates(sources: Sequence[Path], out_dir: Path) -> dict[str, Any]:
    """Merge the aggregates folders ``sources`` into ``out_dir``; return (and save) a summary."""
    started = time.perf_counter()
    sources = [Path(s) for s in sources]
    if len(sources) < 2:
        raise MergeError("give at least two aggregates folders to merge")
    summaries = [load_summary(s) for s in sources]
    _check(sources, summaries)
    parts = [load_mart(s, INSTANCES) for s in sources]
    games = [pc.unique(part["game_id"]) for part in parts]
    counts = pc.value_counts(pa.chunked_array(games))
    shared = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(shared):
        game_id = shared[0].as_py()
        holders = [str(s) for s, g in zip(sources, games, strict=True) if game_id in g.to_pylist()]
        raise MergeError(
            f"{len(shared)} game(s) are in more than one folder, e.g. {game_id!r} in {holders}:"
            " merge aggregates of disjoint games only"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    con, tables = tables_of_instances(
        pa.concat_tables(parts, promote_options="permissive"), summaries[0]["parameters"]
    )
    if all((s / f"{LOSS_REPORT}.parquet").is_file() for s in sources):
        losses = pa.concat_tables(
            [load_mart(s, LOSS_REPORT) for s in sources], promote_options="permissive"
        )
        con.register("loss_parts", losses)
        con.execute(f"create table {LOSS_REPORT} as {POOLED_LOSS_SQL}")
        tables.append(LOSS_REPORT)
    rows = save_tables(con, tables, out_dir)
    con.close()
    summary = {
        **{k: summaries[0][k] for k in ("features_config_hash", "features_config", "parameters")},
        "features_dir": None,
        "merged_from": [
            {
                "aggregates_dir": str(s.resolve()),
                "features_dir": m.get("features_dir"),
                "moves": m["moves"],
            }
            for s, m in zip(sources, summaries, strict=True)
        ],
        "moves": sum(m["moves"] for m in summaries),
        "rows": rows,
        "merge_s": round(time.perf_counter() - started, 3),
    }
    return save_summary(summary, out_dir)
