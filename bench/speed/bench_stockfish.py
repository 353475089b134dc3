"""Stockfish throughput with 1, 2, 4, … engines up to the machine's cores.

    python bench/speed/bench_stockfish.py                 # the extraction preset's 2,000 nodes
    python bench/speed/bench_stockfish.py --nodes 500 --repeats 5

Positions come from real Lichess games (the testing split's 1400-1600 file), 40 per engine at
the largest count, so every count searches the same positions. Each engine is driven from its
own process, as extraction runs it (one Ray actor per engine). Driving all engines from threads
of one Python process (python-chess parses every UCI ``info`` line under one GIL) flattened the
curve at about 380 searches/s on a 16-core node, where one process per engine reaches 1,328:
it measured the driver, not the engines. Each count starts
its engines, waits until all are up, then times the searches; medians over ``--repeats``, and
the speed-up against one engine measured in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

import chess

from pipeline.core import settings
from pipeline.nets.check_chess import read_games
from pipeline.nets.stockfish import StockfishEvaluator, StockfishSettings

# bench_chess_nets.GAMES_FILE, not imported from there: that module loads torch, and every
# spawned engine process imports this one
GAMES_FILE = ("chess", "lichess-2024-02-blitz", "testing", "1400-1600.pgn.zst")


def engine_counts(cores: int) -> list[int]:
    """1, 2, 4, … up to ``cores``, and ``cores`` itself when it is not a power of two."""
    counts = [1]
    while counts[-1] * 2 <= cores:
        counts.append(counts[-1] * 2)
    return counts if counts[-1] == cores else [*counts, cores]


def real_fens(n: int) -> list[str]:
    """The first ``n`` positions (before each move) of the testing split's games."""
    fens: list[str] = []
    games = read_games(settings.data_dir().joinpath(*GAMES_FILE), max_games=max(8, n // 40))
    for moves in games.column("moves").to_pylist():
        board = chess.Board()
        for move in moves:
            fens.append(board.fen())
            board.push_uci(move)
            if len(fens) == n:
                return fens
    raise ValueError(f"{GAMES_FILE[-1]}: fewer than {n} positions in the games read")


def _search_share(fens: list[str], nodes: int, barrier, results) -> None:
    """One engine and its driver in a process of its own: start, wait for the others, search."""
    with StockfishEvaluator(StockfishSettings(nodes=nodes)) as engine:
        barrier.wait()
        started = time.monotonic()  # CLOCK_MONOTONIC: comparable across processes
        engine.evaluate(fens)
        results.put((started, time.monotonic()))


def searches_per_s(fens: list[str], engines: int, nodes: int) -> float:
    """All ``fens`` split over ``engines`` engines: searches/s from the first start to the last
    finish."""
    spawn = multiprocessing.get_context("spawn")  # never fork a driver that ran Ray or torch
    barrier, results = spawn.Barrier(engines), spawn.Queue()
    workers = [
        spawn.Process(target=_search_share, args=(fens[i::engines], nodes, barrier, results))
        for i in range(engines)
    ]
    for worker in workers:
        worker.start()
    spans = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
    return len(fens) / (max(end for _, end in spans) - min(start for start, _ in spans))


def stockfish_scaling(nodes: int, repeats: int = 3, cores: int | None = None) -> dict[int, float]:
    """Median searches/s for each engine count (see the module docstring)."""
    counts = engine_counts(cores or os.cpu_count() or 1)
    fens = real_fens(40 * counts[-1])
    return {
        engines: statistics.median(searches_per_s(fens, engines, nodes) for _ in range(repeats))
        for engines in counts
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000, help="per search (preset: 2000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cores", type=int, default=None, help="largest count (all cores)")
    args = parser.parse_args()
    rates = stockfish_scaling(args.nodes, args.repeats, args.cores)
    print(
        f"Stockfish, {args.nodes} nodes a search, {os.cpu_count()} CPUs; median of {args.repeats}"
    )
    print("engines  searches/s  vs one engine")
    for engines, rate in rates.items():
        print(f"{engines:>7}  {rate:>10,.1f}  {rate / rates[1]:>12.2f}x")


if __name__ == "__main__":
    main()
