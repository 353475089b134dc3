"""``kibitz models check NAME --pgn FILE`` for chess: move-matching accuracy and mean
log-likelihood of an Lc0/Maia net on real games, per rating band.

Games are read with the chess ingestion reader (``pipeline.ingest.pgn``: plain, ``.pgn.zst`` or
``.pgn.bz2``, a file or a folder of them), encoded with ``pipeline.chess_game.encode`` a few thousand
positions at a time, evaluated through ``pipeline.nets.evaluator`` and decoded with
``pipeline.chess_game.policy``. A position's band is its game's ``rank_group`` (both players in the
same 200-point group, ``1000-1200`` … ``2400-2600``), else ``mixed``.

Run::

    python -m pipeline.nets.check_chess maia-1500 ../shared/data/chess/lichess-2024-02-blitz/testing/1400-1600.pgn.zst --max-games 50
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.chess_game.encode import encode_games
from pipeline.chess_game.policy import policy_over_legal
from pipeline.ingest.pgn import expand_sources, read_chunk, stream_chunks
from pipeline.nets.move_matching import MoveMatchResult, MoveMatchTally

logger = logging.getLogger(__name__)

BATCH_POSITIONS = 2048  # positions encoded and evaluated per step (~60 MB of planes)
GAMES_PER_READ = 2000  # games parsed per ingestion chunk
NO_BAND = "mixed"  # players in different groups (or outside 1000-2600), as check_go says


def iter_games(path: str | Path, *, max_games: int | None) -> Iterator[tuple[pa.Table, int]]:
    """(games with columns ``moves``, ``num_plies``, ``band``; games quarantined) for the first
    ``max_games`` games of each PGN file under ``path``, a chunk at a time."""
    for source in expand_sources([path]):
        left = max_games
        per_read = GAMES_PER_READ if left is None else max(1, min(left, GAMES_PER_READ))
        for piece in stream_chunks(source, games_per_chunk=per_read):
            result = read_chunk(piece.chunk, piece.data, stream_error=piece.stream_error)
            for reason in result.quarantine.column("reason").to_pylist():
                logger.warning("skipped: %s", reason)
            games = result.games
            if left is not None:
                games = games.slice(0, left)
                left -= games.num_rows + result.quarantine.num_rows
            band = pc.fill_null(games.column("rank_group"), NO_BAND)
            yield (
                pa.table(
                    {
                        "moves": games.column("moves"),
                        "num_plies": games.column("num_plies"),
                        "band": band,
                    }
                ),
                result.quarantine.num_rows,
            )
            if left is not None and left <= 0:
                break


def read_games(path: str | Path, *, max_games: int | None) -> pa.Table:
    """All of :func:`iter_games` as one table (small reads: tests, benchmarks)."""
    return pa.concat_tables(table for table, _ in iter_games(path, max_games=max_games))


def _batches(games: pa.Table, batch_positions: int) -> Iterator[pa.Table]:
    """Consecutive slices of ``games`` holding about ``batch_positions`` positions each."""
    plies = games.column("num_plies").to_numpy()
    group = np.cumsum(plies) // batch_positions  # (G,) batch number of each game, non-decreasing
    bounds = np.flatnonzero(np.diff(group)) + 1
    for start, stop in zip(np.r_[0, bounds], np.r_[bounds, len(plies)], strict=True):
        if stop > start:
            yield games.slice(start, stop - start)


def check_net(
    name: str,
    path: str | Path,
    *,
    max_games: int | None = 200,
    backend: str = "torch",
    device: str = "cpu",
    batch_positions: int = BATCH_POSITIONS,
) -> MoveMatchResult:
    """Move matching of net ``name`` (registry name or .pb.gz path) on the games under ``path``
    (at most ``max_games`` per PGN file)."""
    from pipeline.nets.evaluator import make_evaluator
    from pipeline.nets.loading import load_net

    evaluate = make_evaluator(load_net(name), backend=backend, device=device)
    tally = MoveMatchTally()
    started = time.perf_counter()
    for table, quarantined in iter_games(path, max_games=max_games):
        tally.skipped_games += quarantined
        for batch in _batches(table, batch_positions):
            pos = encode_games(batch.column("moves"))
            for error in pos.errors:
                logger.warning("%s: %s", path, error)
            tally.skipped_games += len(pos.errors)
            bands = batch.column("band").to_numpy(zero_copy_only=False)  # (G,) object
            labels, counts = np.unique(bands, return_counts=True)
            games_per_band = dict(zip(labels.tolist(), counts.tolist(), strict=True))
            if len(pos) == 0:
                tally.add(bands[:0], np.zeros(0, bool), np.zeros(0), games_per_band)
                continue
            policy = evaluate({"planes": pos.planes})["policy"]  # (N, 1858)
            decoded = policy_over_legal(policy, pos)
            tally.add(
                bands[pos.game_index],
                decoded.top1_is_played,
                decoded.played_logprob,
                games_per_band,
            )
    return tally.result(
        net=str(name), source=str(path), backend=backend, seconds=time.perf_counter() - started
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("net", help="registered net name (maia-1500) or an Lc0 .pb.gz file")
    parser.add_argument("pgn", type=Path, help="a PGN file (.pgn, .pgn.zst, .pgn.bz2) or a folder")
    parser.add_argument("--max-games", type=int, default=200, help="games per PGN file")
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx", "tensorrt"))
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    result = check_net(
        args.net, args.pgn, max_games=args.max_games, backend=args.backend, device=args.device
    )
    print(result.to_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
