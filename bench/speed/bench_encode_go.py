"""Go featurizer throughput: positions/s per core of ``pipeline.go_game.encode.encode_games`` (KataGo
v7 inputs with ladder search, legal mask, played move) on real Fox games, against a baseline
measured in the same run: a straightforward pure-Python board (flood-fill chains, board copies in
a recursive ladder reader) filling the same planes one position at a time.

Run::

    python bench/speed/bench_encode_go.py [--games-per-band 20] [--repeats 3] [--batch-games 16]

The compiled encoder runs on one core (it has no threads). Prints medians and the ratio, and how
many baseline positions agree exactly with the compiled encoder (a cross-check of the ladder port).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pipeline.core import settings
from pipeline.go_game import spec as go_spec
from pipeline.go_game.encode import encode_games
from pipeline.go_game.rules import GoGameSpec, games_from_table
from pipeline.ingest.sgf import read_paths

BANDS = ("3-5k", "1-2k", "1d", "2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d")
NEIGHBOURS = ((0, -1), (-1, 0), (1, 0), (0, 1))


class PyBoard:
    """A plain Go board: colours in a list of lists, chains found by flood fill."""

    def __init__(self, n: int = 19) -> None:
        self.n = n
        self.c = [[0] * n for _ in range(n)]
        self.ko: tuple[int, int] | None = None

    def copy(self) -> PyBoard:
        other = PyBoard(self.n)
        other.c = [row[:] for row in self.c]
        other.ko = self.ko
        return other

    def around(self, x: int, y: int):
        for dx, dy in NEIGHBOURS:
            if 0 <= x + dx < self.n and 0 <= y + dy < self.n:
                yield x + dx, y + dy

    def chain(self, x: int, y: int) -> tuple[set, set]:
        colour = self.c[y][x]
        stones, libs, todo = {(x, y)}, set(), [(x, y)]
        while todo:
            px, py = todo.pop()
            for q in self.around(px, py):
                v = self.c[q[1]][q[0]]
                if v == 0:
                    libs.add(q)
                elif v == colour and q not in stones:
                    stones.add(q)
                    todo.append(q)
        return stones, libs

    def legal(self, x: int, y: int, pla: int) -> bool:
        if self.c[y][x] != 0 or self.ko == (x, y):
            return False
        for q in self.around(x, y):
            v = self.c[q[1]][q[0]]
            libs = len(self.chain(*q)[1]) if v else 0
            if v == 0 or (v == pla and libs > 1) or (v == 3 - pla and libs == 1):
                return True
        return False

    def play(self, x: int, y: int, pla: int) -> int:
        self.c[y][x] = pla
        captured: list = []
        for q in self.around(x, y):
            if self.c[q[1]][q[0]] == 3 - pla:
                stones, libs = self.chain(*q)
                if not libs:
                    captured.extend(stones)
                    for sx, sy in stones:
                        self.c[sy][sx] = 0
        stones, libs = self.chain(x, y)
        lone_in_atari = len(stones) == 1 and len(libs) == 1
        self.ko = captured[0] if len(captured) == 1 and lone_in_atari else None
        return len(captured)

    def defender_escapes(self, x: int, y: int, root: bool) -> bool:
        """Defender to move with one liberty: does some move avoid the ladder?"""
        if not root and self.ko is not None:
            return True
        pla = self.c[y][x]
        stones, libs = self.chain(x, y)
        moves = []
        for sx, sy in stones:
            for q in self.around(sx, sy):
                if self.c[q[1]][q[0]] == 3 - pla:
                    moves.extend(lib for lib in self.chain(*q)[1] if lib not in moves)
        moves.extend(lib for lib in libs if lib not in moves)
        for mx, my in moves:
            if self.legal(mx, my, pla):
                after = self.copy()
                after.play(mx, my, pla)
                if not after.attacker_captures(x, y):
                    return True
        return False

    def attacker_captures(self, x: int, y: int) -> bool:
        libs = self.chain(x, y)[1]
        if len(libs) <= 1:
            return True
        if len(libs) >= 3:
            return False
        for mx, my in sorted(libs):
            if self.legal(mx, my, 3 - self.c[y][x]):
                after = self.copy()
                after.play(mx, my, 3 - self.c[y][x])
                if not after.defender_escapes(x, y, root=False):
                    return True
        return False

    def ladders(self) -> tuple[np.ndarray, dict]:
        """Laddered stones (19, 19) and working moves per colour of the 2-liberty chain."""
        laddered = np.zeros((19, 19), np.float32)
        working: dict[int, set] = {1: set(), 2: set()}
        solved: set = set()  # stones of chains already read
        for y in range(self.n):
            for x in range(self.n):
                colour = self.c[y][x]
                if not colour or (x, y) in solved:
                    continue
                stones, libs = self.chain(x, y)
                solved |= stones
                if len(libs) == 1:
                    root = self.copy()
                    root.ko = None
                    if not root.defender_escapes(x, y, root=True):
                        for sx, sy in stones:
                            laddered[sy, sx] = 1
                elif len(libs) == 2:
                    for mx, my in libs:
                        if self.legal(mx, my, 3 - colour):
                            after = self.copy()
                            after.play(mx, my, 3 - colour)
                            after.ko = None
                            if not after.defender_escapes(x, y, root=True):
                                for sx, sy in stones:
                                    laddered[sy, sx] = 1
                                working[colour].add((mx, my))
        return laddered, working


def baseline_positions(games: list[GoGameSpec], limit: int, komi: float):
    """Japanese-rules planes of the first ``limit`` positions, one position at a time."""
    spatial, glob = [], []
    for game in games:
        board = PyBoard()
        boards: list[PyBoard] = []
        history: list[tuple[int, tuple[int, int] | None]] = []
        for move in game.moves:
            if len(spatial) == limit:
                return np.array(spatial), np.array(glob)
            pla = 1 if move[0] == "B" else 2
            sp = np.zeros((22, 19, 19), np.float32)
            gl = np.zeros(19, np.float32)
            sp[0] = 1
            for y in range(19):
                for x in range(19):
                    v = board.c[y][x]
                    if v:
                        sp[1 if v == pla else 2, y, x] = 1
                        libs = len(board.chain(x, y)[1])
                        if libs <= 3:
                            sp[2 + libs, y, x] = 1
            if board.ko is not None:
                sp[6, board.ko[1], board.ko[0]] = 1
            for k in range(1, 6):
                if len(history) < k or history[-k][0] != (3 - pla if k % 2 else pla):
                    break
                where = history[-k][1]
                if where is None:
                    gl[k - 1] = 1
                else:
                    sp[8 + k, where[1], where[0]] = 1
            laddered, working = board.ladders()
            sp[14] = laddered
            sp[15] = boards[-1].ladders()[0] if boards else laddered
            sp[16] = boards[-2].ladders()[0] if len(boards) > 1 else sp[15]
            for wx, wy in working[3 - pla]:
                sp[17, wy, wx] = 1
            white_komi = komi + sum(1 if p == 1 else -1 for p, w in history if w is not None)
            gl[5] = np.float32(white_komi if pla == 2 else -white_komi) / np.float32(20)
            gl[9] = gl[10] = 1
            spatial.append(sp)
            glob.append(gl)
            boards.append(board.copy())
            if move[2:] == "pass":
                board.ko = None
                history.append((pla, None))
            else:
                x, y = go_spec.sgf_to_xy(move[2:])
                board.play(x, y, pla)
                history.append((pla, (x, y)))
    return np.array(spatial), np.array(glob)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games-per-band", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-positions", type=int, default=200)
    parser.add_argument("--batch-games", type=int, default=16)
    args = parser.parse_args()

    root = settings.data_dir() / "go" / "fox-selected" / "candidating"
    table = read_paths([root / f"{band}.sgf" for band in BANDS]).games
    per_band = []
    for band in BANDS:
        rows = np.flatnonzero(np.array(table["rank_group"].to_pylist()) == band)
        per_band.extend(rows[: args.games_per_band].tolist())
    games = games_from_table(table.take(per_band))
    encode_games(games[:1])  # compile / load the numba cache outside the timing

    # The caller owns the batch buffers and reuses them (as the extraction actors do), so the
    # figure measures the featurizer, not the kernel's page faults on fresh gigabyte arrays.
    batches = [games[i : i + args.batch_games] for i in range(0, len(games), args.batch_games)]
    rows = max(sum(len(g.moves) for g in batch) for batch in batches)
    out = (np.zeros((rows, 22, 19, 19), np.float32), np.zeros((rows, 19), np.float32))
    for rules in ("japanese", "chinese"):
        times, cpu_times = [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            n = sum(len(encode_games(b, rules=rules, komi=6.5, out=out).ply) for b in batches)
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
        rate = n / statistics.median(times)
        print(
            f"compiled  {rules:9s} {n} positions from {len(games)} Fox games "
            f"({args.batch_games} games per call): median {statistics.median(times):.2f} s wall "
            f"-> {rate:,.0f} positions/s per core; "
            f"{n / statistics.median(cpu_times):,.0f} positions per CPU-second"
        )
        if rules == "japanese":
            japanese_rate = rate
    japanese_pos = encode_games(games[: args.batch_games], rules="japanese", komi=6.5)

    limit = args.baseline_positions
    t0, c0 = time.perf_counter(), time.process_time()
    base_spatial, base_global = baseline_positions(games, limit, 6.5)
    base_time = time.perf_counter() - t0
    base_cpu = time.process_time() - c0
    base_rate = len(base_spatial) / base_time
    print(
        f"baseline  pure-Python board, {len(base_spatial)} positions: {base_time:.2f} s "
        f"-> {base_rate:,.1f} positions/s; {len(base_spatial) / base_cpu:,.1f} per CPU-second"
    )
    print(f"ratio     compiled / baseline (Japanese): {japanese_rate / base_rate:,.0f}x")
    same_spatial = (japanese_pos.spatial[:limit] == base_spatial).all(axis=(1, 2, 3))
    same_global = (japanese_pos.global_[:limit] == base_global).all(axis=1)
    print(
        f"agreement baseline == compiled on {int((same_spatial & same_global).sum())} of "
        f"{len(base_spatial)} positions"
    )


if __name__ == "__main__":
    main()
