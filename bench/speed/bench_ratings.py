"""Benchmarks of the rating systems (figures quoted in docs/guide/ratings.md).

1. Elo replay speed on one core: the numba loop on 10 million synthetic games (integer ids,
   1 million players) against a plain-Python loop on a 300,000-game subset, medians of repeats.
2. The whole default Elo tuning grid (12 configurations: replays + logistic fits + scores) on a
   synthetic history, extrapolated linearly to a 90-million-game Lichess month.
3. TrueSkill Through Time on the raw Fox archives (``data/go/fox-raw``: 27,750 games read by
   ``pipeline.ingest.sgf``) and on a synthetic 3.5-million-game history: wall time, sweeps and
   peak memory (tracemalloc: numpy allocations), plus the ``trueskillthroughtime`` package on a
   subset of the Fox games with the same number of sweeps, as the baseline.

Run: ``python bench/speed/bench_ratings.py`` (``--quick`` for smaller sizes while developing).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from pipeline.core import settings
from pipeline.ingest import sgf as ingest_sgf
from pipeline.ratings.data import RatedGames, from_table
from pipeline.ratings.elo import EloConfig, replay_arrays
from pipeline.ratings.ttt import TTTConfig, smooth_arrays, smooth_ttt
from pipeline.ratings.tune import split_games, tune

LICHESS_MONTH_GAMES = 90_000_000


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls."""
    return _median_times(fn, repeats)[0]


def _median_times(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall and CPU (process) time: on a shared machine the CPU time is the one-core cost."""
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


def _synthetic(n_games: int, n_players: int, n_days: int, seed: int = 0) -> RatedGames:
    """Random pairings, results from the Elo curve of normal true ratings, ~3 % draws."""
    rng = np.random.default_rng(seed)
    true = rng.normal(1500.0, 300.0, n_players)
    white = rng.integers(0, n_players, n_games).astype(np.int32)
    black = ((white + 1 + rng.integers(0, n_players - 1, n_games)) % n_players).astype(np.int32)
    p = 1.0 / (1.0 + 10 ** ((true[black] - true[white]) / 400.0))
    u = rng.random(n_games)
    score = np.where(u < p - 0.015, 1.0, np.where(u < p + 0.015, 0.5, 0.0))
    day = np.sort(rng.integers(0, n_days, n_games)).astype(np.int32) + 19_000
    return RatedGames(
        white,
        black,
        score,
        day,
        np.array([""] * n_games, dtype=object),
        np.arange(n_players).astype(object),
    )


def _plain_python_elo(
    white: list[int], black: list[int], score: list[float], n_players: int
) -> list[float]:
    ratings = [1500.0] * n_players
    played = [0] * n_players
    for w, b, s in zip(white, black, score, strict=True):
        e = 1.0 / (1.0 + 10 ** ((ratings[b] - ratings[w]) / 400.0))
        played[w] += 1
        played[b] += 1
        kw = 60.0 if played[w] <= 5 else (30.0 if played[w] <= 10 else 16.0)
        kb = 60.0 if played[b] <= 5 else (30.0 if played[b] <= 10 else 16.0)
        ratings[w] += kw * (s - e)
        ratings[b] -= kb * (s - e)
    return ratings


def bench_elo(n_games: int, repeats: int, n_players: int) -> None:
    games = _synthetic(n_games, n_players, 30)
    print(f"[elo] {n_players:,} players (state {n_players * 16 / 2**20:.0f} MiB)")
    config = EloConfig(k=(60, 30, 16), thresholds=(5, 10))
    replay_arrays(
        games.white[:1000], games.black[:1000], games.score[:1000], games.n_players, config
    )
    fast = _median_seconds(
        lambda: replay_arrays(games.white, games.black, games.score, games.n_players, config),
        repeats,
    )
    subset = min(300_000, n_games)
    args = (
        games.white[:subset].tolist(),
        games.black[:subset].tolist(),
        games.score[:subset].tolist(),
    )
    slow = _median_seconds(lambda: _plain_python_elo(*args, games.n_players), max(1, repeats // 2))
    fast_rate = n_games / fast
    slow_rate = subset / slow
    print(
        f"[elo] numba replay: {n_games:,} games in {fast:.3f} s = {fast_rate / 1e6:.2f} M games/s (median of {repeats})"
    )
    print(f"[elo] plain Python: {subset:,} games in {slow:.3f} s = {slow_rate / 1e6:.3f} M games/s")
    print(
        f"[elo] speed-up: {fast_rate / slow_rate:.0f}x; a 90M-game month replays in {LICHESS_MONTH_GAMES / fast_rate:.1f} s"
    )


def bench_grid(n_games: int) -> None:
    games = _synthetic(n_games, max(1000, n_games // 40), 30, seed=1)
    split = split_games(games, train_frac=0.8)
    started, started_cpu = time.perf_counter(), time.process_time()
    result = tune("elo", games, split)
    wall = time.perf_counter() - started
    seconds = time.process_time() - started_cpu
    print(f"[grid] wall {wall:.1f} s, CPU {seconds:.1f} s")
    per_game = seconds / n_games
    print(
        f"[grid] default Elo grid ({len(result.scores)} configs, replay + logit + scores): "
        f"{n_games:,} games in {seconds:.1f} s; linear extrapolation to 90M games: "
        f"{per_game * LICHESS_MONTH_GAMES / 60:.1f} min (measured size, not run at 90M)"
    )


def _fox_raw_games() -> RatedGames:
    folder = settings.data_dir() / "go" / "fox-raw"
    chunks = ingest_sgf.plan_chunks(sorted(folder.iterdir()), games_per_chunk=50_000)
    tables = [ingest_sgf.read_chunk(c).games for c in chunks]
    return from_table(pa.concat_tables(tables))


def _peak(fn: Callable[[], object]) -> tuple[object, float, float]:
    tracemalloc.start()
    started = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return value, seconds, peak / 2**20


def bench_ttt(synthetic_games: int, package_games: int) -> None:
    import trueskillthroughtime as ttt_package

    started = time.perf_counter()
    fox = _fox_raw_games()
    print(
        f"[ttt] fox-raw: {fox.n_games:,} games, {fox.n_players:,} players, read in {time.perf_counter() - started:.1f} s; left out {fox.excluded}"
    )
    config = TTTConfig(gamma=0.03, iterations=200)  # beyond the package's 30: EP converges slowly
    smooth_ttt(fox.head(200), config)  # compile outside the timing
    result, seconds, peak = _peak(lambda: smooth_ttt(fox, config))
    print(
        f"[ttt] kibitz on fox-raw: {seconds:.2f} s, {result.iterations} sweeps (last step {result.step:.2e}), peak {peak:.0f} MiB"
    )

    sub = fox.head(package_games)
    fixed = TTTConfig(gamma=0.03, epsilon=1e-12, iterations=3)
    ours = _median_seconds(lambda: smooth_ttt(sub, fixed), 3)
    p_draw = float(np.mean(sub.score == 0.5))
    composition = [
        [[str(w)], [str(b)]] for w, b in zip(sub.white.tolist(), sub.black.tolist(), strict=True)
    ]
    results = [[1, 0] if s == 1 else ([0, 1] if s == 0 else [0, 0]) for s in sub.score.tolist()]

    def package() -> None:
        history = ttt_package.History(
            composition, results, times=sub.day.tolist(), p_draw=p_draw, gamma=0.03
        )
        history.convergence(epsilon=1e-12, iterations=3, verbose=False)

    theirs = _median_seconds(package, 1)
    print(
        f"[ttt] same {package_games:,} Fox games, 3 sweeps: package {theirs:.2f} s, kibitz {ours:.4f} s "
        f"→ {theirs / ours:.0f}x; package extrapolated to all fox-raw games at {result.iterations} sweeps: "
        f"~{theirs * fox.n_games / package_games * max(result.iterations, 1) / 3 / 60:.0f} min"
    )

    synth = _synthetic(synthetic_games, max(1000, synthetic_games // 35), 3650, seed=2)
    big = TTTConfig(gamma=0.03, iterations=10)
    result, seconds, peak = _peak(
        lambda: smooth_arrays(
            synth.white, synth.black, synth.score, synth.day, synth.n_players, big
        )
    )
    print(
        f"[ttt] synthetic {synthetic_games:,} games, {synth.n_players:,} players, 3,650 daily steps: "
        f"{seconds:.1f} s for {result.iterations} sweeps ({seconds / max(result.iterations, 1):.2f} s/sweep incl. forward pass), "
        f"last step {result.step:.2e}, peak {peak:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a fast check")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.quick:
        bench_elo(1_000_000, 3, 100_000)
        bench_grid(200_000)
        bench_ttt(200_000, 500)
    else:
        bench_elo(10_000_000, 5, 100_000)
        bench_elo(10_000_000, 5, 1_000_000)
        bench_grid(2_000_000)
        bench_ttt(3_500_000, 2_000)


if __name__ == "__main__":
    main()
