"""A fast reader for the SGF subset that Go servers (Fox above all) write.

One numba pass over the bytes of a file or archive member finds every game tree, follows its
main line (the first variation at every branch), records each ``B``/``W`` move as integers and
marks where the game-info part ends; only that short header is decoded and split in Python.
This keeps the per-move work out of the interpreter: a dump of millions of games is mostly
moves. Supported: several game trees per file (also one per line), properties with several
values (``AB[pd][dp]``), escaped ``\\]`` in values, variations (nested ``(;…)`` inside a game
tree: only the main line is kept, the others are counted per tree), and a root node that lost
its opening ``(`` (raw Fox files: the ``(`` is put back, so the file stays one game tree).

Text is decoded as UTF-8 with replacement because Fox replaces bytes of player names with
``?``, breaking multi-byte characters; bytes that cannot be SGF structure (outside ``[...]``)
are errors of that game. Content without any game tree is classified as empty, NUL-filled
or not SGF, each its own error type.

Moves come out as SGF coordinates (``x``, ``y`` = letter − ``a``, column then row, ``-1`` for
an empty value, i.e. a pass); ``move_strings`` turns them into the games table's
``"B:pd"``/``"W:pass"`` form, treating ``tt`` as a pass on boards up to 19×19.

Run ``python -m pytest tests/test_ingest_go.py`` for the checks on real Fox files and
``python bench/speed/bench_ingest_go.py`` for the speed.

>>> batch = parse_sgf(b"(;GM[1]SZ[19]PB[a\\\\]b]AB[dd][pp];W[qd];B[];W[tt])")
>>> batch.num_games, batch.properties(0)["AB"], batch.properties(0)["PB"]
(1, ['dd', 'pp'], ['a]b'])
>>> move_strings(batch.move_colour, batch.move_x, batch.move_y, np.array([19, 19, 19])).to_pylist()
['W:qd', 'B:pass', 'W:pass']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numba import njit

from pipeline.core.errors import KibitzError

# Per-tree status codes written by the scanner.
OK = 0
TRUNCATED = 1  # end of input inside a game tree or a property value
BAD_BYTE = 2  # a byte that cannot be SGF structure outside [...], e.g. broken UTF-8
BAD_MOVE = 3  # a B/W value that is neither empty nor two letters
SETUP_AFTER_MOVE = 4  # AB/AW/AE after the first move on the main line (not supported)

STATUS_TEXT = {
    TRUNCATED: "truncated game tree (input ends inside the game)",
    BAD_BYTE: "byte that is not SGF structure outside a property value",
    BAD_MOVE: "move value is neither empty (pass) nor two letters",
    SETUP_AFTER_MOVE: "setup stones (AB/AW/AE) after the first move",
}

# Columns of the scanner's per-tree table.
(
    _T_START,
    _T_END,
    _T_HEAD_END,
    _T_MOVE_LO,
    _T_MOVE_HI,
    _T_STATUS,
    _T_ERROR_POS,
    _T_SEGMENT,
    _T_VARIATIONS,
) = range(9)
_T_COLUMNS = 9

# One match per property value; the identifier group is empty for a property's 2nd, 3rd… value.
_VALUE_RE = re.compile(r"(?:([A-Za-z]+)\s*)?\[([^\]\\]*(?:\\.[^\]\\]*)*)\]", re.DOTALL)
_ESCAPE_RE = re.compile(r"\\(\r\n|\n\r|\n|\r|.)", re.DOTALL)
_UTF8_BOM = b"\xef\xbb\xbf"
# A file whose first byte besides whitespace is ";": a root node that lost its "(".
_ROOT_WITHOUT_PAREN = re.compile(rb"[ \t\r\n\x0b\x0c]*;")

# Move code = colour * 1024 + (x + 1) * 32 + (y + 1); x = y = -1 (code 0 / 1024) is a pass.
_MOVE_CODE_COLOUR = 1024
_MOVE_TEXT = pa.array(
    [
        f"{'BW'[c // 1024]}:pass"
        if (c % 1024) < 32
        else f"{'BW'[c // 1024]}:{chr(96 + (c % 1024) // 32)}{chr(96 + c % 32)}"
        for c in range(2 * _MOVE_CODE_COLOUR)
    ],
    pa.string(),
)


class SgfError(KibitzError, ValueError):
    """Input that is not a readable SGF game."""


class EmptySgfError(SgfError):
    """A file or member with no bytes other than whitespace."""


class NulFilledSgfError(SgfError):
    """A file or member made only of NUL bytes (seen in raw Fox archives)."""


class NotSgfError(SgfError):
    """Content without any SGF game tree."""


class SgfGameError(SgfError):
    """One game tree that is broken (truncated, bad bytes, bad move values)."""


@njit(cache=True, nogil=True)
def _scan(buf, bounds, max_trees, max_moves):  # pragma: no cover - compiled
    """Find game trees and main-line moves in each segment ``buf[bounds[s]:bounds[s + 1]]``.

    A tree never runs past the end of its segment (a truncated member stays one broken game).
    """
    num_segments = bounds.shape[0] - 1
    trees = np.empty((max_trees, _T_COLUMNS), np.int64)
    colour = np.empty(max_moves, np.int8)
    xs = np.empty(max_moves, np.int8)
    ys = np.empty(max_moves, np.int8)
    junk = np.zeros(num_segments, np.int64)
    first_junk = np.full(num_segments, -1, np.int64)
    nt = 0
    nm = 0
    for seg in range(num_segments):
        i = bounds[seg]
        n = bounds[seg + 1]
        nt, nm = _scan_segment(buf, i, n, seg, trees, nt, colour, xs, ys, nm, junk, first_junk)
    return trees[:nt], colour[:nm], xs[:nm], ys[:nm], junk, first_junk


@njit(cache=True, nogil=True)
def _scan_segment(
    buf, i, n, seg, trees, nt, colour, xs, ys, nm, junk, first_junk
):  # pragma: no cover
    """Scan one segment from ``i`` to ``n``; returns the new tree and move counts."""
    while i < n:
        c = buf[i]
        if c == 40:  # '(' starts a game tree
            start = i
            depth = 1
            mainline = True
            leaves = 0  # lines of play: trees closed without a subtree of their own
            opened = True  # the last parenthesis seen was a "("
            head_end = -1
            pending_head = False
            seen_move = False
            node = -1
            node_start = i
            status = 0
            error_pos = -1
            move_lo = nm
            id0 = 0
            id1 = 0
            idlen = 0
            in_ident = False
            i += 1
            while i < n and depth > 0:
                c = buf[i]
                if c == 91:  # '[' property value
                    j = i + 1
                    while j < n and buf[j] != 93:
                        if buf[j] == 92:  # backslash escapes the next byte
                            j += 1
                        j += 1
                    if j >= n:
                        if status == 0:
                            status = 1
                            error_pos = i
                        i = n
                        break
                    if mainline and idlen == 1 and (id0 == 66 or id0 == 87):  # B / W
                        if not seen_move:
                            seen_move = True
                            if node > 0:
                                head_end = node_start
                            else:
                                pending_head = True
                        length = j - i - 1
                        x = -1
                        y = -1
                        if length == 2:
                            a = buf[i + 1]
                            b = buf[i + 2]
                            if 97 <= a <= 122 and 97 <= b <= 122:
                                x = a - 97
                                y = b - 97
                            elif status == 0:
                                status = 3
                                error_pos = i
                        elif length != 0 and status == 0:
                            status = 3
                            error_pos = i
                        colour[nm] = 0 if id0 == 66 else 1
                        xs[nm] = x
                        ys[nm] = y
                        nm += 1
                    elif (
                        mainline
                        and seen_move
                        and idlen == 2
                        and id0 == 65
                        and (id1 == 66 or id1 == 87 or id1 == 69)
                        and status == 0
                    ):
                        status = 4
                        error_pos = i
                    in_ident = False
                    i = j + 1
                    continue
                if 65 <= c <= 90:  # upper-case letter of a property identifier
                    if in_ident:
                        idlen += 1
                        if idlen == 2:
                            id1 = c
                    else:
                        id0 = c
                        id1 = 0
                        idlen = 1
                        in_ident = True
                elif 97 <= c <= 122:  # FF[3] lower-case letters inside identifiers
                    if in_ident:
                        idlen += 8
                    elif status == 0:
                        status = 2
                        error_pos = i
                elif c == 59 or c == 40 or c == 41:  # ';' '(' ')'
                    in_ident = False
                    idlen = 0
                    if mainline and pending_head:
                        head_end = i
                        pending_head = False
                    if c == 59:
                        if mainline:
                            node += 1
                            node_start = i
                    elif c == 40:
                        depth += 1
                        opened = True
                    else:
                        if opened:
                            leaves += 1
                        opened = False
                        depth -= 1
                        if mainline:
                            mainline = False
                            if head_end < 0:
                                head_end = i
                elif status == 0 and not (
                    c == 32 or c == 10 or c == 13 or c == 9 or c == 11 or c == 12
                ):
                    status = 2
                    error_pos = i
                i += 1
            if depth > 0 and status == 0:
                status = 1
                error_pos = i
            if head_end < 0:
                head_end = i
            trees[nt, 0] = start
            trees[nt, 1] = i
            trees[nt, 2] = head_end
            trees[nt, 3] = move_lo
            trees[nt, 4] = nm
            trees[nt, 5] = status
            trees[nt, 6] = error_pos
            trees[nt, 7] = seg
            trees[nt, 8] = max(leaves - 1, 0)  # variations: lines besides the main line
            nt += 1
        else:
            if not (c == 32 or c == 10 or c == 13 or c == 9 or c == 11 or c == 12):
                junk[seg] += 1
                if first_junk[seg] < 0:
                    first_junk[seg] = i
            i += 1
    return nt, nm


def _unescape(value: str) -> str:
    """SGF text unescaping: ``\\]`` → ``]``, a backslash before a line break removes both."""
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: "" if m[1] in ("\n", "\r", "\r\n", "\n\r") else m[1], value)


@dataclass(frozen=True)
class SgfBatch:
    """Game trees of one or more segments (files, archive members) scanned in one pass.

    Structure and main-line moves are arrays; header properties are decoded on demand.
    """

    data: bytes
    bounds: np.ndarray  # (S + 1,) int64 segment s is data[bounds[s]:bounds[s + 1]]
    # (T, 9) int64: start, end, head_end, move_lo, move_hi, status, error_pos, segment,
    # variations (lines of play besides the main line, dropped)
    trees: np.ndarray
    move_colour: np.ndarray  # (M,) int8: 0 black, 1 white
    move_x: np.ndarray  # (M,) int8: column, 0 = 'a'; -1 for an empty value (pass)
    move_y: np.ndarray  # (M,) int8: row, 0 = 'a' (top); -1 for an empty value
    junk_bytes: np.ndarray  # (S,) int64 non-whitespace bytes outside every game tree
    first_junk: np.ndarray  # (S,) int64 offset of the first of them, -1 when none
    recovered: np.ndarray  # (S,) bool: the segment's root lacked its "(" (put back in ``data``)

    @property
    def num_games(self) -> int:
        return int(self.trees.shape[0])

    @property
    def move_offsets(self) -> np.ndarray:
        """(T + 1,) int64: game i's moves are ``move_*[offsets[i]:offsets[i + 1]]``."""
        return np.append(self.trees[:, _T_MOVE_LO], len(self.move_colour))

    @property
    def status(self) -> np.ndarray:
        return self.trees[:, _T_STATUS]

    @property
    def starts(self) -> np.ndarray:
        return self.trees[:, _T_START]

    @property
    def segment(self) -> np.ndarray:
        """(T,) int64 segment of each game tree."""
        return self.trees[:, _T_SEGMENT]

    @property
    def variations(self) -> np.ndarray:
        """(T,) int64 lines of play besides the main line in each game tree (not kept).

        A tree with ``n`` leaves has ``n - 1`` variations:
        ``(;B[aa](;W[bb])(;W[cc](;B[dd])(;B[ee])))`` has 2 (``aa cc dd`` and ``aa cc ee``
        besides the main line ``aa bb``).
        """
        return self.trees[:, _T_VARIATIONS]

    def trees_per_segment(self) -> np.ndarray:
        """(S,) int64 number of game trees found in each segment."""
        return np.bincount(self.segment, minlength=len(self.bounds) - 1)

    def line_numbers(self) -> np.ndarray:
        """(T,) int64 1-based line of its segment on which each game tree starts."""
        newlines = np.flatnonzero(np.frombuffer(self.data, np.uint8) == 10)
        before_segment = np.searchsorted(newlines, self.bounds[self.segment])
        return np.searchsorted(newlines, self.starts) - before_segment + 1

    def segment_error(self, segment: int) -> SgfError | None:
        """Why a segment holds no game at all (empty, NUL-filled, not SGF); None if it has games."""
        if np.any(self.segment == segment):
            return None
        data = self.data[self.bounds[segment] : self.bounds[segment + 1]]
        if not data.strip():
            return EmptySgfError("empty input: no bytes besides whitespace")
        if data.count(0) == len(data):
            return NulFilledSgfError(f"input is {len(data)} NUL bytes")
        return NotSgfError(f"no SGF game tree '(;' found; input starts with {data[:40]!r}")

    def error(self, index: int) -> str | None:
        """Why game ``index`` is broken, naming the byte offset in its segment; None when fine."""
        status = int(self.trees[index, _T_STATUS])
        if status == OK:
            return None
        pos = int(self.trees[index, _T_ERROR_POS])
        segment = int(self.trees[index, _T_SEGMENT])
        lo, hi = int(self.bounds[segment]), int(self.bounds[segment + 1])
        near = self.data[max(pos - 20, lo) : min(pos + 20, hi)]
        offset = pos - lo
        return f"{STATUS_TEXT[status]} at byte {offset} (near {near!r})"

    def header_text(self, index: int) -> str:
        """Root node and setup nodes of game ``index`` (up to the first move node), decoded."""
        start, head_end = int(self.trees[index, _T_START]), int(self.trees[index, _T_HEAD_END])
        return self.data[start:head_end].decode("utf-8", "replace")

    def raw_bytes(self, index: int, limit: int = 4096) -> bytes:
        """The first ``limit`` bytes of game ``index``."""
        start, end = int(self.trees[index, _T_START]), int(self.trees[index, _T_END])
        return self.data[start : min(end, start + limit)]

    def properties(self, index: int) -> dict[str, list[str]]:
        """Game-info and setup properties (root node plus nodes before the first move).

        A property seen twice (Fox writes ``AP`` twice) keeps all values in order; ``B``/``W``
        in the root node are moves and not listed.
        """
        props: dict[str, list[str]] = {}
        values: list[str] = []
        for ident, value in _VALUE_RE.findall(self.header_text(index)):
            if ident:
                values = props.setdefault(ident, []) if ident not in ("B", "W") else []
            values.append(_unescape(value) if "\\" in value else value)
        return props


def parse_segments(segments: Sequence[bytes]) -> SgfBatch:
    """Scan several files or members in one pass; games never span two segments.

    Per-segment problems (no game tree) are reported by ``SgfBatch.segment_error`` and per-game
    ones by ``SgfBatch.error``, so one bad member does not lose the others. A segment whose
    first byte besides whitespace is the root's ``;`` (its ``(`` is missing, seen in raw Fox
    archives) gets the ``(`` put back, so that the file is one game tree whose variations stay
    inside it; ``SgfBatch.recovered`` names those segments (byte offsets in their messages
    count the ``(`` put back).
    """
    cleaned = [b"   " + d[3:] if d.startswith(_UTF8_BOM) else d for d in segments]
    recovered = np.array([_ROOT_WITHOUT_PAREN.match(d) is not None for d in cleaned], bool)
    if recovered.any():
        cleaned = [b"(" + d if r else d for d, r in zip(cleaned, recovered.tolist(), strict=True)]
    data = b"".join(cleaned)
    bounds = np.zeros(len(cleaned) + 1, np.int64)
    np.cumsum([len(d) for d in cleaned], out=bounds[1:])
    trees, colour, xs, ys, junk, first_junk = _scan(
        np.frombuffer(data, np.uint8), bounds, data.count(b"("), data.count(b"[")
    )
    return SgfBatch(data, bounds, trees, colour, xs, ys, junk, first_junk, recovered)


def parse_sgf(data: bytes) -> SgfBatch:
    """Scan every game tree of one file; raises only when there is no game tree at all."""
    batch = parse_segments([data])
    error = batch.segment_error(0)
    if error is not None:
        raise error
    return batch


def move_strings(
    colour: np.ndarray, x: np.ndarray, y: np.ndarray, board_size: np.ndarray
) -> pa.StringArray:
    """``"B:pd"`` / ``"W:pass"`` strings for moves; ``tt`` is a pass on boards up to 19×19.

    ``board_size`` is per move. Off-board coordinates must be rejected before (``off_board``).
    """
    x = x.astype(np.int16)  # (M,)
    y = y.astype(np.int16)  # (M,)
    tt_pass = (x == 19) & (y == 19) & (board_size <= 19)  # (M,)
    x = np.where(tt_pass, -1, x)
    y = np.where(tt_pass, -1, y)
    codes = colour.astype(np.int16) * _MOVE_CODE_COLOUR + (x + 1) * 32 + (y + 1)  # (M,)
    return _MOVE_TEXT.take(pa.array(codes, pa.int16()))


def off_board(x: np.ndarray, y: np.ndarray, board_size: np.ndarray) -> np.ndarray:
    """(M,) bool: moves outside the board (``tt`` on boards up to 19×19 is a pass, not off)."""
    tt_pass = (x == 19) & (y == 19) & (board_size <= 19)
    return ~tt_pass & ((x >= board_size) | (y >= board_size))
