"""The layout of Lc0's classical 112-plane input and of its 1858-move policy: one spec module
shared by the encoder (``pipeline/chess_game/encode.py``), the policy decoder
(``pipeline/chess_game/policy.py``) and the net (``pipeline/nets/lc0_net.py``), so that none of them
imports another to learn a channel count.

Versions
- ``INPUT_CLASSICAL_112_PLANE`` (Lc0 input format 1, used by Maia-1 and every classical Lc0 net):
  the layout below. Later Lc0 formats (canonical, 960 castling planes) are not supported.

Planes (keep in sync with ``_write_planes`` in pipeline/chess_game/encode.py)::

    0-103  history: 8 positions x 13 planes, step 0 = the position to move, step 7 = 7 plies ago
           per step: 0-5 the mover's P N B R Q K, 6-11 the opponent's P N B R Q K,
                     12 ones if this position occurred before (repetition)
    104    ones if the mover may still castle queenside (O-O-O)
    105    ones if the mover may still castle kingside (O-O)
    106    ones if the opponent may still castle queenside
    107    ones if the opponent may still castle kingside
    108    ones if Black is to move
    109    the rule-50 half-move count, raw (Maia's exporter folded Lc0's /99 into the weights)
    110    zeros (was the move count in old nets)
    111    ones (lets the convolutions find the board edge)

Squares are ``rank * 8 + file`` (a1 = 0, h8 = 63) as in python-chess. Everything is written from
the mover's view: when Black is to move the board is mirrored by rank (``square ^ 56``), files
stay where they are. Plane ``k`` row ``r`` column ``f`` is square ``r * 8 + f`` of that view.

Policy (1858 moves, mover's view): for every from-square in square order, every to-square in
square order that a queen or a knight could reach on an empty board (1792 moves); then the
queen, rook and bishop promotions from rank 7 to rank 8 (66 moves, ``q r b`` per from/to
pair). A knight promotion uses the plain move's index (``a7a8`` = 1401). Castling is written
king-takes-rook: ``e1h1`` = 103, ``e1a1`` = 97 (python-chess writes ``e1g1`` / ``e1c1``).
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# Input planes
HISTORY_STEPS = 8  # positions in the history, the current one included
PLANES_PER_STEP = 13  # 6 mover pieces + 6 opponent pieces + repetition
REPETITION_PLANE = 12  # offset inside a history step
AUX_BASE = HISTORY_STEPS * PLANES_PER_STEP  # 104
PLANE_OUR_QUEENSIDE = 104
PLANE_OUR_KINGSIDE = 105
PLANE_THEIR_QUEENSIDE = 106
PLANE_THEIR_KINGSIDE = 107
PLANE_BLACK_TO_MOVE = 108
PLANE_RULE50 = 109
PLANE_ZEROS = 110
PLANE_ONES = 111
NUM_PLANES = 112
INPUT_SHAPE = (NUM_PLANES, 8, 8)

# Piece types, in the order of the per-step piece planes (mover's 0-5, opponent's 6-11).
PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = range(6)
PIECE_LETTERS = "pnbrqk"

# Promotion codes used in packed moves (0 = no promotion).
PROMO_NONE, PROMO_KNIGHT, PROMO_BISHOP, PROMO_ROOK, PROMO_QUEEN = range(5)
PROMO_LETTERS = ("", "n", "b", "r", "q")

MIRROR = 56  # square ^ MIRROR flips the rank: a1 <-> a8

# ---------------------------------------------------------------------------------------------
# Policy
POLICY_SIZE = 1858
SQUARE_NAMES = [f"{'abcdefgh'[s % 8]}{s // 8 + 1}" for s in range(64)]

_QUEEN_DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))
_KNIGHT_JUMPS = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
_PROMOTION_ORDER = ("q", "r", "b")  # lc0's order within one from/to pair


def _plain_targets(square: int) -> list[int]:
    """Squares a queen or a knight on ``square`` reaches on an empty board, in square order."""
    rank, file = divmod(square, 8)
    targets = set()
    for dr, df in _QUEEN_DIRECTIONS:
        r, f = rank + dr, file + df
        while 0 <= r < 8 and 0 <= f < 8:
            targets.add(r * 8 + f)
            r, f = r + dr, f + df
    for dr, df in _KNIGHT_JUMPS:
        r, f = rank + dr, file + df
        if 0 <= r < 8 and 0 <= f < 8:
            targets.add(r * 8 + f)
    return sorted(targets)


def _build_policy_moves() -> list[str]:
    """lc0's 1858 move names in index order (the table lc0 ships as ``kIdxToMove``)."""
    names = [
        SQUARE_NAMES[src] + SQUARE_NAMES[dst] for src in range(64) for dst in _plain_targets(src)
    ]
    for file in range(8):
        for to_file in (file - 1, file, file + 1):
            if 0 <= to_file < 8:
                src, dst = 48 + file, 56 + to_file
                names.extend(SQUARE_NAMES[src] + SQUARE_NAMES[dst] + p for p in _PROMOTION_ORDER)
    return names


# POLICY_MOVES[i]: lc0's name of policy index i (mover's view, castling king-takes-rook).
POLICY_MOVES: tuple[str, ...] = tuple(_build_policy_moves())
POLICY_INDEX_OF: dict[str, int] = {name: i for i, name in enumerate(POLICY_MOVES)}


def _build_index_table() -> np.ndarray:
    """(5, 64, 64) int16: policy index by (promotion code, from, to) in the mover's view, -1
    where no such move exists. No promotion and knight promotion share the plain index."""
    table = np.full((5, 64, 64), -1, dtype=np.int16)
    for i, name in enumerate(POLICY_MOVES):
        src = SQUARE_NAMES.index(name[0:2])
        dst = SQUARE_NAMES.index(name[2:4])
        if len(name) == 4:
            table[PROMO_NONE, src, dst] = i
            if src // 8 == 6 and dst // 8 == 7 and abs(src % 8 - dst % 8) <= 1:
                table[PROMO_KNIGHT, src, dst] = i
        else:
            table[PROMO_LETTERS.index(name[4]), src, dst] = i
    return table


# POLICY_INDEX_TABLE[promo, from, to] with squares in the mover's view; keep in sync with
# _build_policy_moves (lc0's ordering) — the encoder's numba kernels read it.
POLICY_INDEX_TABLE: np.ndarray = _build_index_table()

# Inverse of POLICY_INDEX_TABLE for decoding: from/to square (mover's view) and promotion code
# of each policy index (knight promotions decode as the plain move; the board disambiguates).
POLICY_FROM = np.array([SQUARE_NAMES.index(n[0:2]) for n in POLICY_MOVES], dtype=np.int8)
POLICY_TO = np.array([SQUARE_NAMES.index(n[2:4]) for n in POLICY_MOVES], dtype=np.int8)
POLICY_PROMO = np.array(
    [PROMO_LETTERS.index(n[4]) if len(n) == 5 else PROMO_NONE for n in POLICY_MOVES],
    dtype=np.int8,
)

# Packed move code (absolute squares, python-chess meaning): from | to << 6 | promo << 12.
# Castling is packed the python-chess way (e1g1). Fits in int16 (promo <= 4).
MOVE_TO_SHIFT = 6
MOVE_PROMO_SHIFT = 12


def mirror_square(square: int) -> int:
    """The same square seen from the other side (rank flipped), as lc0 shows it to Black."""
    return square ^ MIRROR


def unpack_move(code: int) -> str:
    """Packed move code to python-chess UCI (``e1g1``, ``e7e8q``)."""
    src = code & 63
    dst = (code >> MOVE_TO_SHIFT) & 63
    promo = (code >> MOVE_PROMO_SHIFT) & 7
    return SQUARE_NAMES[src] + SQUARE_NAMES[dst] + PROMO_LETTERS[promo]
