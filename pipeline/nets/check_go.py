"""``kibitz models check NAME --sgf FILE`` for Go: move-matching accuracy and mean
log-likelihood of a KataGo net on real games, per rank group.

Games are read with the ingestion reader (``pipeline.ingest.sgf``: SGF files, one-game-per-line
collections, folders, 7z archives), encoded with ``pipeline.go_game.encode`` (KataGo's v7 inputs and
legal moves) a few thousand positions at a time, evaluated through ``pipeline.nets.evaluator`` and
scored on KataGo's policy over legal moves (``pipeline.nets.katago_outputs``): top-1 = the played move,
log-likelihood = log of the played move's probability. A position's band is the game's common
rank group (``3-5k``, ``1d``, … or ``mixed``). HumanSL nets (with a metadata input) need
``profile``, the rank profile whose 192-wide row KataGo feeds them (``pipeline.go_game.metadata``).

Run::

    python -m pipeline.nets.check_go katago-g170-b6c96 ../shared/data/go/fox-selected/candidating/1d.sgf --max-games 20
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

from pipeline.go_game.encode import encode_games
from pipeline.go_game.rules import GoGameSpec
from pipeline.nets.katago_outputs import policy_log_probabilities
from pipeline.nets.move_matching import MoveMatchResult, MoveMatchTally

logger = logging.getLogger(__name__)

BATCH_POSITIONS = 2048  # positions encoded and evaluated per step (~65 MB of spatial inputs)
GAMES_PER_CHUNK = 2000  # games the reader parses at a time
MIXED_BAND = "mixed"  # players in different rank groups, or unranked


class GamesNotFoundError(FileNotFoundError):
    """No SGF games where the user pointed."""


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


def _game_specs(table: pa.Table, komi: float | None) -> list[GoGameSpec]:
    columns = {
        name: table.column(name).to_pylist()
        for name in ("moves", "setup_black", "setup_white", "board_size", "komi", "rules")
    }
    return [
        GoGameSpec(
            moves=moves,
            setup_black=black or (),
            setup_white=white or (),
            board_size=size or 19,
            komi=komi if komi is not None else (game_komi if game_komi is not None else 6.5),
            rules=rules or "japanese",
        )
        for moves, black, white, size, game_komi, rules in zip(
            columns["moves"],
            columns["setup_black"],
            columns["setup_white"],
            columns["board_size"],
            columns["komi"],
            columns["rules"],
            strict=True,
        )
    ]


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
    """Move matching of net ``name`` (registry name or .bin.gz path) on the games under
    ``path`` (at most ``max_games`` per source file). ``komi`` overrides the games' komi (Fox
    records ``KM[0]`` for most even games); ``profile`` is the HumanSL rank profile."""
    from pipeline.nets.evaluator import make_evaluator
    from pipeline.nets.loading import load_net

    net = load_net(name)
    evaluate = make_evaluator(net, backend=backend, device=device)
    needs_meta = "meta" in net.input_names
    if needs_meta and profile is None:
        raise ValueError(f"net {name!r} is a HumanSL net: pass a rank profile (rank_1d, …)")
    tally = MoveMatchTally()
    started = time.perf_counter()
    for table in _batches(read_games(Path(path), max_games=max_games), batch_positions):
        positions = encode_games(_game_specs(table, komi))
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
        logits = evaluate(inputs)["policy"]  # (N, P, 362)
        log_probs = policy_log_probabilities(logits, positions.legal)  # (N, 362)
        played = positions.played_index.astype(np.int64)
        rows = np.arange(n)
        band_of_game = np.asarray(
            [group or MIXED_BAND for group in table.column("rank_group").to_pylist()], dtype=object
        )
        labels, counts = np.unique(band_of_game, return_counts=True)
        tally.add(
            band_of_game[positions.game_index],
            log_probs.argmax(axis=1) == played,
            log_probs[rows, played],
            dict(zip(labels.tolist(), counts.tolist(), strict=True)),
        )
    return tally.result(
        net=str(name), source=str(path), backend=backend, seconds=time.perf_counter() - started
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("net", help="registered net name (katago-g170-b6c96) or a .bin.gz file")
    parser.add_argument("sgf", type=Path, help="an SGF file or collection, a folder, or a 7z")
    parser.add_argument("--max-games", type=int, default=200, help="games per source file")
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx", "tensorrt"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--komi", type=float, help="override the games' komi")
    parser.add_argument("--profile", help="HumanSL rank profile, e.g. rank_1d or preaz_5k")
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
