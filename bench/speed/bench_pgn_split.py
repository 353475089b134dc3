"""Speed of the PGN game splitter (``pipeline.ingest.pgn_reader.GameSplitter``), which the ingest
driver runs over every byte of a dump to cut it into chunks.

    python bench/speed/bench_pgn_split.py            # the Lichess testing split, best of 30

Prints the text size, GB/s of CPU time on one core and µs a game (best of ``--repeats``).
"""

from __future__ import annotations

import argparse
import time

import zstandard

from pipeline.core import settings
from pipeline.ingest.pgn_reader import GameSplitter

SPLIT = "chess/lichess-2024-02-blitz/testing"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    files = sorted((settings.data_dir() / SPLIT).glob("*.pgn.zst"))
    text = b"".join(zstandard.ZstdDecompressor().stream_reader(p.open("rb")).read() for p in files)
    games = len(GameSplitter().feed(text, final=True)[0]) + 1
    best = float("inf")
    for _ in range(args.repeats):
        started = time.process_time()
        GameSplitter().feed(text, final=True)
        best = min(best, time.process_time() - started)
    print(
        f"{len(text) / 1e6:.1f} MB, {games:,} games: {len(text) / best / 1e9:.2f} GB/s of CPU time,"
        f" {best / games * 1e6:.2f} µs a game (best of {args.repeats})"
    )


if __name__ == "__main__":
    main()
