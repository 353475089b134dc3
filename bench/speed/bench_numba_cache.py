"""A fresh node's numba kernels: compiled in every worker, or once in the driver.

    python bench/speed/bench_numba_cache.py                  # both stages, chess and Go, a worker per core
    python bench/speed/bench_numba_cache.py --stage encode --game chess --workers 16 --repeats 1
    python bench/speed/bench_numba_cache.py --stage ingest --workers 8 --repeats 1

Ingestion's readers (``pipeline/ingest/pgn_reader.py``, ``pipeline/ingest/sgf_parse.py``) and
extraction's encoders (``pipeline/chess_game/encode.py``, ``pipeline/go_game/encode.py``) are
numba kernels whose machine code numba keeps in an on-disk cache. On a node whose cache is empty
(a fresh machine) every new Ray worker compiled the kernels itself: a fresh H100 node's first
chess extraction spent 121 CPU-s encoding against 4.5 on a warm one (docs/guide/gpu.md). The drivers
now compile them once before any worker starts (``kibitz ingest``: ``ChunkReader.compile_kernels``;
``kibitz extract``: ``Extraction.compile_encoders``), so the workers load the cache.

For each stage and game this takes the first chunk of real testing games (ingest: 1,000 games, a
task's share of a chunk; encode: the preset's chunk) and starts ``--workers`` fresh Python
processes at once (as Ray starts its workers), each doing that chunk's work: ``ingest`` plans
and reads it as the driver and a task do; ``encode`` encodes it as the encode task does (chess:
the games and each game's final position, the value net preset's children kernel; Go: the
preset's games). Two cases, each on an empty cache (a new ``NUMBA_CACHE_DIR``):

- ``each worker``: no warm-up, every worker compiles;
- ``driver first``: one process compiles (the driver), then the workers start.

Printed per case: CPU-seconds summed over every process (``RUSAGE_CHILDREN``), the wall time
until the last worker is done, and their ratios; median of ``--repeats``. The
processes' Python start-up and imports are in every figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from pipeline.core import settings
from pipeline.extract.config import preset
from pipeline.kinds import CHESS, GO, game_kind

CHESS_TESTING = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "testing"
SPLIT_FILES = {
    "chess": CHESS_TESTING / "1600-1800.pgn.zst",
    "go": settings.data_dir() / "go" / "fox-selected" / "testing" / "1-2k.sgf",
}

INGEST_GAMES = 1_000
# Each stage's (worker, driver) programs; argv: the game, the input (a split file or a games table).
PROGRAMS = {
    "ingest": (
        f"""
import sys
from pipeline.kinds import game_kind
reader = game_kind(sys.argv[1]).reader
item = next(iter(reader.work_items([sys.argv[2]], games_per_chunk={INGEST_GAMES})))
reader.read_chunk(item)
""",
        """
import sys
from pipeline.kinds import game_kind
game_kind(sys.argv[1]).reader.compile_kernels()
""",
    ),
    "encode": (
        """
import sys
from types import SimpleNamespace
import pyarrow.parquet as pq
from pipeline.extract.config import preset
from pipeline.kinds import game_kind
kind = game_kind(sys.argv[1])
work = kind.extraction.encode(preset(kind.name), pq.read_table(sys.argv[2]))
if kind.name == "chess":  # each game's final position: the value net preset's children kernel
    kind.extraction.encode_children(work, SimpleNamespace(likely=None), None)
""",
        """
import sys
from pipeline.kinds import game_kind
game_kind(sys.argv[1]).extraction.compile_encoders()
""",
    ),
}


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_case(
    stage: str, game: str, data: Path, workers: int, *, driver_first: bool
) -> tuple[float, float]:
    """(CPU-seconds of every process, wall seconds) of one case on an empty numba cache."""
    worker, driver = PROGRAMS[stage]
    with tempfile.TemporaryDirectory(prefix="kibitz-numba-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        cpu0, t0 = _cpu_children(), time.perf_counter()
        if driver_first:
            subprocess.run([sys.executable, "-c", driver, game], env=env, check=True)
        procs = [
            subprocess.Popen([sys.executable, "-c", worker, game, str(data)], env=env)
            for _ in range(workers)
        ]
        if any(p.wait() for p in procs):
            raise SystemExit(f"a {game} {stage} worker failed")
        return _cpu_children() - cpu0, time.perf_counter() - t0


def first_chunk(game: str, out: Path) -> tuple[Path, int]:
    """The first chunk of ``game``'s testing file as a games table; (its path, its positions)."""
    kind = game_kind(game)
    per_chunk = preset(game).games_per_chunk
    item = next(iter(kind.reader.work_items([str(SPLIT_FILES[game])], games_per_chunk=per_chunk)))
    games = kind.reader.read_chunk(item).games
    path = out / f"{game}.parquet"
    pq.write_table(games, path)
    return path, int(sum(games["num_plies"].to_pylist()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=list(PROGRAMS), action="append")
    parser.add_argument("--game", choices=[CHESS.name, GO.name], action="append")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for stage in args.stage or list(PROGRAMS):
            for game in args.game or [CHESS.name, GO.name]:
                if stage == "ingest":
                    data, what = SPLIT_FILES[game], f"reading {INGEST_GAMES:,} games"
                else:
                    data, positions = first_chunk(game, Path(tmp))
                    what = f"encoding {positions:,} positions"
                print(f"{stage} {game}: {args.workers} workers, each {what}")
                print(f"  {'case':<14} {'CPU-s':>8} {'wall s':>8}")
                rows = {}
                for case, driver_first in (("each worker", False), ("driver first", True)):
                    runs = [
                        run_case(stage, game, data, args.workers, driver_first=driver_first)
                        for _ in range(args.repeats)
                    ]
                    cpu, wall = (statistics.median(r[i] for r in runs) for i in (0, 1))
                    rows[case] = cpu, wall
                    print(f"  {case:<14} {cpu:8.1f} {wall:8.1f}")
                (cpu_a, wall_a), (cpu_b, wall_b) = rows.values()
                print(f"  each worker / driver first: CPU {cpu_a / cpu_b:.2f}x, "
                      f"wall {wall_a / wall_b:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
