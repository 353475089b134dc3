"""Chess net evaluation speed: Kibitz's batched path against a naive per-position baseline.

Measured in one run on real Lichess games (testing split, 1400-1600 band):
- the CPU's fp32 matmul peak (torch, large square matrices) and each net's FLOPs per position;
- evaluation only: positions/s for one Maia net over a batch-size sweep, PyTorch vs ONNX
  Runtime, with achieved GFLOP/s;
- end to end (moves → planes → net → probability of the played move): the naive baseline
  (a python-chess board per position, planes built one position at a time, one forward call
  per position — how existing Maia tooling runs) against Kibitz (vectorised encoder, batched
  evaluator, segment softmax), for one net and for all nine nets on the same positions.

Run: ``python bench/speed/bench_chess_nets.py`` (about 3 minutes on 2 cores; ``--games`` /
``--baseline-positions`` / ``--repeats`` trade time for noise). Figures are medians over repeats.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import chess
import numpy as np
import torch
from torch import nn

from pipeline.chess_game.encode import encode_games
from pipeline.chess_game.policy import policy_over_legal
from pipeline.chess_game.spec import POLICY_INDEX_OF
from pipeline.core import settings
from pipeline.nets.check_chess import read_games
from pipeline.nets.evaluator import make_evaluator
from pipeline.nets.loading import load_net

MAIA_NETS = [f"maia-{level}" for level in range(1100, 2000, 100)]
GAMES_FILE = ("chess", "lichess-2024-02-blitz", "testing", "1400-1600.pgn.zst")
PIECE_TYPES = (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN, chess.KING)


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``run`` after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def matmul_peak_gflops(repeats: int, size: int = 2048) -> float:
    """Best (not median) fp32 matmul rate: a peak is what the CPU can do when undisturbed."""
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    a @ b
    times = []
    for _ in range(max(repeats, 5)):
        started = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - started)
    return 2 * size**3 / min(times) / 1e9


def flops_per_position(net: nn.Module) -> int:
    """Multiply-adds x 2 of every conv (on the 8x8 board) and dense layer."""
    total = 0
    for module in net.modules():
        if isinstance(module, nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1]
            total += 2 * module.in_channels * module.out_channels * k * 64
        elif isinstance(module, nn.Linear):
            total += 2 * module.in_features * module.out_features
    return total


# ----------------------------------------------------------------------- naive baseline


def naive_planes(board: chess.Board) -> np.ndarray:
    """lc0's 112 input planes for one python-chess board, built square by square."""
    planes = np.zeros((112, 8, 8), dtype=np.float32)
    us = board.turn
    flip = us == chess.BLACK
    history = board.copy()
    for step in range(8):
        if step and not history.move_stack:
            break
        if step:
            history.pop()
        for offset, colour in ((0, us), (6, not us)):
            for i, piece_type in enumerate(PIECE_TYPES):
                for square in history.pieces(piece_type, colour):
                    s = chess.square_mirror(square) if flip else square
                    planes[step * 13 + offset + i, s // 8, s % 8] = 1.0
        if history.is_repetition(2):
            planes[step * 13 + 12] = 1.0
    planes[104] = board.has_queenside_castling_rights(us)
    planes[105] = board.has_kingside_castling_rights(us)
    planes[106] = board.has_queenside_castling_rights(not us)
    planes[107] = board.has_kingside_castling_rights(not us)
    planes[108] = flip
    planes[109] = board.halfmove_clock
    planes[111] = 1.0
    return planes


def lc0_index(board: chess.Board, move: chess.Move) -> int:
    """lc0's policy index of a python-chess move (mover's view, king-takes-rook castling)."""
    to_square = move.to_square
    if board.is_castling(move):
        to_square = chess.square(
            7 if chess.square_file(to_square) == 6 else 0, chess.square_rank(move.from_square)
        )
    from_square = move.from_square
    if board.turn == chess.BLACK:
        from_square, to_square = chess.square_mirror(from_square), chess.square_mirror(to_square)
    name = chess.square_name(from_square) + chess.square_name(to_square)
    if move.promotion and move.promotion != chess.KNIGHT:
        name += chess.piece_symbol(move.promotion)
    return POLICY_INDEX_OF[name]


def naive_played_probs(net: nn.Module, games: list[list[str]], limit: int) -> np.ndarray:
    """Probability of each played move, one position and one forward call at a time."""
    probs = []
    with torch.inference_mode():
        for moves in games:
            board = chess.Board()
            for uci in moves:
                if len(probs) == limit:
                    return np.array(probs)
                planes = torch.from_numpy(naive_planes(board))[None]  # (1, 112, 8, 8)
                policy = net(planes)[0][0].numpy()  # (1858,)
                legal = list(board.legal_moves)
                logits = np.array([policy[lc0_index(board, m)] for m in legal])
                weights = np.exp(logits - logits.max())
                played = legal.index(chess.Move.from_uci(uci))
                probs.append(weights[played] / weights.sum())
                board.push_uci(uci)
    return np.array(probs)


# ----------------------------------------------------------------------- Kibitz path


def kibitz_played_probs(evaluators: list, games: list[list[str]]) -> list[np.ndarray]:
    positions = encode_games(games)
    return [
        policy_over_legal(evaluate({"planes": positions.planes})["policy"], positions).played_prob
        for evaluate in evaluators
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=30, help="games for the end-to-end runs")
    parser.add_argument("--baseline-positions", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--batch-sizes", default="1,16,64,256,1024")
    parser.add_argument("--backend", default="onnx", choices=("torch", "onnx"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]

    games = read_games(settings.data_dir().joinpath(*GAMES_FILE), max_games=args.games)
    moves = games.column("moves").to_pylist()
    positions = encode_games(moves)
    n = len(positions)
    print(f"{len(moves)} games, {n} positions; {args.threads} threads; torch {torch.__version__}")

    peak = matmul_peak_gflops(args.repeats)
    net = load_net("maia-1500")
    flops = flops_per_position(net)
    print(f"matmul peak: {peak:.1f} GFLOP/s fp32; Maia net: {flops / 1e6:.1f} MFLOP/position")

    print("\nevaluation only, maia-1500 (positions/s, achieved GFLOP/s):")
    print(f"{'batch':>6} {'torch':>10} {'GFLOP/s':>8} {'onnx':>10} {'GFLOP/s':>8}")
    evaluators = {
        backend: make_evaluator(net, backend=backend, num_threads=args.threads)
        for backend in ("torch", "onnx")
    }
    best = 0.0
    for batch in batch_sizes:
        reps = max(1, min(50, 1024 // batch))  # about 1024 positions per measurement
        planes = np.ascontiguousarray(np.resize(positions.planes, (batch * reps, 112, 8, 8)))
        row = [f"{batch:>6}"]
        for evaluate in evaluators.values():
            chunks = [planes[i * batch : (i + 1) * batch] for i in range(reps)]
            seconds = median_seconds(
                lambda evaluate=evaluate, chunks=chunks: [evaluate({"planes": c}) for c in chunks],
                args.repeats,
            )
            rate = batch * reps / seconds
            best = max(best, rate)
            row += [f"{rate:>10.0f}", f"{rate * flops / 1e9:>8.1f}"]
        print(" ".join(row))
    print(
        f"best: {best * flops / 1e9:.1f} GFLOP/s = {best * flops / 1e9 / peak:.0%} of matmul peak"
    )

    limit = min(args.baseline_positions, n)
    check = naive_planes_match(moves, positions, limit=40)
    print(f"\nbaseline planes equal Kibitz planes on the first 40 positions: {check}")
    baseline_s = median_seconds(lambda: naive_played_probs(net, moves, limit), args.repeats)
    baseline_rate = limit / baseline_s
    one = [make_evaluator(net, backend=args.backend, num_threads=args.threads, max_batch=1024)]
    kibitz_s = median_seconds(lambda: kibitz_played_probs(one, moves), args.repeats)
    naive = naive_played_probs(net, moves, limit)
    kibitz = kibitz_played_probs(one, moves)[0][:limit]
    print(
        f"played-move probabilities, baseline vs Kibitz: max diff {np.abs(naive - kibitz).max():.1e}"
    )
    print(f"\nend to end, one net ({args.backend}):")
    print(f"  baseline  {baseline_rate:10.0f} positions/s  ({limit} positions)")
    print(f"  Kibitz    {n / kibitz_s:10.0f} positions/s  ({n} positions)")
    print(f"  ratio     {n / kibitz_s / baseline_rate:10.1f}x")

    nine = [
        make_evaluator(load_net(name), backend=args.backend, num_threads=args.threads)
        for name in MAIA_NETS
    ]
    nine_s = median_seconds(lambda: kibitz_played_probs(nine, moves), args.repeats)
    print(f"\nend to end, all nine nets ({args.backend}):")
    print(f"  baseline  {baseline_rate / 9:10.0f} positions/s (x 9 nets, one net measured)")
    print(f"  Kibitz    {n / nine_s:10.0f} positions/s  ({9 * n / nine_s:.0f} net-evaluations/s)")
    print(f"  ratio     {n / nine_s / (baseline_rate / 9):10.1f}x")


def naive_planes_match(moves: list[list[str]], positions, *, limit: int) -> bool:
    """The baseline does the same work: its planes equal the Kibitz encoder's."""
    rows = []
    for game in moves:
        board = chess.Board()
        for uci in game:
            rows.append(naive_planes(board))
            board.push_uci(uci)
            if len(rows) == limit:
                return bool(np.array_equal(np.stack(rows), positions.planes[:limit]))
    return bool(np.array_equal(np.stack(rows), positions.planes[: len(rows)]))


if __name__ == "__main__":
    main()
