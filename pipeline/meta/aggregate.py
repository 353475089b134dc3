"""DuckDB aggregates over the per-move features table: player instances, players, rank groups.

The SQL lives in ``sql/marts/*.sql`` and ``sql/reports/*.sql`` (one statement per file, usable by hand in the DuckDB
CLI, see docs/meta.md); this module only opens the features Parquet as the view ``features``,
sets the parameters α and γ as DuckDB variables, runs the marts in dependency order and saves
them twice: as Parquet files (what ``kibitz train meta`` and ``kibitz estimate`` read) and as
tables in ``kibitz.duckdb`` (what a user opens with ``duckdb OUT/kibitz.duckdb``).

Run::

    kibitz aggregate --features kibitz-out/features-chess --out kibitz-out/aggregates-chess
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

from pipeline.core.settings import SQL_DIR

log = logging.getLogger(__name__)

# Run order: each query reads only the features view and the tables before it.
SQL_FILES = {
    "player_instance_features": SQL_DIR / "marts" / "player_instance_features.sql",
    "rank_groups": SQL_DIR / "marts" / "rank_groups.sql",
    "player_features": SQL_DIR / "marts" / "player_features.sql",
    "prior_profile": SQL_DIR / "reports" / "prior_profile.sql",  # Fig. 3 of the paper
    "loss_by_move_number": SQL_DIR / "reports" / "loss_by_move_number.sql",  # Fig. 4
}
MARTS = tuple(SQL_FILES)
DATABASE_FILE = "kibitz.duckdb"
SUMMARY_FILE = "_aggregate.json"
FEATURES_CONFIG_FILE = "_config.yaml"  # written by `kibitz extract` next to the features
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
    return (Path(features_dir).resolve() / "**" / "*.parquet").as_posix()


def read_sql(name: str) -> str:
    """The text of one query of :data:`SQL_FILES`."""
    return SQL_FILES[name].read_text()


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def open_features(
    features_dir: Path,
    *,
    config: AggregateConfig = AggregateConfig(),
    database: str = ":memory:",
) -> duckdb.DuckDBPyConnection:
    """A connection with the view ``features`` over the folder and α, γ set as variables."""
    features_dir = Path(features_dir)
    if not any(features_dir.glob("**/*.parquet")):
        raise FeaturesNotFoundError(
            f"no features Parquet under {str(features_dir)!r} (run `kibitz extract` first)"
        )
    con = duckdb.connect(database)
    con.execute(
        "create or replace view features as select * from read_parquet("
        f"{_sql_string(features_glob(features_dir))}, hive_partitioning = true)"
    )
    set_parameters(con, config)
    return con


def set_parameters(con: duckdb.DuckDBPyConnection, config: AggregateConfig) -> None:
    """α and γ as DuckDB variables, read by the SQL through ``getvariable``."""
    con.execute(f"set variable alpha = {float(config.alpha)!r}::double")
    con.execute(f"set variable gamma = {float(config.gamma)!r}::double")


def build_marts(con: duckdb.DuckDBPyConnection, marts: Sequence[str] = MARTS) -> dict[str, int]:
    """Create (or replace) one table per mart; return the row count of each."""
    rows = {}
    for name in marts:
        con.execute(f"create or replace table {name} as {read_sql(name)}")
        rows[name] = con.execute(f"select count(*) from {name}").fetchone()[0]
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

    ``out_dir/kibitz.duckdb`` is rebuilt from scratch each time so that it never holds tables
    of an older run; its ``features`` view points at the absolute features path.
    """
    features_dir, out_dir = Path(features_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    db_path = out_dir / DATABASE_FILE
    tmp_db = out_dir / (DATABASE_FILE + ".tmp")
    tmp_db.unlink(missing_ok=True)
    started = time.perf_counter()
    con = open_features(features_dir, config=config, database=str(tmp_db))
    try:
        moves = con.execute("select count(*) from features").fetchone()[0]
        rows = build_marts(con)
        sql_s = time.perf_counter() - started
        for name in MARTS:
            target = out_dir / f"{name}.parquet"
            con.execute(f"copy {name} to {_sql_string(str(target) + '.tmp')} (format parquet)")
            Path(str(target) + ".tmp").replace(target)
    finally:
        con.close()
    tmp_db.replace(db_path)
    extract_config = features_run_config(features_dir)
    summary = {
        "features_dir": str(features_dir.resolve()),
        "features_config_hash": extract_config.get("config_hash"),
        "parameters": asdict(config),
        "moves": moves,
        "rows": rows,
        "sql_s": round(sql_s, 3),
        "moves_per_s": round(moves / sql_s, 1) if sql_s else None,
        "database": str(db_path),
    }
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
