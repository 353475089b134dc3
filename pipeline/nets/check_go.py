"""``kibitz models check NAME --sgf FILE`` for Go: move-matching accuracy and mean
log-likelihood of a KataGo net or a rank-conditioned policy on real games, per rank group.

Games are read with the ingestion reader (``pipeline.ingest.sgf``: SGF files, one-game-per-line
collections, folders, 7z archives), encoded with ``pipeline.go_game.encode`` (KataGo's v7 inputs and
legal moves) a few thousand positions at a time, evaluated through ``pipeline.nets.evaluator`` and
scored on KataGo's policy over legal moves (``pipeline.nets.katago_outputs``): top-1 = the played move,
log-likelihood = log of the played move's probability. A position's band is the game's common
rank group (``3-5k``, ``1d``, … or ``mixed``). HumanSL nets (with a metadata input) need
``profile``, the rank profile whose 192-wide row KataGo feeds them (``pipeline.go_game.metadata``).

A rank-conditioned policy (``kibitz-go-policy`` format: all 19 ranks' logits in one pass) is
scored at each position's own rank, the rank of the player to move, which the games table holds
(``black_rank`` / ``white_rank``; for the 1d … 9d files the game's rank); positions of movers
outside 10k … 9d are left out and counted. Each row also names the conditioning rank with the
highest mean log-likelihood of the band's moves, and ``profile`` (a rank, ``3d``) adds the
figures at that one rank.

Run::

    python -m pipeline.nets.check_go katago-g170-b6c96 ../shared/data/go/fox-selected/candidating/1d.sgf --max-games 20
    python -m pipeline.nets.check_go kibitz-go-policy ../shared/data/go/fox-selected/candidating --profile 3d
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

from pipeline.core.errors import KibitzError
from pipeline.go_game.encode import GoPositions, encode_games
from pipeline.go_game.rules import games_from_table
from pipeline.nets.go_rank_policy import GO_POLICY_RANKS, GoRankPolicyNet, rank_index, rank_indices
from pipeline.nets.katago_outputs import policy_log_probabilities
from pipeline.nets.move_matching import MoveMatchResult, MoveMatchTally

logger = logging.getLogger(__name__)

BATCH_POSITIONS = 2048  # positions encoded and evaluated per step (~65 MB of spatial inputs)
GAMES_PER_CHUNK = 2000  # games the reader parses at a time
MIXED_BAND = "mixed"  # players in different rank groups, or unranked


class GamesNotFoundError(FileNotFoundError):
    """No SGF games where the user pointed."""


class ProfileError(KibitzError, ValueError):
    """A rank profile missing for a net that needs one, or given to a net without a rank input."""


def read_games(path: Path, *, max_games: int | None) -> Iterator[pa.Table]:
    """Games-table batches of the first ``max_games`` games of each source file under ``path``."""
    from pipeline.ingest.sgf import plan_chunks, read_chunk

    chunks = plan_chunks([Path(path)], games_per_chunk=GAMES_PER_CHUNK)
    if not chunks:
        raise GamesNotFoundError(f"no SGF games at {str(path)!r}")
    taken: dict[str, int] = {}
    for chunk in chunks:
        left = None if max_games is None else max_games - taken.get(chunk.source_file, 0)
        if left is not None and left <= 0:
            continue
        result = read_chunk(chunk)
        for row in result.quarantine.to_pylist():
            logger.warning("%s: %s", row["source_file"], row["reason"])
        games = result.games if left is None else result.games.slice(0, left)
        taken[chunk.source_file] = taken.get(chunk.source_file, 0) + games.num_rows
        if games.num_rows:
            yield games


def _batches(tables: Iterator[pa.Table], batch_positions: int) -> Iterator[pa.Table]:
    """Re-slice game tables so that each batch holds about ``batch_positions`` positions."""
    for table in tables:
        plies = np.cumsum(table.column("num_plies").to_numpy(zero_copy_only=False))
        start = 0
        while start < table.num_rows:
            base = plies[start - 1] if start else 0
            stop = int(np.searchsorted(plies, base + batch_positions, side="left")) + 1
            stop = min(max(stop, start + 1), table.num_rows)
            yield table.slice(start, stop - start)
            start = stop


def mover_ranks(table: pa.Table, positions: GoPositions) -> np.ndarray:
    """(N,) rank-axis index (``GO_POLICY_RANKS``) of each position's player to move; -1 where
    that rank is none of them."""
    black = rank_indices(np.asarray(table.column("black_rank").to_pylist(), dtype=object))
    white = rank_indices(np.asarray(table.column("white_rank").to_pylist(), dtype=object))
    game = positions.game_index
    return np.where(positions.black_to_move, black[game], white[game])


def rank_conditioned_scores(
    logits: np.ndarray, legal: np.ndarray, played: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(N, R) log-likelihood of the played move and (N, R) top-1 = played, under each of a
    rank-conditioned policy's (N, R, 362) logits, softmax over the legal moves.

    float32 with the maximum subtracted (the sums in float64): a log-probability is exact to
    ~1e-6 nats even where the probability itself would underflow, at half float64's memory.
    """
    masked = np.where(legal[:, None, :], logits, -np.inf).astype(np.float32)  # (N, R, 362)
    masked -= masked.max(axis=2, keepdims=True)
    log_total = np.log(np.exp(masked).sum(axis=2, dtype=np.float64))  # (N, R)
    rows = np.arange(len(played))
    played_lp = masked[rows, :, played] - log_total  # (N, R)
    return played_lp, masked.argmax(axis=2) == played[:, None]


def check_net(
    name: str,
    path: str | Path,
    *,
    max_games: int | None = 200,
    backend: str = "torch",
    device: str = "cpu",
    batch_positions: int = BATCH_POSITIONS,
    komi: float | None = None,
    profile: str | None = None,
) -> MoveMatchResult:
    """Move matching of net ``name`` (registry name or net file) on the games under ``path``
    (at most ``max_games`` per source file). ``komi`` overrides the games' komi (Fox records
    ``KM[0]`` for most even games); ``profile`` is the HumanSL rank profile (``rank_1d``) or, for
    a rank-conditioned policy, a rank (``1d``) whose figures each row adds."""
    from pipeline.nets.evaluator import make_evaluator
    from pipeline.nets.loading import load_net

    net = load_net(name)
    evaluate = make_evaluator(net, backend=backend, device=device)
    needs_meta = "meta" in net.input_names
    if needs_meta and profile is None:
        raise ProfileError(f"net {name!r} is a HumanSL net: pass a rank profile (rank_1d, …)")
    conditioned = isinstance(net, GoRankPolicyNet)
    if profile is not None and not (needs_meta or conditioned):
        raise ProfileError(f"net {name!r} has no rank input: a profile would change nothing")
    if conditioned and profile is not None:
        rank_index(profile)  # an UnknownRankError naming the ranks, before any game is read
    tally = MoveMatchTally(conditionings=GO_POLICY_RANKS if conditioned else ())
    started = time.perf_counter()
    for table in _batches(read_games(Path(path), max_games=max_games), batch_positions):
        positions = encode_games(games_from_table(table), komi=komi)
        sources = table.column("source_file").to_pylist()
        indices = table.column("source_index").to_pylist()
        for game, ply, reason in positions.illegal_moves:
            logger.warning(
                "%s game %d: move %d illegal: %s", sources[game], indices[game], ply, reason
            )
        tally.skipped_games += len(positions.illegal_moves)
        n = len(positions.played_index)
        if n == 0:
            continue
        inputs = {"spatial": positions.spatial, "global": positions.global_}
        if needs_meta:
            from pipeline.go_game.metadata import metadata_rows

            # (N, 192): the row differs by side to move (whose rank is "own")
            inputs["meta"] = metadata_rows(profile, positions.black_to_move)
        logits = evaluate(inputs)["policy"]  # (N, P, 362); rank-conditioned (N, R, 362)
        played = positions.played_index.astype(np.int64)
        band_of_game = np.asarray(
            [group or MIXED_BAND for group in table.column("rank_group").to_pylist()], dtype=object
        )
        labels, counts = np.unique(band_of_game, return_counts=True)
        games_per_band = dict(zip(labels.tolist(), counts.tolist(), strict=True))
        bands = band_of_game[positions.game_index]
        if conditioned:
            own = mover_ranks(table, positions)  # (N,)
            ranked = np.flatnonzero(own >= 0)
            tally.unranked_positions += n - len(ranked)
            played_lp, top1 = rank_conditioned_scores(logits, positions.legal, played)
            tally.add(
                bands[ranked], top1[ranked, own[ranked]], played_lp[ranked, own[ranked]],
                games_per_band, conditioned_top1=top1[ranked],
                conditioned_logprob=played_lp[ranked],
            )  # fmt: skip
        else:
            log_probs = policy_log_probabilities(logits, positions.legal)  # (N, 362)
            tally.add(bands, log_probs.argmax(axis=1) == played,
                      log_probs[np.arange(n), played], games_per_band)  # fmt: skip
    return tally.result(
        net=str(name), source=str(path), backend=backend, seconds=time.perf_counter() - started,
        profile=profile if conditioned else None,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("net", help="registered net name (katago-g170-b6c96) or a .bin.gz file")
    parser.add_argument("sgf", type=Path, help="an SGF file or collection, a folder, or a 7z")
    parser.add_argument("--max-games", type=int, default=200, help="games per source file")
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx", "tensorrt"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--komi", type=float, help="override the games' komi")
    parser.add_argument(
        "--profile",
        help="HumanSL rank profile (rank_1d, preaz_5k); a rank-conditioned policy's rank (3d)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    result = check_net(
        args.net,
        args.sgf,
        max_games=args.max_games,
        backend=args.backend,
        device=args.device,
        komi=args.komi,
        profile=args.profile,
    )
    print(result.to_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
