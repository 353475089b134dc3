"""Chess encoder throughput: positions/s per core of ``pipeline.chess_game.encode.encode_games``
(112 planes with full 8-position history + legal moves as lc0 indices + played move), against a
baseline measured in the same run: a python-chess ``Board`` per position building the same planes
and legal-move indices one position at a time (how existing Maia tooling feeds lc0 nets).

Run::

    python bench/speed/bench_encode_chess.py [--games-per-band 100] [--repeats 5]

Numba runs single-threaded (NUMBA_NUM_THREADS=1), so the figure is per core. Prints medians.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import argparse
import statistics
import time

import chess
import numpy as np
import pyarrow as pa

from pipeline.chess_game.encode import encode_games
from pipeline.chess_game.spec import NUM_PLANES, POLICY_INDEX_OF
from pipeline.core import settings
from pipeline.nets.check_chess import read_games

BANDS = ("1000-1200", "1600-1800", "2200-2400")
_PIECES = (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN, chess.KING)


def _lc0_name(board: chess.Board, move: chess.Move) -> str:
    """The move as lc0 names it from the mover's view (castling king-takes-rook)."""
    src, dst = move.from_square, move.to_square
    if board.is_castling(move):
        dst = chess.square(7 if chess.square_file(dst) == 6 else 0, chess.square_rank(dst))
    if board.turn == chess.BLACK:
        src, dst = chess.square_mirror(src), chess.square_mirror(dst)
    promo = "" if move.promotion in (None, chess.KNIGHT) else chess.piece_symbol(move.promotion)
    return chess.square_name(src) + chess.square_name(dst) + promo


def baseline_encode(games: list[list[str]]) -> int:
    """Per-position python-chess encoder (the baseline); returns the number of positions."""
    count = 0
    for moves in games:
        board = chess.Board()
        history: list[chess.Board] = []
        for uci in moves:
            planes = np.zeros((NUM_PLANES, 8, 8), dtype=np.float32)  # (112, 8, 8)
            us = board.turn
            history.insert(0, board.copy(stack=False))
            del history[8:]
            for k, past in enumerate(history):
                for t, piece in enumerate(_PIECES):
                    for colour, offset in ((us, 0), (not us, 6)):
                        for sq in past.pieces(piece, colour):
                            sq = sq if us == chess.WHITE else chess.square_mirror(sq)
                            planes[k * 13 + offset + t, sq // 8, sq % 8] = 1.0
            if board.is_repetition(2):
                planes[12] = 1.0
            planes[104] = board.has_queenside_castling_rights(us)
            planes[105] = board.has_kingside_castling_rights(us)
            planes[106] = board.has_queenside_castling_rights(not us)
            planes[107] = board.has_kingside_castling_rights(not us)
            planes[108] = us == chess.BLACK
            planes[109] = board.halfmove_clock
            planes[111] = 1.0
            legal = [POLICY_INDEX_OF[_lc0_name(board, m)] for m in board.legal_moves]
            if not legal:
                break
            board.push_uci(uci)
            count += 1
    return count


def _median_rate(fn, positions: int, repeats: int) -> tuple[float, float]:
    """Median positions per wall-clock second and per CPU second of this process.

    On a shared machine the CPU-time rate is the per-core figure; the wall rate includes
    waiting for a core.
    """
    wall, cpu = [], []
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(positions / (time.perf_counter() - start_wall))
        cpu.append(positions / (time.process_time() - start_cpu))
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games-per-band", type=int, default=100)
    parser.add_argument("--baseline-games", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    testing = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "testing"
    column = pa.concat_tables(
        read_games(testing / f"{band}.pgn.zst", max_games=args.games_per_band) for band in BANDS
    )["moves"]  # the games table's list<string> column, as extraction passes it
    games = column.to_pylist()
    positions = sum(len(m) for m in games)
    encode_games(games[:2])  # load the compiled kernels (numba cache) outside the timing

    out = np.empty((positions, NUM_PLANES, 8, 8), dtype=np.float32)  # (N, 112, 8, 8)
    check = encode_games(column, out=out)
    if len(check) != positions or check.errors:
        raise SystemExit(f"real games did not encode cleanly: {check.errors[:3]!r}")
    legal_per_pos = check.legal_offsets[-1] / positions
    rate_out = _median_rate(lambda: encode_games(column, out=out), positions, args.repeats)
    rate_alloc = _median_rate(lambda: encode_games(column), positions, args.repeats)
    rate_lists = _median_rate(lambda: encode_games(games, out=out), positions, args.repeats)

    base_games = games[: args.baseline_games]
    base_positions = sum(len(m) for m in base_games)
    rate_base = _median_rate(lambda: baseline_encode(base_games), base_positions, 3)

    print(
        f"games: {len(games)} from testing/{{{','.join(BANDS)}}}, positions: {positions}, "
        f"legal moves/position: {legal_per_pos:.1f}; medians of {args.repeats} runs"
    )
    print(f"{'':32} {'wall pos/s':>12} {'CPU pos/s':>12}")
    rows = [
        ("encode_games, preallocated out", rate_out),
        ("encode_games, allocating", rate_alloc),
        ("encode_games, Python lists in", rate_lists),
        (f"baseline python-chess ({base_positions} pos)", rate_base),
    ]
    for label, (wall, cpu) in rows:
        print(f"{label:32} {wall:>12,.0f} {cpu:>12,.0f}")
    for label, (wall, cpu) in rows[:3]:
        print(
            f"ratio {label[14:]:>26} / baseline: {wall / rate_base[0]:>7.1f}x wall, "
            f"{cpu / rate_base[1]:>7.1f}x CPU"
        )


if __name__ == "__main__":
    main()
