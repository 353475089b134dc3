"""The Go reader of ``kibitz ingest go``: SGF files, collections, folders and 7z archives → games.

Implements the reader contract of ``pipeline.ingest.chunks`` (C2)::

    chunks = plan_chunks([Path("fox-raw/9d2.7z.001"), Path("fox-selected/")], games_per_chunk=20_000)
    result = read_chunk(chunks[0])      # ChunkResult: GAMES_SCHEMA rows + QUARANTINE_SCHEMA rows

Inputs: a single-game ``.sgf``; an SGF collection (one game per line, or several game trees in
one file); a folder (searched recursively for ``*.sgf``, ``*.7z`` and ``*.7z.001``); a ``.7z``
archive or the first volume ``.7z.001`` of a split one. Small SGF files of a folder are grouped
into chunks of ``games_per_chunk`` files; a large collection is split at game-tree starts; an
archive is split into ranges of ``games_per_chunk`` members (a solid archive decompresses the
prefix of its block for each range, so give archives large chunks).

Locators (JSON-serialisable, paths relative to ``chunk.source_file``, ``""`` when it is the file):
``("sgf", rel, byte_start, byte_end, first_game, first_line)`` part of one SGF file;
``("sgf-files", rel, rel, …)`` whole small SGF files; ``("7z", rel, first_member, stop_member)``.

Identity: ``game_id`` is blake2b-64 of the game's last two path components (the Fox member
``9k/1571194973010001560.sgf`` whether read from the archive or unpacked), plus ``#<n>`` when
the file is a collection (``testing/1d.sgf#17``). ``source`` is ``"fox"`` when the game says
``AP[foxwq]``, uses Fox's Chinese rank labels or its path mentions ``fox``; else ``"sgf"``.
Ranks come from ``BR``/``WR`` only (folder names lie: the 9d archive's folder is ``9k/``).

One file is one game unless it is a collection: game trees are the top-level ``(;…)`` of a
file; variations nested inside a tree are read past (main line kept) and counted in the
result's ``notes`` (``variations_dropped``); a root missing its opening ``(`` (raw Fox ``Pro2``
files) is read as one game and named in ``notes`` (``recovered_roots``, ``recovered_files``).

Bad input never stops a chunk: empty, NUL-filled and non-SGF files or members, undecodable or
corrupt 7z members, truncated trees, broken bytes and bad move values each become a quarantine
row naming the file, the member and the game. ``read = kept + quarantined`` per chunk.

Run ``python -m pytest tests/test_ingest_go.py``; see ``docs/guide/ingest.md``.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.core.games_schema import GAMES_SCHEMA, UNKNOWN_MONTH
from pipeline.go_game import ranks as go_ranks
from pipeline.ingest import fox_results
from pipeline.ingest.archive_7z import CorruptMemberError, is_7z_path, iter_members, list_members
from pipeline.ingest.chunks import (
    MAX_NOTED_NAMES,
    Chunk,
    ChunkResult,
    blake2b_hex,
    merge_notes,
    quarantine_table,
    raw_excerpt,
)
from pipeline.ingest.sgf_parse import (
    SgfBatch,
    SgfError,
    SgfGameError,
    move_strings,
    off_board,
    parse_segments,
    parse_sgf,
)

logger = logging.getLogger(__name__)

GAME = "go"
# SGF files up to this size are grouped whole into chunks; bigger ones (collections) are split
# at game-tree starts. 1 MiB holds about 800 Fox games.
SMALL_FILE_BYTES = 1 << 20
DEFAULT_BOARD_SIZE = 19
# Files or members scanned together in one numba pass: amortises the per-call cost over
# thousands of single-game Fox files while bounding memory.
SCAN_BATCH_BYTES = 16 << 20
SCAN_BATCH_FILES = 4096
_FOX_RANK_RE = re.compile(r"[段级級]")
_MULTI_VOLUME_PART_RE = re.compile(r"\.7z\.\d{3}$", re.IGNORECASE)


class SgfInputError(FileNotFoundError):
    """A path given on the command line that does not exist."""


# ---------------------------------------------------------------- planning


def _is_go_input(path: Path) -> bool:
    return path.suffix.lower() == ".sgf" or is_7z_path(path)


def _folder_inputs(folder: Path) -> list[Path]:
    """SGF files and archives under ``folder``, sorted; other files are skipped with a log line."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    chosen = [p for p in files if _is_go_input(p)]
    skipped = [p for p in files if not _is_go_input(p) and not _MULTI_VOLUME_PART_RE.search(p.name)]
    if skipped:
        logger.info(
            "%s: skipping %d files that are neither .sgf nor .7z (first: %s)",
            folder,
            len(skipped),
            skipped[0].name,
        )
    return chosen


def _plan_7z(path: Path, rel: str, games_per_chunk: int) -> list[tuple]:
    members = list_members(path)  # raises CorruptArchiveError naming the file
    return [
        ("7z", rel, first, min(first + games_per_chunk, len(members)))
        for first in range(0, len(members), games_per_chunk)
    ] or [("7z", rel, 0, 0)]


def _plan_big_sgf(path: Path, rel: str, games_per_chunk: int) -> list[tuple]:
    data = path.read_bytes()
    try:
        starts = parse_sgf(data).starts
    except SgfError:
        return [("sgf", rel, 0, len(data), 0, 1)]  # read_chunk quarantines it with the reason
    cuts = [0, *starts[games_per_chunk::games_per_chunk].tolist(), len(data)]
    newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    return [
        ("sgf", rel, a, b, k * games_per_chunk, int(np.searchsorted(newlines, a)) + 1)
        for k, (a, b) in enumerate(itertools.pairwise(cuts))
    ]


def plan_chunks(paths: Sequence[Path], *, games_per_chunk: int) -> list[Chunk]:
    """Expand files, folders and archives into chunks of about ``games_per_chunk`` games."""
    if games_per_chunk < 1:
        raise ValueError(f"games_per_chunk must be at least 1, got {games_per_chunk!r}")
    chunks: list[Chunk] = []
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise SgfInputError(f"no such file or folder: {str(given)!r}")
        files = _folder_inputs(root) if root.is_dir() else [root]
        locators: list[tuple] = []
        group: list[str] = []
        for path in files:
            rel = "" if path == root else path.relative_to(root).as_posix()
            if is_7z_path(path):
                locators += _plan_7z(path, rel, games_per_chunk)
            elif path.stat().st_size > SMALL_FILE_BYTES:
                locators += _plan_big_sgf(path, rel, games_per_chunk)
            else:
                group.append(rel)
                if len(group) == games_per_chunk:
                    locators.append(("sgf-files", *group))
                    group = []
        if group:
            locators.append(("sgf-files", *group))
        chunks += [Chunk(GAME, str(given), i, loc) for i, loc in enumerate(locators)]
    return chunks


# ---------------------------------------------------------------- reading


def _identity_name(path_text: str) -> str:
    """Last two components of a path (``9k/1571194973010001560.sgf``): the game's identity."""
    return "/".join(path_text.replace("\\", "/").rstrip("/").split("/")[-2:])


def _board_size(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_BOARD_SIZE
    text = raw.split(":")[0].strip()
    if not text.isdigit() or not 2 <= int(text) <= 25:
        raise SgfGameError(f"unsupported board size SZ[{raw}] (2..25 square boards)")
    return int(text)


# Columns that ``_Reader._row`` and ``add_buffer`` fill per game.
_ROW_FIELDS = (
    "game_id", "game", "source", "month", "source_file", "source_member", "source_index",
    "source_offset", "site", "event", "date", "white", "black", "white_rating_raw",
    "black_rating_raw", "time_control", "tc_base_s", "tc_increment_s", "tc_periods", "tc_class",
    "result", "winner", "ended_by", "score_margin", "komi", "handicap", "rules", "board_size",
    "setup_black", "setup_white",
)  # fmt: skip


@dataclass
class _Rows:
    """Column lists of the games read so far, plus their moves as arrays."""

    columns: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in _ROW_FIELDS})
    move_counts: list[np.ndarray] = field(default_factory=list)
    colours: list[np.ndarray] = field(default_factory=list)
    xs: list[np.ndarray] = field(default_factory=list)
    ys: list[np.ndarray] = field(default_factory=list)
    sizes: list[np.ndarray] = field(default_factory=list)
    quarantine: list[dict[str, Any]] = field(default_factory=list)

    def table(self) -> pa.Table:
        counts = np.concatenate(self.move_counts) if self.move_counts else np.zeros(0, np.int64)
        offsets = np.zeros(len(counts) + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        if self.colours:
            moves = move_strings(
                np.concatenate(self.colours),
                np.concatenate(self.xs),
                np.concatenate(self.ys),
                np.concatenate(self.sizes),
            )
        else:
            moves = pa.array([], pa.string())
        arrays = []
        for f in GAMES_SCHEMA:
            if f.name == "moves":
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets), moves))
            elif f.name == "num_plies":
                arrays.append(pa.array(counts, pa.int32()))
            elif f.name in _ROW_FIELDS:
                arrays.append(pa.array(self.columns[f.name], f.type))
            else:  # chess-only columns and those filled later (ranks, selection)
                arrays.append(pa.nulls(len(counts), f.type))
        table = pa.Table.from_arrays(arrays, schema=GAMES_SCHEMA)
        return _add_rank_columns(table)


def _add_rank_columns(table: pa.Table) -> pa.Table:
    """Normalised ranks, scale and groups, computed once per distinct label (vectorised)."""
    out = {}
    for side in ("white", "black"):
        rank = go_ranks.normalize_rank_array(table[f"{side}_rating_raw"])
        out[f"{side}_rank"] = rank
        out[f"{side}_rank_num"] = go_ranks.rank_num_array(rank)
        out[f"{side}_rank_group"] = go_ranks.rank_group_array(rank)
    out["rank_group"] = go_ranks.common_group_array(
        out["white_rank_group"], out["black_rank_group"]
    )
    for name, column in out.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


@dataclass(frozen=True)
class _Segment:
    """One file, archive member or file range: the unit that games are numbered within."""

    source_file: str
    member: str | None
    data: bytes
    first_index: int = 0  # game number of the first tree (ranges of a collection)
    first_line: int = 1  # line number of the first byte
    collection: bool = False  # identities get "#<n>" even when this range holds one game

    @property
    def where(self) -> str:
        return f"{self.source_file!r}" + (f" member {self.member!r}" if self.member else "")


def empty_notes() -> dict[str, Any]:
    """A chunk's notes before reading (:attr:`ChunkResult.notes`): ``variations_dropped``
    (subtrees off the main line, all games), ``games_with_variations``, ``recovered_roots``
    (files or members whose root lacked its ``(``, read as one game) and ``recovered_files``
    (their names, the first ``MAX_NOTED_NAMES``)."""
    return {
        "variations_dropped": 0,
        "games_with_variations": 0,
        "recovered_roots": 0,
        "recovered_files": [],
    }


class _Reader:
    """Turns segments (files, members, file ranges) of one chunk into rows and quarantine rows."""

    def __init__(self) -> None:
        self.rows = _Rows()
        self.notes = empty_notes()

    def quarantine(
        self,
        segment: _Segment,
        index: int,
        offset: int | None,
        error: Exception,
        where: str,
        raw: bytes,
    ) -> None:
        self.rows.quarantine.append(
            {
                "game": GAME,
                "source_file": segment.source_file,
                "source_member": segment.member,
                "source_index": index,
                "source_offset": offset,
                "error_type": type(error).__name__,
                "reason": f"{where}: {error}",
                "raw": raw_excerpt(raw),
            }
        )

    def add_segments(self, segments: Sequence[_Segment]) -> None:
        """Scan all segments in one pass, then turn each game tree into a row or a quarantine row."""
        if not segments:
            return
        batch = parse_segments([seg.data for seg in segments])
        per_segment = batch.trees_per_segment()  # (S,)
        variations = batch.variations  # (T,)
        self.notes["variations_dropped"] += int(variations.sum())
        self.notes["games_with_variations"] += int(np.count_nonzero(variations))
        for s in np.flatnonzero(batch.recovered).tolist():
            self.notes["recovered_roots"] += 1
            if len(self.notes["recovered_files"]) < MAX_NOTED_NAMES:
                self.notes["recovered_files"].append(segments[s].member or segments[s].source_file)
        for s, seg in enumerate(segments):
            error = batch.segment_error(s) if per_segment[s] == 0 else None
            if error is not None:
                self.quarantine(seg, seg.first_index, seg.first_line, error, seg.where, seg.data)
            elif batch.junk_bytes[s]:
                first = int(batch.first_junk[s] - batch.bounds[s])
                junk = SgfError(
                    f"{batch.junk_bytes[s]} bytes outside any game tree, first at byte {first}"
                )
                index = seg.first_index + int(per_segment[s])
                self.quarantine(seg, index, None, junk, seg.where, seg.data[first:])
        lines = batch.line_numbers()  # (T,) within each segment
        tree_segment = batch.segment  # (T,)
        index_in_segment = np.arange(batch.num_games) - np.searchsorted(tree_segment, tree_segment)
        kept: list[tuple[int, dict[str, Any], int]] = []
        for i in range(batch.num_games):
            s = int(tree_segment[i])
            seg = segments[s]
            index = seg.first_index + int(index_in_segment[i])
            line = int(lines[i]) + seg.first_line - 1
            try:
                problem = batch.error(i)
                if problem:
                    raise SgfGameError(problem)
                row, board_size = self._row(batch.properties(i), seg)
            except (SgfGameError, fox_results.GameInfoError) as exc:
                where = f"{seg.where} game {index} (line {line})"
                self.quarantine(seg, index, line, exc, where, batch.raw_bytes(i))
                continue
            name = _identity_name(seg.member or seg.source_file)
            collection = seg.collection or per_segment[s] > 1 or seg.first_index > 0
            row["game_id"] = blake2b_hex(f"{name}#{index}" if collection else name)
            row["source_index"] = index
            row["source_offset"] = line
            kept.append((i, row, board_size))
        self._add_moves(batch, kept, segments)

    def _add_moves(
        self,
        batch: SgfBatch,
        kept: list[tuple[int, dict[str, Any], int]],
        segments: Sequence[_Segment],
    ) -> None:
        """Check kept games' moves against their board (vectorised) and append the rows."""
        if not kept:
            return
        offsets = batch.move_offsets
        games = np.array([i for i, _, _ in kept], np.int64)  # (G,)
        sizes = np.array([size for _, _, size in kept], np.int16)  # (G,)
        counts = offsets[games + 1] - offsets[games]  # (G,)
        starts = np.repeat(offsets[games] - (np.cumsum(counts) - counts), counts)  # (M,)
        take = starts + np.arange(int(counts.sum()))  # (M,) index into the batch's moves
        per_move_size = np.repeat(sizes, counts)  # (M,)
        x, y = batch.move_x[take], batch.move_y[take]  # (M,)
        bad_move = off_board(x, y, per_move_size)  # (M,)
        bad_game = np.zeros(len(games), bool)  # (G,)
        if bad_move.any():
            game_of_move = np.repeat(np.arange(len(games)), counts)  # (M,)
            bad_game[game_of_move[bad_move]] = True
            for k in np.flatnonzero(bad_game):
                i, row, size = kept[k]
                first_bad = int(np.flatnonzero(bad_move & (game_of_move == k))[0])
                ply = first_bad - int(np.searchsorted(game_of_move, k)) + 1
                seg = segments[int(batch.segment[i])]
                error = SgfGameError(
                    f"move {ply} is off the {size}x{size} board "
                    f"(x={int(x[first_bad])}, y={int(y[first_bad])})"
                )
                where = f"{seg.where} game {row['source_index']} (line {row['source_offset']})"
                self.quarantine(
                    seg, row["source_index"], row["source_offset"], error, where, batch.raw_bytes(i)
                )
            keep_move = ~bad_game[game_of_move]
            take, x, y, per_move_size = (
                take[keep_move],
                x[keep_move],
                y[keep_move],
                per_move_size[keep_move],
            )
            counts = counts[~bad_game]
        self.rows.move_counts.append(counts)
        self.rows.colours.append(batch.move_colour[take])
        self.rows.xs.append(x)
        self.rows.ys.append(y)
        self.rows.sizes.append(per_move_size)
        columns = self.rows.columns
        for k, (_, row, _) in enumerate(kept):
            if not bad_game[k]:
                for key, value in row.items():
                    columns[key].append(value)

    @staticmethod
    def _row(props: dict[str, list[str]], seg: _Segment) -> tuple[dict[str, Any], int]:
        """Game-info columns of one game from its header properties."""
        first = {key: values[0] for key, values in props.items() if values}.get
        game_type = first("GM")
        if game_type is not None and game_type.strip() not in ("", "1"):
            raise SgfGameError(f"not a Go game: GM[{game_type}]")
        board_size = _board_size(first("SZ"))
        black_raw, white_raw = first("BR"), first("WR")
        fox = (
            any(v.strip().lower() == "foxwq" for v in props.get("AP", ()))
            or any(r is not None and _FOX_RANK_RE.search(r) for r in (black_raw, white_raw))
            or "fox" in f"{seg.source_file}/{seg.member or ''}".lower()
        )
        date, month = fox_results.parse_date(first("DT") or "")
        result_raw = first("RE")
        result = fox_results.parse_result(result_raw) if result_raw is not None else None
        komi_raw = first("KM")
        clock = fox_results.parse_clock(first("TM"), first("TC"), first("TT"), first("OT"))
        rules_raw = first("RU")
        setup_black = props.get("AB", [])
        setup_white = props.get("AW", [])
        row = {
            "game": GAME,
            "source_file": seg.source_file,
            "source_member": seg.member,
            "source": "fox" if fox else "sgf",
            "month": month or UNKNOWN_MONTH,
            "site": first("PC"),
            "event": first("EV") or first("GN") or None,
            "date": date,
            "white": first("PW"),
            "black": first("PB"),
            "white_rating_raw": white_raw,
            "black_rating_raw": black_raw,
            "time_control": clock.raw,
            "tc_base_s": clock.base_s,
            "tc_increment_s": clock.period_s,
            "tc_periods": clock.periods,
            "tc_class": clock.tc_class,
            "result": result_raw,
            "winner": result.winner if result else None,
            "ended_by": result.ended_by if result else "other",
            "score_margin": result.score_margin if result else None,
            "komi": fox_results.parse_komi(komi_raw, fox=fox) if komi_raw is not None else None,
            "handicap": fox_results.parse_handicap(first("HA"), len(setup_black)),
            "rules": fox_results.parse_rules(rules_raw) if rules_raw is not None else None,
            "board_size": board_size,
            "setup_black": setup_black or None,
            "setup_white": setup_white or None,
        }
        return row, board_size

    def result(self) -> ChunkResult:
        return ChunkResult(
            games=self.rows.table(),
            quarantine=quarantine_table(self.rows.quarantine),
            notes=self.notes,
        )


def _read_range(path: Path, start: int, end: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(end - start)


def _read_7z(reader: _Reader, archive: Path, first: int, stop: int) -> None:
    """Members in batches of about ``SCAN_BATCH_BYTES`` (one scan each); bad members quarantined."""
    batch: list[_Segment] = []
    size = 0
    for member, content in iter_members(archive, first, stop):
        segment = _Segment(
            str(archive), member.name, b"" if isinstance(content, Exception) else content
        )
        if isinstance(content, CorruptMemberError):
            reader.quarantine(segment, 0, None, content, segment.where, b"")
            continue
        batch.append(segment)
        size += len(content)
        if size >= SCAN_BATCH_BYTES:
            reader.add_segments(batch)
            batch, size = [], 0
    reader.add_segments(batch)


def _resolve(chunk: Chunk, rel: str) -> Path:
    return Path(chunk.source_file) / rel if rel else Path(chunk.source_file)


def read_chunk(chunk: Chunk) -> ChunkResult:
    """Read one planned chunk into games and quarantine rows (never raises on bad games)."""
    kind = chunk.locator[0]
    reader = _Reader()
    if kind == "sgf":
        _, rel, start, end, first_game, first_line = chunk.locator
        path = _resolve(chunk, rel)
        data = _read_range(path, start, end)
        reader.add_segments([_Segment(str(path), None, data, first_game, first_line, True)])
    elif kind == "sgf-files":
        paths = [_resolve(chunk, rel) for rel in chunk.locator[1:]]
        for k in range(0, len(paths), SCAN_BATCH_FILES):
            reader.add_segments(
                [_Segment(str(p), None, p.read_bytes()) for p in paths[k : k + SCAN_BATCH_FILES]]
            )
    elif kind == "7z":
        _, rel, first, stop = chunk.locator
        _read_7z(reader, _resolve(chunk, rel), first, stop)
    else:
        raise ValueError(f"unknown Go chunk locator {chunk.locator!r}")
    return reader.result()


def read_text(data: bytes, source_file: str) -> ChunkResult:
    """Read SGF text held in memory (one posted game, ``kibitz serve``) as the file
    ``source_file``, whose last two path components give the game its id."""
    reader = _Reader()
    reader.add_segments([_Segment(source_file, None, data)])
    return reader.result()


_COMPILE_SGF = b"(;GM[1]FF[4]SZ[19]KM[650]RU[Japanese]PB[a]PW[b]BR[1d]WR[1d]RE[B+R];B[pd];W[dp](;B[pp])(;B[dd]))"


def compile_kernels() -> None:
    """Compile the SGF scanner's numba kernels (or load them from numba's on-disk cache) by
    reading one short game as a task does.

    ``kibitz ingest`` calls it in the driver before Ray starts its workers, which then load
    the kernels instead of each compiling them (``bench/speed/bench_numba_cache.py --stage ingest``,
    docs/guide/ingest.md).
    """
    reader = _Reader()
    reader.add_segments([_Segment("<compile_kernels>", None, _COMPILE_SGF)])
    if reader.result().games.num_rows != 1:
        raise RuntimeError("compile_kernels: the scanner did not read its one game")


def read_paths(paths: Iterable[Path], *, games_per_chunk: int = 50_000) -> ChunkResult:
    """Plan and read ``paths`` in this process (tests, benchmarks, small inputs)."""
    results = [read_chunk(c) for c in plan_chunks(list(paths), games_per_chunk=games_per_chunk)]
    return ChunkResult(
        games=pa.concat_tables([r.games for r in results])
        if results
        else GAMES_SCHEMA.empty_table(),
        quarantine=pa.concat_tables([r.quarantine for r in results])
        if results
        else quarantine_table([]),
        notes=merge_notes(r.notes for r in results),
    )


__all__ = [
    "SgfInputError",
    "compile_kernels",
    "empty_notes",
    "plan_chunks",
    "read_chunk",
    "read_paths",
    "read_text",
]
