"""Real games tables for the rating tests, built once per test session.

The tables are written exactly as ingestion writes them: the real readers
(``pipeline.ingest.pgn`` / ``pipeline.ingest.sgf``) read the shared files and
``pipeline.core.chunk_store.ChunkStore`` commits the chunks in the hive layout.

- ``fox_by_player``: the 10,332 Fox games of ``data/go/fox-selected/by-player`` (players with
  ≥ 20 games each, so ratings really move; 6 draws);
- ``lichess_candidating``: the 960 Lichess blitz games of ``candidating/`` (8 bands × 120).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core import settings
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.games_schema import PARTITION_COLUMNS
from pipeline.ingest import pgn as ingest_pgn
from pipeline.ingest import sgf as ingest_sgf

SETS = {
    "fox_by_player": (ingest_sgf, "go/fox-selected/by-player"),
    "lichess_candidating": (ingest_pgn, "chess/lichess-2024-02-blitz/candidating"),
}


@functools.cache
def build_games_table(name: str, root: Path) -> Path:
    """Ingest one real set into ``root/name`` (once per session root) and return the folder."""
    reader, relative = SETS[name]
    source = settings.data_dir() / relative
    if not source.exists():
        raise FileNotFoundError(f"real data missing: {str(source)!r} (set KIBITZ_DATA_DIR)")
    paths = sorted(source.iterdir())
    out = root / name
    store = ChunkStore(out, PARTITION_COLUMNS)
    for chunk in reader.plan_chunks(paths, games_per_chunk=5000):
        result = reader.read_chunk(chunk)
        games = result.games.set_column(
            result.games.schema.get_field_index("selection"),
            "selection",
            pa.array(["all@1"] * result.games.num_rows, pa.string()),
        )
        store.commit(chunk.chunk_id, {"": games, "_quarantine": result.quarantine}, {})
    return out


def decided_mask(table: pa.Table) -> pa.ChunkedArray:
    return pc.is_in(table["winner"], pa.array(["white", "black", "draw"]))
