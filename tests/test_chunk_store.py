"""ChunkStore: atomic per-chunk commits, markers last, crash clean-up, reset, DuckDB layout.

Run: ``python -m pytest tests/test_chunk_store.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.chunk_store import ChunkStore, ChunkStoreError

PARTITIONS = ("game", "source", "month")


def _rows(ids: list[str], months: list[str]) -> pa.Table:
    return pa.table(
        {
            "game_id": ids,
            "game": ["chess"] * len(ids),
            "source": ["lichess"] * len(ids),
            "month": months,
            "num_plies": list(range(len(ids))),
        }
    )


def _quarantine(indices: list[int]) -> pa.Table:
    return pa.table(
        {
            "game": ["chess"] * len(indices),
            "source_index": indices,
            "reason": [f"bad game {i}" for i in indices],
        }
    )


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_commit_writes_partitions_then_marker(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path, PARTITIONS)
    games = _rows(["a", "b", "c"], ["2024-01", "2024-02", "2024-02"])
    store.commit("c0", {"": games, "_quarantine": _quarantine([7])}, {"games_read": 4})

    assert _files(tmp_path) == [
        "_chunks/c0.json",
        "_quarantine/game=chess/part-c0.pq",
        "game=chess/source=lichess/month=2024-01/part-c0.parquet",
        "game=chess/source=lichess/month=2024-02/part-c0.parquet",
    ]
    marker = json.loads((tmp_path / "_chunks/c0.json").read_text())
    assert marker["meta"] == {"games_read": 4}
    assert marker["rows"] == {"": 3, "_quarantine": 1}
    assert sorted(marker["files"]) == _files(tmp_path)[1:]
    # partition columns live in folder names only
    part = pq.read_table(tmp_path / "game=chess/source=lichess/month=2024-02/part-c0.parquet")
    assert part.column_names == ["game_id", "num_plies"]
    assert part.column("game_id").to_pylist() == ["b", "c"]
    assert store.done_ids() == {"c0"} and store.is_done("c0") and not store.is_done("c1")


def test_duckdb_reads_main_table_with_partitions_not_side_tables(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path, PARTITIONS)
    store.commit(
        "c0", {"": _rows(["a", "b"], ["2024-02"] * 2), "_quarantine": _quarantine([3])}, {}
    )
    store.commit("c1", {"": _rows(["c"], ["2024-03"])}, {})
    rows = duckdb.sql(
        f"select game_id, game, source, month from read_parquet('{tmp_path}/**/*.parquet', "
        "hive_partitioning = true) order by game_id"
    ).fetchall()
    assert rows == [
        ("a", "chess", "lichess", "2024-02"),
        ("b", "chess", "lichess", "2024-02"),
        ("c", "chess", "lichess", "2024-03"),
    ]
    side = duckdb.sql(
        f"select game, source_index from read_parquet('{tmp_path}/_quarantine/**/*.pq', "
        "hive_partitioning = true)"
    ).fetchall()
    assert side == [("chess", 3)]


def test_recommit_overwrites_instead_of_duplicating(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path, PARTITIONS)
    store.commit("c0", {"": _rows(["a", "b"], ["2024-02"] * 2)}, {})
    store.commit("c0", {"": _rows(["a", "b"], ["2024-02"] * 2)}, {})
    count = duckdb.sql(f"select count(*) from read_parquet('{tmp_path}/**/*.parquet')").fetchall()
    assert count == [(2,)]


def test_clean_partial_removes_unmarked_chunks_and_temp_files(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path, PARTITIONS)
    store.commit("done", {"": _rows(["a"], ["2024-02"])}, {})
    store.commit("killed", {"": _rows(["b"], ["2024-05"]), "_quarantine": _quarantine([1])}, {})
    # a run killed after writing the files of "killed" but before its marker:
    (tmp_path / "_chunks/killed.json").unlink()
    (tmp_path / "game=chess/source=lichess/month=2024-02/part-other.parquet.tmp").write_bytes(b"x")
    (tmp_path / "_chunks/other.json.tmp").write_text("{")

    assert store.clean_partial() == 4
    assert _files(tmp_path) == [
        "_chunks/done.json",
        "game=chess/source=lichess/month=2024-02/part-done.parquet",
    ]
    assert not (tmp_path / "game=chess/source=lichess/month=2024-05").exists()
    assert store.clean_partial() == 0


def test_reset_removes_everything_it_wrote_only(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path, PARTITIONS)
    store.commit("c0", {"": _rows(["a"], ["2024-02"]), "_quarantine": _quarantine([0])}, {})
    (tmp_path / "notes.txt").write_text("the user's own file")
    store.reset()
    assert _files(tmp_path) == ["notes.txt"]
    assert store.done_ids() == set()


def test_null_partition_value_uses_hive_default(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path, ("game",))
    table = pa.table({"game": pa.array([None], pa.string()), "x": [1]})
    store.commit("c0", {"": table}, {})
    assert _files(tmp_path)[1] == "game=__HIVE_DEFAULT_PARTITION__/part-c0.parquet"


@pytest.mark.parametrize(
    ("chunk_id", "table"),
    [
        ("../escape", _rows(["a"], ["2024-02"])),
        ("c0", _rows(["a"], ["../../etc"])),
        ("c0", _rows(["a"], ["2024/02"])),
    ],
)
def test_unsafe_ids_and_partition_values_are_refused(
    tmp_path: Path, chunk_id: str, table: pa.Table
) -> None:
    with pytest.raises(ChunkStoreError, match="not"):
        ChunkStore(tmp_path, PARTITIONS).commit(chunk_id, {"": table}, {})
