"""A hive-partitioned Parquet dataset written one input chunk at a time, exactly once.

Ingestion (the games table) and feature extraction (the features table) both turn a list of
input chunks into rows. A run can be killed at any moment (pre-empted node, Ctrl-C, OOM) and is
then re-run with the same arguments; it must neither duplicate nor lose rows. The rule that
makes this hold:

1. every file of a chunk is written as ``*.tmp`` and renamed into place (``os.replace`` is
   atomic on POSIX), so a reader never sees half a file;
2. the chunk's marker ``_chunks/<chunk_id>.json`` is written LAST, also atomically;
3. a chunk is done if and only if its marker exists; on start, :meth:`ChunkStore.clean_partial`
   deletes the files of chunks without a marker (left by the killed run).

Files are named ``part-<chunk_id>.parquet`` inside their partition folder, so re-committing a
chunk overwrites the same files instead of adding copies. Side tables (names starting with
``_``) end in ``.pq`` instead: their schema differs from the main table's, and DuckDB's
``read_parquet('root/**/*.parquet', hive_partitioning = true)`` must see the main table only
(it would bind to whichever schema it meets first). Read them with ``'root/_quarantine/**/*.pq'``. On a multi-node Ray cluster the root
must be on a filesystem every node sees (NFS, a mounted bucket): tasks commit their own chunks.

Layout (``partition_cols = ("game", "source", "month")``)::

    root/game=chess/source=lichess/month=2024-02/part-<chunk_id>.parquet      table ""
    root/_quarantine/game=chess/part-<chunk_id>.pq                            table "_quarantine"
    root/_chunks/<chunk_id>.json                                              the marker

Example::

    store = ChunkStore(Path("out/games"), ("game", "source", "month"))
    store.clean_partial()
    if not store.is_done("3f2a…"):
        store.commit("3f2a…", {"": games, "_quarantine": bad}, {"games_read": 120})
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MARKER_DIR = "_chunks"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
SIDE_PART_SUFFIX = ".pq"  # side tables ("_quarantine"): outside the main table's *.parquet glob
TMP_SUFFIX = ".tmp"
# Hive's spelling of a null partition value; DuckDB and Spark read it back as NULL.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_CHUNK_ID = re.compile(r"^[0-9A-Za-z_-]{1,128}$")
_PART_FILE = re.compile(r"^part-(?P<chunk_id>[0-9A-Za-z_-]+)\.(?:parquet|pq)(?:\.tmp)?$")


class ChunkStoreError(ValueError):
    """A chunk id, table name or partition value that cannot become a safe path."""


def _partition_dir_name(column: str, value: Any) -> str:
    if value is None:
        return f"{column}={NULL_PARTITION}"
    text = str(value)
    if not text or "/" in text or "\\" in text or text in {".", ".."} or "\x00" in text:
        raise ChunkStoreError(f"partition value {text!r} of column {column!r} is not a folder name")
    return f"{column}={text}"


def _write_atomically(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)``, flush it to disk, then rename it over ``path``."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    write(tmp)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class ChunkStore:
    """A hive-partitioned Parquet dataset written one input chunk at a time, atomically."""

    def __init__(self, root: Path, partition_cols: Sequence[str]) -> None:
        self.root = Path(root)
        self.partition_cols = tuple(partition_cols)
        self.marker_dir = self.root / MARKER_DIR

    # -- markers ---------------------------------------------------------------------------

    def _marker_path(self, chunk_id: str) -> Path:
        if not _CHUNK_ID.match(chunk_id):
            raise ChunkStoreError(f"chunk id {chunk_id!r} is not a safe file name")
        return self.marker_dir / f"{chunk_id}.json"

    def done_ids(self) -> set[str]:
        """Chunk ids whose marker exists."""
        if not self.marker_dir.is_dir():
            return set()
        return {p.stem for p in self.marker_dir.glob("*.json")}

    def is_done(self, chunk_id: str) -> bool:
        """Whether ``chunk_id`` was committed completely."""
        return self._marker_path(chunk_id).is_file()

    def read_marker(self, chunk_id: str) -> dict[str, Any]:
        """The marker of a committed chunk: its ``meta``, ``files`` and ``rows`` per table."""
        with open(self._marker_path(chunk_id), encoding="utf-8") as handle:
            return json.load(handle)

    def markers(self) -> dict[str, dict[str, Any]]:
        """Every committed chunk's marker, by chunk id."""
        return {chunk_id: self.read_marker(chunk_id) for chunk_id in sorted(self.done_ids())}

    # -- writing ---------------------------------------------------------------------------

    def _table_dir(self, table_name: str) -> Path:
        if table_name and (
            table_name.startswith(".") or "/" in table_name or table_name == MARKER_DIR
        ):
            raise ChunkStoreError(f"table name {table_name!r} is not a folder name")
        return self.root / table_name if table_name else self.root

    def _split_by_partition(self, table: pa.Table) -> list[tuple[tuple[str, ...], pa.Table]]:
        """Split ``table`` into (folder names, rows without partition columns), sorted by folder."""
        cols = [c for c in self.partition_cols if c in table.column_names]
        if not cols:
            return [((), table)]
        keys = table.select(cols).group_by(cols).aggregate([]).to_pylist()
        parts = []
        for key in keys:
            mask = None
            for col in cols:
                value = key[col]
                column = table[col]
                cond = pc.is_null(column) if value is None else pc.equal(column, value)
                cond = pc.fill_null(cond, False)
                mask = cond if mask is None else pc.and_(mask, cond)
            rows = table.filter(mask).drop_columns(cols)
            dirs = tuple(_partition_dir_name(col, key[col]) for col in cols)
            parts.append((dirs, rows))
        parts.sort(key=lambda item: item[0])
        return parts

    def commit(
        self, chunk_id: str, tables: Mapping[str, pa.Table], meta: Mapping[str, Any]
    ) -> None:
        """Write every non-empty table of one chunk, then its marker (last, atomically).

        ``tables`` maps a table name to rows: ``""`` is the main table under ``root``, other names
        are sub-folders (``"_quarantine"``). Each is split by those ``partition_cols`` it has.
        """
        marker = self._marker_path(chunk_id)
        files: list[str] = []
        rows: dict[str, int] = {}
        for table_name, table in tables.items():
            rows[table_name] = table.num_rows
            if table.num_rows == 0:
                continue
            base = self._table_dir(table_name)
            for dirs, part in self._split_by_partition(table):
                folder = base.joinpath(*dirs)
                folder.mkdir(parents=True, exist_ok=True)
                suffix = SIDE_PART_SUFFIX if table_name.startswith("_") else PART_SUFFIX
                path = folder / f"{PART_PREFIX}{chunk_id}{suffix}"
                _write_atomically(
                    path, lambda tmp, part=part: pq.write_table(part, tmp, compression="zstd")
                )
                files.append(path.relative_to(self.root).as_posix())
        record = {
            "chunk_id": chunk_id,
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": files,
            "rows": rows,
            "meta": dict(meta),
        }
        self.marker_dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(record, indent=1, sort_keys=True, default=str)
        _write_atomically(marker, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    # -- recovery --------------------------------------------------------------------------

    def _part_files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        found = []
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                if _PART_FILE.match(name) or (
                    name.endswith(TMP_SUFFIX) and dirpath.endswith(MARKER_DIR)
                ):
                    found.append(Path(dirpath) / name)
        return found

    def _remove_empty_dirs(self) -> None:
        for dirpath, _dirnames, _filenames in sorted(os.walk(self.root), reverse=True):
            path = Path(dirpath)
            written_by_store = "=" in path.name or path.name.startswith("_")
            if path != self.root and written_by_store and not any(path.iterdir()):
                path.rmdir()

    def clean_partial(self) -> int:
        """Delete part files (and temp files) of chunks without a marker; return how many.

        Call it before starting work, never while another writer is committing to this root.
        """
        done = self.done_ids()
        removed = 0
        for path in self._part_files():
            match = _PART_FILE.match(path.name)
            if path.name.endswith(TMP_SUFFIX) or (match and match["chunk_id"] not in done):
                path.unlink()
                removed += 1
        if removed:
            self._remove_empty_dirs()
        return removed

    def reset(self) -> None:
        """Remove everything this store wrote (part files, markers), for ``--force``."""
        for path in self._part_files():
            path.unlink()
        if self.marker_dir.is_dir():
            shutil.rmtree(self.marker_dir)
        if self.root.is_dir():
            self._remove_empty_dirs()
