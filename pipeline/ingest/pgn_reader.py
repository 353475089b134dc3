"""Compiled PGN reader: tags, SAN → from/to squares, ``%clk`` and ``%eval`` for whole chunks.

The chess ingestion hot path (issue: 20,000 games/s per core). One numba call reads every game
of a chunk: it locates the values of the wanted tags, tokenises the movetext, resolves each SAN
move on bitboards
(attack tables and the legality test of :mod:`pipeline.chess_game.encode`, so there is one board
implementation in Kibitz), plays it, and reads the first ``[%clk …]`` and ``[%eval …]`` of the
comments after each move exactly as python-chess's ``GameNode.clock()`` / ``eval()`` regexes
do. No Python object exists per game or per move.

It reads the dialect of the Lichess exports strictly — SAN with optional ``+``/``#``/``!?``
suffixes, move numbers, comments, NAGs, one result token — and hands anything else back
(status ≠ 0): variations, ``;`` comments, null moves, long algebraic or other unusual SAN, an
illegal or ambiguous move. Those games go to python-chess, which decides with exact rules
(:func:`pipeline.ingest.pgn.read_games`): it quarantines what it rejects and re-exports what it
reads as clean SAN, which this reader then reads. Being strict therefore never changes a
result; it only sends a rare game down the slow path. Tested field by field against
python-chess on a whole band file (``tests/test_ingest_chess.py``, ``tests/test_pgn_movetext.py``).

Use::

    from pipeline.ingest.pgn_reader import read_pgn
    games = read_pgn(data, offsets, ("White", "Black"))  # offsets: (n + 1,) byte offsets
    games.tag_start, games.tag_length                     # (n, 2) value spans, -1 = absent
    games.move_offsets, games.from_sq, games.to_sq, games.promotion, games.clocks, games.evals_cp
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numba import njit

from pipeline.chess_game.encode import (
    _BK,
    _BQ,
    _START_COLOURS,
    _START_MAILBOX,
    _START_PIECES,
    _WK,
    _WQ,
    BIT,
    KING_ATTACKS,
    KNIGHT_ATTACKS,
    _apply_move,
    _attacked,
    _bishop_attacks,
    _lsb,
    _rook_attacks,
    _safe_after,
)
from pipeline.chess_game.spec import (
    BISHOP,
    KING,
    KNIGHT,
    PAWN,
    PROMO_BISHOP,
    PROMO_KNIGHT,
    PROMO_NONE,
    PROMO_QUEEN,
    PROMO_ROOK,
    QUEEN,
    ROOK,
)

MATE_SCORE_CP = 100_000  # mate in n is ±(MATE_SCORE_CP − n), White's view

STATUS_OK = 0
STATUS_UNSUPPORTED = 1  # a token this reader does not read (python-chess decides)
STATUS_ILLEGAL = 2  # no legal move matches the SAN
STATUS_AMBIGUOUS = 3  # several legal moves match the SAN
STATUS_REASONS = {
    STATUS_UNSUPPORTED: "token outside the Lichess PGN dialect",
    STATUS_ILLEGAL: "no legal move matches",
    STATUS_AMBIGUOUS: "ambiguous move",
}
_TOKEN = re.compile(rb"[^\s{}();$]*")
_NAME_BYTES = 32

_SP, _TAB, _CR, _LF = 32, 9, 13, 10
# Where the game splitter is at the start of a line (python-chess's read_game states).
_SPLIT_BETWEEN, _SPLIT_HEADERS, _SPLIT_MOVETEXT, _SPLIT_COMMENT = 0, 1, 2, 3
# What is left of the current line: nothing (at a line start), bytes to skip, movetext.
_REST_NONE, _REST_SKIP, _REST_MOVETEXT = 0, 1, 2
# How a stretch of movetext ended: its line ended, inside a comment, or mid-line at the input's
# end (in movetext, or in a ";" comment).
_MT_LINE_DONE, _MT_IN_COMMENT, _MT_MID_LINE, _MT_MID_SKIP = 0, 1, 2, 3
_LBRACE, _RBRACE, _LPAREN, _RPAREN, _SEMI, _DOLLAR, _PERCENT = 123, 125, 40, 41, 59, 36, 37
_DOT, _DASH, _SLASH, _STAR, _EQ, _X, _HASH, _PLUS, _BANG, _QMARK = (
    46,
    45,
    47,
    42,
    61,
    120,
    35,
    43,
    33,
    63,
)
_LBRACKET, _RBRACKET, _COLON, _COMMA = 91, 93, 58, 44
_SPACE = np.zeros(256, dtype=np.bool_)
_SPACE[[_SP, _TAB, _CR, _LF]] = True
_BLANK = _SPACE.copy()  # bytes of a blank line (python-chess: str.isspace())
_BLANK[[_LF, 11, 12]] = True
_LINE_COMMENT = np.zeros(256, dtype=np.bool_)  # "%" / ";" opening a line: python-chess skips it
_LINE_COMMENT[[_PERCENT, _SEMI]] = True
_MOVETEXT_STOP = np.zeros(256, dtype=np.bool_)  # bytes that end a stretch of plain movetext
_MOVETEXT_STOP[[_LF, _LBRACE, _SEMI]] = True
_TOKEN_STOP = _SPACE.copy()  # bytes that end a SAN / number / result token
_TOKEN_STOP[[_LBRACE, _RBRACE, _LPAREN, _RPAREN, _SEMI, _DOLLAR]] = True
_CLK = np.frombuffer(b"[%clk", dtype=np.uint8)
_EVAL = np.frombuffer(b"[%eval", dtype=np.uint8)
_PIECE_OF_LETTER = np.full(256, -1, dtype=np.int64)
for _letter, _piece in ((b"N", KNIGHT), (b"B", BISHOP), (b"R", ROOK), (b"Q", QUEEN), (b"K", KING)):
    _PIECE_OF_LETTER[_letter[0]] = _piece
_PROMO_OF_LETTER = np.full(256, -1, dtype=np.int64)
for _letter, _promo in (
    (b"N", PROMO_KNIGHT),
    (b"B", PROMO_BISHOP),
    (b"R", PROMO_ROOK),
    (b"Q", PROMO_QUEEN),
):
    _PROMO_OF_LETTER[_letter[0]] = _promo


@dataclass
class PgnGames:
    """``n`` games as flat arrays; game i's moves are ``[move_offsets[i], move_offsets[i+1])``.

    A game whose status is not ``STATUS_OK`` has no moves here (python-chess reads it); its tags
    are still located. A tag line is ``[Name "value"]`` (a trailing ``\\r`` allowed); a repeated
    tag: the last one wins; the value is the raw bytes between the quotes (escapes kept)."""

    tag_start: np.ndarray  # (n, T) int64 byte offset of each wanted tag's value, -1 = absent
    tag_length: np.ndarray  # (n, T) int64

    move_offsets: np.ndarray  # (n + 1,) int64
    from_sq: np.ndarray  # (M,) uint8, a1 = 0 … h8 = 63
    to_sq: np.ndarray  # (M,) uint8 (castling: the king's square, e1g1)
    promotion: np.ndarray  # (M,) int8, chess_spec PROMO_* (0 none)
    clocks: np.ndarray  # (M,) float32 seconds, NaN = no %clk
    evals_cp: np.ndarray  # (M,) int32 centipawns, White's view, mates ±(100000 − n)
    has_eval: np.ndarray  # (M,) bool
    status: np.ndarray  # (n,) int8 STATUS_*
    error_at: np.ndarray  # (n,) int64 byte offset of the token that stopped the reader

    @property
    def valid(self) -> np.ndarray:
        return self.status == STATUS_OK

    def error(self, data: bytes, row: int) -> str | None:
        """Why game ``row`` was handed back, quoting the token, or None when it was read."""
        code = int(self.status[row])
        if code == STATUS_OK:
            return None
        at = int(self.error_at[row])
        token = (_TOKEN.match(data, at).group(0) or data[at : at + 1]).decode("utf-8", "replace")
        return f"{STATUS_REASONS[code]}: {token!r}"


def read_pgn(data: bytes, offsets: np.ndarray, tag_names: tuple[str, ...]) -> PgnGames:
    """Read the games ``data[offsets[i]:offsets[i + 1]]`` (each a whole PGN game, tags first)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    starts = np.ascontiguousarray(offsets[:-1], dtype=np.int64)
    ends = np.ascontiguousarray(offsets[1:], dtype=np.int64)
    names = np.zeros((len(tag_names), _NAME_BYTES), dtype=np.uint8)
    for i, name in enumerate(tag_names):
        raw = name.encode()
        if not 0 < len(raw) <= _NAME_BYTES:
            raise ValueError(f"tag name {name!r} must be 1 to {_NAME_BYTES} bytes")
        names[i, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    name_lengths = np.array([len(n.encode()) for n in tag_names], dtype=np.int64)
    out = _read_games(buf, starts, ends, names, name_lengths, max(len(buf) // 12, 256))
    tag_start, tag_length, counts, status, error_at = out[:5]
    from_sq, to_sq, promo, clocks, cp, has_eval, m = out[5:]
    move_offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(counts, out=move_offsets[1:])
    return PgnGames(
        tag_start=tag_start,
        tag_length=tag_length,
        move_offsets=move_offsets,
        from_sq=from_sq[:m],
        to_sq=to_sq[:m],
        promotion=promo[:m],
        clocks=clocks[:m],
        evals_cp=cp[:m],
        has_eval=has_eval[:m],
        status=status,
        error_at=error_at,
    )


def game_starts(data: bytes) -> np.ndarray:
    """Byte offsets of every game start in ``data`` after the first one (which is at 0 or
    after leading blank lines), splitting games exactly as python-chess's ``read_game`` does
    (see :class:`GameSplitter`)."""
    starts, _ = GameSplitter().feed(data, final=True)
    return starts


class GameSplitter:
    """Finds where games start in PGN text fed piece by piece, by python-chess's rules.

    Line by line, as ``chess.pgn.read_game`` reads: between games, blank lines and ``%`` / ``;``
    comment lines are skipped and the next line starts a game (the comment lines go with it).
    In the tag section, lines starting with ``[`` are tags and *one* blank line between them
    is allowed (ChessBase writes one); a second blank line, or a line of movetext, ends the
    tags. In the movetext, a blank line ends the game unless it is inside a ``{…}`` comment;
    a ``;`` comment runs to the end of its line. A blank line is one of only spaces, tabs,
    ``\\r``, ``\\v`` or ``\\f``.

    ``feed(data)`` scans ``data`` and returns the starts it found (offsets in ``data``) and how
    many bytes it consumed; the caller feeds the rest again with the next bytes (``final=True``
    for the last piece). A line cut by the end of a piece is resumed where it stopped, so a
    long line costs one pass; only the start of a line (up to its first byte that is not
    blank) and comment lines between games are fed again.

    >>> text = b'[Event "a"]\\n\\n[White "x"]\\n\\n1. e4 {\\n\\n} e5 *\\n\\n[Event "b"]\\n\\n*\\n'
    >>> GameSplitter().feed(text, final=True)[0].tolist()
    [43]
    """

    def __init__(self) -> None:
        # mode (_SPLIT_*), blank lines in a row in the tag section, 1 once a game has started,
        # what is left of the line where the last feed stopped (_REST_*)
        self.state = np.zeros(4, dtype=np.int64)

    def feed(self, data: bytes, *, final: bool = False) -> tuple[np.ndarray, int]:
        """(starts of the games found in ``data``, bytes of ``data`` consumed)."""
        starts, consumed = _split_games(np.frombuffer(data, dtype=np.uint8), self.state, final)
        return starts, int(consumed)


# ---------------------------------------------------------------------------------------------
# Numba kernels


@njit(cache=True, inline="always")
def _is_space(c):
    return _SPACE[c]


@njit(cache=True, inline="always")
def _is_digit(c):
    return 48 <= c <= 57


@njit(cache=True)
def _starts_with(buf, p, end, word):
    if p + len(word) > end:
        return False
    i = 0
    while i < len(word) and buf[p + i] == word[i]:
        i += 1
    return i == len(word)


@njit(cache=True)
def _digits(buf, p, end):
    """(value, end of the digit run) of the decimal digits at ``p``; end == p when none."""
    value = 0
    q = p
    while q < end and _is_digit(buf[q]):
        value = value * 10 + (buf[q] - 48)
        q += 1
    return value, q


@njit(cache=True)
def _match_clock(buf, p, end):
    """Seconds of ``[%clk H:MM:SS(.f)]`` at ``p`` (python-chess CLOCK_REGEX), or -1.0."""
    q = p + len(_CLK)
    if q >= end or not _is_space(buf[q]):
        return -1.0
    hours, r = _digits(buf, q + 1, end)
    if r == q + 1 or r >= end or buf[r] != _COLON:
        return -1.0
    minutes, s = _digits(buf, r + 1, end)
    if s == r + 1 or s >= end or buf[s] != _COLON:
        return -1.0
    seconds, t = _digits(buf, s + 1, end)
    if t == s + 1:
        return -1.0
    value = float(seconds)
    if t < end and buf[t] == _DOT:
        frac, u = _digits(buf, t + 1, end)
        if u - (t + 1) > 15:
            return -1.0
        value += frac / 10.0 ** (u - (t + 1))
        t = u
    if t >= end or buf[t] != _RBRACKET:
        return -1.0
    return hours * 3600.0 + minutes * 60.0 + value


@njit(cache=True)
def _match_eval(buf, p, end):
    """(ok, centipawns from White's view) of ``[%eval …]`` at ``p`` (python-chess EVAL_REGEX)."""
    q = p + len(_EVAL)
    if q >= end or not _is_space(buf[q]):
        return False, 0
    q += 1
    mate = q < end and buf[q] == _HASH
    if mate:
        q += 1
    sign = 1
    if q < end and (buf[q] == _PLUS or buf[q] == _DASH):
        sign = -1 if buf[q] == _DASH else 1
        q += 1
    whole, r = _digits(buf, q, end)
    int_digits = r - q
    if mate:
        if int_digits == 0:
            return False, 0
        value = MATE_SCORE_CP - whole if sign > 0 or whole == 0 else whole - MATE_SCORE_CP
    else:
        frac_digits = 0
        frac = 0
        if r < end and buf[r] == _DOT:
            frac, s = _digits(buf, r + 1, end)
            frac_digits = s - (r + 1)
            r = s
            if frac_digits > 2 or int_digits > 10 or (frac_digits == 0 and int_digits == 0):
                return False, 0
        elif int_digits == 0 or int_digits > 10:
            return False, 0
        value = sign * (whole * 100 + (frac * 10 if frac_digits == 1 else frac))
    if r < end and buf[r] == _COMMA:
        _depth, s = _digits(buf, r + 1, end)
        if s == r + 1:
            return False, 0
        r = s
    if r >= end or buf[r] != _RBRACKET:
        return False, 0
    return True, value


@njit(cache=True)
def _resolve_san(buf, p, end, pieces, colours, mailbox, stm, castle, ep_sq):
    """(status, src, dst, promo) of the SAN move ``buf[p:end]`` (suffixes already stripped)."""
    length = end - p
    us = colours[stm]
    them = colours[1 - stm]
    occ = us | them
    ksq = np.int64(_lsb(pieces[KING] & us))
    home = 56 * stm
    # Castling: O-O / O-O-O (python-chess also reads 0-0; those arrive here too).
    if length >= 3 and (buf[p] == 79 or buf[p] == 48):
        zero = buf[p]
        kingside = length == 3 and buf[p + 1] == _DASH and buf[p + 2] == zero
        queenside = (
            length == 5
            and buf[p + 1] == _DASH
            and buf[p + 2] == zero
            and buf[p + 3] == _DASH
            and buf[p + 4] == zero
        )
        if not kingside and not queenside:
            return STATUS_UNSUPPORTED, 0, 0, 0
        if _attacked(ksq, occ, them, pieces, stm):
            return STATUS_ILLEGAL, 0, 0, 0
        if kingside:
            right = _BK if stm else _WK
            ok = (
                (castle & right) != 0
                and not occ & (BIT[home + 5] | BIT[home + 6])
                and not _attacked(home + 5, occ, them, pieces, stm)
                and not _attacked(home + 6, occ, them, pieces, stm)
            )
            return (STATUS_OK if ok else STATUS_ILLEGAL), home + 4, home + 6, PROMO_NONE
        right = _BQ if stm else _WQ
        ok = (
            (castle & right) != 0
            and not occ & (BIT[home + 1] | BIT[home + 2] | BIT[home + 3])
            and not _attacked(home + 3, occ, them, pieces, stm)
            and not _attacked(home + 2, occ, them, pieces, stm)
        )
        return (STATUS_OK if ok else STATUS_ILLEGAL), home + 4, home + 2, PROMO_NONE

    i = p
    piece = PAWN
    if _PIECE_OF_LETTER[buf[i]] >= 0:
        piece = _PIECE_OF_LETTER[buf[i]]
        i += 1
    j = end
    promo = PROMO_NONE
    if j - i >= 3 and _PROMO_OF_LETTER[buf[j - 1]] >= 0:
        rank_at = j - 3 if buf[j - 2] == _EQ else j - 2
        if not _is_digit(buf[rank_at]):
            return STATUS_UNSUPPORTED, 0, 0, 0
        promo = _PROMO_OF_LETTER[buf[j - 1]]
        j -= 1
        if buf[j - 1] == _EQ:
            j -= 1
    if j - i < 2:
        return STATUS_UNSUPPORTED, 0, 0, 0
    dst_file = np.int64(buf[j - 2]) - 97
    dst_rank = np.int64(buf[j - 1]) - 49
    if not (0 <= dst_file < 8 and 0 <= dst_rank < 8):
        return STATUS_UNSUPPORTED, 0, 0, 0
    dst = dst_rank * 8 + dst_file
    k = j - 2
    if k > i and (buf[k - 1] == _X or buf[k - 1] == _DASH):
        k -= 1
    from_file = -1
    from_rank = -1
    if k > i and 97 <= buf[i] <= 104:
        from_file = np.int64(buf[i]) - 97
        i += 1
    if k > i and 49 <= buf[i] <= 56:
        from_rank = np.int64(buf[i]) - 49
        i += 1
    if i != k:
        return STATUS_UNSUPPORTED, 0, 0, 0
    if promo != PROMO_NONE and piece != PAWN:
        return STATUS_UNSUPPORTED, 0, 0, 0
    if BIT[dst] & us:
        return STATUS_ILLEGAL, 0, 0, 0

    if piece == PAWN:
        if from_rank >= 0 or from_file == dst_file:
            return STATUS_UNSUPPORTED, 0, 0, 0  # long algebraic pawn moves: python-chess decides
        step = 8 - 16 * stm
        own_pawn = 1 + 6 * stm + PAWN
        captured_sq = -1
        if from_file < 0:  # a push
            if BIT[dst] & occ:
                return STATUS_ILLEGAL, 0, 0, 0
            src = dst - step
            if src < 0 or src > 63:
                return STATUS_ILLEGAL, 0, 0, 0
            if mailbox[src] != own_pawn:
                double_rank = 3 if stm == 0 else 4
                if dst_rank != double_rank or mailbox[src] != 0 or mailbox[src - step] != own_pawn:
                    return STATUS_ILLEGAL, 0, 0, 0
                src -= step
        else:  # a capture from the adjacent file
            if abs(from_file - dst_file) != 1:
                return STATUS_ILLEGAL, 0, 0, 0
            src = dst - step + (from_file - dst_file)
            if src < 0 or src > 63 or mailbox[src] != own_pawn:
                return STATUS_ILLEGAL, 0, 0, 0
            if not BIT[dst] & them:
                if dst != ep_sq:
                    return STATUS_ILLEGAL, 0, 0, 0
                captured_sq = dst - step
        last_rank = 7 - 7 * stm
        if (dst_rank == last_rank) != (promo != PROMO_NONE):
            return STATUS_ILLEGAL, 0, 0, 0
        if not _safe_after(ksq, src, dst, captured_sq, occ, them, pieces, stm):
            return STATUS_ILLEGAL, 0, 0, 0
        return STATUS_OK, src, dst, promo

    if piece == KNIGHT:
        candidates = KNIGHT_ATTACKS[dst] & pieces[KNIGHT] & us
    elif piece == KING:
        candidates = KING_ATTACKS[dst] & pieces[KING] & us
    elif piece == BISHOP:
        candidates = _bishop_attacks(dst, occ) & pieces[BISHOP] & us
    elif piece == ROOK:
        candidates = _rook_attacks(dst, occ) & pieces[ROOK] & us
    else:
        candidates = (_rook_attacks(dst, occ) | _bishop_attacks(dst, occ)) & pieces[QUEEN] & us
    found = 0
    chosen = 0
    while candidates:
        src = np.int64(_lsb(candidates))
        candidates &= candidates - np.uint64(1)
        if from_file >= 0 and (src & 7) != from_file:
            continue
        if from_rank >= 0 and (src >> 3) != from_rank:
            continue
        if piece == KING:
            safe = not _attacked(dst, occ & ~BIT[ksq], them & ~BIT[dst], pieces, stm)
        else:
            safe = _safe_after(ksq, src, dst, -1, occ, them, pieces, stm)
        if safe:
            found += 1
            chosen = src
    if found == 0:
        return STATUS_ILLEGAL, 0, 0, 0
    if found > 1:
        return STATUS_AMBIGUOUS, 0, 0, 0
    return STATUS_OK, chosen, dst, PROMO_NONE


@njit(cache=True)
def _read_comment(buf, p, end, clocks, cp, has_eval, move):
    """Record the first valid %clk / %eval of the comment ``buf[p:end]`` for ``move``."""
    q = p
    while q < end:
        if buf[q] == _LBRACKET and q + 1 < end and buf[q + 1] == _PERCENT:
            if np.isnan(clocks[move]) and _starts_with(buf, q, end, _CLK):
                seconds = _match_clock(buf, q, end)
                if seconds >= 0.0:
                    clocks[move] = seconds
            elif not has_eval[move] and _starts_with(buf, q, end, _EVAL):
                ok, value = _match_eval(buf, q, end)
                if ok:
                    cp[move] = value
                    has_eval[move] = True
        q += 1


@njit(cache=True)
def _is_result(buf, p, t):
    length = t - p
    if length == 1:
        return buf[p] == _STAR
    if length == 3:
        return (buf[p] == 49 and buf[p + 1] == _DASH and buf[p + 2] == 48) or (
            buf[p] == 48 and buf[p + 1] == _DASH and buf[p + 2] == 49
        )
    if length == 7:
        return (
            buf[p] == 49
            and buf[p + 1] == _SLASH
            and buf[p + 2] == 50
            and buf[p + 3] == _DASH
            and buf[p + 4] == 49
            and buf[p + 5] == _SLASH
            and buf[p + 6] == 50
        )
    return False


@njit(cache=True)
def _token_end(buf, p, end):
    t = p
    while t < end:
        if _TOKEN_STOP[buf[t]]:
            break
        t += 1
    return t


@njit(cache=True)
def _read_tag_line(buf, p, end, g, names, name_lengths, tag_start, tag_length):
    """Record the value span of the tag line at ``p`` (``[``) if it is a wanted one; return
    the line's end."""
    e = p
    while e < end and buf[e] != _LF:
        e += 1
    le = e - 1 if e > p and buf[e - 1] == _CR else e
    if le - p < 4 or buf[le - 1] != _RBRACKET or buf[le - 2] != 34:  # ends with "]
        return e
    for t in range(len(names)):
        length = name_lengths[t]
        value = p + length + 3
        if value > le - 2 or buf[p + 1 + length] != _SP or buf[p + 2 + length] != 34:
            continue
        same = True
        for i in range(length):
            if buf[p + 1 + i] != names[t, i]:
                same = False
                break
        if same:
            tag_start[g, t] = value
            tag_length[g, t] = le - 2 - value
            break
    return e


@njit(cache=True, nogil=True)
def _read_games(buf, starts, ends, names, name_lengths, capacity):
    """Read every game; returns tag spans, per-game counts/status and the per-move arrays."""
    n = len(starts)
    tag_start = np.full((n, len(names)), -1, dtype=np.int64)
    tag_length = np.zeros((n, len(names)), dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    status = np.zeros(n, dtype=np.int8)
    error_at = np.zeros(n, dtype=np.int64)
    from_sq = np.empty(capacity, dtype=np.uint8)
    to_sq = np.empty(capacity, dtype=np.uint8)
    promo = np.empty(capacity, dtype=np.int8)
    clocks = np.empty(capacity, dtype=np.float32)
    cp = np.empty(capacity, dtype=np.int32)
    has_eval = np.empty(capacity, dtype=np.bool_)
    pieces = np.empty(6, dtype=np.uint64)
    colours = np.empty(2, dtype=np.uint64)
    mailbox = np.empty(64, dtype=np.int8)
    m = 0
    for g in range(n):
        p = starts[g]
        end = ends[g]
        need = m + (end - p) // 2 + 1  # every move token and its separator take ≥ 2 bytes
        if need > len(from_sq):
            size = max(need, 2 * len(from_sq))
            from_sq = _grown(from_sq, size, m)
            to_sq = _grown(to_sq, size, m)
            promo = _grown(promo, size, m)
            clocks = _grown(clocks, size, m)
            cp = _grown(cp, size, m)
            has_eval = _grown(has_eval, size, m)
        pieces[:] = _START_PIECES
        colours[:] = _START_COLOURS
        mailbox[:] = _START_MAILBOX
        stm = 0
        castle = _WK | _WQ | _BK | _BQ
        ep_sq = -1
        first = m
        code = STATUS_OK
        after_result = False
        # Tag lines: every line whose first non-blank byte is "["; lines opening with "%" or
        # ";" are comments there (python-chess skips them too).
        while p < end:
            while p < end and _is_space(buf[p]):
                p += 1
            if p < end and buf[p] == _LBRACKET:
                p = _read_tag_line(buf, p, end, g, names, name_lengths, tag_start, tag_length)
            elif p < end and _LINE_COMMENT[buf[p]] and (p == starts[g] or buf[p - 1] == _LF):
                while p < end and buf[p] != _LF:
                    p += 1
            else:
                break
        while p < end:
            c = buf[p]
            if _is_space(c):
                p += 1
                continue
            if c == _LBRACE:
                q = p + 1
                while q < end and buf[q] != _RBRACE:
                    q += 1
                if q >= end:
                    code = STATUS_UNSUPPORTED
                    error_at[g] = p
                    break
                if m > first:
                    _read_comment(buf, p + 1, q, clocks, cp, has_eval, m - 1)
                p = q + 1
                continue
            if c == _DOLLAR:
                _nag, p = _digits(buf, p + 1, end)
                continue
            t = _token_end(buf, p, end)
            if after_result or t == p:
                code = STATUS_UNSUPPORTED
                error_at[g] = p
                break
            if _is_result(buf, p, t):
                after_result = True
                p = t
                continue
            q = p
            if _is_digit(buf[q]) and not (t - q >= 3 and buf[q] == 48 and buf[q + 1] == _DASH):
                _number, q = _digits(buf, q, t)
                if q == t or buf[q] != _DOT:
                    code = STATUS_UNSUPPORTED
                    error_at[g] = p
                    break
                while q < t and buf[q] == _DOT:
                    q += 1
                if q == t:
                    p = t
                    continue
            r = t
            while r > q and (
                buf[r - 1] == _PLUS
                or buf[r - 1] == _HASH
                or buf[r - 1] == _BANG
                or buf[r - 1] == _QMARK
            ):
                r -= 1
            if r == q:
                code = STATUS_UNSUPPORTED
                error_at[g] = p
                break
            code, src, dst, pr = _resolve_san(
                buf, q, r, pieces, colours, mailbox, stm, castle, ep_sq
            )
            if code != STATUS_OK:
                error_at[g] = q
                break
            from_sq[m] = src
            to_sq[m] = dst
            promo[m] = pr
            clocks[m] = np.nan
            cp[m] = 0
            has_eval[m] = False
            m += 1
            castle, ep_sq, _lc0_ep, _resets = _apply_move(
                pieces, colours, mailbox, stm, castle, src, dst, pr
            )
            stm = 1 - stm
            p = t
        status[g] = code
        if code != STATUS_OK:
            m = first
        counts[g] = m - first
    return (
        tag_start,
        tag_length,
        counts,
        status,
        error_at,
        from_sq,
        to_sq,
        promo,
        clocks,
        cp,
        has_eval,
        m,
    )


@njit(cache=True)
def _grown(values, size, used):
    out = np.empty(size, dtype=values.dtype)
    out[:used] = values[:used]
    return out


@njit(cache=True, inline="always")
def _movetext(buf, p, n, in_comment):
    """Read movetext from ``p`` (inside a ``{…}`` comment when ``in_comment``) to the end of its
    line; comments span lines. Returns (offset reached, _MT_* outcome)."""
    while True:
        if in_comment:
            while p < n and buf[p] != _RBRACE:
                p += 1
            if p == n:
                return n, _MT_IN_COMMENT
            p += 1
            in_comment = False
        while p < n and not _MOVETEXT_STOP[buf[p]]:
            p += 1
        if p == n:
            return n, _MT_MID_LINE
        c = buf[p]
        if c == _LBRACE:
            in_comment = True
            p += 1
        elif c == _LF:
            return p + 1, _MT_LINE_DONE
        else:  # a ";" comment runs to the end of the line
            while p < n and buf[p] != _LF:
                p += 1
            if p == n:
                return n, _MT_MID_SKIP
            return p + 1, _MT_LINE_DONE


@njit(cache=True, nogil=True)
def _split_games(buf, state, final):
    """Game starts in ``buf`` (see ``GameSplitter``); updates ``state`` and returns (starts,
    bytes consumed). One pass: tag lines and comments are skipped with tight loops, movetext
    bytes are looked up once; a line cut at the end of ``buf`` is resumed where it stopped."""
    n = len(buf)
    out = np.empty(max(n // 256, 16), dtype=np.int64)
    count = 0
    mode = state[0]
    blanks = state[1]
    seen = state[2]
    rest = state[3]
    pending = -1  # first comment line skipped between games (the next game starts there)
    consumed = 0
    i = 0
    while i < n:
        if rest == _REST_NONE and mode != _SPLIT_COMMENT:  # a line starts: what is it?
            j = i
            while j < n and _BLANK[buf[j]] and buf[j] != _LF:
                j += 1
            if j == n and not final:
                break  # not known yet whether the line is blank: fed again
            c = buf[i]
            if j == n or buf[j] == _LF:  # a blank line
                if mode == _SPLIT_HEADERS and blanks < 1:
                    blanks += 1
                else:  # ends the movetext, or the tags of a game without movetext
                    mode = _SPLIT_BETWEEN
                i = min(j + 1, n)
                if mode != _SPLIT_BETWEEN or pending < 0:
                    consumed = i
                continue
            rest = _REST_SKIP  # the rest of a tag or comment line is not looked at
            if _LINE_COMMENT[c]:
                if mode == _SPLIT_BETWEEN and pending < 0:
                    pending = i
            elif mode == _SPLIT_BETWEEN:
                if seen:
                    if count == len(out):
                        out = _grown(out, 2 * len(out), count)
                    out[count] = pending if pending >= 0 else i
                    count += 1
                seen = 1
                pending = -1
                if c == _LBRACKET:
                    mode = _SPLIT_HEADERS
                    blanks = 0
                else:
                    mode = _SPLIT_MOVETEXT
                    rest = _REST_MOVETEXT
            elif mode == _SPLIT_HEADERS and c == _LBRACKET:
                blanks = 0
            else:
                mode = _SPLIT_MOVETEXT
                rest = _REST_MOVETEXT
        if rest == _REST_SKIP:
            while i < n and buf[i] != _LF:
                i += 1
            if i < n:
                i += 1
                rest = _REST_NONE
        else:  # movetext, or a comment
            i, outcome = _movetext(buf, i, n, mode == _SPLIT_COMMENT)
            mode = _SPLIT_COMMENT if outcome == _MT_IN_COMMENT else _SPLIT_MOVETEXT
            rest = _REST_NONE
            if outcome == _MT_MID_LINE:
                rest = _REST_MOVETEXT
            elif outcome == _MT_MID_SKIP:
                rest = _REST_SKIP
        if mode != _SPLIT_BETWEEN or pending < 0:
            consumed = i
    if mode == _SPLIT_BETWEEN and pending >= 0:
        rest = _REST_NONE  # fed again from the first skipped comment line
    state[0] = mode
    state[1] = blanks
    state[2] = seen
    state[3] = rest
    return out[:count], consumed
