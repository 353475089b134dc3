"""Go ingestion speed: games/s per core of Kibitz's SGF reader vs a pure-Python SGF parser.

Run ``python bench/speed/bench_ingest_go.py [--repeats 3]``. Inputs are the real Fox files in
``$KIBITZ_DATA_DIR/go``: the selected testing split (9,900 games, SGF collections) and the two
raw archives (27,750 members of solid 7z). For each input it times, in one process (one core):

- Kibitz: ``pipeline.ingest.sgf.read_paths`` (planning, 7z decompression, numba scan, headers,
  Arrow games table with normalised ranks);
- baseline: sgfmill (a widely used pure-Python SGF library) parsing each game and walking its
  main sequence into the same ``"B:pd"`` move strings, on bytes already in memory (archives are
  decompressed once up front and not counted, which favours the baseline).

CPU time (``time.process_time``) is used so that other load on the machine inflates the figures
less; medians over repeats. The ratio is Kibitz games/s divided by baseline games/s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from sgfmill import sgf as sgfmill_sgf

from pipeline.core import settings
from pipeline.ingest.archive_7z import iter_members
from pipeline.ingest.sgf import read_paths

GO = settings.data_dir() / "go"


def _median_cpu_s(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    """Median CPU seconds of ``fn`` over ``repeats`` runs, and the games it reported."""
    times = []
    games = 0
    for _ in range(repeats):
        start = time.process_time()
        games = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), games


def _baseline_games(blobs: list[bytes]) -> int:
    """Parse every game with sgfmill and build its main-line move strings."""
    games = 0
    for blob in blobs:
        for line in blob.splitlines() if blob.count(b"(;") > 1 else [blob]:
            if not line.strip() or line.count(0) == len(line):
                continue
            try:
                game = sgfmill_sgf.Sgf_game.from_bytes(line)
            except ValueError:
                continue
            size = game.get_size()
            moves = []
            for node in game.get_main_sequence():
                colour, point = node.get_move()
                if colour is not None:
                    where = (
                        "pass" if point is None else chr(97 + point[1]) + chr(96 + size - point[0])
                    )
                    moves.append(f"{colour.upper()}:{where}")
            games += 1
    return games


def _blobs(paths: list[Path]) -> list[bytes]:
    """Files' bytes, or archive members' bytes, in memory for the baseline."""
    blobs: list[bytes] = []
    for path in paths:
        if path.suffix == ".sgf" or path.is_dir():
            files = sorted(path.glob("*.sgf")) if path.is_dir() else [path]
            blobs += [f.read_bytes() for f in files]
        else:
            blobs += [c for _, c in iter_members(path) if isinstance(c, bytes)]
    return blobs


def bench_go(repeats: int = 3) -> list[dict[str, float | str | int]]:
    """Games/s per core of Kibitz and of the sgfmill baseline on each Fox input, with the ratio."""
    inputs = {
        "fox-selected/testing": [GO / "fox-selected" / "testing"],
        "fox-raw (9d2.7z.001 + Pro.7z)": [GO / "fox-raw" / "9d2.7z.001", GO / "fox-raw" / "Pro.7z"],
    }
    read_paths([GO / "fox-selected" / "candidating"])  # compile / load the numba kernel once
    rows = []
    for label, paths in inputs.items():
        kibitz_s, games = _median_cpu_s(lambda p=paths: read_paths(p).games_read, repeats)
        blobs = _blobs(paths)
        base_s, base_games = _median_cpu_s(lambda b=blobs: _baseline_games(b), repeats)
        kibitz_rate, base_rate = games / kibitz_s, base_games / base_s
        rows.append(
            {
                "input": label,
                "games": games,
                "kibitz_games_per_s": kibitz_rate,
                "baseline_games": base_games,
                "baseline_games_per_s": base_rate,
                "ratio": kibitz_rate / base_rate,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per input (median)")
    args = parser.parse_args()
    print(
        f"{'input':32} {'games':>7} {'kibitz g/s/core':>16} {'sgfmill g/s/core':>17} {'ratio':>6}"
    )
    for row in bench_go(args.repeats):
        print(
            f"{row['input']:32} {row['games']:>7} {row['kibitz_games_per_s']:>16,.0f} "
            f"{row['baseline_games_per_s']:>17,.0f} {row['ratio']:>6.1f}"
        )


if __name__ == "__main__":
    main()
