"""The unit of ingestion work: a :class:`Chunk` of one input file, and what reading it gives.

A reader module (``pipeline.ingest.pgn`` for chess, ``pipeline.ingest.sgf`` for Go) exposes::

    def plan_chunks(paths: Sequence[Path], *, games_per_chunk: int) -> list[Chunk]
    def read_chunk(chunk: Chunk) -> ChunkResult

The game kind (``pipeline.kinds``: ``game_kind("chess").reader``) wraps its module as the
``ChunkReader`` of ``pipeline.ingest.work``; the driver (``pipeline.jobs.ingest``) runs chunks
as Ray tasks that read each with that reader and commit the result through
``pipeline.core.chunk_store.ChunkStore`` under ``chunk.chunk_id``. The id depends only on the game
kind, the absolute source path, the chunk's index and its locator, so the same arguments always
plan the same ids: that is what makes a killed run resumable.

    >>> Chunk("chess", "a.pgn", 0, ("bytes", 0, 10)).chunk_id == Chunk("chess", "a.pgn", 0, ("bytes", 0, 10)).chunk_id
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.core.games_schema import GAMES_SCHEMA, QUARANTINE_SCHEMA

# Bytes of a bad game's text kept in the quarantine table.
RAW_EXCERPT_BYTES = 4096
# Names (of recovered files, say) kept in a run's reader notes; the counts are always exact.
MAX_NOTED_NAMES = 100


def blake2b_hex(text: str) -> str:
    """16 hex chars (64 bits) of blake2b: Kibitz's stable ids for games and chunks."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Chunk:
    """A slice of one input file that one task reads: ``locator`` says which slice."""

    game: str  # "chess" | "go"
    source_file: str  # path as given by the user
    chunk_index: int  # 0-based within source_file
    locator: tuple  # reader-specific, hashable and JSON-serialisable

    @property
    def chunk_id(self) -> str:
        """16 hex blake2b of (game, absolute source path, chunk_index, locator)."""
        identity = [
            self.game,
            str(Path(self.source_file).resolve()),
            self.chunk_index,
            list(self.locator),
        ]
        return blake2b_hex(json.dumps(identity, separators=(",", ":"), default=str))

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description stored in the chunk's completion marker."""
        return {
            "game": self.game,
            "source_file": self.source_file,
            "chunk_index": self.chunk_index,
            "locator": list(self.locator),
        }


@dataclass
class ChunkResult:
    """What reading one chunk gives: readable games and the ones that could not be read."""

    games: pa.Table  # GAMES_SCHEMA, column "selection" null (filled by the driver)
    quarantine: pa.Table  # QUARANTINE_SCHEMA
    # What the reader read past or repaired without losing a game (Go: variations dropped,
    # roots recovered); counts and name lists, added up over chunks into the run summary's
    # ``reader_notes`` by :func:`merge_notes`.
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def games_read(self) -> int:
        """Every game the chunk held: ``games.num_rows + quarantine.num_rows``."""
        return self.games.num_rows + self.quarantine.num_rows


def merge_notes(notes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Notes of several chunks as one: counts summed, name lists joined (the first
    ``MAX_NOTED_NAMES``; the counts beside them stay exact)."""
    merged: dict[str, Any] = {}
    for one in notes:
        for key, value in one.items():
            if isinstance(value, list):
                names = merged.setdefault(key, [])
                names += value[: max(MAX_NOTED_NAMES - len(names), 0)]
            else:
                merged[key] = merged.get(key, 0) + value
    return merged


def raw_excerpt(data: bytes) -> str:
    """The first 4 KiB of a bad game's bytes, decoded with replacement, for the quarantine table."""
    return data[:RAW_EXCERPT_BYTES].decode("utf-8", errors="replace")


def quarantine_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Build a QUARANTINE_SCHEMA table from dicts (missing optional keys become null)."""
    columns = {field.name: [row.get(field.name) for row in rows] for field in QUARANTINE_SCHEMA}
    return pa.table(columns, schema=QUARANTINE_SCHEMA)


def empty_games_table() -> pa.Table:
    """A games table with no rows (a chunk whose every game was quarantined)."""
    return GAMES_SCHEMA.empty_table()
