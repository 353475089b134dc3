"""KataGo input features (input version 7) for whole Go games, compiled with numba. No torch.

For every position BEFORE each move of each game this fills, exactly as KataGo's
``NNInputs::fillRowV7`` does for the side to move: 22 spatial planes (stones, liberties 1/2/3,
ko bans, last five moves, ladder features, area), 19 global values (pass history, komi with
Japanese "chilling", rule flags, pass-ends-phase, komi parity), the legal-move mask over
KataGo's 362 policy indices and the index of the move actually played. Channel layouts live in
``pipeline/go_game/spec.py``; the rules in ``pipeline/go_game/rules.py``.

The ladder features port KataGo's ``Board::searchIsLadderCaptured`` and
``searchIsLadderCapturedAttackerFirst2Libs`` (cpp/game/board.cpp), the area planes its Benson
pass-alive reader ``Board::calculateArea``. Each board's ladder result is computed once and
reused for the next two positions (channels 15 and 16).

Games are encoded in one compiled call (one core; parallelism belongs to the Ray actors)::

    from pipeline.go_game.encode import encode_games
    from pipeline.go_game.rules import GoGameSpec
    pos = encode_games([GoGameSpec(moves=["B:pd", "W:dp", "B:pp"])], rules="japanese", komi=6.5)
    pos.spatial.shape   # (3, 22, 19, 19)

With ``keep_states=True`` the call also keeps each position's board state, and
:func:`encode_children` encodes the position after any candidate move of any row (one play and
one row encode each, no replay of the game): expected loss evaluates such children::

    pos = encode_games(specs, keep_states=True)
    kids = encode_children(pos.states, parents=np.array([0, 0]), moves=np.array([72, 361]))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numba as nb
import numpy as np

from pipeline.core.packed_planes import pack_planes
from pipeline.go_game import spec
from pipeline.go_game.rules import (
    BLACK,
    EMPTY,
    H_NBPASS,
    H_NKO,
    H_NMOVES,
    H_NO_RESULT,
    H_NWPASS,
    HF_HANDICAP_BONUS,
    HF_WHITE_BONUS,
    JOURNAL_LEN,
    KO_SIMPLE,
    NULL_LOC,
    PASS_LOC,
    R_COLOR,
    R_HEAD,
    R_LIBS,
    R_MISC,
    R_NEXT,
    R_SIZE,
    SCORING_AREA,
    SCORING_TERRITORY,
    TAX_ALL,
    TAX_NONE,
    WALL,
    WHITE,
    GoGameSpec,
    ParsedGames,
    adj,
    is_illegal_suicide,
    is_legal,
    loc_of,
    make_move,
    move_loc_of,
    new_board,
    new_history,
    parse_games,
    pass_would_end_phase,
    play,
    replay_parsed,
    setup_board,
    undo_to,
)

NN = spec.NN_LEN
LADDER_BUF_LEN = 1 << 14  # candidate-move buffer of one ladder search (KataGo grows a vector)
LADDER_STACK_LEN = NN * NN * 3 // 2 + 1  # KataGo's arrSize: deeper searches count as captured


class IllegalCandidateError(ValueError):
    """A candidate move given to :func:`encode_children` that is not legal in its position."""


@dataclass
class GoBoardStates:
    """What encoding the position after any move of an encoded position needs, per row.

    Per position: the stones, the simple-ko point, the laddered stones (the next positions'
    channels 15 and 16) and KataGo's history counters before the move; per game the ko and
    pass hash histories, which only grow, so one array per game serves every prefix. With
    these a child position costs one play and one row encode, never a replay of its game
    (:func:`encode_children`). About 0.8 kB per position.
    """

    parsed: ParsedGames  # the games as encoded (rule and komi overrides applied)
    game: np.ndarray  # (N,) int32 index of each row's game in ``parsed``
    ply: np.ndarray  # (N,) int32
    board: np.ndarray  # (N, 19, 19) int8 stone colours (go_rules EMPTY / BLACK / WHITE)
    ladder: np.ndarray  # (N, 361) bool laddered stones of the board (channel 14)
    history: np.ndarray  # (N, 8) int64 go_rules H_* counters
    history_f: np.ndarray  # (N, 2) float64 go_rules HF_* bonuses
    ko_point: np.ndarray  # (N,) int16 simple-ko policy index, -1 if none
    legal: np.ndarray  # (N, 362) bool the rows' legal masks (superko bans included)
    hash_offsets: np.ndarray  # (G+1,) int64 CSR of the per-game hash histories
    ko_hashes: np.ndarray  # (H,) uint64
    pass_hashes: np.ndarray  # (3, H) uint64, rows BLACK and WHITE used


@dataclass
class GoPositions:
    """Every position before each move of the encoded games, in game order (contract C7)."""

    spatial: np.ndarray  # (N, 22, 19, 19) float32, KataGo binaryInputNCHW
    global_: np.ndarray  # (N, 19) float32, KataGo globalInputNC
    legal: np.ndarray  # (N, 362) bool, index y*19+x (y = 0 top row), 361 pass
    played_index: np.ndarray  # (N,) int16 policy index of the move actually played
    game_index: np.ndarray  # (N,) int32 which input game
    ply: np.ndarray  # (N,) int32 moves played before this position
    black_to_move: np.ndarray  # (N,) bool
    ko_point: np.ndarray  # (N,) int16 policy index of the simple-ko point, -1 if none
    captured_by_last_move: np.ndarray  # (N,) int16 stones the previous move captured
    illegal_moves: list[tuple[int, int, str]]  # (game, ply, reason); games stop there
    states: GoBoardStates | None = None  # only with keep_states=True


# --------------------------------------------------------------------------------------------
# Tactical helpers (KataGo Board "TACTICAL STUFF")


@nb.njit(cache=True)
def _pos(loc, n):
    return (loc // (n + 1) - 1) * NN + (loc % (n + 1) - 1)


@nb.njit(cache=True)
def _find_liberties(st, loc, buf, buf_start, buf_idx, n):
    found = 0
    cur = loc
    while True:
        for i in range(4):
            lib = adj(cur, i, n)
            if st[R_COLOR, lib] == EMPTY:
                dup = False
                for j in range(buf_start, buf_idx + found):
                    if buf[j] == lib:
                        dup = True
                        break
                if not dup:
                    if buf_idx + found >= buf.shape[0]:
                        raise ValueError("encode_go: ladder search buffer overflow")
                    buf[buf_idx + found] = lib
                    found += 1
        cur = st[R_NEXT, cur]
        if cur == loc:
            break
    return found


@nb.njit(cache=True)
def _find_liberty_gaining_captures(st, loc, buf, buf_start, buf_idx, n):
    opp = 3 - st[R_COLOR, loc]
    checked = np.empty(n * n, np.int32)
    nchecked = 0
    found = 0
    cur = loc
    while True:
        for i in range(4):
            a = adj(cur, i, n)
            if st[R_COLOR, a] == opp:
                head = st[R_HEAD, a]
                if st[R_LIBS, head] == 1:
                    already = False
                    for j in range(nchecked):
                        if checked[j] == head:
                            already = True
                            break
                    if not already:
                        found += _find_liberties(st, a, buf, buf_start, buf_idx + found, n)
                        checked[nchecked] = head
                        nchecked += 1
        cur = st[R_NEXT, cur]
        if cur == loc:
            break
    return found


@nb.njit(cache=True)
def _has_liberty_gaining_captures(st, loc, n):
    opp = 3 - st[R_COLOR, loc]
    cur = loc
    while True:
        for i in range(4):
            a = adj(cur, i, n)
            if st[R_COLOR, a] == opp and st[R_LIBS, st[R_HEAD, a]] == 1:
                return True
        cur = st[R_NEXT, cur]
        if cur == loc:
            break
    return False


@nb.njit(cache=True)
def _immediate_libs(st, loc, n):
    k = 0
    for i in range(4):
        if st[R_COLOR, adj(loc, i, n)] == EMPTY:
            k += 1
    return k


@nb.njit(cache=True)
def _heuristic_connection_libs_x2(st, loc, pla, n):
    total = 0
    for i in range(4):
        a = adj(loc, i, n)
        if st[R_COLOR, a] == pla:
            libs = st[R_LIBS, st[R_HEAD, a]]
            if libs > 1:
                total += libs * 2 - 3
    return total


@nb.njit(cache=True)
def _would_be_ko_capture(st, loc, pla, n):
    if st[R_COLOR, loc] != EMPTY:
        return False
    opp = 3 - pla
    capturable = NULL_LOC
    for i in range(4):
        a = adj(loc, i, n)
        c = st[R_COLOR, a]
        if c != WALL and c != opp:
            return False
        if c == opp and st[R_LIBS, st[R_HEAD, a]] == 1:
            if capturable != NULL_LOC:
                return False
            capturable = a
    if capturable == NULL_LOC:
        return False
    return st[R_SIZE, st[R_HEAD, capturable]] == 1


@nb.njit(cache=True)
def _libs_after_play(st, loc, pla, maximum, n):
    """Board::getNumLibertiesAfterPlay, capped at ``maximum``."""
    opp = 3 - pla
    libs = np.empty(4 * n * n + 4, np.int32)
    nlibs = 0
    cap_heads = np.empty(4, np.int32)
    ncap = 0
    for i in range(4):
        a = adj(loc, i, n)
        c = st[R_COLOR, a]
        if c == EMPTY:
            libs[nlibs] = a
            nlibs += 1
            if nlibs >= maximum:
                return maximum
        elif c == opp and st[R_LIBS, st[R_HEAD, a]] == 1:
            libs[nlibs] = a
            nlibs += 1
            if nlibs >= maximum:
                return maximum
            head = st[R_HEAD, a]
            found = False
            for j in range(ncap):
                if cap_heads[j] == head:
                    found = True
                    break
            if not found:
                cap_heads[ncap] = head
                ncap += 1
    conn_heads = np.empty(4, np.int32)
    nconn = 0
    for i in range(4):
        a = adj(loc, i, n)
        if st[R_COLOR, a] == pla:
            head = st[R_HEAD, a]
            found = False
            for j in range(nconn):
                if conn_heads[j] == head:
                    found = True
                    break
            if found:
                continue
            conn_heads[nconn] = head
            nconn += 1
            cur = a
            while True:
                for k in range(4):
                    lib = adj(cur, k, n)
                    if lib == loc:
                        continue
                    c = st[R_COLOR, lib]
                    empty_after = c == EMPTY
                    if c == opp:
                        for j in range(ncap):
                            if cap_heads[j] == st[R_HEAD, lib]:
                                empty_after = True
                    if empty_after:
                        counted = False
                        for j in range(nlibs):
                            if libs[j] == lib:
                                counted = True
                                break
                        if not counted:
                            libs[nlibs] = lib
                            nlibs += 1
                            if nlibs >= maximum:
                                return maximum
                cur = st[R_NEXT, cur]
                if cur == a:
                    break
    return nlibs


@nb.njit(cache=True)
def _is_adjacent(a, b, n):
    return a == b - (n + 1) or a == b - 1 or a == b + 1 or a == b + (n + 1)


@nb.njit(cache=True)
def ladder_captured(st, jr, jp, loc, defender_first, buf, stack, n):
    """Board::searchIsLadderCaptured: can the chain at ``loc`` be captured by a ladder?

    ``stack`` is an int64 (4, LADDER_STACK_LEN) scratch array: list starts, list lengths,
    current index, journal marks. Moves are taken back through the board journal.
    """
    col = st[R_COLOR, loc]
    if col != BLACK and col != WHITE:
        return False
    libs0 = st[R_LIBS, st[R_HEAD, loc]]
    if libs0 > 2 or (defender_first and libs0 > 1):
        return False
    pla = col
    opp = 3 - pla
    ko_saved = st[R_MISC, 0]
    if defender_first:
        st[R_MISC, 0] = NULL_LOC
    arr_size = n * n * 3 // 2 + 1
    starts = stack[0]
    lens = stack[1]
    curs = stack[2]
    marks = stack[3]
    depth = 0
    curs[0] = -1
    starts[0] = 0
    lens[0] = 0
    ret = False
    from_deeper = False
    while True:
        if depth <= -1:
            st[R_MISC, 0] = ko_saved
            return ret
        if depth >= arr_size - 1:
            ret = True
            from_deeper = True
            depth -= 1
            continue
        is_def = (defender_first and depth % 2 == 0) or (not defender_first and depth % 2 == 1)
        if curs[depth] == -1:
            libs = st[R_LIBS, st[R_HEAD, loc]]
            if not is_def and libs <= 1:
                ret = True
                from_deeper = True
                depth -= 1
                continue
            if not is_def and libs >= 3:
                ret = False
                from_deeper = True
                depth -= 1
                continue
            if is_def and libs >= 2:
                ret = False
                from_deeper = True
                depth -= 1
                continue
            if is_def and st[R_MISC, 0] != NULL_LOC:
                ret = False
                from_deeper = True
                depth -= 1
                continue
            start = starts[depth]
            if is_def:
                lens[depth] = _find_liberty_gaining_captures(st, loc, buf, start, start, n)
                lens[depth] += _find_liberties(st, loc, buf, start, start + lens[depth], n)
            else:
                lens[depth] += _find_liberties(st, loc, buf, start, start, n)
                m0 = buf[start]
                m1 = buf[start + 1]
                l0 = _immediate_libs(st, m0, n)
                l1 = _immediate_libs(st, m1, n)
                if (
                    l0 == 0
                    and l1 == 0
                    and _would_be_ko_capture(st, m0, opp, n)
                    and _would_be_ko_capture(st, m1, opp, n)
                    and _libs_after_play(st, m0, pla, 3, n) <= 2
                    and _libs_after_play(st, m1, pla, 3, n) <= 2
                    and not _has_liberty_gaining_captures(st, loc, n)
                ):
                    ret = True
                    from_deeper = True
                    depth -= 1
                    continue
                if not _is_adjacent(m0, m1, n):
                    if l0 >= 3 and l1 >= 3:
                        ret = False
                        from_deeper = True
                        depth -= 1
                        continue
                    elif l0 >= 3:
                        lens[depth] = 1
                    elif l1 >= 3:
                        buf[start] = m1
                        lens[depth] = 1
                if lens[depth] > 1:
                    s0 = l0 * 2 + _heuristic_connection_libs_x2(st, m0, pla, n)
                    s1 = l1 * 2 + _heuristic_connection_libs_x2(st, m1, pla, n)
                    if s1 > s0:
                        buf[start] = m1
                        buf[start + 1] = m0
            curs[depth] = 0
        else:
            if from_deeper:
                undo_to(st, jr, jp, marks[depth])
            if is_def and not ret:
                from_deeper = True
                depth -= 1
                continue
            if not is_def and ret:
                from_deeper = True
                depth -= 1
                continue
            curs[depth] += 1
        if curs[depth] >= lens[depth]:
            ret = is_def
            from_deeper = True
            depth -= 1
            continue
        move = buf[starts[depth] + curs[depth]]
        p = pla if is_def else opp
        if not is_legal(st, move, p, False, n):
            ret = is_def
            from_deeper = False
            continue
        marks[depth] = jp[0]
        play(st, jr, jp, move, p, n)
        depth += 1
        curs[depth] = -1
        starts[depth] = starts[depth - 1] + lens[depth - 1]
        lens[depth] = 0


@nb.njit(cache=True)
def ladder_captured_attacker_first(st, jr, jp, loc, buf, stack, working, n):
    """Board::searchIsLadderCapturedAttackerFirst2Libs; returns (laddered, working moves)."""
    col = st[R_COLOR, loc]
    if col != BLACK and col != WHITE:
        return False, 0
    if st[R_LIBS, st[R_HEAD, loc]] != 2:
        return False, 0
    opp = 3 - col
    _find_liberties(st, loc, buf, 0, 0, n)
    move0 = buf[0]
    move1 = buf[1]
    works0 = False
    works1 = False
    if is_legal(st, move0, opp, False, n):
        mark = jp[0]
        play(st, jr, jp, move0, opp, n)
        works0 = ladder_captured(st, jr, jp, loc, True, buf, stack, n)
        undo_to(st, jr, jp, mark)
    if is_legal(st, move1, opp, False, n):
        mark = jp[0]
        play(st, jr, jp, move1, opp, n)
        works1 = ladder_captured(st, jr, jp, loc, True, buf, stack, n)
        undo_to(st, jr, jp, mark)
    nw = 0
    if works0:
        working[nw] = move0
        nw += 1
    if works1:
        working[nw] = move1
        nw += 1
    return nw > 0, nw


@nb.njit(cache=True)
def iter_ladders(st, jr, jp, buf, stack, laddered, work_black, work_white, n):
    """KataGo's iterLadders: mark laddered stones and the moves that start working ladders.

    ``laddered`` (361,) gets every stone of a chain with 1–2 liberties that a ladder captures;
    ``work_black`` / ``work_white`` get the working first moves against 2-liberty chains of
    that colour.
    """
    heads = np.empty(n * n, np.int32)
    values = np.empty(n * n, np.bool_)
    nsolved = 0
    working = np.empty(2, np.int32)
    for y in range(n):
        for x in range(n):
            loc = loc_of(x, y, n)
            col = st[R_COLOR, loc]
            if col != BLACK and col != WHITE:
                continue
            libs = st[R_LIBS, st[R_HEAD, loc]]
            if libs != 1 and libs != 2:
                continue
            head = st[R_HEAD, loc]
            solved = -1
            for i in range(nsolved):
                if heads[i] == head:
                    solved = i
                    break
            if solved >= 0:
                if values[solved]:
                    laddered[y * NN + x] = True
                continue
            nw = 0
            if libs == 1:
                result = ladder_captured(st, jr, jp, loc, True, buf, stack, n)
            else:
                result, nw = ladder_captured_attacker_first(st, jr, jp, loc, buf, stack, working, n)
            heads[nsolved] = head
            values[nsolved] = result
            nsolved += 1
            if result:
                laddered[y * NN + x] = True
                for k in range(nw):
                    if col == BLACK:
                        work_black[_pos(working[k], n)] = True
                    else:
                        work_white[_pos(working[k], n)] = True


# --------------------------------------------------------------------------------------------
# Area (Benson pass-alive chains and territory), KataGo Board::calculateArea


@nb.njit(cache=True)
def _area_for_player(st, pla, safe_big, unsafe_big, multi, result, n):
    opp = 3 - pla
    arr = st.shape[1]
    region_of = np.full(arr, -1, np.int32)
    max_regions = n * n
    vital = np.zeros((max_regions, 4), np.int32)
    vlen = np.zeros(max_regions, np.int32)
    internal = np.zeros(max_regions, np.int32)
    borders_pla = np.zeros(max_regions, np.bool_)
    contains_opp = np.zeros(max_regions, np.bool_)
    borders_npa = np.zeros(max_regions, np.bool_)
    region_start = np.zeros(max_regions + 1, np.int32)
    members = np.empty(n * n, np.int32)
    nmembers = 0
    nregions = 0
    for y in range(n):
        for x in range(n):
            first = loc_of(x, y, n)
            if region_of[first] != -1 or st[R_COLOR, first] != EMPTY:
                continue
            r = nregions
            nregions += 1
            region_start[r] = nmembers
            nv = 0
            for i in range(4):
                a = adj(first, i, n)
                if st[R_COLOR, a] == pla:
                    h = st[R_HEAD, a]
                    present = False
                    for j in range(nv):
                        if vital[r, j] == h:
                            present = True
                    if not present:
                        vital[r, nv] = h
                        nv += 1
            region_of[first] = r
            members[nmembers] = first
            nmembers += 1
            k = region_start[r]
            while k < nmembers:
                loc = members[k]
                k += 1
                col = st[R_COLOR, loc]
                if multi or col == EMPTY:
                    keep = 0
                    for j in range(nv):
                        h = vital[r, j]
                        touches = False
                        for i in range(4):
                            a = adj(loc, i, n)
                            if st[R_COLOR, a] == pla and st[R_HEAD, a] == h:
                                touches = True
                        if touches:
                            vital[r, keep] = h
                            keep += 1
                    nv = keep
                is_internal = True
                for i in range(4):
                    if st[R_COLOR, adj(loc, i, n)] == pla:
                        is_internal = False
                if is_internal and internal[r] < 2:
                    internal[r] += 1
                if not is_internal:
                    borders_pla[r] = True
                if col == opp:
                    contains_opp[r] = True
                for i in range(4):
                    a = adj(loc, i, n)
                    c = st[R_COLOR, a]
                    if c != pla and c != WALL and region_of[a] == -1:
                        region_of[a] = r
                        members[nmembers] = a
                        nmembers += 1
            vlen[r] = nv
    region_start[nregions] = nmembers

    heads = np.empty(n * n, np.int32)
    nheads = 0
    is_head = np.zeros(arr, np.bool_)
    for y in range(n):
        for x in range(n):
            loc = loc_of(x, y, n)
            if st[R_COLOR, loc] == pla:
                h = st[R_HEAD, loc]
                if not is_head[h]:
                    is_head[h] = True
                    heads[nheads] = h
                    nheads += 1
    killed = np.zeros(arr, np.bool_)
    vital_count = np.zeros(arr, np.int32)
    while True:
        for i in range(nheads):
            vital_count[heads[i]] = 0
        for r in range(nregions):
            if borders_npa[r]:
                continue
            for j in range(vlen[r]):
                vital_count[vital[r, j]] += 1
        killed_any = False
        for i in range(nheads):
            h = heads[i]
            if killed[h] or vital_count[h] >= 2:
                continue
            killed[h] = True
            killed_any = True
            cur = h
            while True:
                for d in range(4):
                    a = adj(cur, d, n)
                    c = st[R_COLOR, a]
                    if c != pla and c != WALL and region_of[a] >= 0:
                        borders_npa[region_of[a]] = True
                cur = st[R_NEXT, cur]
                if cur == h:
                    break
        if not killed_any:
            break
    for i in range(nheads):
        h = heads[i]
        if killed[h]:
            continue
        cur = h
        while True:
            result[cur] = pla
            cur = st[R_NEXT, cur]
            if cur == h:
                break
    for r in range(nregions):
        mark = internal[r] <= 1 and borders_pla[r] and not borders_npa[r]
        mark = mark or (safe_big and borders_pla[r] and not contains_opp[r] and not borders_npa[r])
        mark = mark or (unsafe_big and borders_pla[r] and not contains_opp[r])
        if mark:
            for k in range(region_start[r], region_start[r + 1]):
                result[members[k]] = pla


@nb.njit(cache=True)
def calculate_area(st, non_pass_alive_stones, safe_big, unsafe_big, multi, result, n):
    """Board::calculateArea into ``result`` (arr_size,) int8: BLACK / WHITE / EMPTY per loc."""
    result[:] = EMPTY
    _area_for_player(st, BLACK, safe_big, unsafe_big, multi, result, n)
    _area_for_player(st, WHITE, safe_big, unsafe_big, multi, result, n)
    if non_pass_alive_stones:
        for y in range(n):
            for x in range(n):
                loc = loc_of(x, y, n)
                if result[loc] == EMPTY:
                    result[loc] = st[R_COLOR, loc]


# --------------------------------------------------------------------------------------------
# One position's row: shared by the game kernel and the child kernel, so both encode alike


@nb.njit(cache=True)
def _fill_row(
    st,
    jr,
    jp,
    hi,
    hf,
    pass_hashes,
    sk,
    mloc,
    mpla,
    rule_row,
    komi,
    pla,
    lad_cur,
    lad_prev,
    lad_prev2,
    work_black,
    work_white,
    area,
    buf,
    stack,
    n,
    sp,
    gl,
    lg,
):
    """KataGo's fillRowV7 for side to move ``pla``: fills ``sp`` / ``gl`` / ``lg`` in place.

    ``lad_cur`` (361,) receives this board's laddered stones (channel 14); ``lad_prev`` and
    ``lad_prev2`` are those of the boards one and two moves ago (channels 15, 16). Returns
    (White's komi from the mover's view before scaling, simple-ko policy index or -1).
    """
    ko_rule = rule_row[0]
    scoring = rule_row[1]
    tax = rule_row[2]
    multi = rule_row[3] != 0
    has_area = scoring == SCORING_AREA and tax == TAX_NONE
    opp = 3 - pla
    sp[:] = 0.0
    gl[:] = 0.0
    lg[:] = False
    hide = hi[H_NO_RESULT] != 0

    lad_cur[:] = False
    work_black[:] = False
    work_white[:] = False
    iter_ladders(st, jr, jp, buf, stack, lad_cur, work_black, work_white, n)

    ko = st[R_MISC, 0]
    for y in range(n):
        for x in range(n):
            loc = loc_of(x, y, n)
            sp[0, y, x] = 1.0
            c = st[R_COLOR, loc]
            if c == EMPTY:
                if loc != ko and not is_illegal_suicide(st, loc, pla, multi, n) and not sk[loc]:
                    lg[y * NN + x] = True
                if sk[loc] and loc != ko:
                    sp[6, y, x] = 1.0
                continue
            sp[1 if c == pla else 2, y, x] = 1.0
            libs = st[R_LIBS, st[R_HEAD, loc]]
            if libs <= 3:
                sp[2 + libs, y, x] = 1.0
    lg[spec.PASS_INDEX] = True
    ko_index = -1
    if ko != NULL_LOC:
        sp[6, ko // (n + 1) - 1, ko % (n + 1) - 1] = 1.0
        ko_index = _pos(ko, n)

    included = 0
    if not hide:
        nm = hi[H_NMOVES]
        for k in range(1, 6):
            idx = nm - k
            if idx < 0:
                break
            expected = opp if k % 2 == 1 else pla
            if mpla[idx] != expected:
                break
            included = k
            ml = mloc[idx]
            if ml == PASS_LOC:
                gl[k - 1] = 1.0
            else:
                sp[8 + k, ml // (n + 1) - 1, ml % (n + 1) - 1] = 1.0

    prev = lad_cur if (hide or included < 1) else lad_prev
    prev2 = prev if (hide or included < 2) else lad_prev2
    work = work_black if opp == BLACK else work_white
    for y in range(n):
        for x in range(n):
            p = y * NN + x
            if lad_cur[p]:
                sp[14, y, x] = 1.0
            if prev[p]:
                sp[15, y, x] = 1.0
            if prev2[p]:
                sp[16, y, x] = 1.0
            if work[p]:
                sp[17, y, x] = 1.0

    if has_area:
        calculate_area(st, True, True, True, multi, area, n)
        for y in range(n):
            for x in range(n):
                a = area[loc_of(x, y, n)]
                if a == pla:
                    sp[18, y, x] = 1.0
                elif a == opp:
                    sp[19, y, x] = 1.0

    if ko_rule != KO_SIMPLE:
        gl[6] = 1.0
        gl[7] = 0.5
    if multi:
        gl[8] = 1.0
    if scoring == SCORING_TERRITORY:
        gl[9] = 1.0
    if tax != TAX_NONE:
        gl[10] = 1.0
    if tax == TAX_ALL:
        gl[11] = 1.0
    if not hide and pass_would_end_phase(st, hi, pass_hashes, pla, ko_rule, n):
        gl[14] = 1.0
    white_komi = hf[HF_WHITE_BONUS] + hf[HF_HANDICAP_BONUS] + komi
    return (white_komi if pla == WHITE else -white_komi), ko_index


# --------------------------------------------------------------------------------------------
# The batch kernels


@nb.njit(cache=True)
def _encode_kernel(
    move_offsets,
    move_color,
    move_index,
    setup_offsets,
    setup_color,
    setup_index,
    sizes,
    komis,
    rules,
    n_valid,
    row_offsets,
    spatial,
    glob,
    legal,
    played,
    self_komi,
    ko_point,
    last_captured,
    keep_states,
    st_board,
    st_ladder,
    st_hi,
    st_hf,
    hash_offsets,
    ko_hash_out,
    pass_hash_out,
):
    """Replay every game, one row per position; with ``keep_states`` also what children need."""
    for g in range(len(sizes)):
        n = sizes[g]
        m0 = move_offsets[g]
        st, bad = setup_board(setup_color, setup_index, setup_offsets[g], setup_offsets[g + 1], n)
        if bad or n_valid[g] == 0:
            continue
        jr = np.empty((JOURNAL_LEN, 3), np.int32)
        jp = np.zeros(1, np.int64)
        hi, hf, ko_hashes, pass_hashes, was_ever, sk, mloc, mpla = new_history(
            st, move_color[m0], rules[g], n_valid[g], n
        )
        buf = np.zeros(LADDER_BUF_LEN, np.int32)
        stack = np.zeros((4, LADDER_STACK_LEN), np.int64)
        lad = np.zeros((3, NN * NN), np.bool_)  # ring of the last three boards' ladders
        work_black = np.zeros(NN * NN, np.bool_)
        work_white = np.zeros(NN * NN, np.bool_)
        area = np.zeros(st.shape[1], np.int8)
        captured = 0
        for t in range(n_valid[g]):
            row = row_offsets[g] + t
            pla = move_color[m0 + t]
            if keep_states:
                board = st_board[row]
                board[:] = EMPTY
                for y in range(n):
                    for x in range(n):
                        board[y, x] = st[R_COLOR, loc_of(x, y, n)]
                st_hi[row] = hi
                st_hf[row] = hf
            komi_row, ko_row = _fill_row(
                st,
                jr,
                jp,
                hi,
                hf,
                pass_hashes,
                sk,
                mloc,
                mpla,
                rules[g],
                komis[g],
                pla,
                lad[t % 3],
                lad[(t + 2) % 3],
                lad[(t + 1) % 3],
                work_black,
                work_white,
                area,
                buf,
                stack,
                n,
                spatial[row],
                glob[row],
                legal[row],
            )
            self_komi[row] = komi_row
            ko_point[row] = ko_row
            if keep_states:
                st_ladder[row] = lad[t % 3]
            played[row] = move_index[m0 + t]
            last_captured[row] = captured

            loc = move_loc_of(move_index[m0 + t], n)
            captured = make_move(
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
        if keep_states:
            # Both histories are append-only: the game's final arrays hold every prefix.
            h0 = hash_offsets[g]
            h1 = hash_offsets[g + 1]
            ko_hash_out[h0:h1] = ko_hashes[: h1 - h0]
            pass_hash_out[:, h0:h1] = pass_hashes[:, : h1 - h0]


@nb.njit(cache=True)
def _board_from_colors(colors, ko_index, jr, jp, n):
    """Board state (chains, liberties) of a stored colour grid and simple-ko point.

    Stones of a legal position all keep a liberty, so placing them in any order captures
    nothing; chain lists may be linked in another order than the game built them, which
    changes no feature (liberty counts, ladders and areas do not depend on it).
    """
    st = new_board(n)
    for y in range(n):
        for x in range(n):
            c = colors[y, x]
            if c != EMPTY:
                play(st, jr, jp, loc_of(x, y, n), c, n)
                jp[0] = 0
    st[R_MISC, 0] = NULL_LOC if ko_index < 0 else loc_of(ko_index % NN, ko_index // NN, n)
    return st


@nb.njit(cache=True)
def _child_kernel(
    move_offsets,
    move_color,
    move_index,
    setup_offsets,
    setup_index,
    sizes,
    komis,
    rules,
    row_game,
    row_ply,
    st_board,
    st_ladder,
    st_hi,
    st_hf,
    st_ko,
    hash_offsets,
    ko_hash_in,
    pass_hash_in,
    parents,
    moves,
    spatial,
    glob,
    legal,
    self_komi,
    ko_point,
    last_captured,
):
    """One row per (parent row, move): the position after ``moves[c]`` is played in it."""
    jr = np.empty((JOURNAL_LEN, 3), np.int32)
    jp = np.zeros(1, np.int64)
    buf = np.zeros(LADDER_BUF_LEN, np.int32)
    stack = np.zeros((4, LADDER_STACK_LEN), np.int64)
    lad_cur = np.zeros(NN * NN, np.bool_)
    no_ladder = np.zeros(NN * NN, np.bool_)
    work_black = np.zeros(NN * NN, np.bool_)
    work_white = np.zeros(NN * NN, np.bool_)
    for c in range(len(parents)):
        p = parents[c]
        g = row_game[p]
        t = row_ply[p]
        n = sizes[g]
        m0 = move_offsets[g]
        pla = move_color[m0 + t]
        st = _board_from_colors(st_board[p], st_ko[p], jr, jp, n)
        hi = st_hi[p].copy()
        hf = st_hf[p].copy()
        h0 = hash_offsets[g]
        length = hash_offsets[g + 1] - h0 + 1
        ko_hashes = np.zeros(length, np.uint64)
        ko_hashes[: hi[H_NKO]] = ko_hash_in[h0 : h0 + hi[H_NKO]]
        pass_hashes = np.zeros((3, length), np.uint64)
        pass_hashes[BLACK, : hi[H_NBPASS]] = pass_hash_in[BLACK, h0 : h0 + hi[H_NBPASS]]
        pass_hashes[WHITE, : hi[H_NWPASS]] = pass_hash_in[WHITE, h0 : h0 + hi[H_NWPASS]]
        # Moves and "ever occupied" points of the prefix come from the move list, not a replay.
        mloc = np.zeros(length, np.int32)
        mpla = np.zeros(length, np.int8)
        was_ever = np.zeros(st.shape[1], np.bool_)
        for k in range(setup_offsets[g], setup_offsets[g + 1]):
            idx = setup_index[k]
            was_ever[loc_of(idx % NN, idx // NN, n)] = True
        for i in range(t):
            ml = move_loc_of(move_index[m0 + i], n)
            mloc[i] = ml
            mpla[i] = move_color[m0 + i]
            if ml != PASS_LOC:
                was_ever[ml] = True
        # The parent's superko bans only gate legality (the caller checks the legal mask);
        # make_move recomputes the child's own bans from the hash history.
        sk = np.zeros(st.shape[1], np.bool_)
        area = np.zeros(st.shape[1], np.int8)
        captured = make_move(
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
            move_loc_of(moves[c], n),
            pla,
            rules[g],
            n,
        )
        jp[0] = 0
        komi_row, ko_row = _fill_row(
            st,
            jr,
            jp,
            hi,
            hf,
            pass_hashes,
            sk,
            mloc,
            mpla,
            rules[g],
            komis[g],
            3 - pla,
            lad_cur,
            st_ladder[p],
            st_ladder[p - 1] if t > 0 else no_ladder,
            work_black,
            work_white,
            area,
            buf,
            stack,
            n,
            spatial[c],
            glob[c],
            legal[c],
        )
        self_komi[c] = komi_row
        ko_point[c] = ko_row
        last_captured[c] = captured


# --------------------------------------------------------------------------------------------
# Python API


def _komi_features(
    self_komi: np.ndarray, board_area: np.ndarray, area_scoring: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Global 5 (komi / 20) and 18 (parity wave) in float32 arithmetic, as KataGo computes them."""
    f32 = np.float32
    bound = board_area.astype(f32) + f32(20.0)
    komi = np.clip(self_komi.astype(f32), -bound, bound)  # (N,)
    g5 = komi / f32(20.0)
    even = (board_area % 2) == 0
    floor_even = np.floor(komi / f32(2.0)) * f32(2.0)
    floor_odd = np.floor((komi - f32(1.0)) / f32(2.0)) * f32(2.0) + f32(1.0)
    delta = np.clip(komi - np.where(even, floor_even, floor_odd), f32(0.0), f32(2.0))
    wave = np.where(
        delta < f32(0.5), delta, np.where(delta < f32(1.5), f32(1.0) - delta, delta - f32(2.0))
    )
    return g5.astype(f32), np.where(area_scoring, wave, f32(0.0)).astype(f32)


def _set_komi_features(glob: np.ndarray, self_komi: np.ndarray, parsed: ParsedGames,
                       games: np.ndarray) -> None:  # fmt: skip
    """Write globals 5 and 18 of rows whose games (indices into ``parsed``) are ``games``."""
    sizes = parsed.board_size[games].astype(np.int64)
    area_scoring = parsed.rules[games, 1] == SCORING_AREA
    g5, g18 = _komi_features(self_komi, sizes * sizes, area_scoring)
    glob[:, spec.GL_SELF_KOMI] = g5
    glob[:, spec.GL_KOMI_PARITY] = g18


def encode_parsed(
    parsed: ParsedGames,
    *,
    out: tuple[np.ndarray, np.ndarray] | None = None,
    keep_states: bool = False,
) -> GoPositions:
    """Encode already parsed games; ``out`` = (spatial, global) arrays to fill (≥ N rows).

    ``keep_states`` also returns :class:`GoBoardStates` (``positions.states``), from which
    :func:`encode_children` encodes the position after any move of any row.
    """
    replay = replay_parsed(parsed)
    n_valid = replay.num_valid_moves
    g = len(n_valid)
    row_offsets = np.zeros(g + 1, np.int64)
    np.cumsum(n_valid, out=row_offsets[1:])
    total = int(row_offsets[-1])
    if out is None:
        spatial = np.empty((total, spec.NUM_SPATIAL, NN, NN), np.float32)
        glob = np.empty((total, spec.NUM_GLOBAL), np.float32)
    else:
        spatial, glob = out[0][:total], out[1][:total]
    legal = np.empty((total, spec.POLICY_SIZE), np.bool_)
    played = np.empty(total, np.int16)
    self_komi = np.empty(total, np.float32)
    ko_point = np.empty(total, np.int16)
    last_captured = np.empty(total, np.int16)
    kept = total if keep_states else 0
    hash_offsets = np.zeros(g + 1, np.int64)
    if keep_states:
        np.cumsum(np.where(n_valid > 0, n_valid + 1, 0), out=hash_offsets[1:])
    n_hashes = int(hash_offsets[-1])
    st_board = np.zeros((kept, NN, NN), np.int8)
    st_ladder = np.zeros((kept, NN * NN), np.bool_)
    st_hi = np.zeros((kept, 8), np.int64)
    st_hf = np.zeros((kept, 2), np.float64)
    ko_hashes = np.zeros(n_hashes, np.uint64)
    pass_hashes = np.zeros((3, n_hashes), np.uint64)
    if total:
        _encode_kernel(
            parsed.move_offsets,
            parsed.move_color,
            parsed.move_index,
            parsed.setup_offsets,
            parsed.setup_color,
            parsed.setup_index,
            parsed.board_size,
            parsed.komi,
            parsed.rules,
            n_valid,
            row_offsets,
            spatial,
            glob,
            legal,
            played,
            self_komi,
            ko_point,
            last_captured,
            keep_states,
            st_board,
            st_ladder,
            st_hi,
            st_hf,
            hash_offsets,
            ko_hashes,
            pass_hashes,
        )
    game_index = np.repeat(np.arange(g, dtype=np.int32), n_valid)
    ply = (np.arange(total, dtype=np.int64) - np.repeat(row_offsets[:-1], n_valid)).astype(np.int32)
    starts = parsed.move_offsets[:-1]
    black = parsed.move_color[np.repeat(starts, n_valid) + ply] == BLACK
    _set_komi_features(glob, self_komi, parsed, game_index)
    states = None
    if keep_states:
        states = GoBoardStates(
            parsed, game_index.copy(), ply.copy(), st_board, st_ladder, st_hi, st_hf,
            ko_point.copy(), legal, hash_offsets, ko_hashes, pass_hashes,
        )  # fmt: skip
    return GoPositions(
        spatial,
        glob,
        legal,
        played,
        game_index,
        ply,
        black,
        ko_point,
        last_captured,
        replay.illegal_moves,
        states,
    )


def encode_games(
    games: Sequence[GoGameSpec],
    *,
    rules: str | None = None,
    komi: float | None = None,
    out: tuple[np.ndarray, np.ndarray] | None = None,
    keep_states: bool = False,
) -> GoPositions:
    """KataGo v7 inputs of every position before each move of ``games`` (contract C7).

    ``rules`` / ``komi`` override each game's own (for example komi 6.5 for Fox's ``KM[0]``
    games, as KataGo's own Fox training data does). A game stops at its first illegal move,
    which is listed in ``illegal_moves``. ``keep_states``: see :func:`encode_parsed`.
    """
    return encode_parsed(
        parse_games(games, rules=rules, komi=komi), out=out, keep_states=keep_states
    )


def encode_children(
    states: GoBoardStates,
    parents: np.ndarray,
    moves: np.ndarray,
    *,
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> GoPositions:
    """KataGo v7 inputs of the position after policy index ``moves[i]`` is played in row
    ``parents[i]`` of the :func:`encode_games` call that kept ``states``.

    Each child is one play on the parent's stored board and one row encode: bit-identical to
    encoding the game prefix with that move appended (tests/test_extract_go.py checks it on
    real games), at the cost of one position instead of a replay. ``played_index`` of a child
    is -1 (no move is known there); ``illegal_moves`` is empty.
    """
    parents = np.ascontiguousarray(parents, dtype=np.int64)
    moves = np.ascontiguousarray(moves, dtype=np.int16)
    if parents.shape != moves.shape or parents.ndim != 1:
        raise ValueError(f"parents {parents.shape!r} and moves {moves.shape!r} must be (C,)")
    total = len(parents)
    if total and (parents.min() < 0 or parents.max() >= len(states.game)):
        raise IndexError(f"parent rows must be in [0, {len(states.game)}), got {parents!r}")
    if total and ((moves < 0) | (moves >= spec.POLICY_SIZE)).any():
        raise IllegalCandidateError(f"policy indices must be in [0, 362), got {moves!r}")
    bad = np.flatnonzero(~states.legal[parents, moves]) if total else np.zeros(0, np.int64)
    if len(bad):
        pairs = list(zip(parents[bad].tolist(), moves[bad].tolist(), strict=True))[:5]
        raise IllegalCandidateError(f"(parent row, move) pairs not legal there: {pairs!r}")
    if out is None:
        spatial = np.empty((total, spec.NUM_SPATIAL, NN, NN), np.float32)
        glob = np.empty((total, spec.NUM_GLOBAL), np.float32)
    else:
        spatial, glob = out[0][:total], out[1][:total]
    legal = np.empty((total, spec.POLICY_SIZE), np.bool_)
    self_komi = np.empty(total, np.float32)
    ko_point = np.empty(total, np.int16)
    last_captured = np.empty(total, np.int16)
    parsed = states.parsed
    if total:
        _child_kernel(
            parsed.move_offsets,
            parsed.move_color,
            parsed.move_index,
            parsed.setup_offsets,
            parsed.setup_index,
            parsed.board_size,
            parsed.komi,
            parsed.rules,
            states.game,
            states.ply,
            states.board,
            states.ladder,
            states.history,
            states.history_f,
            states.ko_point,
            states.hash_offsets,
            states.ko_hashes,
            states.pass_hashes,
            parents,
            moves,
            spatial,
            glob,
            legal,
            self_komi,
            ko_point,
            last_captured,
        )
    games = states.game[parents]
    ply = states.ply[parents] + 1
    mover = parsed.move_color[parsed.move_offsets[games] + states.ply[parents]]
    _set_komi_features(glob, self_komi, parsed, games)
    return GoPositions(
        spatial,
        glob,
        legal,
        np.full(total, -1, np.int16),
        games.astype(np.int32),
        ply.astype(np.int32),
        mover == WHITE,  # the opponent of the parent's mover is to move
        ko_point,
        last_captured,
        [],
    )


def compile_kernels() -> None:
    """Compile every kernel extraction calls (or load them from numba's on-disk cache) by
    encoding one short game with its board states and one position after a move, as
    extraction with expected loss does, and packing its planes.

    The extraction driver calls it once before its Ray workers start
    (``GoExtraction.compile_encoders``), so that the workers of a fresh node load the kernels
    from the cache instead of each compiling them (see ``pipeline.chess_game.encode``'s). The
    children are encoded twice: a Ray worker receives the board states from the object store
    as read-only arrays, which numba compiles as a signature of their own.
    """
    positions = encode_games([GoGameSpec(moves=["B:pd", "W:dp", "B:pass"])], keep_states=True)
    pack_planes(positions.spatial)
    states = positions.states
    parents = np.array([1])
    moves = np.flatnonzero(states.legal[1])[:1].astype(np.int16)
    encode_children(states, parents, moves)
    encode_children(read_only(states), parents, moves)


def read_only(states: GoBoardStates) -> GoBoardStates:
    """``states`` with every array a read-only view, as a Ray task receives them."""

    def frozen(value: object) -> object:
        if isinstance(value, np.ndarray):
            value = value.view()
            value.flags.writeable = False
        return value

    parsed = replace(states.parsed, **{f.name: frozen(getattr(states.parsed, f.name))
                                       for f in fields(states.parsed)})  # fmt: skip
    return replace(states, parsed=parsed, **{f.name: frozen(getattr(states, f.name))
                                             for f in fields(states) if f.name != "parsed"})  # fmt: skip
