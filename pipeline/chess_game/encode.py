"""Batch chess encoder: UCI move lists of whole games to Lc0's 112-plane inputs, legal moves and
the played move, for every position before every move. The hot path of Kibitz's chess side.

Board replay, legal move generation (bitboards) and repetition detection run in numba over
whole batches of games in one call, with no Python object per position. Encodes exactly what
lc0 v0.31 feeds its net for ``position startpos moves …`` with ``--history-fill=fen_only``:
8-position history in the mover's view, castling, side to move, raw rule-50 count, repetition
planes (a position repeats when its pieces, castling rights, side to move and lc0's en-passant
flag match an earlier one; lc0 sets that flag after a double push only when an enemy pawn
stands next to the pushed pawn). Layout: ``pipeline/chess_game/spec.py``.

Use::

    from pipeline.chess_game.encode import encode_games, legal_uci
    pos = encode_games([["e2e4", "e7e5", "g1f3"], ["d2d4"]])
    pos.planes.shape            # (4, 112, 8, 8)
    legal_uci(pos, 0)[:3]       # ['b1a3', 'b1c3', 'g1f3'] (knights come before pawns)

``encode_after`` encodes the position after any legal move of an encoded position (each
game's final position, expected loss's candidate moves), with whether the game is over there.

Benchmark: ``python bench/speed/bench_encode_chess.py``; tests: ``pytest tests/test_encode_chess.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from pipeline.chess_game.spec import (
    BISHOP,
    HISTORY_STEPS,
    KING,
    KNIGHT,
    MOVE_PROMO_SHIFT,
    MOVE_TO_SHIFT,
    NUM_PLANES,
    PAWN,
    PLANE_BLACK_TO_MOVE,
    PLANE_ONES,
    PLANE_OUR_KINGSIDE,
    PLANE_OUR_QUEENSIDE,
    PLANE_RULE50,
    PLANE_THEIR_KINGSIDE,
    PLANE_THEIR_QUEENSIDE,
    PLANES_PER_STEP,
    POLICY_INDEX_TABLE,
    PROMO_BISHOP,
    PROMO_KNIGHT,
    PROMO_NONE,
    PROMO_QUEEN,
    PROMO_ROOK,
    QUEEN,
    REPETITION_PLANE,
    ROOK,
    unpack_move,
)
from pipeline.core.packed_planes import PackedPlanes

# ---------------------------------------------------------------------------------------------
# Constants and lookup tables (numpy at import; numba bakes them into the compiled kernels).

MAX_LEGAL_MOVES = 256  # upper bound per position (the known maximum is 218)
LEGAL_PER_POSITION_GUESS = 48  # initial legal-move buffer per position; grows on overflow

# Whether a position after a move is already over (python-chess ``Board.outcome()`` without
# claims): checkmate (the side to move lost), or a draw by stalemate, insufficient material,
# the 75-move rule or fivefold repetition. OUTCOME_ILLEGAL marks a request that was not legal.
OUTCOME_NONE, OUTCOME_CHECKMATE, OUTCOME_DRAW, OUTCOME_ILLEGAL = 0, 1, 2, 3
_DARK_SQUARES = np.uint64(0xAA55AA55AA55AA55)
_LIGHT_SQUARES = ~_DARK_SQUARES

ERROR_UNPARSEABLE = 1  # the move is not UCI (``e2e9``, ``""``, ``O-O``)
ERROR_ILLEGAL = 2  # well-formed but not legal in the position
_ERROR_REASONS = {ERROR_UNPARSEABLE: "not a UCI move", ERROR_ILLEGAL: "illegal move"}

# Castling-right bits.
_WK, _WQ, _BK, _BQ = 1, 2, 4, 8

_U1 = np.uint64(1)
_U255 = np.uint64(255)
# Bit-packed output (``encode_games(..., packed=True)``, ``encode_after(..., packed=True)``): the
# layout ``pack_planes`` gives a chunk whose rule-50 counts are not all 0 / 1, written straight
# from the bitboards: every channel but the rule-50 count as 8 bytes (rank r of the mover's view
# in byte r, file a in the high bit), the count as float32.
PACKED_BINARY_CHANNELS = np.array(
    [c for c in range(NUM_PLANES) if c != PLANE_RULE50], dtype=np.int32
)
PACKED_FLOAT_CHANNELS = np.array([PLANE_RULE50], dtype=np.int32)
PACKED_BYTES = 8 * len(PACKED_BINARY_CHANNELS)  # 888 a position
_BYTE_REVERSE = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=np.uint8)
_U0 = np.uint64(0)


def _bit_table() -> np.ndarray:
    return np.array([1 << s for s in range(64)], dtype=np.uint64)


def _step_table(steps: Sequence[tuple[int, int]]) -> np.ndarray:
    """Squares one step (rank, file) away from each square, for knights and kings."""
    table = np.zeros(64, dtype=np.uint64)
    for sq in range(64):
        rank, file = divmod(sq, 8)
        for dr, df in steps:
            r, f = rank + dr, file + df
            if 0 <= r < 8 and 0 <= f < 8:
                table[sq] |= np.uint64(1 << (r * 8 + f))
    return table


def _pawn_attack_table() -> np.ndarray:
    """(2, 64): squares a pawn of colour c (0 White, 1 Black) on each square attacks."""
    return np.stack([_step_table([(1, -1), (1, 1)]), _step_table([(-1, -1), (-1, 1)])]).astype(
        np.uint64
    )


# Ray directions: 0-3 increase the square index (bit scan forward finds the first blocker),
# 4-7 decrease it (bit scan reverse). Rook: 0 1 4 5; bishop: 2 3 6 7.
_DIRECTIONS = ((1, 0), (0, 1), (1, 1), (1, -1), (-1, 0), (0, -1), (-1, -1), (-1, 1))
_ROOK_DIRS = np.array([0, 1, 4, 5], dtype=np.int64)
_BISHOP_DIRS = np.array([2, 3, 6, 7], dtype=np.int64)


def _ray_table() -> np.ndarray:
    """(8, 64): squares from each square to the board edge in each direction, exclusive."""
    rays = np.zeros((8, 64), dtype=np.uint64)
    for d, (dr, df) in enumerate(_DIRECTIONS):
        for sq in range(64):
            r, f = divmod(sq, 8)
            r, f = r + dr, f + df
            while 0 <= r < 8 and 0 <= f < 8:
                rays[d, sq] |= np.uint64(1 << (r * 8 + f))
                r, f = r + dr, f + df
    return rays


def _castle_keep_table() -> np.ndarray:
    """Castling rights kept when a move starts or ends on each square (king or rook home)."""
    keep = np.full(64, 15, dtype=np.int64)
    keep[4] &= ~(_WK | _WQ)  # e1
    keep[0] &= ~_WQ  # a1
    keep[7] &= ~_WK  # h1
    keep[60] &= ~(_BK | _BQ)  # e8
    keep[56] &= ~_BQ  # a8
    keep[63] &= ~_BK  # h8
    return keep


BIT = _bit_table()
KNIGHT_ATTACKS = _step_table(
    [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]
)
KING_ATTACKS = _step_table([(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)])
PAWN_ATTACKS = _pawn_attack_table()
RAYS = _ray_table()
QUEEN_LINES = np.bitwise_or.reduce(RAYS, axis=0)  # (64,) every square on a line with each square
CASTLE_KEEP = _castle_keep_table()
POLICY_TABLE = POLICY_INDEX_TABLE  # (5, 64, 64) int16, keep in sync with chess_spec

# Start position, White's view: pieces by type, then colours; mailbox 0 = empty,
# 1 + colour * 6 + type otherwise.
_START_PIECES = np.array(
    [
        0x00FF00000000FF00,  # pawns
        0x4200000000000042,  # knights
        0x2400000000000024,  # bishops
        0x8100000000000081,  # rooks
        0x0800000000000008,  # queens
        0x1000000000000010,  # kings
    ],
    dtype=np.uint64,
)
_START_COLOURS = np.array([0x000000000000FFFF, 0xFFFF000000000000], dtype=np.uint64)


def _start_mailbox() -> np.ndarray:
    box = np.zeros(64, dtype=np.int8)
    back = (ROOK, KNIGHT, BISHOP, QUEEN, KING, BISHOP, KNIGHT, ROOK)
    for f in range(8):
        box[f] = 1 + back[f]
        box[8 + f] = 1 + PAWN
        box[48 + f] = 1 + 6 + PAWN
        box[56 + f] = 1 + 6 + back[f]
    return box


_START_MAILBOX = _start_mailbox()

# ---------------------------------------------------------------------------------------------
# Bit scans as LLVM intrinsics (one instruction each on x86-64 / arm64).


@intrinsic
def _lsb(typingctx, x):
    """Index of the lowest set bit of a non-zero uint64."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@intrinsic
def _clz(typingctx, x):
    """Leading zero count of a non-zero uint64."""
    if x != types.uint64:
        return None

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


# ---------------------------------------------------------------------------------------------
# Numba kernels


@njit(cache=True, inline="always")
def _ray(sq, occ, d):
    """Squares a slider on ``sq`` reaches in direction ``d`` (first blocker included)."""
    ray = RAYS[d, sq]
    blockers = ray & occ
    if blockers:
        b = _lsb(blockers) if d < 4 else np.uint64(63) - _clz(blockers)
        ray ^= RAYS[d, b]
    return ray


@njit(cache=True, inline="always")
def _rook_attacks(sq, occ):
    return _ray(sq, occ, 0) | _ray(sq, occ, 1) | _ray(sq, occ, 4) | _ray(sq, occ, 5)


@njit(cache=True, inline="always")
def _bishop_attacks(sq, occ):
    return _ray(sq, occ, 2) | _ray(sq, occ, 3) | _ray(sq, occ, 6) | _ray(sq, occ, 7)


@njit(cache=True)
def _attacked(sq, occ, them, pieces, stm):
    """Whether pieces of ``them`` (the side not to move) attack ``sq`` given occupancy ``occ``."""
    if KNIGHT_ATTACKS[sq] & pieces[KNIGHT] & them:
        return True
    if KING_ATTACKS[sq] & pieces[KING] & them:
        return True
    if PAWN_ATTACKS[stm, sq] & pieces[PAWN] & them:
        return True
    rooks = (pieces[ROOK] | pieces[QUEEN]) & them
    if rooks and _rook_attacks(sq, occ) & rooks:
        return True
    bishops = (pieces[BISHOP] | pieces[QUEEN]) & them
    return bishops != _U0 and (_bishop_attacks(sq, occ) & bishops) != _U0


@njit(cache=True, inline="always")
def _push(codes, index, n, src, dst, promo, view, policy_dst):
    """Append one legal move: packed absolute code and lc0 policy index (mover's view)."""
    codes[n] = src | (dst << MOVE_TO_SHIFT) | (promo << MOVE_PROMO_SHIFT)
    index[n] = POLICY_TABLE[promo, src ^ view, policy_dst ^ view]
    return n + 1


@njit(cache=True)
def _generate_legal(pieces, colours, stm, castle, ep_sq, codes, index, start):
    """Write the legal moves of the side to move at ``codes/index[start:]``; return the end."""
    us = colours[stm]
    them = colours[1 - stm]
    occ = us | them
    ksq = np.int64(_lsb(pieces[KING] & us))
    in_check = _attacked(ksq, occ, them, pieces, stm)
    pinnable = QUEEN_LINES[ksq]  # only pieces on a line with the king can be pinned
    view = 56 * stm
    n = start

    # King steps: the destination must be safe with the king gone from its square.
    occ_wo_king = occ & ~BIT[ksq]
    targets = KING_ATTACKS[ksq] & ~us
    while targets:
        dst = np.int64(_lsb(targets))
        targets &= targets - _U1
        if not _attacked(dst, occ_wo_king, them & ~BIT[dst], pieces, stm):
            n = _push(codes, index, n, ksq, dst, PROMO_NONE, view, dst)

    # Castling (standard chess: king on e1/e8, rook on its home square while the right lasts).
    if not in_check:
        home = 56 * stm
        kingside = _BK if stm else _WK
        queenside = _BQ if stm else _WQ
        if (
            castle & kingside
            and not occ & (BIT[home + 5] | BIT[home + 6])
            and not _attacked(home + 5, occ, them, pieces, stm)
            and not _attacked(home + 6, occ, them, pieces, stm)
        ):
            n = _push(codes, index, n, home + 4, home + 6, PROMO_NONE, view, home + 7)
        if (
            castle & queenside
            and not occ & (BIT[home + 1] | BIT[home + 2] | BIT[home + 3])
            and not _attacked(home + 3, occ, them, pieces, stm)
            and not _attacked(home + 2, occ, them, pieces, stm)
        ):
            n = _push(codes, index, n, home + 4, home + 2, PROMO_NONE, view, home)

    # Every other piece: pseudo-legal targets, tested only when the move could expose the king.
    movers = us & ~pieces[KING]
    while movers:
        src = np.int64(_lsb(movers))
        movers &= movers - _U1
        sbit = BIT[src]
        must_test = in_check or (sbit & pinnable) != _U0
        if sbit & pieces[PAWN]:
            step = 8 - 16 * stm
            last_rank = 7 - 7 * stm
            targets = PAWN_ATTACKS[stm, src] & them
            fwd = src + step
            if not occ & BIT[fwd]:
                targets |= BIT[fwd]
                if (src >> 3) == 1 + 5 * stm and not occ & BIT[fwd + step]:
                    targets |= BIT[fwd + step]
            while targets:
                dst = np.int64(_lsb(targets))
                targets &= targets - _U1
                if must_test and not _safe_after(ksq, src, dst, -1, occ, them, pieces, stm):
                    continue
                if (dst >> 3) == last_rank:
                    n = _push(codes, index, n, src, dst, PROMO_QUEEN, view, dst)
                    n = _push(codes, index, n, src, dst, PROMO_ROOK, view, dst)
                    n = _push(codes, index, n, src, dst, PROMO_BISHOP, view, dst)
                    n = _push(codes, index, n, src, dst, PROMO_KNIGHT, view, dst)
                else:
                    n = _push(codes, index, n, src, dst, PROMO_NONE, view, dst)
            if ep_sq >= 0 and PAWN_ATTACKS[stm, src] & BIT[ep_sq]:
                captured = ep_sq - step
                if _safe_after(ksq, src, ep_sq, captured, occ, them, pieces, stm):
                    n = _push(codes, index, n, src, ep_sq, PROMO_NONE, view, ep_sq)
            continue
        if sbit & pieces[KNIGHT]:
            targets = KNIGHT_ATTACKS[src] & ~us
        else:
            targets = _U0
            if sbit & (pieces[ROOK] | pieces[QUEEN]):
                targets |= _rook_attacks(src, occ)
            if sbit & (pieces[BISHOP] | pieces[QUEEN]):
                targets |= _bishop_attacks(src, occ)
            targets &= ~us
        while targets:
            dst = np.int64(_lsb(targets))
            targets &= targets - _U1
            if must_test and not _safe_after(ksq, src, dst, -1, occ, them, pieces, stm):
                continue
            n = _push(codes, index, n, src, dst, PROMO_NONE, view, dst)
    return n


@njit(cache=True, inline="always")
def _safe_after(ksq, src, dst, captured_sq, occ, them, pieces, stm):
    """Whether the king on ``ksq`` is safe after a non-king move (``captured_sq``: en passant)."""
    gone = BIT[src]
    if captured_sq >= 0:
        gone |= BIT[captured_sq]
    occ2 = (occ & ~gone) | BIT[dst]
    them2 = them & ~BIT[dst] & ~gone
    return not _attacked(ksq, occ2, them2, pieces, stm)


@njit(cache=True)
def _apply_move(pieces, colours, mailbox, stm, castle, src, dst, promo):
    """Play a legal move in place; return (castle, ep_sq, lc0_ep_file, resets_rule50)."""
    moving = np.int64(mailbox[src]) - 1
    ptype = moving % 6
    sbit = BIT[src]
    dbit = BIT[dst]
    resets = ptype == PAWN
    captured = np.int64(mailbox[dst]) - 1
    if captured >= 0:
        ctype = captured % 6
        pieces[ctype] &= ~dbit
        colours[1 - stm] &= ~dbit
        resets = True
    elif ptype == PAWN and (src & 7) != (dst & 7):  # en passant: the captured pawn is behind dst
        behind = dst - 8 + 16 * stm
        pieces[PAWN] &= ~BIT[behind]
        colours[1 - stm] &= ~BIT[behind]
        mailbox[behind] = 0
    pieces[ptype] ^= sbit | dbit
    colours[stm] ^= sbit | dbit
    mailbox[dst] = mailbox[src]
    mailbox[src] = 0
    if promo != PROMO_NONE:
        new_type = (KNIGHT, BISHOP, ROOK, QUEEN)[promo - 1]
        pieces[PAWN] &= ~dbit
        pieces[new_type] |= dbit
        mailbox[dst] = 1 + 6 * stm + new_type
    if ptype == KING and abs(dst - src) == 2:  # castling moves the rook too
        if dst > src:
            rook_src, rook_dst = src + 3, src + 1
        else:
            rook_src, rook_dst = src - 4, src - 1
        rbits = BIT[rook_src] | BIT[rook_dst]
        pieces[ROOK] ^= rbits
        colours[stm] ^= rbits
        mailbox[rook_dst] = mailbox[rook_src]
        mailbox[rook_src] = 0
    castle &= CASTLE_KEEP[src] & CASTLE_KEEP[dst]
    ep_sq = -1
    lc0_ep_file = -1
    if ptype == PAWN and abs(dst - src) == 16:
        ep_sq = (src + dst) // 2
        # lc0 flags en passant only when an enemy pawn could take (pins ignored).
        if PAWN_ATTACKS[stm, ep_sq] & pieces[PAWN] & colours[1 - stm]:
            lc0_ep_file = dst & 7
    return castle, ep_sq, lc0_ep_file, resets


@njit(cache=True)
def _repetitions(hist_pieces, hist_colours, hist_castle, hist_ep, hist_rule50, hist_reps, j):
    """lc0's PositionHistory::ComputeLastMoveRepetitions for ply ``j`` of the current game."""
    if hist_rule50[j] < 4:
        return 0
    idx = j - 2
    while idx >= 0:
        same = (
            hist_colours[idx, 0] == hist_colours[j, 0]
            and hist_colours[idx, 1] == hist_colours[j, 1]
            and hist_castle[idx] == hist_castle[j]
            and hist_ep[idx] == hist_ep[j]
        )
        if same:
            for t in range(6):
                if hist_pieces[idx, t] != hist_pieces[j, t]:
                    same = False
                    break
        if same:
            return 1 + hist_reps[idx]
        if hist_rule50[idx] < 2:
            return 0
        idx -= 2
    return 0


@njit(cache=True)
def _write_planes(planes, row, ply, hist_pieces, hist_colours, hist_castle, hist_rule50, hist_reps):
    """Fill ``planes[row]`` (112, 64) with lc0's input for the position at ``ply``.

    Keep in sync with the plane table in pipeline/chess_game/spec.py.
    """
    out = planes[row]  # (112, 64)
    out[:, :] = 0.0
    stm = ply & 1
    view = 56 * stm
    for k in range(HISTORY_STEPS):
        j = ply - k
        if j < 0:  # history-fill=fen_only: nothing before the start position
            break
        base = k * PLANES_PER_STEP
        ours = hist_colours[j, stm]
        theirs = hist_colours[j, 1 - stm]
        for t in range(6):
            b = hist_pieces[j, t] & ours
            while b:
                out[base + t, np.int64(_lsb(b)) ^ view] = 1.0
                b &= b - _U1
            b = hist_pieces[j, t] & theirs
            while b:
                out[base + 6 + t, np.int64(_lsb(b)) ^ view] = 1.0
                b &= b - _U1
        if hist_reps[j] >= 1:
            out[base + REPETITION_PLANE, :] = 1.0
    castle = hist_castle[ply]
    our_k, our_q, their_k, their_q = (_BK, _BQ, _WK, _WQ) if stm else (_WK, _WQ, _BK, _BQ)
    if castle & our_q:
        out[PLANE_OUR_QUEENSIDE, :] = 1.0
    if castle & our_k:
        out[PLANE_OUR_KINGSIDE, :] = 1.0
    if castle & their_q:
        out[PLANE_THEIR_QUEENSIDE, :] = 1.0
    if castle & their_k:
        out[PLANE_THEIR_KINGSIDE, :] = 1.0
    if stm:
        out[PLANE_BLACK_TO_MOVE, :] = 1.0
    out[PLANE_RULE50, :] = np.float32(hist_rule50[ply])
    out[PLANE_ONES, :] = 1.0


@njit(cache=True, inline="always")
def _put_plane(out, channel, b, flip):
    """Bitboard ``b`` as channel ``channel``'s 8 packed bytes of ``out`` (PACKED_BYTES,),
    ranks mirrored when ``flip`` (Black to move): ``_write_planes``'s plane, bit-packed."""
    at = 8 * (channel if channel < PLANE_RULE50 else channel - 1)
    for r in range(8):
        byte = _BYTE_REVERSE[np.int64((b >> np.uint64(8 * r)) & _U255)]
        out[at + (7 - r if flip else r)] = byte


@njit(cache=True, inline="always")
def _fill_plane(out, channel):
    at = 8 * (channel if channel < PLANE_RULE50 else channel - 1)
    out[at : at + 8] = 255


@njit(cache=True)
def _write_packed(bits, floats, row, ply, hist_pieces, hist_colours, hist_castle, hist_rule50,
                  hist_reps):  # fmt: skip
    """``_write_planes`` straight into the packed layout: ``bits[row]`` (PACKED_BYTES,) and the
    rule-50 count into ``floats[row]`` (1, 64); ``pack_planes`` of its planes unpacks the same."""
    out = bits[row]
    out[:] = 0
    stm = ply & 1
    flip = stm == 1
    for k in range(HISTORY_STEPS):
        j = ply - k
        if j < 0:  # history-fill=fen_only: nothing before the start position
            break
        base = k * PLANES_PER_STEP
        ours = hist_colours[j, stm]
        theirs = hist_colours[j, 1 - stm]
        for t in range(6):
            _put_plane(out, base + t, hist_pieces[j, t] & ours, flip)
            _put_plane(out, base + 6 + t, hist_pieces[j, t] & theirs, flip)
        if hist_reps[j] >= 1:
            _fill_plane(out, base + REPETITION_PLANE)
    castle = hist_castle[ply]
    our_k, our_q, their_k, their_q = (_BK, _BQ, _WK, _WQ) if stm else (_WK, _WQ, _BK, _BQ)
    if castle & our_q:
        _fill_plane(out, PLANE_OUR_QUEENSIDE)
    if castle & our_k:
        _fill_plane(out, PLANE_OUR_KINGSIDE)
    if castle & their_q:
        _fill_plane(out, PLANE_THEIR_QUEENSIDE)
    if castle & their_k:
        _fill_plane(out, PLANE_THEIR_KINGSIDE)
    if stm:
        _fill_plane(out, PLANE_BLACK_TO_MOVE)
    floats[row, 0, :] = np.float32(hist_rule50[ply])
    _fill_plane(out, PLANE_ONES)


@njit(cache=True, inline="always")
def _write_position(planes, bits, floats, packed, row, ply, hist_pieces, hist_colours,
                    hist_castle, hist_rule50, hist_reps):  # fmt: skip
    """Position ``ply`` of the replay into row ``row``: float planes, or bit-packed."""
    if packed:
        _write_packed(
            bits, floats, row, ply, hist_pieces, hist_colours, hist_castle, hist_rule50, hist_reps
        )
    else:
        _write_planes(
            planes, row, ply, hist_pieces, hist_colours, hist_castle, hist_rule50, hist_reps
        )


@njit(cache=True)
def _parse_uci(data, str_offsets, src, dst, promo):
    """Parse every UCI string into squares and a promotion code; src = -1 where malformed."""
    for m in range(src.shape[0]):
        a = str_offsets[m]
        length = str_offsets[m + 1] - a
        src[m] = -1
        dst[m] = 0
        promo[m] = PROMO_NONE
        if length != 4 and length != 5:
            continue
        f1 = np.int64(data[a]) - 97
        r1 = np.int64(data[a + 1]) - 49
        f2 = np.int64(data[a + 2]) - 97
        r2 = np.int64(data[a + 3]) - 49
        if not (0 <= f1 < 8 and 0 <= r1 < 8 and 0 <= f2 < 8 and 0 <= r2 < 8):
            continue
        p = PROMO_NONE
        if length == 5:
            c = data[a + 4]
            if c == 113:  # q
                p = PROMO_QUEEN
            elif c == 114:  # r
                p = PROMO_ROOK
            elif c == 98:  # b
                p = PROMO_BISHOP
            elif c == 110:  # n
                p = PROMO_KNIGHT
            else:
                continue
        src[m] = r1 * 8 + f1
        dst[m] = r2 * 8 + f2
        promo[m] = p


@njit(cache=True, nogil=True)
def _encode_kernel(
    move_src,
    move_dst,
    move_promo,
    game_offsets,
    planes,
    bits,
    floats,
    packed,
    legal_codes,
    legal_index,
    pos_game,
    pos_ply,
    legal_offsets,
    played_pos,
    err_game,
    err_ply,
    err_kind,
):
    """Replay every game, writing one row per position before each legal move.

    Returns (positions, legal moves, errors, overflowed); on overflow of the legal-move buffers
    the caller retries with bigger ones.
    """
    n_games = game_offsets.shape[0] - 1
    max_len = 0
    for g in range(n_games):
        max_len = max(max_len, game_offsets[g + 1] - game_offsets[g])
    hist_pieces = np.empty((max_len + 1, 6), dtype=np.uint64)
    hist_colours = np.empty((max_len + 1, 2), dtype=np.uint64)
    hist_castle = np.empty(max_len + 1, dtype=np.int64)
    hist_ep = np.empty(max_len + 1, dtype=np.int64)
    hist_rule50 = np.empty(max_len + 1, dtype=np.int64)
    hist_reps = np.empty(max_len + 1, dtype=np.int64)
    pieces = np.empty(6, dtype=np.uint64)
    colours = np.empty(2, dtype=np.uint64)
    mailbox = np.empty(64, dtype=np.int8)
    capacity = legal_codes.shape[0]

    n_pos = 0
    n_legal = 0
    n_err = 0
    legal_offsets[0] = 0
    for g in range(n_games):
        pieces[:] = _START_PIECES
        colours[:] = _START_COLOURS
        mailbox[:] = _START_MAILBOX
        castle = _WK | _WQ | _BK | _BQ
        ep_sq = -1
        hist_pieces[0, :] = pieces
        hist_colours[0, :] = colours
        hist_castle[0] = castle
        hist_ep[0] = -1
        hist_rule50[0] = 0
        hist_reps[0] = 0
        first = game_offsets[g]
        for ply in range(game_offsets[g + 1] - first):
            m = first + ply
            if n_legal + MAX_LEGAL_MOVES > capacity:
                return n_pos, n_legal, n_err, True
            stm = ply & 1
            if move_src[m] < 0:
                err_game[n_err], err_ply[n_err], err_kind[n_err] = g, ply, ERROR_UNPARSEABLE
                n_err += 1
                break
            end = _generate_legal(
                pieces, colours, stm, castle, ep_sq, legal_codes, legal_index, n_legal
            )
            code = (
                move_src[m] | (move_dst[m] << MOVE_TO_SHIFT) | (move_promo[m] << MOVE_PROMO_SHIFT)
            )
            found = -1
            for i in range(n_legal, end):
                if legal_codes[i] == code:
                    found = i - n_legal
                    break
            if found < 0:
                err_game[n_err], err_ply[n_err], err_kind[n_err] = g, ply, ERROR_ILLEGAL
                n_err += 1
                break
            _write_position(
                planes, bits, floats, packed, n_pos, ply,
                hist_pieces, hist_colours, hist_castle, hist_rule50, hist_reps,
            )  # fmt: skip
            pos_game[n_pos] = g
            pos_ply[n_pos] = ply
            played_pos[n_pos] = found
            n_legal = end
            n_pos += 1
            legal_offsets[n_pos] = n_legal

            castle, ep_sq, lc0_ep, resets = _apply_move(
                pieces, colours, mailbox, stm, castle, move_src[m], move_dst[m], move_promo[m]
            )
            j = ply + 1
            hist_pieces[j, :] = pieces
            hist_colours[j, :] = colours
            hist_castle[j] = castle
            hist_ep[j] = lc0_ep
            hist_rule50[j] = 0 if resets else hist_rule50[j - 1] + 1
            hist_reps[j] = _repetitions(
                hist_pieces, hist_colours, hist_castle, hist_ep, hist_rule50, hist_reps, j
            )
    return n_pos, n_legal, n_err, False


@njit(cache=True)
def _popcount(b):
    count = 0
    while b:
        b &= b - _U1
        count += 1
    return count


@njit(cache=True)
def _has_insufficient_material(pieces, colours, colour):
    """python-chess ``Board.has_insufficient_material(colour)``: material only, no positions."""
    us = colours[colour]
    them = colours[1 - colour]
    if us & (pieces[PAWN] | pieces[ROOK] | pieces[QUEEN]):
        return False
    if us & pieces[KNIGHT]:
        return _popcount(us) <= 2 and not (them & ~pieces[KING] & ~pieces[QUEEN])
    if us & pieces[BISHOP]:
        bishops = pieces[BISHOP]
        same_colour = not (bishops & _DARK_SQUARES) or not (bishops & _LIGHT_SQUARES)
        return same_colour and not pieces[PAWN] and not pieces[KNIGHT]
    return True


@njit(cache=True)
def _outcome(pieces, colours, stm, castle, ep_sq, rule50, reps, codes, index):
    """OUTCOME_* of a position, in python-chess ``Board.outcome()``'s order of checks."""
    end = _generate_legal(pieces, colours, stm, castle, ep_sq, codes, index, 0)
    if end == 0:
        us = colours[stm]
        ksq = np.int64(_lsb(pieces[KING] & us))
        if _attacked(ksq, us | colours[1 - stm], colours[1 - stm], pieces, stm):
            return OUTCOME_CHECKMATE
        return OUTCOME_DRAW  # stalemate
    if _has_insufficient_material(pieces, colours, 0) and _has_insufficient_material(
        pieces, colours, 1
    ):
        return OUTCOME_DRAW
    if rule50 >= 150:  # 75-move rule
        return OUTCOME_DRAW
    if reps >= 4:  # the fifth occurrence (lc0 counts the earlier ones)
        return OUTCOME_DRAW
    return OUTCOME_NONE


@njit(cache=True, nogil=True)
def _after_kernel(
    move_src,
    move_dst,
    move_promo,
    game_offsets,
    req_game,
    req_ply,
    req_code,
    order,
    planes,
    bits,
    floats,
    packed,
    outcome,
):
    """Planes of the position after move ``req_code[i]`` from position (game, ply), per request.

    ``order`` sorts the requests by (game, ply): each requested game is replayed once, up to
    its last requested ply (the bitboard replay costs microseconds; no encoding on the way).
    The request's move is played on a copy of the board, its history slot written, the planes
    filled, and the game goes on with its own move.
    """
    n_games = game_offsets.shape[0] - 1
    max_len = 0
    for g in range(n_games):
        max_len = max(max_len, game_offsets[g + 1] - game_offsets[g])
    hist_pieces = np.empty((max_len + 2, 6), dtype=np.uint64)
    hist_colours = np.empty((max_len + 2, 2), dtype=np.uint64)
    hist_castle = np.empty(max_len + 2, dtype=np.int64)
    hist_ep = np.empty(max_len + 2, dtype=np.int64)
    hist_rule50 = np.empty(max_len + 2, dtype=np.int64)
    hist_reps = np.empty(max_len + 2, dtype=np.int64)
    pieces = np.empty(6, dtype=np.uint64)
    colours = np.empty(2, dtype=np.uint64)
    mailbox = np.empty(64, dtype=np.int8)
    child_pieces = np.empty(6, dtype=np.uint64)
    child_colours = np.empty(2, dtype=np.uint64)
    child_mailbox = np.empty(64, dtype=np.int8)
    codes = np.empty(MAX_LEGAL_MOVES, dtype=np.int16)
    index = np.empty(MAX_LEGAL_MOVES, dtype=np.int16)
    n_req = order.shape[0]
    r = 0
    while r < n_req:
        g = req_game[order[r]]
        pieces[:] = _START_PIECES
        colours[:] = _START_COLOURS
        mailbox[:] = _START_MAILBOX
        castle = _WK | _WQ | _BK | _BQ
        ep_sq = -1
        hist_pieces[0, :] = pieces
        hist_colours[0, :] = colours
        hist_castle[0] = castle
        hist_ep[0] = -1
        hist_rule50[0] = 0
        hist_reps[0] = 0
        ply = 0
        while r < n_req and req_game[order[r]] == g:
            i = order[r]
            if req_ply[i] == ply:
                stm = ply & 1
                end = _generate_legal(pieces, colours, stm, castle, ep_sq, codes, index, 0)
                legal = False
                for k in range(end):
                    if codes[k] == req_code[i]:
                        legal = True
                        break
                r += 1
                if not legal:
                    outcome[i] = OUTCOME_ILLEGAL
                    continue
                code = np.int64(req_code[i])
                child_pieces[:] = pieces
                child_colours[:] = colours
                child_mailbox[:] = mailbox
                c_castle, c_ep, c_lc0_ep, resets = _apply_move(
                    child_pieces, child_colours, child_mailbox, stm, castle,
                    code & 63, (code >> MOVE_TO_SHIFT) & 63, (code >> MOVE_PROMO_SHIFT) & 7,
                )  # fmt: skip
                j = ply + 1
                hist_pieces[j, :] = child_pieces
                hist_colours[j, :] = child_colours
                hist_castle[j] = c_castle
                hist_ep[j] = c_lc0_ep
                hist_rule50[j] = 0 if resets else hist_rule50[ply] + 1
                hist_reps[j] = _repetitions(
                    hist_pieces, hist_colours, hist_castle, hist_ep, hist_rule50, hist_reps, j
                )
                _write_position(
                    planes, bits, floats, packed, i, j,
                    hist_pieces, hist_colours, hist_castle, hist_rule50, hist_reps,
                )  # fmt: skip
                outcome[i] = _outcome(
                    child_pieces, child_colours, 1 - stm, c_castle, c_ep,
                    hist_rule50[j], hist_reps[j], codes, index,
                )  # fmt: skip
                continue
            # No request left at this ply: the game goes on with its own move.
            m = game_offsets[g] + ply
            if ply >= game_offsets[g + 1] - game_offsets[g] or move_src[m] < 0:
                while r < n_req and req_game[order[r]] == g:  # past the game's end
                    outcome[order[r]] = OUTCOME_ILLEGAL
                    r += 1
                break
            castle, ep_sq, lc0_ep, resets = _apply_move(
                pieces, colours, mailbox, ply & 1, castle, move_src[m], move_dst[m], move_promo[m]
            )
            ply += 1
            hist_pieces[ply, :] = pieces
            hist_colours[ply, :] = colours
            hist_castle[ply] = castle
            hist_ep[ply] = lc0_ep
            hist_rule50[ply] = 0 if resets else hist_rule50[ply - 1] + 1
            hist_reps[ply] = _repetitions(
                hist_pieces, hist_colours, hist_castle, hist_ep, hist_rule50, hist_reps, ply
            )


# ---------------------------------------------------------------------------------------------
# Python API


@dataclass(frozen=True)
class MoveError:
    """Why one game stopped early: its positions up to ``ply`` (exclusive) were encoded."""

    game_index: int  # index of the game in the input batch
    ply: int  # 0-based ply of the offending move
    move: str  # the move as given
    reason: str  # "illegal move" | "not a UCI move"

    def __str__(self) -> str:
        return f"game {self.game_index}, ply {self.ply}: {self.reason} {self.move!r}"


@dataclass
class ChessPositions:
    """Every position before each move of a batch of games (contract C6), N positions in total.

    Games stopped by an illegal move contribute the positions before that move; ``errors``
    says which and why.
    """

    planes: np.ndarray  # (N, 112, 8, 8) float32, exactly lc0's input
    game_index: np.ndarray  # (N,) int32 which input game
    ply: np.ndarray  # (N,) int32 plies played before this position
    white_to_move: np.ndarray  # (N,) bool
    legal_offsets: np.ndarray  # (N+1,) int64 CSR into legal_policy_index / legal_move
    legal_policy_index: np.ndarray  # (L,) int16 lc0 1858-index of each legal move (mover's view)
    legal_move: np.ndarray  # (L,) int16 packed absolute move (chess_spec.unpack_move)
    played_legal_pos: np.ndarray  # (N,) int32 where the played move sits in its legal list
    errors: list[MoveError]  # games cut short by an illegal or malformed move
    fen: list[str] | None = None  # only with encode_games(..., with_fen=True), for debugging
    packed: PackedPlanes | None = None  # encode_games(..., packed=True): the planes, bit-packed

    def __len__(self) -> int:
        return int(self.game_index.shape[0])

    @property
    def legal_counts(self) -> np.ndarray:
        """(N,) number of legal moves of each position."""
        return np.diff(self.legal_offsets)

    @property
    def played_policy_index(self) -> np.ndarray:
        """(N,) lc0 policy index of the move actually played."""
        return self.legal_policy_index[self.legal_offsets[:-1] + self.played_legal_pos]


def _packed_buffers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Uninitialised (n, PACKED_BYTES) bits and (n, 1, 8, 8) rule-50 planes for the kernels."""
    return np.empty((n, PACKED_BYTES), dtype=np.uint8), np.empty((n, 1, 8, 8), dtype=np.float32)


def _packed(bits: np.ndarray, floats: np.ndarray, n: int) -> PackedPlanes:
    return PackedPlanes(
        (n, NUM_PLANES, 8, 8), bits[:n], PACKED_BINARY_CHANNELS, PACKED_FLOAT_CHANNELS, floats[:n]
    )


def _as_list_array(moves: Sequence[Sequence[str]] | pa.Array | pa.ChunkedArray) -> pa.ListArray:
    if isinstance(moves, pa.ChunkedArray):
        moves = moves.combine_chunks() if moves.num_chunks else pa.array([], pa.list_(pa.string()))
    if not isinstance(moves, pa.Array):
        moves = pa.array(moves, type=pa.list_(pa.string()))
    if not pa.types.is_list(moves.type):
        moves = moves.cast(pa.list_(pa.string()))
    if moves.null_count:
        moves = pc.fill_null(moves, pa.scalar([], moves.type))
    return moves


def _move_arrays(moves: pa.ListArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Game offsets and parsed (src, dst, promo) of every move, without Python per move."""
    list_offsets = np.asarray(moves.offsets, dtype=np.int64)
    game_offsets = list_offsets - list_offsets[0]
    flat = moves.flatten()
    if not pa.types.is_string(flat.type):
        flat = flat.cast(pa.string())
    if flat.null_count:
        flat = pc.fill_null(flat, "")
    n = len(flat)
    str_offsets = np.frombuffer(flat.buffers()[1], dtype=np.int32)[
        flat.offset : flat.offset + n + 1
    ]
    data_buf = flat.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(1, np.uint8)
    )
    src = np.empty(n, dtype=np.int64)
    dst = np.empty(n, dtype=np.int64)
    promo = np.empty(n, dtype=np.int64)
    _parse_uci(data, str_offsets.astype(np.int64), src, dst, promo)
    return game_offsets, src, dst, promo


def encode_games(
    moves: Sequence[Sequence[str]] | pa.Array | pa.ChunkedArray,
    *,
    out: np.ndarray | None = None,
    with_fen: bool = False,
    packed: bool = False,
) -> ChessPositions:
    """Encode every position before each move of each game (ply 0..n-1, in game order).

    ``moves``: python-chess UCI per game (lists, or the games table's ``moves`` column as a
    pyarrow list array); every game starts from the standard position. ``out``: optional
    preallocated float32 C-contiguous array with at least as many rows as there are moves in
    total, filled in place (``planes`` is then a view of its first rows). ``packed``: write the
    planes bit-packed instead (``positions.packed``, 892 bytes a position against 28.7 kB;
    ``positions.planes`` is empty), exactly what ``pack_planes`` of the float planes unpacks to.
    """
    array = _as_list_array(moves)
    game_offsets, src, dst, promo = _move_arrays(array)
    total = int(game_offsets[-1])
    bits, floats = _packed_buffers(total if packed else 0)
    if packed:
        if out is not None:
            raise ValueError("encode_games: out and packed=True exclude each other")
        out = np.empty((0, NUM_PLANES, 8, 8), dtype=np.float32)
    elif out is None:
        out = np.empty((total, NUM_PLANES, 8, 8), dtype=np.float32)
    elif (
        out.dtype != np.float32
        or out.ndim != 4
        or out.shape[1:] != (NUM_PLANES, 8, 8)
        or out.shape[0] < total
        or not out.flags.c_contiguous
    ):
        raise ValueError(
            f"out must be a C-contiguous float32 array of shape (>= {total}, 112, 8, 8), "
            f"got {out.dtype} {out.shape!r}"
        )
    planes_flat = out.reshape(out.shape[0], NUM_PLANES, 64)  # (N, 112, 64) view
    n_games = len(game_offsets) - 1
    pos_game = np.empty(total, dtype=np.int32)
    pos_ply = np.empty(total, dtype=np.int32)
    legal_offsets = np.empty(total + 1, dtype=np.int64)
    played = np.empty(total, dtype=np.int32)
    err_game = np.empty(max(n_games, 1), dtype=np.int32)
    err_ply = np.empty_like(err_game)
    err_kind = np.empty_like(err_game)
    capacity = max(total, 1) * LEGAL_PER_POSITION_GUESS + MAX_LEGAL_MOVES
    while True:
        legal_codes = np.empty(capacity, dtype=np.int16)
        legal_index = np.empty(capacity, dtype=np.int16)
        n_pos, n_legal, n_err, overflowed = _encode_kernel(
            src, dst, promo, game_offsets, planes_flat, bits, floats.reshape(-1, 1, 64), packed,
            legal_codes, legal_index,
            pos_game, pos_ply, legal_offsets, played, err_game, err_ply, err_kind,
        )  # fmt: skip
        if not overflowed:
            break
        capacity = max(total, 1) * MAX_LEGAL_MOVES + MAX_LEGAL_MOVES
    flat_moves = array.flatten()
    errors = [
        MoveError(
            game_index=int(g),
            ply=int(p),
            move=str(flat_moves[int(game_offsets[g]) + int(p)].as_py()),
            reason=_ERROR_REASONS[int(k)],
        )
        for g, p, k in zip(err_game[:n_err], err_ply[:n_err], err_kind[:n_err], strict=True)
    ]
    positions = ChessPositions(
        planes=out[:n_pos],
        game_index=pos_game[:n_pos],
        ply=pos_ply[:n_pos],
        white_to_move=(pos_ply[:n_pos] & 1) == 0,
        legal_offsets=legal_offsets[: n_pos + 1],
        legal_policy_index=legal_index[:n_legal].copy(),
        legal_move=legal_codes[:n_legal].copy(),
        played_legal_pos=played[:n_pos],
        errors=errors,
        packed=_packed(bits, floats, n_pos) if packed else None,
    )
    if with_fen:
        positions.fen = _fens(array, positions)
    return positions


def compile_kernels() -> None:
    """Compile every kernel extraction calls (or load them from numba's on-disk cache) by
    encoding one short game and the position after its last move, as extraction does.

    The extraction driver calls it once before its Ray workers start
    (``ChessExtraction.compile_encoders``), so that the workers load the kernels from the
    cache; without it every new worker of a fresh node compiled them itself (121 CPU-s of
    encoding on a fresh 16-core GPU node against 4.5 on a warm one; 8 processes encoding a
    chunk, 238 CPU-s against 63 with this call first: ``bench/speed/bench_numba_cache.py --stage encode``,
    docs/guide/gpu.md).
    """
    moves = [["e2e4", "e7e5", "g1f3"]]
    positions = encode_games(moves, packed=True)
    last = positions.legal_offsets[2] + positions.played_legal_pos[2]
    encode_after(moves, np.array([0]), np.array([2]), positions.legal_move[last : last + 1],
                 packed=True)  # fmt: skip


class IllegalAfterMoveError(ValueError):
    """A move given to :func:`encode_after` that is not legal in its position."""


@dataclass
class AfterPositions:
    """Positions after one move from encoded positions (children, and each game's end)."""

    planes: np.ndarray  # (R, 112, 8, 8) float32, lc0's input for the side to move there
    outcome: np.ndarray  # (R,) int8 OUTCOME_NONE / OUTCOME_CHECKMATE / OUTCOME_DRAW
    white_to_move: np.ndarray  # (R,) bool
    packed: PackedPlanes | None = None  # encode_after(..., packed=True): the planes, bit-packed

    def __len__(self) -> int:
        return int(self.outcome.shape[0])


def encode_after(
    moves: Sequence[Sequence[str]] | pa.Array | pa.ChunkedArray,
    games: np.ndarray,
    plies: np.ndarray,
    move_codes: np.ndarray,
    *,
    out: np.ndarray | None = None,
    packed: bool = False,
) -> AfterPositions:
    """Planes of the position after packed move ``move_codes[i]`` (``ChessPositions.legal_move``)
    is played at ply ``plies[i]`` of game ``games[i]`` of ``moves`` (the same games as given to
    :func:`encode_games`), and whether the game is over there.

    With the game's own move at its last ply this is the position after the game; with a
    likely move it is a candidate's position (expected loss). Bit-identical to
    :func:`encode_games` of the prefix plus the move. Requests may come in any order.
    ``packed``: the planes bit-packed instead (``after.packed``; ``after.planes`` is empty),
    written from the replay's bitboards with no float planes on the way: what the positions
    after likely moves of a chunk travel as (``pipeline.extract.chess.encode_chess_children``).

        >>> after = encode_after([["e2e4", "e7e5"]], np.array([0]), np.array([1]),
        ...                      np.array([52 | (36 << 6)]))   # e7e5 at ply 1
        >>> after.planes.shape, after.outcome.tolist()
        ((1, 112, 8, 8), [0])
    """
    array = _as_list_array(moves)
    game_offsets, src, dst, promo = _move_arrays(array)
    games = np.ascontiguousarray(games, dtype=np.int64)
    plies = np.ascontiguousarray(plies, dtype=np.int64)
    move_codes = np.ascontiguousarray(move_codes, dtype=np.int16)
    n = len(games)
    if plies.shape != (n,) or move_codes.shape != (n,):
        raise ValueError(f"games, plies and move_codes must be (R,), got {n}, {plies.shape!r}")
    n_games = len(game_offsets) - 1
    if n and (games.min() < 0 or games.max() >= n_games):
        raise IndexError(f"game indices must be in [0, {n_games}), got {games!r}")
    bits, floats = _packed_buffers(n if packed else 0)
    if packed:
        if out is not None:
            raise ValueError("encode_after: out and packed=True exclude each other")
        out = np.empty((0, NUM_PLANES, 8, 8), dtype=np.float32)
    elif out is None:
        out = np.empty((n, NUM_PLANES, 8, 8), dtype=np.float32)
    planes = out[: 0 if packed else n]
    outcome = np.zeros(n, dtype=np.int8)
    if n:
        order = np.lexsort((plies, games))  # by game, then ply
        _after_kernel(
            src, dst, promo, game_offsets, games, plies, move_codes, order,
            planes.reshape(len(planes), NUM_PLANES, 64), bits, floats.reshape(-1, 1, 64), packed,
            outcome,
        )  # fmt: skip
    bad = np.flatnonzero(outcome == OUTCOME_ILLEGAL)
    if len(bad):
        shown = [(int(games[i]), int(plies[i]), unpack_move(int(move_codes[i]))) for i in bad[:5]]
        raise IllegalAfterMoveError(f"(game, ply, move) not legal there: {shown!r}")
    return AfterPositions(
        planes, outcome, (plies & 1) == 1, _packed(bits, floats, n) if packed else None
    )


def _fens(moves: pa.ListArray, positions: ChessPositions) -> list[str]:
    """FEN of every encoded position, replayed with python-chess (debugging only, slow)."""
    import chess

    fens: list[str] = []
    games = moves.to_pylist()
    for g in np.unique(positions.game_index):
        board = chess.Board()
        for ply in positions.ply[positions.game_index == g]:
            fens.append(board.fen())
            board.push_uci(games[g][ply])
    return fens


def legal_uci(pos: ChessPositions, i: int) -> list[str]:
    """The legal moves of position ``i`` as python-chess UCI (``e1g1`` castling), in the order of
    ``legal_policy_index``; for display and tests."""
    start, end = int(pos.legal_offsets[i]), int(pos.legal_offsets[i + 1])
    return [unpack_move(int(c)) for c in pos.legal_move[start:end]]


def played_uci(pos: ChessPositions, i: int) -> str:
    """The move played from position ``i`` as python-chess UCI."""
    return unpack_move(int(pos.legal_move[pos.legal_offsets[i] + pos.played_legal_pos[i]]))
