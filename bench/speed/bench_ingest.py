"""Ingestion speed: Kibitz's chess reader vs python-chess ``read_game``, plus the Go reader.

Run: ``python bench/speed/bench_ingest.py`` (``--help`` for options). It reports, on the 9,598-game
Lichess testing split (``$KIBITZ_DATA_DIR/chess/lichess-2024-02-blitz/testing``):

1. ``read_chunk`` hot path: the compiled reader + Arrow columns on bytes already in memory;
2. single process end to end: zstd streaming, chunk cutting, reading (what one Ray task does,
   plus the driver's streaming);
3. the CLI end to end (``kibitz ingest chess --num-cpus N --preset all``): Ray tasks,
   selection, Parquet commits, on the split as shipped and on one ``.pgn.zst`` stream of
   ``--copies`` copies of it; rates exclude Ray's start-up (the whole command time is printed);
4. the baseline: python-chess ``chess.pgn.read_game`` replaying every move (and reading the
   tags, clocks and evals through the game tree), timed on ``--baseline-games`` games and
   extrapolated per game;

and the Go reader (``pipeline.ingest.sgf``, single process) on the Fox selected testing split
and the raw archives. "per core" = games / CPU seconds of the process (``time.process_time``),
which is robust to other processes sharing the machine; wall-clock rates are printed too.
Figures are medians over ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import chess.pgn
import zstandard

from pipeline.core import settings
from pipeline.ingest.compressed_streams import iter_blocks
from pipeline.ingest.pgn import expand_sources, read_chunk, stream_chunks


def _timed(fn: Callable[[], int], repeats: int) -> tuple[int, float, float]:
    """(games, median CPU seconds, median wall seconds) of ``fn`` returning a game count."""
    cpu, wall, games = [], [], 0
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        games = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return games, statistics.median(cpu), statistics.median(wall)


def _line(label: str, games: int, cpu_s: float, wall_s: float) -> float:
    per_core = games / cpu_s
    print(
        f"{label:<44} {games:>7,} games  {per_core:>9,.0f} games/s per core (CPU)  "
        f"{games / wall_s:>9,.0f} games/s wall"
    )
    return per_core


def bench_chess(split: Path, repeats: int, baseline_games: int) -> dict[str, float]:
    files = expand_sources([split])
    pieces = [p for f in files for p in stream_chunks(f, games_per_chunk=20_000)]

    def hot_path() -> int:
        return sum(read_chunk(p.chunk, p.data).games.num_rows for p in pieces)

    def end_to_end() -> int:
        return sum(
            read_chunk(p.chunk, p.data, stream_error=p.stream_error).games.num_rows
            for f in files
            for p in stream_chunks(f, games_per_chunk=20_000)
        )

    hot_path()  # warm-up: imports, first-call allocations
    figures = {"hot_path": _line("kibitz read_chunk (bytes in memory)", *_timed(hot_path, repeats))}
    figures["single_process"] = _line(
        "kibitz stream + cut + read (one process)", *_timed(end_to_end, repeats)
    )

    texts = [b"".join(iter_blocks(f)).decode("utf-8") for f in files]

    def baseline() -> int:
        count = 0
        for text in texts:
            handle = io.StringIO(text)
            while count < baseline_games and (game := chess.pgn.read_game(handle)) is not None:
                # read_game already replayed every move on a board to parse its SAN; this
                # collects what Kibitz stores: UCI moves, clocks, evals.
                for node in game.mainline():
                    node.move.uci()
                    node.clock()
                    node.eval()
                count += 1
            if count >= baseline_games:
                break
        return count

    figures["baseline"] = _line(
        f"python-chess read_game (first {baseline_games:,} games)",
        *_timed(baseline, max(1, repeats // 2)),
    )
    print(
        f"ratio kibitz hot path / python-chess:          {figures['hot_path'] / figures['baseline']:6.1f}x"
    )
    print(
        f"ratio kibitz one process / python-chess:       {figures['single_process'] / figures['baseline']:6.1f}x"
    )
    return figures


def _run_cli(label: str, source: Path, num_cpus: int) -> None:
    with tempfile.TemporaryDirectory() as out:
        w0 = time.perf_counter()
        command = ["kibitz", "ingest", "chess", str(source), "--out", out]
        command += ["--num-cpus", str(num_cpus), "--no-progress", "--preset", "all"]
        done = subprocess.run(command, capture_output=True, text=True)
        total = time.perf_counter() - w0
        if done.returncode != 0:
            print(f"{label}: the command failed ({done.returncode}):\n{done.stderr[-3000:]}")
            return
        run = json.loads((Path(out) / "_summary.json").read_text())["this_run"]
    print(
        f"{label:<44} {run['games_read']:>7,} games  {run['games_per_task_cpu_s']:>9,.0f} "
        f"games/s per core (task CPU)  {run['games_per_s']:,.0f} games/s wall on "
        f"{num_cpus} CPUs (excl. Ray start); driver {run['driver_cpu_s']:.1f} CPU s; "
        f"whole command {total:.1f} s"
    )


def bench_cli(split: Path, num_cpus: int, copies: int) -> None:
    """The CLI on the split as shipped (8 small files: fixed costs dominate), then on one
    ``.pgn.zst`` stream holding ``copies`` copies of it (a monthly dump's shape: one stream cut
    into 20,000-game chunks)."""
    _run_cli(f"kibitz ingest chess CLI, split, {num_cpus} CPUs", split, num_cpus)
    with tempfile.TemporaryDirectory() as folder:
        stream = Path(folder) / "copies.pgn.zst"
        texts = [b"".join(iter_blocks(f)) for f in expand_sources([split])]
        with open(stream, "wb") as handle, zstandard.ZstdCompressor().stream_writer(handle) as out:
            for _ in range(copies):
                for text in texts:
                    out.write(text.rstrip(b"\n") + b"\n\n")
        _run_cli(f"kibitz ingest chess CLI, {copies}x split stream", stream, num_cpus)


def bench_go(repeats: int) -> None:
    from pipeline import ingest_sgf  # the Go reader (INGEST-GO)

    data = settings.data_dir() / "go"
    inputs = {
        "fox-selected/testing": [data / "fox-selected/testing"],
        "fox-raw/9d2.7z.001": [data / "fox-raw/9d2.7z.001"],
        "fox-raw/Pro.7z": [data / "fox-raw/Pro.7z"],
    }
    for label, paths in inputs.items():
        if not all(p.exists() for p in paths):
            print(f"go {label}: missing, skipped")
            continue

        def read(paths: list[Path] = paths) -> int:
            chunks = ingest_sgf.plan_chunks(paths, games_per_chunk=20_000)
            return sum(ingest_sgf.read_chunk(c).games_read for c in chunks)

        _line(f"kibitz go reader {label}", *_timed(read, max(1, repeats // 2)))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--split", type=Path, default=settings.data_dir() / "chess/lichess-2024-02-blitz/testing"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-games", type=int, default=1200)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs for the CLI run")
    parser.add_argument("--copies", type=int, default=10, help="split copies in the stream run")
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--no-go", action="store_true")
    args = parser.parse_args()
    bench_chess(args.split, args.repeats, args.baseline_games)
    if not args.no_cli:
        bench_cli(args.split, args.num_cpus, args.copies)
    if not args.no_go:
        bench_go(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
