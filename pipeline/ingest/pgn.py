"""Chess reader: Lichess PGN (plain, ``.pgn.zst``, ``.pgn.bz2``) → rows of the games table.

The hot path is compiled: :mod:`pipeline.ingest.pgn_reader` (numba) resolves SAN, replays every
move and reads ``%clk`` / ``%eval`` for a whole chunk of games in one call; tags are cut out of
the raw bytes with numpy; UCI strings, rating bands, time-control classes and outcomes are built
as whole Arrow columns. Python only loops per *unusual* game: a game the compiled reader hands
back (an illegal or ambiguous move, or PGN outside the Lichess dialect such as variations) is
replayed with python-chess, which decides (exact rules) whether it is really illegal (the game
is quarantined with the reason) or readable (python-chess re-exports it as clean SAN and the
compiled reader reads that text).

Chunking. A Lichess month is one ~30 GB ``.pgn.zst`` stream that cannot be seeked, so the driver
streams it once (:func:`stream_chunks`), cuts the decompressed bytes at game boundaries every
``games_per_chunk`` games and ships each piece of raw text to a Ray task (:func:`read_chunk`).
Re-streaming from the start inside every task would cost O(chunks²) decompression; the single
stream costs the driver ~1 s of zstd per GB of text while the parse costs ~40 µs per game on a
worker. A chunk's locator is ``("bytes", start, end, first_game, num_games, status)`` in
decompressed bytes, so the same file and ``games_per_chunk`` always give the same chunk ids.

Games are split where python-chess's ``read_game`` splits them
(:class:`pipeline.ingest.pgn_reader.GameSplitter`): a blank line ends a game's movetext
(not inside a ``{…}`` comment), and one blank line between two tags does not end the tags
(ChessBase exports). Besides Lichess, the PGN of OTB databases, ChessBase and chess.com
reads: partial dates (``1997.??.??``: ``month = "unknown"``, ``1997.05.??``: ``"1997-05"``,
``date`` null), no date at all (``"unknown"``), ``?`` ratings (null), sudden-death
``TimeControl "600"`` (600 + 0), ``%`` / ``;`` comment lines. Run it::

    python -m pipeline.ingest.pgn ../shared/data/chess/lichess-2024-02-blitz/candidating/1000-1200.pgn.zst
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import chess
import chess.pgn
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import KibitzError
from pipeline.core.games_schema import GAMES_SCHEMA, UNKNOWN_MONTH
from pipeline.ingest.chunks import (
    Chunk,
    ChunkResult,
    blake2b_hex,
    quarantine_table,
    raw_excerpt,
)
from pipeline.ingest.compressed_streams import (
    CorruptStreamError,
    TruncatedStreamError,
    iter_blocks,
    sniff_compression,
)
from pipeline.ingest.pgn_reader import GameSplitter, PgnGames, game_starts, read_pgn

logger = logging.getLogger(__name__)

GAME = "chess"
PGN_SUFFIXES = (".pgn", ".pgn.zst", ".pgn.bz2")
_PGN_FIRST_BYTES = b"[{;%0123456789"
_WHITESPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
SNIFF_BYTES = 1 << 16
# Rating bands of Kuboki et al. 2025: 200 points wide, 1000 ≤ rating < 2600.
BAND_LOW, BAND_HIGH, BAND_WIDTH = 1000, 2600, 200
BAND_LABELS = pa.array([f"{lo}-{lo + BAND_WIDTH}" for lo in range(BAND_LOW, BAND_HIGH, BAND_WIDTH)])
# Lichess's speed rule: estimated duration = base + 40 × increment (seconds).
TC_THRESHOLDS_S = np.array([30, 180, 480, 1500])
TC_LABELS = pa.array(["ultrabullet", "bullet", "blitz", "rapid", "classical", "correspondence"])
RESULTS = pa.array(["1-0", "0-1", "1/2-1/2"])
WINNERS = pa.array(["white", "black", "draw"])
ENDED_BY = pa.array(["draw", "time", "resign", "other"])
TAGS = (
    "Event",
    "Site",
    "Date",
    "UTCDate",
    "White",
    "Black",
    "WhiteElo",
    "BlackElo",
    "TimeControl",
    "Result",
    "Termination",
    "Variant",
    "FEN",
)
REQUIRED_TAGS = ("White", "Black", "Result")
STANDARD_VARIANTS = ("standard", "from position", "chess")
# The games table's move lists start from the standard position, so a game set up from any
# other FEN cannot be stored (a "From Position" game holding the start FEN can).
START_FEN = chess.STARTING_FEN


class PgnError(KibitzError, ValueError):
    """A game or a file that is not readable PGN."""


class NotPgnError(PgnError):
    """A file whose bytes are not PGN text at all (binary, another format)."""


class IllegalMoveError(PgnError):
    """A move that python-chess, replaying the game, rejects (illegal, ambiguous, unparsable)."""


class MissingHeaderError(PgnError):
    """A game without a tag Kibitz needs (White, Black, Result; a date is optional)."""


class InvalidUtf8Error(PgnError):
    """A game whose bytes are not UTF-8."""


class UnsupportedVariantError(PgnError):
    """A game of a chess variant (Chess960, Crazyhouse…) that the games table does not hold."""


class ReaderDisagreementError(PgnError):
    """A game python-chess reads but the compiled reader rejects even after normalisation."""


@dataclass(frozen=True)
class PgnPiece:
    """The raw bytes of one chunk as cut from the stream, plus how the stream ended."""

    chunk: Chunk
    data: bytes
    stream_error: str | None  # set on the last piece of a truncated / corrupt / non-PGN file


@dataclass
class _GameTexts:
    """Games as one contiguous UTF-8 buffer: game i is ``data[offsets[i]:offsets[i + 1]]``."""

    data: bytes
    offsets: np.ndarray  # (n + 1,) int64
    source_index: np.ndarray  # (n,) int64, game number in the file
    source_offset: np.ndarray  # (n,) int64, byte offset in the decompressed file

    def __len__(self) -> int:
        return len(self.source_index)

    def text(self, i: int) -> bytes:
        return self.data[self.offsets[i] : self.offsets[i + 1]]

    def arrow(self) -> pa.LargeStringArray:
        """Zero-copy Arrow view (the bytes were checked to be UTF-8 before)."""
        return pa.LargeStringArray.from_buffers(
            len(self), pa.py_buffer(self.offsets), pa.py_buffer(self.data)
        )

    def take(self, rows: np.ndarray) -> _GameTexts:
        """The games ``rows`` packed into a new contiguous buffer (vectorised gather)."""
        starts = self.offsets[rows]
        lengths = self.offsets[rows + 1] - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        data = np.frombuffer(self.data, dtype=np.uint8)[gather].tobytes()
        return _GameTexts(data, offsets, self.source_index[rows], self.source_offset[rows])


# -- input files and chunk planning ---------------------------------------------------------


def expand_sources(paths: Sequence[str | Path]) -> list[str]:
    """Files given, plus every ``*.pgn``, ``*.pgn.zst``, ``*.pgn.bz2`` under folders given (sorted).

    The returned paths keep the spelling the user gave (``source_file`` in the table).
    """
    files: list[str] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(PGN_SUFFIXES)
            )
            files.extend(str(Path(given) / p.relative_to(path)) for p in found)
        elif path.is_file():
            files.append(str(given))
        else:
            raise FileNotFoundError(f"PGN source {str(given)!r} does not exist")
    return files


def _not_pgn_reason(head: bytes) -> str | None:
    """Why the first bytes of a file cannot start PGN text, or None if they can."""
    if b"\x00" in head[:SNIFF_BYTES]:
        return "contains NUL bytes (binary data)"
    text = head.removeprefix(_BOM).lstrip(_WHITESPACE)
    if text and text[0] not in _PGN_FIRST_BYTES:
        return f"starts with {text[:32]!r}, not a tag or a move"
    return None


def _locator(start: int, end: int, first_game: int, num_games: int, status: str) -> tuple:
    return ("bytes", start, end, first_game, num_games, status)


def stream_chunks(path: str | Path, *, games_per_chunk: int) -> Iterator[PgnPiece]:
    """Stream one file once and cut it into pieces of ``games_per_chunk`` games.

    The last piece of a stream that ends badly carries ``stream_error`` and the status
    ``"truncated"`` / ``"corrupt"`` in its locator (its last game is quarantined); a file that is
    not PGN at all gives one piece with status ``"not-pgn"``.
    """
    if games_per_chunk < 1:
        raise ValueError(f"games_per_chunk must be ≥ 1, got {games_per_chunk!r}")
    source_file = str(path)
    buf = bytearray()
    base = 0  # offset of buf[0] in the decompressed file
    found: list[int] = []  # starts of the games after the first one, relative to buf
    splitter = GameSplitter()
    scanned = 0  # buf[:scanned] has been fed to the splitter
    first_game = 0
    chunk_index = 0
    status, error = "ok", None
    blocks = iter_blocks(path)
    started = False
    try:
        for block in blocks:
            if not started:
                reason = _not_pgn_reason(block)
                if reason is not None:
                    error = f"{source_file!r} is not a PGN file: {reason}"
                    locator = _locator(0, min(len(block), 4096), 0, 1, "not-pgn")
                    yield PgnPiece(Chunk(GAME, source_file, 0, locator), block[:4096], error)
                    return
                stripped = block.removeprefix(_BOM).lstrip(_WHITESPACE)
                base += len(block) - len(stripped)
                block = stripped
                started = bool(block)
                if not started:
                    continue
            buf += block
            # A copy of the unscanned tail: no view of ``buf`` may outlive the call (numba's
            # first, compiling call keeps its arguments alive, and ``buf`` is resized below).
            starts, consumed = splitter.feed(bytes(buf[scanned:]))
            found.extend((starts + scanned).tolist())
            scanned += consumed
            while len(found) >= games_per_chunk:
                cut = found[games_per_chunk - 1]
                locator = _locator(base, base + cut, first_game, games_per_chunk, "ok")
                with memoryview(buf) as view:
                    data = bytes(view[:cut])
                yield PgnPiece(Chunk(GAME, source_file, chunk_index, locator), data, None)
                del buf[:cut]
                found = [p - cut for p in found[games_per_chunk:]]
                scanned -= cut
                base += cut
                first_game += games_per_chunk
                chunk_index += 1
    except TruncatedStreamError as exc:
        status, error = "truncated", str(exc)
    except CorruptStreamError as exc:
        status, error = ("corrupt" if started else "not-pgn"), str(exc)
    if status == "not-pgn":
        locator = _locator(0, 0, 0, 1, "not-pgn")
        yield PgnPiece(Chunk(GAME, source_file, 0, locator), b"", error)
        return
    starts, _ = splitter.feed(bytes(buf[scanned:]), final=True)  # the last line
    found.extend((starts + scanned).tolist())
    num_games = len(found) + 1 if buf.strip(_WHITESPACE) else 0
    if num_games or error:
        locator = _locator(base, base + len(buf), first_game, num_games, status)
        yield PgnPiece(Chunk(GAME, source_file, chunk_index, locator), bytes(buf), error)


def plan_chunks(paths: Sequence[Path], *, games_per_chunk: int) -> list[Chunk]:
    """Every chunk of every file (one streaming pass per file; the driver uses
    :func:`stream_chunks` instead so that it decompresses each file only once)."""
    return [
        piece.chunk
        for source in expand_sources(paths)
        for piece in stream_chunks(source, games_per_chunk=games_per_chunk)
    ]


def load_chunk_bytes(chunk: Chunk) -> tuple[bytes, str | None]:
    """Re-read a chunk's bytes from its file (seek for plain files, re-stream otherwise)."""
    _kind, start, end, _first, _count, status = chunk.locator
    if status == "not-pgn":
        for piece in stream_chunks(chunk.source_file, games_per_chunk=1):
            return piece.data, piece.stream_error
    if status == "ok" and sniff_compression(chunk.source_file) == "plain":
        with open(chunk.source_file, "rb") as handle:
            handle.seek(start)
            return handle.read(end - start), None
    out = bytearray()
    position = 0
    error = None
    try:
        for block in iter_blocks(chunk.source_file):
            lo, hi = max(start - position, 0), min(end - position, len(block))
            if lo < hi:
                out += block[lo:hi]
            position += len(block)
            if position >= end and status == "ok":
                break
    except CorruptStreamError as exc:
        error = str(exc)
    return bytes(out), error


# -- reading a chunk ------------------------------------------------------------------------


def _game_offsets(data: bytes) -> np.ndarray:
    """(n + 1,) byte offsets of the games in ``data`` (which starts at a game)."""
    if not data.strip(_WHITESPACE):
        return np.zeros(1, dtype=np.int64)
    return np.concatenate(([0], game_starts(data), [len(data)])).astype(np.int64)


def _tag_columns(texts: _GameTexts, parsed: PgnGames, names: Sequence[str]) -> dict[str, pa.Array]:
    """Values of the tags ``names`` (in the order given to :func:`read_pgn`) as string columns,
    gathered from the value spans the compiled reader located, with PGN escapes undone."""
    n = len(texts)
    buf = np.frombuffer(texts.data, dtype=np.uint8)
    out: dict[str, pa.Array] = {}
    for t, name in enumerate(names):
        starts = parsed.tag_start[:, t]
        present = starts >= 0
        lengths = np.where(present, parsed.tag_length[:, t], 0)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        gathered = buf[gather].tobytes()
        values = pa.LargeStringArray.from_buffers(
            n,
            pa.py_buffer(offsets),
            pa.py_buffer(gathered),
            null_bitmap=None if present.all() else pa.array(present).buffers()[1],
        ).cast(pa.string())
        if b"\\" in gathered:
            values = pc.replace_substring_regex(values, r'\\(["\\])', r"\1")
        out[name] = values
    return out


def _uci_table() -> np.ndarray:
    """(4096,) uint32: the 4 UCI bytes of (from·64 + to), little-endian, a1 = 0 … h8 = 63."""
    squares = [f + r for r in "12345678" for f in "abcdefgh"]
    codes = [int.from_bytes((a + b).encode(), "little") for a in squares for b in squares]
    return np.array(codes, dtype="<u4")


_UCI_CODES = _uci_table()
# chess_spec PROMO_* (0 none, 1 N, 2 B, 3 R, 4 Q) → UCI suffix byte.
_PROMOTION_BYTE = np.frombuffer(b"\0nbrq", dtype=np.uint8)


def _uci_strings(from_sq: np.ndarray, to_sq: np.ndarray, promotion: np.ndarray) -> pa.StringArray:
    """UCI moves as python-chess writes them (castling ``e1g1``), built without a Python loop."""
    codes = _UCI_CODES[from_sq.astype(np.int64) * 64 + to_sq]  # (M,) 4 bytes each
    data = codes.view(np.uint8)
    offsets = 4 * np.arange(len(codes) + 1, dtype=np.int32)
    promoted = np.flatnonzero(promotion > 0)
    if len(promoted):
        data = np.insert(data, 4 * promoted + 4, _PROMOTION_BYTE[promotion[promoted]])
        extra = np.zeros(len(codes) + 1, dtype=np.int32)
        extra[promoted + 1] = 1
        offsets += np.cumsum(extra, dtype=np.int32)
    return pa.StringArray.from_buffers(
        len(codes), pa.py_buffer(offsets), pa.py_buffer(data.tobytes())
    )


def _list_column(offsets: np.ndarray, values: pa.Array, present: np.ndarray) -> pa.ListArray:
    """A list per game; the list itself is null where ``present`` is False."""
    mask = None if present.all() else pa.array(~present)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=mask)


def _per_game_count(present: np.ndarray, plies: np.ndarray) -> np.ndarray:
    """(n,) how many moves of each game carry the annotation."""
    game_of_move = np.repeat(np.arange(len(plies)), plies)
    return np.bincount(game_of_move, weights=present, minlength=len(plies)).astype(np.int64)


def _rating_band(rating: pa.Array) -> pa.Array:
    values = pc.fill_null(rating, -1).to_numpy()
    inside = (values >= BAND_LOW) & (values < BAND_HIGH)
    index = np.where(inside, (values - BAND_LOW) // BAND_WIDTH, 0)
    return pc.take(BAND_LABELS, pa.array(index, mask=~inside))


def _int_or_null(raw: pa.Array, pattern: str = r"^\d{1,6}$") -> pa.Array:
    matches = pc.fill_null(pc.match_substring_regex(raw, pattern), False)
    return pc.cast(pc.if_else(matches, raw, pa.scalar(None, pa.string())), pa.int32())


def _date_and_month(raw: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(date, month) of PGN dates ``YYYY.MM.DD``; PGN writes unknown parts as ``??``:
    ``1997.05.??`` → (null, ``"1997-05"``), ``1997.??.??`` / ``????.??.??`` → (null, null)."""
    date = pc.cast(pc.strptime(raw, format="%Y.%m.%d", unit="s", error_is_null=True), pa.date32())
    ym = pc.extract_regex(raw, r"^(?P<y>\d{4})\.(?P<m>0[1-9]|1[0-2])\b")
    month = pc.binary_join_element_wise(pc.struct_field(ym, "y"), pc.struct_field(ym, "m"), "-")
    return date, month


def _time_control(raw: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(base_s, increment_s, class) with Lichess's rule: base + 40 × increment seconds.

    ``300+3``; sudden death ``600`` (chess.com, the PGN standard) is ``600+0``."""
    parts = pc.extract_regex(raw, r"^(?P<base>\d{1,7})(?:\+(?P<inc>\d{1,5}))?$")
    base = pc.cast(pc.struct_field(parts, "base"), pa.int32())
    inc_text = pc.struct_field(parts, "inc")
    inc = pc.cast(pc.if_else(pc.equal(inc_text, ""), "0", inc_text), pa.int32())
    estimate = pc.fill_null(pc.add(base, pc.multiply(inc, 40)), -1).to_numpy()
    index = np.searchsorted(TC_THRESHOLDS_S, estimate, side="right")
    correspondence = pc.fill_null(pc.equal(raw, "-"), False).to_numpy(zero_copy_only=False)
    index = np.where(correspondence, 5, index)
    known = (estimate >= 0) | correspondence
    return base, inc, pc.take(TC_LABELS, pa.array(index, mask=~known))


def _outcome(result: pa.Array, termination: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(winner, ended_by). Lichess's Termination "Normal" covers checkmate, resignation and
    the other over-the-board ends; with a decisive result it maps to "resign". A draw is
    "draw" whatever the Termination; "Time forfeit" with a decisive result is "time";
    Abandoned, Rules infraction, Unterminated and unfinished games ("*") are "other"."""
    index = pc.index_in(result, value_set=RESULTS)
    winner = pc.take(WINNERS, index)
    code = pc.fill_null(index, -1).to_numpy()
    term = pc.fill_null(termination, "").to_numpy(zero_copy_only=False)
    decisive = (code == 0) | (code == 1)
    ended = np.select(
        [code == 2, decisive & (term == "Time forfeit"), decisive & (term == "Normal")],
        [0, 1, 2],
        default=3,
    )
    return winner, pc.take(ENDED_BY, pa.array(ended))


def _game_ids(site: pa.Array, source_file: str, source_index: np.ndarray) -> pa.Array:
    """blake2b-64 of the game URL; of ``file#index`` when Site is not a URL."""
    ids = [
        blake2b_hex(url) if url and "://" in url else blake2b_hex(f"{source_file}#{index}")
        for url, index in zip(site.to_pylist(), source_index.tolist(), strict=True)
    ]
    return pa.array(ids, pa.string())


def _games_table(
    texts: _GameTexts, source_file: str
) -> tuple[pa.Table, PgnGames, dict[int, tuple[str, str]]]:
    """Every column of GAMES_SCHEMA for ``texts``, the compiled reader's verdicts and the rows
    with tag problems. Rows the compiled reader rejected are included; the caller drops them."""
    parsed = read_pgn(texts.data, texts.offsets, TAGS)
    n = len(texts)
    tags = _tag_columns(texts, parsed, TAGS)
    moves = _list_column(
        parsed.move_offsets,
        _uci_strings(parsed.from_sq, parsed.to_sq, parsed.promotion),
        np.ones(n, bool),
    )
    clock_present = ~np.isnan(parsed.clocks)
    clocks = _list_column(
        parsed.move_offsets,
        pa.array(parsed.clocks, pa.float32(), mask=~clock_present),
        _per_game_count(clock_present, np.diff(parsed.move_offsets)) > 0,
    )
    eval_present = parsed.has_eval
    evals = _list_column(
        parsed.move_offsets,
        pa.array(parsed.evals_cp, pa.int32(), mask=~eval_present),
        _per_game_count(eval_present, np.diff(parsed.move_offsets)) > 0,
    )
    utc_date, utc_month = _date_and_month(tags["UTCDate"])
    pgn_date, pgn_month = _date_and_month(tags["Date"])
    date = pc.coalesce(utc_date, pgn_date)
    month = pc.coalesce(utc_month, pgn_month, pa.scalar(UNKNOWN_MONTH))
    white_rating = _int_or_null(tags["WhiteElo"])
    black_rating = _int_or_null(tags["BlackElo"])
    white_band = _rating_band(white_rating)
    black_band = _rating_band(black_rating)
    rank_group = pc.if_else(
        pc.equal(white_band, black_band), white_band, pa.scalar(None, pa.string())
    )
    base, inc, tc_class = _time_control(tags["TimeControl"])
    winner, ended_by = _outcome(tags["Result"], tags["Termination"])
    site = tags["Site"]
    is_lichess = pc.fill_null(pc.starts_with(site, "https://lichess.org/"), False)
    columns = {
        "game_id": _game_ids(site, source_file, texts.source_index),
        "game": pa.array(np.full(n, GAME), pa.string()),
        "source": pc.if_else(is_lichess, "lichess", "pgn"),
        "month": month,
        "source_file": pa.array(np.full(n, source_file), pa.string()),
        "source_member": pa.nulls(n, pa.string()),
        "source_index": pa.array(texts.source_index, pa.int64()),
        "source_offset": pa.array(texts.source_offset, pa.int64()),
        "site": site,
        "event": tags["Event"],
        "date": date,
        "white": tags["White"],
        "black": tags["Black"],
        "white_rating_raw": tags["WhiteElo"],
        "black_rating_raw": tags["BlackElo"],
        "white_rating": white_rating,
        "black_rating": black_rating,
        "white_rank_group": white_band,
        "black_rank_group": black_band,
        "rank_group": rank_group,
        "time_control": tags["TimeControl"],
        "tc_base_s": base,
        "tc_increment_s": inc,
        "tc_class": tc_class,
        "result": tags["Result"],
        "winner": winner,
        "ended_by": ended_by,
        "termination": tags["Termination"],
        "board_size": pa.array(np.full(n, 8, dtype=np.int16)),
        "num_plies": pa.array(np.diff(parsed.move_offsets).astype(np.int32)),
        "moves": moves,
        "clocks_s": clocks,
        "evals_cp": evals,
    }
    arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in GAMES_SCHEMA]
    table = pa.Table.from_arrays(
        [a.cast(f.type) for a, f in zip(arrays, GAMES_SCHEMA, strict=True)], schema=GAMES_SCHEMA
    )
    return table, parsed, _header_problems(tags, texts, source_file)


def _header_problems(
    tags: dict[str, pa.Array], texts: _GameTexts, source_file: str
) -> dict[int, tuple[str, str]]:
    """Row → (error type, reason) for games missing a needed tag, of another variant or set up
    from a position other than the standard start."""
    missing = {
        name: pc.is_null(tags[name]).to_numpy(zero_copy_only=False) for name in REQUIRED_TAGS
    }
    variant = pc.utf8_lower(pc.fill_null(tags["Variant"], "standard"))
    other_variant = pc.invert(pc.is_in(variant, pa.array(STANDARD_VARIANTS))).to_numpy(
        zero_copy_only=False
    )
    set_up = pc.fill_null(pc.not_equal(tags["FEN"], START_FEN), False).to_numpy(
        zero_copy_only=False
    )
    any_missing = np.logical_or.reduce(list(missing.values()))
    problems: dict[int, tuple[str, str]] = {}
    for row in np.flatnonzero(any_missing | other_variant | set_up).tolist():
        where = _where(source_file, texts, row)
        if any_missing[row]:
            names = [name for name, mask in missing.items() if mask[row]]
            problems[row] = ("MissingHeaderError", f"{where}: missing tag(s) {', '.join(names)}")
        elif other_variant[row]:
            name = tags["Variant"][row].as_py()
            problems[row] = (
                "UnsupportedVariantError",
                f"{where}: variant {name!r} is not standard chess",
            )
        else:
            fen = tags["FEN"][row].as_py()
            problems[row] = (
                "UnsupportedVariantError",
                f"{where}: starts from the set-up position {fen!r}, not the standard start",
            )
    return problems


def _where(source_file: str, texts: _GameTexts, row: int) -> str:
    return (
        f"{source_file!r} game {int(texts.source_index[row])} "
        f"(byte {int(texts.source_offset[row])})"
    )


def _replay_with_python_chess(text: str) -> tuple[str | None, str | None]:
    """(the game re-exported by python-chess, None) or (None, why python-chess rejects it)."""
    game = chess.pgn.read_game(io.StringIO(text))
    if game is None:
        return None, "no game found"
    if game.errors:
        return None, str(game.errors[0])
    for ply, move in enumerate(game.mainline_moves(), start=1):
        if not move:
            return None, f"null move at ply {ply}"
    exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=True)
    return game.accept(exporter), None


def _quarantine_row(texts: _GameTexts, row: int, error_type: str, reason: str) -> dict:
    return {
        "game": GAME,
        "source_file": None,  # filled by the caller
        "source_index": int(texts.source_index[row]),
        "source_offset": int(texts.source_offset[row]),
        "error_type": error_type,
        "reason": reason,
        "raw": raw_excerpt(texts.text(row)),
    }


def read_games(texts: _GameTexts, source_file: str) -> tuple[list[pa.Table], list[dict]]:
    """Read well-formed UTF-8 games: (tables of good rows, quarantine rows)."""
    table, parsed, problems = _games_table(texts, source_file)
    quarantined = [
        _quarantine_row(texts, row, kind, reason) for row, (kind, reason) in problems.items()
    ]
    good = parsed.valid.copy()
    good[list(problems)] = False
    tables = [table.filter(pa.array(good))]
    replayed_rows, replayed_texts = [], []
    # A game already quarantined for its tags is not replayed (it would be quarantined twice).
    for row in np.flatnonzero(~parsed.valid).tolist():
        if row in problems:
            continue
        text = texts.text(row).decode("utf-8")
        clean, why = _replay_with_python_chess(text)
        if clean is None:
            reason = (
                f"{_where(source_file, texts, row)}: {parsed.error(texts.data, row)}; "
                f"python-chess: {why}"
            )
            quarantined.append(_quarantine_row(texts, row, "IllegalMoveError", reason))
        else:
            replayed_rows.append(row)
            replayed_texts.append(clean.encode("utf-8"))
    if replayed_rows:
        rows = np.array(replayed_rows, dtype=np.int64)
        lengths = [len(t) for t in replayed_texts]
        clean_texts = _GameTexts(
            b"".join(replayed_texts),
            np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
            texts.source_index[rows],
            texts.source_offset[rows],
        )
        clean_table, clean_parsed, clean_problems = _games_table(clean_texts, source_file)
        for row in np.flatnonzero(~clean_parsed.valid).tolist():
            reason = (
                f"{_where(source_file, clean_texts, row)}: python-chess reads the game but the "
                f"compiled reader rejects it: {clean_parsed.error(clean_texts.data, row)}"
            )
            quarantined.append(
                _quarantine_row(texts, int(rows[row]), "ReaderDisagreementError", reason)
            )
        clean_good = clean_parsed.valid.copy()
        for row, (kind, reason) in clean_problems.items():
            clean_good[row] = False
            if clean_parsed.valid[row]:
                quarantined.append(_quarantine_row(texts, int(rows[row]), kind, reason))
        tables.append(clean_table.filter(pa.array(clean_good)))
    return tables, quarantined


def read_chunk(
    chunk: Chunk, data: bytes | None = None, *, stream_error: str | None = None
) -> ChunkResult:
    """Read one chunk: the driver passes the bytes it cut from the stream; without them the
    chunk is re-read from its file (tests, ad-hoc use)."""
    _kind, start, _end, first_game, _num_games, status = chunk.locator
    if data is None:
        data, stream_error = load_chunk_bytes(chunk)
    source_file = chunk.source_file
    if status == "not-pgn":
        row = {
            "game": GAME,
            "source_file": source_file,
            "source_index": 0,
            "source_offset": 0,
            "error_type": NotPgnError.__name__,
            "reason": stream_error or f"{source_file!r} is not a PGN file",
            "raw": raw_excerpt(data),
        }
        return ChunkResult(GAMES_SCHEMA.empty_table(), quarantine_table([row]))
    offsets = _game_offsets(data)
    n = len(offsets) - 1
    texts = _GameTexts(
        data, offsets, first_game + np.arange(n, dtype=np.int64), start + offsets[:-1]
    )
    bad: dict[int, tuple[str, str]] = {}
    if status != "ok" and n:
        kind = TruncatedStreamError if status == "truncated" else CorruptStreamError
        bad[n - 1] = (
            kind.__name__,
            f"{_where(source_file, texts, n - 1)} is cut off where the stream ends: {stream_error}",
        )
    if not data.isascii():
        try:
            texts.arrow().validate(full=True)  # Arrow's vectorised UTF-8 check
        except pa.ArrowInvalid:
            for row in range(n):
                try:
                    texts.text(row).decode("utf-8")
                except UnicodeDecodeError as exc:
                    snippet = texts.text(row)[max(exc.start - 24, 0) : exc.end + 24]
                    bad.setdefault(
                        row,
                        (
                            InvalidUtf8Error.__name__,
                            f"{_where(source_file, texts, row)}: invalid UTF-8 at byte "
                            f"{exc.start} of the game: {snippet!r}",
                        ),
                    )
    quarantined = [_quarantine_row(texts, row, *bad[row]) for row in sorted(bad)]
    readable = texts
    if bad:
        readable = texts.take(np.array([r for r in range(n) if r not in bad], dtype=np.int64))
    tables, more = read_games(readable, source_file) if len(readable) else ([], [])
    quarantined += more
    games = pa.concat_tables(tables) if tables else GAMES_SCHEMA.empty_table()
    if len(tables) > 1:
        games = games.sort_by("source_index")
    for row in quarantined:
        row["source_file"] = source_file
    quarantined.sort(key=lambda row: row["source_index"])
    return ChunkResult(games, quarantine_table(quarantined))


def read_text(data: bytes, source_file: str) -> ChunkResult:
    """Read PGN text held in memory (one posted game, ``kibitz serve``) as a chunk of a file
    named ``source_file``: the name games without a URL in ``Site`` take their id from."""
    text = data.removeprefix(_BOM).lstrip(_WHITESPACE)
    reason = _not_pgn_reason(text[:SNIFF_BYTES])
    if reason is not None:
        locator = _locator(0, len(text), 0, 1, "not-pgn")
        chunk = Chunk(GAME, source_file, 0, locator)
        return read_chunk(chunk, text, stream_error=f"{source_file!r} is not PGN: {reason}")
    return read_chunk(Chunk(GAME, source_file, 0, _locator(0, len(text), 0, 0, "ok")), text)


# One short game with a clock and an eval comment, castling and a promotion: the branches of
# the compiled reader that Lichess dumps take.
_COMPILE_PGN = (
    b'[Event "Rated blitz game"]\n[Site "https://lichess.org/compile0"]\n[Date "2024.02.01"]\n'
    b'[White "a"]\n[Black "b"]\n[Result "1-0"]\n[UTCDate "2024.02.01"]\n[WhiteElo "1500"]\n'
    b'[BlackElo "1500"]\n[TimeControl "180+0"]\n[Termination "Normal"]\n\n'
    b"1. e4 { [%eval 0.2] [%clk 0:03:00] } d5 2. exd5 c6 3. dxc6 Nf6 4. cxb7 Nbd7 5. bxa8=Q "
    b"e5 6. Nf3 Bd6 7. Be2 O-O 8. O-O 1-0\n\n"
)


def compile_kernels() -> None:
    """Compile the compiled reader's numba kernels (or load them from numba's on-disk cache)
    by reading one short game as a task does.

    ``kibitz ingest`` calls it in the driver before Ray starts its workers, which then load
    the kernels instead of each compiling them: on an empty cache 8 workers reading 1,000 games
    each spent 421 CPU-s, against 70 with this call first (docs/guide/ingest.md,
    ``bench/speed/bench_numba_cache.py --stage ingest``).
    """
    data = _COMPILE_PGN
    result = read_chunk(
        Chunk(GAME, "<compile_kernels>", 0, _locator(0, len(data), 0, 1, "ok")), data
    )
    if result.games.num_rows != 1:  # the game above is legal: a reader that drops it is broken
        raise RuntimeError(f"compile_kernels quarantined its game: {result.quarantine.to_pylist()}")


def main(argv: Sequence[str] | None = None) -> int:
    """Read PGN files and print what each chunk gives (a quick check of a file)."""
    paths = list(argv if argv is not None else sys.argv[1:])
    for source in expand_sources(paths):
        for piece in stream_chunks(source, games_per_chunk=20_000):
            result = read_chunk(piece.chunk, piece.data, stream_error=piece.stream_error)
            print(
                f"{source}: chunk {piece.chunk.chunk_index} {piece.chunk.chunk_id}: "
                f"{result.games.num_rows} games, {result.quarantine.num_rows} quarantined"
            )
            for reason in result.quarantine.column("reason").to_pylist():
                print(f"  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
