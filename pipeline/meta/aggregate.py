"""DuckDB aggregates over the per-move features table: player instances, players, rank groups.

The SQL lives in ``sql/`` as dbt-style models, one statement per file: ``sql/staging/stg_moves.sql``
renames and casts the features, ``sql/marts/*.sql`` and ``sql/reports/*.sql`` read it (and each
other) by name. :mod:`pipeline.core.catalog` finds those references and derives the run order
(``stg_moves`` → ``player_instance_features`` → ``player_features``, ``rank_groups`` … ); it
also fills the net-column patterns in from :mod:`pipeline.core.features_schema`. This module
only opens the features Parquet as the source view ``features``, sets the parameters α and γ as
DuckDB variables, creates ``stg_moves`` as a view and every mart and report as a table, and
saves those tables as Parquet (what ``kibitz train meta`` and ``kibitz estimate`` read). When the
output folder sits in an output home (``kibitz-out/aggregates-chess``), the home's catalog
``kibitz-out/kibitz.duckdb`` gets views over them (``chess_player_features`` …).

Run::

    kibitz aggregate --features kibitz-out/features-chess    # → kibitz-out/aggregates-chess
    kibitz aggregate --sql player_instance_features           # the rendered SQL of one model
    python -m pipeline.meta.aggregate FEATURES_DIR OUT_DIR
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pipeline.core.catalog import (
    SOURCES,
    SqlModel,
    create_model,
    load_models,
    parquet_glob,
    refresh_home_of,
    run_order,
)
from pipeline.core.features_schema import BASE_FIELDS

log = logging.getLogger(__name__)

SUMMARY_FILE = "_aggregate.json"
# The mart of one row per player instance: what the meta-models train on and what merges.
INSTANCES = "player_instance_features"
SCRATCH_DB = "_aggregate.duckdb.tmp"  # where the tables are built; deleted once saved as Parquet
FEATURES_CONFIG_FILE = "_config.yaml"  # written by `kibitz extract` next to the features
# The DuckDB type of each Arrow type among the features table's base columns.
_DUCKDB_TYPES = {
    pa.string(): "varchar",
    pa.int16(): "smallint",
    pa.int32(): "integer",
    pa.float32(): "float",
}
# Instance feature columns end in one of these (sql/marts/player_instance_features.sql).
FEATURE_SUFFIXES = ("_k25", "_k50", "_all")


class FeaturesNotFoundError(FileNotFoundError):
    """A features folder without any ``*.parquet`` file of the features table."""


class AggregatesNotFoundError(FileNotFoundError):
    """An aggregates folder that ``kibitz aggregate`` did not write."""


@dataclass(frozen=True)
class AggregateConfig:
    """The parameters of the difficulty-corrected losses (6.1)–(6.4).

    Keep the defaults in sync with the ``coalesce(getvariable(…))`` defaults in
    ``sql/marts/player_instance_features.sql``.
    """

    # α: added to the expected loss E in denominators; 0.1 is about the expected loss of an
    # ordinary middlegame position in chess logit units, so easy positions (E ≈ 0) weigh at most
    # ~10× an ordinary one instead of dividing by zero.
    alpha: float = 0.1
    gamma: float = 1.0  # γ: weight of the correction term (loss − E)/…; 1 = as much as the loss


def features_glob(features_dir: Path) -> str:
    """The ``read_parquet`` glob of the features table (side tables use ``.pq`` and stay out)."""
    return parquet_glob(features_dir)


def mart_names(models: dict[str, SqlModel] | None = None) -> list[str]:
    """The tables an aggregation writes, in run order: every mart and report that reads only
    the ``features`` source (through ``stg_moves``)."""
    models = load_models() if models is None else models
    names = []
    for name in run_order(models):
        if models[name].materialization != "table":
            continue
        sources = set().union(*(models[n].refs for n in run_order(models, [name]))) & set(SOURCES)
        if sources <= {"features"}:
            names.append(name)
    return names


def read_sql(name: str) -> str:
    """The rendered text of one model under ``sql/`` (template calls filled in)."""
    return load_models()[name].sql


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def open_features(
    features_dir: Path,
    *,
    config: AggregateConfig = AggregateConfig(),
    database: str = ":memory:",
) -> duckdb.DuckDBPyConnection:
    """A connection where every mart can run: the source view ``features`` over the folder,
    the staging view ``stg_moves`` over it, and α, γ set as variables."""
    features_dir = Path(features_dir)
    if not any(features_dir.glob("**/*.parquet")):
        raise FeaturesNotFoundError(
            f"no features Parquet under {str(features_dir)!r} (run `kibitz extract` first)"
        )
    con = duckdb.connect(database)
    source = f"read_parquet({_sql_string(features_glob(features_dir))}, hive_partitioning = true)"
    return _with_models(con, source, config, where=str(features_dir))


def player_instances_of(
    features: pa.Table, *, config: AggregateConfig = AggregateConfig()
) -> pa.Table:
    """``player_instance_features`` of a features table held in memory (a few games: ``kibitz
    serve``): the same SQL as :func:`run_aggregate`, in a database in memory, no file."""
    con = duckdb.connect()
    try:
        con.register("features_in_memory", features)
        _with_models(con, "features_in_memory", config, where="the posted games")
        build_marts(con, ["player_instance_features"])
        return con.sql("select * from player_instance_features").to_arrow_table()
    finally:
        con.close()


def _with_models(
    con: duckdb.DuckDBPyConnection, source: str, config: AggregateConfig, *, where: str
) -> duckdb.DuckDBPyConnection:
    """``con`` with the source view ``features`` over ``source``, α and γ set and the staging
    views created."""
    present = {row[0] for row in con.execute(f"describe select * from {source}").fetchall()}
    # A features table written before a base column existed (the time control came with the
    # time-usage features) reads it as nulls, so its marts still build, with those columns null.
    missing = [f for f in BASE_FIELDS if f.name not in present]
    if missing:
        log.info("features in %s have no %s: read as nulls", where, [f.name for f in missing])
    nulls = "".join(f", cast(null as {_DUCKDB_TYPES[f.type]}) as {f.name}" for f in missing)
    con.execute(f"create or replace view features as select *{nulls} from {source}")
    set_parameters(con, config)
    models = load_models()
    for name in run_order(models, mart_names(models)):
        if models[name].materialization == "view":
            create_model(con, models[name])
    return con


def set_parameters(con: duckdb.DuckDBPyConnection, config: AggregateConfig) -> None:
    """α and γ as DuckDB variables, read by the SQL through ``getvariable``."""
    con.execute(f"set variable alpha = {float(config.alpha)!r}::double")
    con.execute(f"set variable gamma = {float(config.gamma)!r}::double")


def build_marts(
    con: duckdb.DuckDBPyConnection, marts: Sequence[str] | None = None
) -> dict[str, int]:
    """Create (or replace) ``marts`` (default :func:`mart_names`) and every model they read, in
    run order: staging models as views, the others as tables. Return each table's row count."""
    models = load_models()
    rows = {}
    for name in run_order(models, mart_names(models) if marts is None else marts):
        create_model(con, models[name])
        if models[name].materialization == "table":
            (rows[name],) = con.execute(f"select count(*) from {name}").fetchall()[0]
    return rows


def features_run_config(features_dir: Path) -> dict[str, Any]:
    """The ``_config.yaml`` that ``kibitz extract`` saved beside the features ({} if none)."""
    path = Path(features_dir) / FEATURES_CONFIG_FILE
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def run_aggregate(
    features_dir: Path, out_dir: Path, *, config: AggregateConfig = AggregateConfig()
) -> dict[str, Any]:
    """Build every mart from ``features_dir`` into ``out_dir``; return (and save) a summary.

    The tables are built in a scratch database in ``out_dir`` (deleted afterwards) and saved as
    ``out_dir/<mart>.parquet``, each replaced whole. When ``out_dir`` sits in an output home,
    the home's catalog is refreshed and the summary's ``catalog`` names it (else None).
    """
    features_dir, out_dir = Path(features_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = out_dir / SCRATCH_DB
    scratch.unlink(missing_ok=True)
    started = time.perf_counter()
    con = open_features(features_dir, config=config, database=str(scratch))
    try:
        (moves,) = con.execute("select count(*) from features").fetchall()[0]
        rows = build_marts(con)
        sql_s = time.perf_counter() - started
        for name in rows:
            target = out_dir / f"{name}.parquet"
            con.execute(f"copy {name} to {_sql_string(str(target) + '.tmp')} (format parquet)")
            Path(str(target) + ".tmp").replace(target)
    finally:
        con.close()
        scratch.unlink(missing_ok=True)
        Path(str(scratch) + ".wal").unlink(missing_ok=True)
    extract_config = features_run_config(features_dir)
    summary = {
        "features_dir": str(features_dir.resolve()),
        "features_config_hash": extract_config.get("config_hash"),
        # The extraction's own record (nets and their sha256, settings), so that the aggregates
        # alone say what they were made from: `kibitz train meta` and a shipped meta-model
        # read it here when the features folder is gone or on another machine.
        "features_config": extract_config,
        "parameters": asdict(config),
        "moves": moves,
        "rows": rows,
        "sql_s": round(sql_s, 3),
        "moves_per_s": round(moves / sql_s, 1) if sql_s else None,
    }
    catalog = refresh_home_of(out_dir)
    summary["catalog"] = str(catalog) if catalog else None
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return summary


def load_mart(aggregates_dir: Path, name: str) -> pa.Table:
    """One mart's Parquet output of :func:`run_aggregate`."""
    path = Path(aggregates_dir) / f"{name}.parquet"
    if not path.is_file():
        raise AggregatesNotFoundError(
            f"no {name}.parquet in {str(aggregates_dir)!r} (run `kibitz aggregate` first)"
        )
    return pq.read_table(path)


def load_summary(aggregates_dir: Path) -> dict[str, Any]:
    """The ``_aggregate.json`` of an aggregates folder."""
    path = Path(aggregates_dir) / SUMMARY_FILE
    if not path.is_file():
        raise AggregatesNotFoundError(f"no {SUMMARY_FILE} in {str(aggregates_dir)!r}")
    return json.loads(path.read_text())


def aggregated_features_config(summary: dict[str, Any]) -> dict[str, Any]:
    """The extraction record (``_config.yaml``) of the features an aggregates folder came from:
    the copy in its summary, else (aggregates written before the copy) the features folder's."""
    if summary.get("features_config"):
        return summary["features_config"]
    features_dir = summary.get("features_dir")
    return features_run_config(Path(features_dir)) if features_dir else {}


def feature_columns(names: Sequence[str]) -> list[str]:
    """The instance feature columns among ``names`` (move counts are bookkeeping, not features)."""
    return [
        c
        for c in names
        if c.endswith(FEATURE_SUFFIXES) and not c.startswith(("moves_", "moves_with_loss_"))
    ]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(json.dumps(run_aggregate(Path(sys.argv[1]), Path(sys.argv[2])), indent=1))
