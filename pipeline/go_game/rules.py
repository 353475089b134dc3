"""Go rules engine: KataGo's board and game-history rules, compiled with numba, for whole games.

Why a port and not a simple board: Kibitz feeds positions to KataGo nets, and the nets' inputs
(liberties, ko bans, superko bans, "a pass ends the phase", komi chilling) depend on exactly how
KataGo's ``Board`` (cpp/game/board.cpp) and ``BoardHistory`` (cpp/game/boardhistory.cpp) track
a game. This module reproduces that state: chains as circular linked lists with liberty counts,
the simple-ko point after a single-stone capture that leaves a lone stone in atari, positional
superko bans, multi-stone suicide where the rules allow it (single-stone suicide is always
illegal, as in KataGo), pass history and the game end after consecutive passes.

Every write to the board goes through a journal so a search (KataGo's ladder reader in
``pipeline/go_game/encode.py``) can play moves and take them back exactly.

Rule sets (KataGo's names): ``japanese`` / ``korean`` (simple ko, territory scoring, seki tax, no
suicide), ``chinese`` (simple ko, area scoring, no suicide, White gets +1 per handicap stone),
``tromp-taylor`` (positional superko, area scoring, multi-stone suicide legal). KataGo's encore
(the cleanup phase after two passes under territory scoring) is not modelled: moves after the game
ended by passes are reported as illegal.

Run the rules over games::

    from pipeline.go_game.rules import GoGameSpec, replay_games
    result = replay_games([GoGameSpec(moves=["B:pd", "W:dp"])])
    result.illegal_moves   # [(game, ply, reason), ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba as nb
import numpy as np
import pyarrow as pa

from pipeline.go_game.spec import NN_LEN, PASS_INDEX

# Colours and special locations (KataGo: C_EMPTY, P_BLACK, P_WHITE, C_WALL; NULL_LOC, PASS_LOC).
EMPTY, BLACK, WHITE, WALL = 0, 1, 2, 3
NULL_LOC, PASS_LOC = 0, 1
MAX_SIZE = NN_LEN
MAX_ARR = (MAX_SIZE + 1) * (MAX_SIZE + 2) + 1  # KataGo's MAX_ARR_SIZE for 19×19

# Rows of the board state array ``st`` (int32, shape (6, arr_size)).
R_COLOR = 0  # colour of each location (walls around the board)
R_HEAD = 1  # chain head of each stone
R_NEXT = 2  # next stone in the chain's circular list
R_LIBS = 3  # liberties of the chain (valid at its head)
R_SIZE = 4  # stones in the chain (valid at its head)
R_MISC = 5  # [0] = simple-ko location (NULL_LOC when none)

JOURNAL_LEN = 1 << 18  # (row, index, old value) entries; a deep ladder search needs a few thousand

# Rule parameters as small integers for the compiled code.
KO_SIMPLE, KO_POSITIONAL = 0, 1
SCORING_AREA, SCORING_TERRITORY = 0, 1
TAX_NONE, TAX_SEKI, TAX_ALL = 0, 1, 2
WHB_ZERO, WHB_N, WHB_N_MINUS_ONE = 0, 1, 2

# Reasons a move is rejected (codes of the compiled replay, texts for reports).
OK = 0
BAD_COORDINATE = 1
OCCUPIED = 2
KO_BANNED = 3
SUPERKO_BANNED = 4
SUICIDE = 5
AFTER_GAME_END = 6
BAD_SETUP = 7
REASONS = {
    BAD_COORDINATE: "not a move on the board",
    OCCUPIED: "point is occupied",
    KO_BANNED: "retakes a ko (simple ko ban)",
    SUPERKO_BANNED: "repeats an earlier position (positional superko)",
    SUICIDE: "suicide",
    AFTER_GAME_END: "move after consecutive passes ended the game (encore not modelled)",
    BAD_SETUP: "setup stone on an occupied or invalid point",
}

# Scalar history state ``hi`` (int64) and ``hf`` (float64) of one game.
H_NMOVES = 0  # moves played so far
H_CONSEC_PASSES = 1  # consecutive game-ending passes (KataGo consecutiveEndingPasses)
H_KO_START = 2  # first index of the ko-hash history still in force (cleared by passes, simple ko)
H_NKO = 3  # ko hashes stored
H_NBPASS = 4  # hashes stored before Black's passes
H_NWPASS = 5  # hashes stored before White's passes
H_GAME_OVER = 6  # the game ended by passes
H_NO_RESULT = 7  # the last move repeated a position a third time (KataGo marks no result)
HF_WHITE_BONUS = 0  # territory scoring: +1 per Black stone/move, −1 per White (chilling)
HF_HANDICAP_BONUS = 1  # White's handicap compensation under WHB_N / WHB_N_MINUS_ONE

_ZOBRIST = (
    np.random.default_rng(20240217)
    .integers(0, np.iinfo(np.int64).max, size=(MAX_ARR, 3), dtype=np.int64)
    .astype(np.uint64)
)
_ZOBRIST_PLAYER = (
    np.random.default_rng(7)
    .integers(0, np.iinfo(np.int64).max, size=3, dtype=np.int64)
    .astype(np.uint64)
)


class MoveFormatError(ValueError):
    """A move or setup string that is not "B:pd" / "W:pass" / "pd"."""


class UnknownRulesError(ValueError):
    """A rule set name KataGo does not know."""


@dataclass(frozen=True)
class RuleSet:
    """KataGo's rule parameters for one named rule set (cpp/game/rules.cpp parseRules)."""

    name: str
    ko_rule: int
    scoring: int
    tax: int
    multi_stone_suicide: bool
    white_handicap_bonus: int


RULESETS = {
    "japanese": RuleSet("japanese", KO_SIMPLE, SCORING_TERRITORY, TAX_SEKI, False, WHB_ZERO),
    "korean": RuleSet("korean", KO_SIMPLE, SCORING_TERRITORY, TAX_SEKI, False, WHB_ZERO),
    "chinese": RuleSet("chinese", KO_SIMPLE, SCORING_AREA, TAX_NONE, False, WHB_N),
    "tromp-taylor": RuleSet("tromp-taylor", KO_POSITIONAL, SCORING_AREA, TAX_NONE, True, WHB_ZERO),
}


def ruleset(name: str) -> RuleSet:
    """The RuleSet for a games-table ``rules`` value (case-insensitive)."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    if key == "tromptaylor":
        key = "tromp-taylor"
    if key not in RULESETS:
        raise UnknownRulesError(f"unknown Go rules {name!r}; known: {sorted(RULESETS)}")
    return RULESETS[key]


@dataclass(frozen=True)
class GoGameSpec:
    """One game as the games table stores it (moves "B:pd" / "W:pass", SGF setup points)."""

    moves: Sequence[str]
    setup_black: Sequence[str] = ()
    setup_white: Sequence[str] = ()
    board_size: int = 19
    komi: float = 6.5
    rules: str = "japanese"


@dataclass
class ParsedGames:
    """Games flattened to arrays for the compiled code (CSR over games)."""

    move_offsets: np.ndarray  # (G+1,) int64
    move_color: np.ndarray  # (M,) int8 BLACK / WHITE, 0 when unparseable
    move_index: np.ndarray  # (M,) int16 policy index y*19+x, 361 pass, -1 unparseable
    setup_offsets: np.ndarray  # (G+1,) int64
    setup_color: np.ndarray  # (S,) int8
    setup_index: np.ndarray  # (S,) int16, -1 unparseable
    board_size: np.ndarray  # (G,) int32
    komi: np.ndarray  # (G,) float32
    rules: np.ndarray  # (G, 5) int32: ko, scoring, tax, multi-stone suicide, handicap bonus


@dataclass
class ReplayResult:
    """Outcome of replaying games under their rules."""

    num_valid_moves: np.ndarray  # (G,) int32 moves played before the first illegal one
    illegal_moves: list[tuple[int, int, str]]  # (game, ply, reason); ply -1 for bad setup
    boards: np.ndarray  # (G, 19, 19) int8 final position (0 empty, 1 black, 2 white)
    captures: np.ndarray  # (G, 2) int32 stones captured by Black, by White (suicides count)


# --------------------------------------------------------------------------------------------
# Parsing (vectorised over all moves at once)


def _encode_ascii(strings: list[str], width: int) -> np.ndarray:
    """Fixed-width bytes rows; non-ASCII or over-long strings become rows that fail parsing."""
    cleaned = [s if isinstance(s, str) and s.isascii() and len(s) < width else "?" for s in strings]
    return np.array(cleaned, dtype=f"S{width}").view(np.uint8).reshape(len(cleaned), width)


def _points_from_bytes(col: np.ndarray, row: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Policy indices of SGF letter pairs, -1 where the letters are off the board."""
    x = col.astype(np.int32) - ord("a")
    y = row.astype(np.int32) - ord("a")
    ok = (x >= 0) & (x < size) & (y >= 0) & (y < size)
    return np.where(ok, y * NN_LEN + x, -1).astype(np.int16)


def parse_moves(moves: list[str], sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Colour (BLACK/WHITE, 0 if bad) and policy index (361 pass, -1 bad) of "B:pd" strings.

    ``sizes`` is the board size of each move's game. "tt" is read as a pass on boards up to
    19×19 (the old SGF convention some servers still write).
    """
    if not moves:
        return np.zeros(0, np.int8), np.zeros(0, np.int16)
    raw = _encode_ascii(moves, 8)  # (M, 8)
    color = np.where(raw[:, 0] == ord("B"), BLACK, np.where(raw[:, 0] == ord("W"), WHITE, 0))
    colon = raw[:, 1] == ord(":")
    is_pass = (raw[:, 2:7] == np.frombuffer(b"pass\x00", np.uint8)).all(axis=1)
    is_tt = (raw[:, 2] == ord("t")) & (raw[:, 3] == ord("t")) & (raw[:, 4] == 0) & (sizes <= 19)
    is_point = (raw[:, 4] == 0) & (raw[:, 2] != 0) & (raw[:, 3] != 0)
    index = _points_from_bytes(raw[:, 2], raw[:, 3], sizes)
    index = np.where(is_pass | is_tt, PASS_INDEX, np.where(is_point, index, -1))
    bad = (color == 0) | ~colon
    return np.where(bad, 0, color).astype(np.int8), np.where(bad, -1, index).astype(np.int16)


def parse_games(
    games: Sequence[GoGameSpec], *, rules: str | None = None, komi: float | None = None
) -> ParsedGames:
    """Flatten game specs to arrays; ``rules`` / ``komi`` override every game's own values."""
    n = len(games)
    sizes = np.array([g.board_size for g in games], dtype=np.int32)
    if ((sizes < 2) | (sizes > MAX_SIZE)).any():
        bad = int(np.flatnonzero((sizes < 2) | (sizes > MAX_SIZE))[0])
        raise MoveFormatError(f"game {bad}: board size {sizes[bad]!r} is not in 2..{MAX_SIZE}")
    move_counts = np.array([len(g.moves) for g in games], dtype=np.int64)
    move_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(move_counts, out=move_offsets[1:])
    flat_moves = [m for g in games for m in g.moves]
    move_color, move_index = parse_moves(flat_moves, np.repeat(sizes, move_counts))

    setup_counts = np.array([len(g.setup_black) + len(g.setup_white) for g in games], np.int64)
    setup_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(setup_counts, out=setup_offsets[1:])
    flat_setup = [p for g in games for p in (*g.setup_black, *g.setup_white)]
    setup_color = np.array(
        [c for g in games for c in [BLACK] * len(g.setup_black) + [WHITE] * len(g.setup_white)],
        dtype=np.int8,
    )
    if flat_setup:
        raw = _encode_ascii(flat_setup, 4)
        two_letters = (raw[:, 2] == 0) & (raw[:, 1] != 0)
        setup_index = _points_from_bytes(raw[:, 0], raw[:, 1], np.repeat(sizes, setup_counts))
        setup_index = np.where(two_letters, setup_index, -1).astype(np.int16)
    else:
        setup_index = np.zeros(0, np.int16)

    rule_rows = np.zeros((n, 5), dtype=np.int32)
    komis = np.zeros(n, dtype=np.float32)
    for i, g in enumerate(games):
        rs = ruleset(rules if rules is not None else g.rules)
        rule_rows[i] = (
            rs.ko_rule,
            rs.scoring,
            rs.tax,
            rs.multi_stone_suicide,
            rs.white_handicap_bonus,
        )
        komis[i] = komi if komi is not None else g.komi
    return ParsedGames(
        move_offsets,
        move_color,
        move_index,
        setup_offsets,
        setup_color,
        setup_index,
        sizes,
        komis,
        rule_rows,
    )


# --------------------------------------------------------------------------------------------
# Board primitives (KataGo's Board), every write journaled


@nb.njit(cache=True)
def _w(st, jr, jp, r, i, v):
    k = jp[0]
    if k >= jr.shape[0]:
        raise ValueError("go_rules: board journal overflow in a ladder search")
    jr[k, 0] = r
    jr[k, 1] = i
    jr[k, 2] = st[r, i]
    jp[0] = k + 1
    st[r, i] = v


@nb.njit(cache=True)
def undo_to(st, jr, jp, mark):
    """Take back every board write made since the journal was at ``mark``."""
    k = jp[0]
    while k > mark:
        k -= 1
        st[jr[k, 0], jr[k, 1]] = jr[k, 2]
    jp[0] = mark


@nb.njit(cache=True)
def new_board(n):
    """Empty n×n board state (walls around), KataGo's Board::init."""
    st = np.zeros((6, (n + 1) * (n + 2) + 1), dtype=np.int32)
    st[R_COLOR, :] = WALL
    for y in range(n):
        for x in range(n):
            st[R_COLOR, (x + 1) + (y + 1) * (n + 1)] = EMPTY
    st[R_MISC, 0] = NULL_LOC
    return st


@nb.njit(cache=True)
def loc_of(x, y, n):
    return (x + 1) + (y + 1) * (n + 1)


@nb.njit(cache=True)
def adj(loc, i, n):
    """Neighbour i of loc in KataGo's order: up, left, right, down."""
    if i == 0:
        return loc - (n + 1)
    if i == 1:
        return loc - 1
    if i == 2:
        return loc + 1
    return loc + (n + 1)


@nb.njit(cache=True)
def num_libs(st, loc):
    return st[R_LIBS, st[R_HEAD, loc]]


@nb.njit(cache=True)
def is_suicide(st, loc, pla, n):
    """Board::isSuicide: the move would leave its own chain without liberties."""
    if loc == PASS_LOC:
        return False
    opp = 3 - pla
    for i in range(4):
        a = adj(loc, i, n)
        c = st[R_COLOR, a]
        if c == EMPTY:
            return False
        if c == pla and num_libs(st, a) > 1:
            return False
        if c == opp and num_libs(st, a) == 1:
            return False
    return True


@nb.njit(cache=True)
def is_illegal_suicide(st, loc, pla, multi_stone_suicide, n):
    """Board::isIllegalSuicide: single-stone suicide is illegal under every rule set."""
    opp = 3 - pla
    for i in range(4):
        a = adj(loc, i, n)
        c = st[R_COLOR, a]
        if c == EMPTY:
            return False
        if c == pla and (multi_stone_suicide or num_libs(st, a) > 1):
            return False
        if c == opp and num_libs(st, a) == 1:
            return False
    return True


@nb.njit(cache=True)
def is_legal(st, loc, pla, multi_stone_suicide, n):
    """Board::isLegal (simple ko, occupancy, suicide); superko is checked by the history."""
    if loc == PASS_LOC:
        return True
    return (
        st[R_COLOR, loc] == EMPTY
        and loc != st[R_MISC, 0]
        and not is_illegal_suicide(st, loc, pla, multi_stone_suicide, n)
    )


@nb.njit(cache=True)
def _is_liberty_of(st, loc, head, n):
    hc = st[R_COLOR, head]
    for i in range(4):
        a = adj(loc, i, n)
        if st[R_COLOR, a] == hc and st[R_HEAD, a] == head:
            return True
    return False


@nb.njit(cache=True)
def _change_surrounding_libs(st, jr, jp, loc, pla, delta, n):
    a0 = adj(loc, 0, n)
    a1 = adj(loc, 1, n)
    a2 = adj(loc, 2, n)
    a3 = adj(loc, 3, n)
    c0 = st[R_COLOR, a0] == pla
    c1 = st[R_COLOR, a1] == pla
    c2 = st[R_COLOR, a2] == pla
    c3 = st[R_COLOR, a3] == pla
    h0 = st[R_HEAD, a0]
    h1 = st[R_HEAD, a1]
    h2 = st[R_HEAD, a2]
    h3 = st[R_HEAD, a3]
    if c0:
        _w(st, jr, jp, R_LIBS, h0, st[R_LIBS, h0] + delta)
    if c1 and not (c0 and h0 == h1):
        _w(st, jr, jp, R_LIBS, h1, st[R_LIBS, h1] + delta)
    if c2 and not (c0 and h0 == h2) and not (c1 and h1 == h2):
        _w(st, jr, jp, R_LIBS, h2, st[R_LIBS, h2] + delta)
    if c3 and not (c0 and h0 == h3) and not (c1 and h1 == h3) and not (c2 and h2 == h3):
        _w(st, jr, jp, R_LIBS, h3, st[R_LIBS, h3] + delta)


@nb.njit(cache=True)
def _merge_chains(st, jr, jp, loc1, loc2, n):
    head1 = st[R_HEAD, loc1]
    head2 = st[R_HEAD, loc2]
    if st[R_SIZE, head1] < st[R_SIZE, head2]:
        head1, head2 = head2, head1
    _w(st, jr, jp, R_SIZE, head1, st[R_SIZE, head1] + st[R_SIZE, head2])
    new_libs = 0
    loc = head2
    while True:
        for i in range(4):
            a = adj(loc, i, n)
            if st[R_COLOR, a] == EMPTY and not _is_liberty_of(st, a, head1, n):
                new_libs += 1
        _w(st, jr, jp, R_HEAD, loc, head1)
        if st[R_NEXT, loc] != head2:
            loc = st[R_NEXT, loc]
        else:
            break
    _w(st, jr, jp, R_LIBS, head1, st[R_LIBS, head1] + new_libs)
    _w(st, jr, jp, R_NEXT, loc, st[R_NEXT, head1])
    _w(st, jr, jp, R_NEXT, head1, head2)


@nb.njit(cache=True)
def _remove_chain(st, jr, jp, loc, n):
    removed = 0
    opp = 3 - st[R_COLOR, loc]
    cur = loc
    while True:
        _w(st, jr, jp, R_COLOR, cur, EMPTY)
        removed += 1
        _change_surrounding_libs(st, jr, jp, cur, opp, 1, n)
        cur = st[R_NEXT, cur]
        if cur == loc:
            break
    return removed


@nb.njit(cache=True)
def play(st, jr, jp, loc, pla, n):
    """Board::playMoveAssumeLegal; returns the number of opponent stones captured.

    The simple-ko point is set when exactly one stone was captured by a lone stone that is left
    with exactly one liberty, as in KataGo.
    """
    if loc == PASS_LOC:
        _w(st, jr, jp, R_MISC, 0, NULL_LOC)
        return 0
    opp = 3 - pla
    immediate = 0
    for i in range(4):
        if st[R_COLOR, adj(loc, i, n)] == EMPTY:
            immediate += 1
    _w(st, jr, jp, R_COLOR, loc, pla)
    _w(st, jr, jp, R_SIZE, loc, 1)
    _w(st, jr, jp, R_LIBS, loc, immediate)
    _w(st, jr, jp, R_HEAD, loc, loc)
    _w(st, jr, jp, R_NEXT, loc, loc)

    captured = 0
    possible_ko = NULL_LOC
    seen = np.empty(4, np.int32)
    nseen = 0
    for i in range(4):
        a = adj(loc, i, n)
        c = st[R_COLOR, a]
        if c == pla:
            if st[R_HEAD, a] == st[R_HEAD, loc]:
                continue
            ha = st[R_HEAD, a]
            _w(st, jr, jp, R_LIBS, ha, st[R_LIBS, ha] - 1)
            _merge_chains(st, jr, jp, a, loc, n)
        elif c == opp:
            oh = st[R_HEAD, a]
            already = False
            for j in range(nseen):
                if seen[j] == oh:
                    already = True
                    break
            if already:
                continue
            _w(st, jr, jp, R_LIBS, oh, st[R_LIBS, oh] - 1)
            seen[nseen] = oh
            nseen += 1
            if st[R_LIBS, oh] == 0:
                captured += _remove_chain(st, jr, jp, a, n)
                possible_ko = a
    h = st[R_HEAD, loc]
    if captured == 1 and st[R_SIZE, h] == 1 and st[R_LIBS, h] == 1:
        _w(st, jr, jp, R_MISC, 0, possible_ko)
    else:
        _w(st, jr, jp, R_MISC, 0, NULL_LOC)
    if st[R_LIBS, h] == 0:
        _remove_chain(st, jr, jp, loc, n)
    return captured


@nb.njit(cache=True)
def pos_hash(st, n):
    """Zobrist hash of the stones (KataGo's pos_hash without the board-size term)."""
    h = np.uint64(0)
    for y in range(n):
        for x in range(n):
            loc = loc_of(x, y, n)
            c = st[R_COLOR, loc]
            if c != EMPTY and c != WALL:
                h ^= _ZOBRIST[loc, c]
    return h


# --------------------------------------------------------------------------------------------
# Game history (KataGo's BoardHistory, main phase only)


@nb.njit(cache=True)
def _ko_hash(st, pla, ko_rule, n):
    h = pos_hash(st, n)
    if ko_rule == KO_SIMPLE:
        h ^= _ZOBRIST_PLAYER[pla]
    return h


@nb.njit(cache=True)
def new_history(st, first_pla, rule_row, max_moves, n):
    """History arrays of a game starting from board ``st``, KataGo's BoardHistory::clear.

    Returns (hi, hf, ko_hashes, pass_hashes, was_ever, superko_banned, move_loc, move_pla).
    """
    ko_rule = rule_row[0]
    scoring = rule_row[1]
    whb = rule_row[4]
    hi = np.zeros(8, np.int64)
    hf = np.zeros(2, np.float64)
    ko_hashes = np.zeros(max_moves + 1, np.uint64)
    pass_hashes = np.zeros((3, max_moves + 1), np.uint64)
    arr = st.shape[1]
    was_ever = np.zeros(arr, np.bool_)
    superko_banned = np.zeros(arr, np.bool_)
    move_loc = np.zeros(max_moves + 1, np.int32)
    move_pla = np.zeros(max_moves + 1, np.int8)
    nblack = 0
    nwhite = 0
    for y in range(n):
        for x in range(n):
            loc = loc_of(x, y, n)
            c = st[R_COLOR, loc]
            was_ever[loc] = c != EMPTY
            if c == BLACK:
                nblack += 1
            elif c == WHITE:
                nwhite += 1
    ko_hashes[0] = _ko_hash(st, first_pla, ko_rule, n)
    hi[H_NKO] = 1
    if scoring == SCORING_TERRITORY:
        hf[HF_WHITE_BONUS] = nblack - nwhite
    handicap = 0 if (nwhite != 0 or nblack <= 1) else nblack
    if whb == WHB_N:
        hf[HF_HANDICAP_BONUS] = handicap
    elif whb == WHB_N_MINUS_ONE:
        hf[HF_HANDICAP_BONUS] = handicap - 1 if handicap > 1 else 0
    return hi, hf, ko_hashes, pass_hashes, was_ever, superko_banned, move_loc, move_pla


@nb.njit(cache=True)
def pass_would_end_phase(st, hi, pass_hashes, pla, ko_rule, n):
    """BoardHistory::passWouldEndPhase for the side to move ``pla``."""
    if hi[H_CONSEC_PASSES] + 1 >= 2:
        return True
    if ko_rule == KO_SIMPLE:
        cnt = hi[H_NBPASS] if pla == BLACK else hi[H_NWPASS]
        if cnt > 0:
            h = _ko_hash(st, pla, ko_rule, n)
            for i in range(cnt):
                if pass_hashes[pla, i] == h:
                    return True
    return False


@nb.njit(cache=True)
def check_move(st, hi, superko_banned, loc, pla, multi_stone_suicide, n):
    """Reason code why ``pla`` may not play ``loc`` now (OK when legal)."""
    if hi[H_GAME_OVER] != 0:
        return AFTER_GAME_END
    if loc == PASS_LOC:
        return OK
    if st[R_COLOR, loc] != EMPTY:
        return OCCUPIED
    if loc == st[R_MISC, 0]:
        return KO_BANNED
    if is_illegal_suicide(st, loc, pla, multi_stone_suicide, n):
        return SUICIDE
    if superko_banned[loc]:
        return SUPERKO_BANNED
    return OK


@nb.njit(cache=True)
def make_move(
    st,
    jr,
    jp,
    hi,
    hf,
    ko_hashes,
    pass_hashes,
    was_ever,
    superko_banned,
    move_loc,
    move_pla,
    loc,
    pla,
    rule_row,
    n,
):
    """BoardHistory::makeBoardMoveAssumeLegal (main phase); returns stones captured."""
    ko_rule = rule_row[0]
    scoring = rule_row[1]
    multi = rule_row[3] != 0
    hi[H_NO_RESULT] = 0
    spight_end = False
    if loc != PASS_LOC:
        hi[H_CONSEC_PASSES] = 0
    else:
        if ko_rule == KO_SIMPLE:
            hi[H_KO_START] = hi[H_NKO]
        h_before = _ko_hash(st, pla, ko_rule, n)
        hi[H_CONSEC_PASSES] += 1
        if ko_rule == KO_SIMPLE:
            cnt = hi[H_NBPASS] if pla == BLACK else hi[H_NWPASS]
            for i in range(cnt):
                if pass_hashes[pla, i] == h_before:
                    spight_end = True
            pass_hashes[pla, cnt] = h_before
            if pla == BLACK:
                hi[H_NBPASS] += 1
            else:
                hi[H_NWPASS] += 1
    captured = play(st, jr, jp, loc, pla, n)
    nxt = 3 - pla
    h_after = _ko_hash(st, nxt, ko_rule, n)
    ko_hashes[hi[H_NKO]] = h_after
    hi[H_NKO] += 1
    move_loc[hi[H_NMOVES]] = loc
    move_pla[hi[H_NMOVES]] = pla
    hi[H_NMOVES] += 1
    if loc != PASS_LOC:
        was_ever[loc] = True

    # Superko bans for the next player (KataGo marks them after every move).
    if ko_rule != KO_SIMPLE:
        for y in range(n):
            for x in range(n):
                q = loc_of(x, y, n)
                # Not pseudo-legal, or a stone where none ever stood: cannot repeat a position.
                if (
                    st[R_COLOR, q] != EMPTY
                    or is_illegal_suicide(st, q, nxt, multi, n)
                    or q == st[R_MISC, 0]
                    or (not was_ever[q] and not is_suicide(st, q, nxt, n))
                ):
                    superko_banned[q] = False
                else:
                    mark = jp[0]
                    play(st, jr, jp, q, nxt, n)
                    h = _ko_hash(st, pla, ko_rule, n)
                    undo_to(st, jr, jp, mark)
                    banned = False
                    for i in range(hi[H_KO_START], hi[H_NKO]):
                        if ko_hashes[i] == h:
                            banned = True
                            break
                    superko_banned[q] = banned

    if scoring == SCORING_TERRITORY and loc != PASS_LOC:
        hf[HF_WHITE_BONUS] += 1.0 if pla == BLACK else -1.0
    if hi[H_CONSEC_PASSES] >= 2 or spight_end:
        hi[H_GAME_OVER] = 1
    # Long cycles under simple ko: a third repetition makes KataGo declare no result.
    if loc != PASS_LOC and ko_rule == KO_SIMPLE:
        count = 0
        for i in range(hi[H_KO_START], hi[H_NKO]):
            if ko_hashes[i] == h_after:
                count += 1
        if count >= 3:
            hi[H_NO_RESULT] = 1
    return captured


@nb.njit(cache=True)
def setup_board(setup_color, setup_index, s0, s1, n):
    """Board with the game's setup stones (KataGo Board::setStone); -1 in [1] if invalid."""
    st = new_board(n)
    jr = np.zeros((4 * st.shape[1], 3), np.int32)
    jp = np.zeros(1, np.int64)
    bad = 0
    for k in range(s0, s1):
        idx = setup_index[k]
        if idx < 0:
            bad = 1
            break
        loc = loc_of(idx % NN_LEN, idx // NN_LEN, n)
        if st[R_COLOR, loc] != EMPTY:
            bad = 1
            break
        play(st, jr, jp, loc, setup_color[k], n)
        jp[0] = 0
    st[R_MISC, 0] = NULL_LOC
    return st, bad


@nb.njit(cache=True)
def move_loc_of(idx, n):
    """Board location of a policy index (PASS_LOC for 361, -1 when off an n×n board)."""
    if idx == PASS_INDEX:
        return PASS_LOC
    if idx < 0:
        return -1
    x = idx % NN_LEN
    y = idx // NN_LEN
    if x >= n or y >= n:
        return -1
    return loc_of(x, y, n)


@nb.njit(cache=True)
def _replay_kernel(
    move_offsets,
    move_color,
    move_index,
    setup_offsets,
    setup_color,
    setup_index,
    sizes,
    rules,
    n_valid,
    err_ply,
    err_code,
    boards,
    captures,
):
    for g in range(len(sizes)):
        n = sizes[g]
        m0 = move_offsets[g]
        m1 = move_offsets[g + 1]
        st, bad = setup_board(setup_color, setup_index, setup_offsets[g], setup_offsets[g + 1], n)
        n_valid[g] = 0
        err_ply[g] = 0
        err_code[g] = OK
        if bad:
            err_ply[g] = -1
            err_code[g] = BAD_SETUP
            continue
        first = move_color[m0] if m1 > m0 and move_color[m0] != 0 else BLACK
        jr = np.empty((JOURNAL_LEN, 3), np.int32)
        jp = np.zeros(1, np.int64)
        hi, hf, ko_hashes, pass_hashes, was_ever, sk, mloc, mpla = new_history(
            st, first, rules[g], m1 - m0, n
        )
        multi = rules[g, 3] != 0
        for t in range(m1 - m0):
            pla = move_color[m0 + t]
            loc = move_loc_of(move_index[m0 + t], n)
            code = OK
            if pla == 0 or loc < 0:
                code = BAD_COORDINATE
            else:
                code = check_move(st, hi, sk, loc, pla, multi, n)
            if code != OK:
                err_ply[g] = t
                err_code[g] = code
                break
            cap = make_move(
                st,
                jr,
                jp,
                hi,
                hf,
                ko_hashes,
                pass_hashes,
                was_ever,
                sk,
                mloc,
                mpla,
                loc,
                pla,
                rules[g],
                n,
            )
            jp[0] = 0
            captures[g, pla - 1] += cap
            n_valid[g] = t + 1
        for y in range(n):
            for x in range(n):
                boards[g, y, x] = st[R_COLOR, loc_of(x, y, n)]


def replay_parsed(parsed: ParsedGames) -> ReplayResult:
    """Replay already parsed games (one compiled call over all games)."""
    g = len(parsed.board_size)
    n_valid = np.zeros(g, np.int32)
    err_ply = np.zeros(g, np.int32)
    err_code = np.zeros(g, np.int32)
    boards = np.zeros((g, NN_LEN, NN_LEN), np.int8)
    captures = np.zeros((g, 2), np.int32)
    if g:
        _replay_kernel(
            parsed.move_offsets,
            parsed.move_color,
            parsed.move_index,
            parsed.setup_offsets,
            parsed.setup_color,
            parsed.setup_index,
            parsed.board_size,
            parsed.rules,
            n_valid,
            err_ply,
            err_code,
            boards,
            captures,
        )
    illegal = [
        (int(i), int(err_ply[i]), REASONS[int(err_code[i])]) for i in np.flatnonzero(err_code)
    ]
    return ReplayResult(n_valid, illegal, boards, captures)


def games_from_table(table: pa.Table) -> list[GoGameSpec]:
    """GoGameSpecs of the Go rows of a games table (pipeline.core.games_schema.GAMES_SCHEMA).

    Null komi / rules / board size fall back to the GoGameSpec defaults (6.5, Japanese, 19).
    """
    cols = table.select(["moves", "setup_black", "setup_white", "board_size", "komi", "rules"])
    rows = cols.to_pydict()
    default = GoGameSpec(moves=())
    return [
        GoGameSpec(
            moves=moves,
            setup_black=black or (),
            setup_white=white or (),
            board_size=size if size is not None else default.board_size,
            komi=komi if komi is not None else default.komi,
            rules=rules if rules is not None else default.rules,
        )
        for moves, black, white, size, komi, rules in zip(
            rows["moves"],
            rows["setup_black"],
            rows["setup_white"],
            rows["board_size"],
            rows["komi"],
            rows["rules"],
            strict=True,
        )
    ]


def replay_games(games: Sequence[GoGameSpec], *, rules: str | None = None) -> ReplayResult:
    """Replay games under their rules (or ``rules`` for all), reporting illegal moves.

    A game stops at its first illegal move; ``num_valid_moves`` says how far it got.
    """
    return replay_parsed(parse_games(games, rules=rules))
