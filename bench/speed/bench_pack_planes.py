"""Packing encoded planes for transport (``pipeline.core.packed_planes.pack_planes``): µs of CPU a
position on real games, against a baseline measured in the same run, numpy's select of the
binary channels, cast to bytes and ``np.packbits`` (the packer until November 2026).

Run::

    python bench/speed/bench_pack_planes.py [--games 60] [--repeats 5]

Go: the first ``--games`` Fox testing games encoded whole (KataGo v7 inputs, 22 × 19 × 19);
chess: the first ``--games`` Lichess testing games of one band (lc0's 112 × 8 × 8, whose
rule-50 plane stays float). Prints medians of ``time.process_time`` per position, the ratio,
and whether the bytes are numpy's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pipeline.chess_game.encode import encode_games as encode_chess
from pipeline.core import settings
from pipeline.core.packed_planes import pack_planes
from pipeline.go_game.encode import encode_games as encode_go
from pipeline.go_game.rules import games_from_table
from pipeline.ingest.sgf import read_paths
from pipeline.nets.check_chess import read_games

CHESS = ("chess", "lichess-2024-02-blitz", "testing", "1400-1600.pgn.zst")
GO = ("go", "fox-selected", "testing", "5d.sgf")


def numpy_pack(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The baseline: (bits, binary channels) as the numpy packer computed them."""
    n, c, h, w = planes.shape
    flat = planes.reshape(n, c, h * w)
    binary = np.flatnonzero(((flat == 0) | (flat == 1)).all(axis=(0, 2)))
    return np.packbits(flat[:, binary].reshape(n, -1).astype(np.uint8), axis=1), binary


def timed(pack, planes: np.ndarray, repeats: int) -> float:
    """Median µs of CPU a position of ``pack(planes)``."""
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        pack(planes)
        seconds.append(time.process_time() - start)
    return statistics.median(seconds) / len(planes) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    data = settings.data_dir()
    go_games = games_from_table(read_paths([data.joinpath(*GO)]).games.slice(0, args.games))
    chess_games = read_games(data.joinpath(*CHESS), max_games=args.games)
    planes = {
        "go": encode_go(go_games).spatial,
        "chess": encode_chess(chess_games.column("moves").to_pylist()).planes,
    }
    print(
        f"{'planes':>6} | {'positions':>9} | {'numpy µs':>8} | {'compiled µs':>11} | ratio | same bytes"
    )
    for kind, x in planes.items():
        pack_planes(x[:2])  # compiles (or loads) the kernels before timing
        base = timed(numpy_pack, x, args.repeats)
        new = timed(pack_planes, x, args.repeats)
        ours, (bits, binary) = pack_planes(x), numpy_pack(x)
        same = np.array_equal(ours.bits, bits) and np.array_equal(ours.binary_channels, binary)
        print(
            f"{kind:>6} | {len(x):>9,} | {base:>8.1f} | {new:>11.1f} | {base / new:5.2f} | {same}"
        )


if __name__ == "__main__":
    main()
