"""CPU budget per position of ``kibitz extract``: every stage but the nets, on real games.

    python bench/speed/bench_cpu_budget.py                         # chess and Go, 300 testing games each
    python bench/speed/bench_cpu_budget.py --game chess --max-games 1000 --repeats 5
    python bench/speed/bench_cpu_budget.py --game chess --check    # + children planes == today's encoder

Prints CPU-seconds per position (``time.process_time``: this process, all its threads) of each
CPU stage of a chunk as the Ray runner chains them (``actors/extract_tasks.py``), summed over the
chunks, median of ``--repeats`` runs:

- read + encode: ``read_games_rows`` + ``Extraction.encode`` (encode task)
- children: ``Extraction.encode_children``, the positions after likely moves (children task)
- assembly: ``steps.assemble`` (features + quarantine rows; assemble task)
- Parquet write: ``ChunkStore.commit`` of the features and quarantine (driver), zstd as extraction
- Ray transport: every object that crosses between tasks and actors (work, net results,
  children, their values, the part's result) pickled with protocol 5 and out-of-band buffers (how
  Ray serialises numpy and Arrow), each out-of-band buffer copied once (the object store's put),
  then unpickled once per consumer (its gets); Ray's own scheduling and RPCs are not counted

and the total, against the budget of 100 µs a position (16 cores feeding 160,000 positions/s),
with the cores that 160,000 positions/s would take at the measured total.

The nets do not run in the timed loop. Their outputs stand in as follows (printed too):

- chess (the preset with ``value.evaluator: net``, Maia-1900's WDL head, as
  ``bench/configs/extract-chess-gpu-value-net.yaml``: with Stockfish the positions after likely moves are
  searched by the engines, not encoded): the real net step runs once, untimed, on the CPU with
  only the expected-loss net (Maia-1500) and the value net, so the children are the real likely
  moves; the other eight Maia nets' columns are copies of Maia-1500's, the s-scores zeros, and the
  children's values uniform random win rates (assembly does the same work whatever the values).
- Go (the preset, expected loss off, so no children): synthetic net outputs of the real shapes
  and dtypes (KataGo + eleven ranks on two CPU cores would take longer than the budget measured).
  ``go+el`` is the preset with expected loss on (``expected_loss.net: katago-g170``): its likely
  moves stand in as up to 5 random legal moves with Dirichlet(0.3) priors cut at the 0.9 share.

Games: the first ``--max-games`` of a testing split (ingested into a temporary folder), or
``--games`` already ingested. Chunks of the preset's ``games_per_chunk``.
"""

from __future__ import annotations

import argparse
import copy
import pickle
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_extract import ingest

from pipeline.core import settings
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.features_schema import PARTITION_COLUMNS
from pipeline.extract.child_positions import ChildValues
from pipeline.extract.config import preset
from pipeline.extract.expected_loss import select_likely
from pipeline.extract.steps import assemble, read_games_rows, split_states
from pipeline.jobs.extract import plan_chunks
from pipeline.kinds import game_kind

TESTING = {
    "chess": settings.data_dir()
    / "chess"
    / "lichess-2024-02-blitz"
    / "testing"
    / "1400-1600.pgn.zst",
    "go": settings.data_dir() / "go" / "fox-selected" / "testing" / "1d.sgf",
}
TARGET_US = 100.0
FEED_RATE = 160_000  # positions/s
STAGES = ("read_encode", "children", "assembly", "parquet_write", "ray_transport")


def bench_config(variant: str):
    if variant == "chess":
        config = preset("chess")
        config.value.evaluator = "net"
        config.value.model = "maia-1900"
    else:
        config = preset("go")
        if variant == "go+el":
            config.expected_loss.net = "katago-g170"
    return config


# -- what stands in for the nets -------------------------------------------------------------


def chess_nets(config, works: list) -> list:
    """The real net step, once, untimed: the expected-loss net and the value net only; the other
    imitation nets' columns copy the expected-loss net's, the s-scores are zeros."""
    from pipeline.extract.chess import ChessNetStep

    small = copy.deepcopy(config)
    small.imitation_nets = [n for n in config.imitation_nets if n.name == config.expected_loss.net]
    small.strength_nets = []
    step = ChessNetStep(small, device="cpu")
    out = []
    for work in works:
        nets = step(work)
        el = config.expected_loss.net
        for net in config.imitation_nets:
            nets.prior[net.name] = nets.prior[el]
            nets.logprior[net.name] = nets.logprior[el]
            nets.top1[net.name] = nets.top1[el]
        for net in config.strength_nets:
            nets.sscore[net.name] = np.zeros(len(work.positions), np.float32)
        out.append(nets)
    return out


def go_nets(config, works: list, rng: np.random.Generator) -> list:
    """Synthetic Go net outputs of the real shapes; random legal likely moves with expected loss."""
    from pipeline.extract.go import GoNetResult

    out = []
    for work in works:
        n = len(work.positions.game_index)
        moves = np.flatnonzero(work.is_move)
        m = len(moves)
        nets = GoNetResult({}, {}, {}, {}, rng.normal(0, 10, n))
        for net in config.imitation_nets:
            prior = rng.random(m).astype(np.float32)
            nets.prior[net.name] = prior
            nets.logprior[net.name] = np.log(np.maximum(prior, 1e-6)).astype(np.float32)
            nets.top1[net.name] = prior > 0.5
        for net in config.strength_nets:
            nets.sscore[net.name] = rng.normal(size=m).astype(np.float32)
        if config.expected_loss.net is not None:
            k = config.expected_loss.max_moves
            legal = work.positions.legal[moves]  # (M, 362)
            score = np.where(legal, rng.random(legal.shape), -1.0)
            order = np.argsort(-score, axis=1)[:, :k]  # k random legal moves
            prior = rng.dirichlet(np.full(k, 0.3), size=m)
            prior = -np.sort(-prior, axis=1) * (np.take_along_axis(score, order, 1) >= 0)
            nets.likely = select_likely(order, prior, prior_share=config.expected_loss.prior_share)
        out.append(nets)
    return out


def child_values(kids, rng: np.random.Generator) -> ChildValues:
    """Stand-in for the value net's second pass: random values laid out as the children."""
    return ChildValues(rng.random(len(kids)), kids.n_final, kids.rows, kids.cols)


# -- the timed stages ------------------------------------------------------------------------


def transport(obj, consumers: int) -> float:
    """CPU seconds to put ``obj`` (pickle 5, out-of-band buffers copied once) and get it
    ``consumers`` times."""
    t0 = time.process_time()
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    stored = [bytearray(b.raw()) for b in buffers]  # the object store's copy
    for _ in range(consumers):
        pickle.loads(data, buffers=stored)
    return time.process_time() - t0


def run_once(config, games_root, chunks, nets_list, out_root) -> tuple[dict, int, int]:
    extraction = game_kind(config.game).extraction
    rng = np.random.default_rng(0)
    seconds = dict.fromkeys(STAGES, 0.0)
    positions = n_children = 0
    store = ChunkStore(out_root, PARTITION_COLUMNS)
    children = extraction.needs_children(config)
    for chunk, nets in zip(chunks, nets_list, strict=True):
        t0 = time.process_time()
        work = extraction.encode(config, read_games_rows(games_root, chunk.part))
        seconds["read_encode"] += time.process_time() - t0
        work, states = split_states(work)
        # work: to the net actor, the children task, the assemble task; states: children task
        seconds["ray_transport"] += transport(work, 3 if children else 2)
        seconds["ray_transport"] += transport(states, 1) if states is not None else 0.0
        seconds["ray_transport"] += transport(nets, 2 if children else 1)  # actor → tasks
        values = None
        if children:
            t0 = time.process_time()
            kids = extraction.encode_children(work, nets, states)
            seconds["children"] += time.process_time() - t0
            n_children += len(kids)
            values = child_values(kids, rng)
            seconds["ray_transport"] += transport(kids, 1) + transport(values, 1)
        t0 = time.process_time()
        result = assemble(extraction, config, chunk.part, work, nets, [], values)
        seconds["assembly"] += time.process_time() - t0
        seconds["ray_transport"] += transport(result, 1)  # assemble task → driver
        t0 = time.process_time()
        store.commit(chunk.chunk_id, {"": result.features, "_quarantine": result.quarantine}, {})
        seconds["parquet_write"] += time.process_time() - t0
        positions += result.positions
    return seconds, positions, n_children


def bench(variant: str, games_root: Path, args, tmp: Path) -> dict:
    config = bench_config(variant)
    extraction = game_kind(config.game).extraction
    chunks = plan_chunks(games_root, config, max_games=args.max_games)
    works = [
        split_states(extraction.encode(config, read_games_rows(games_root, c.part)))[0]
        for c in chunks
    ]  # untimed: the nets' inputs
    t0 = time.perf_counter()
    cache = (args.nets_cache or Path()) / f"{variant}-{len(chunks)}-{chunks[-1].part.stop}.pkl"
    if args.nets_cache and cache.exists():
        nets_list = pickle.loads(cache.read_bytes())
    elif config.game == "chess":
        nets_list = chess_nets(config, works)
    else:
        nets_list = go_nets(config, works, np.random.default_rng(1))
    if args.nets_cache and not cache.exists():
        args.nets_cache.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps(nets_list, protocol=5))
    net_wall = time.perf_counter() - t0
    runs = []
    for r in range(args.repeats):
        out = tmp / f"features-{variant}-{r}"
        seconds, positions, n_children = run_once(config, games_root, chunks, nets_list, out)
        runs.append(seconds)
    us = {s: 1e6 * statistics.median(run[s] for run in runs) / positions for s in STAGES}
    us["total"] = sum(us[s] for s in STAGES)
    return {
        "variant": variant,
        "games": sum(c.part.stop - c.part.start for c in chunks),
        "chunks": len(chunks),
        "positions": positions,
        "children": n_children,
        "net_stand_in_wall_s": round(net_wall, 1),
        "us_per_position": {k: round(v, 1) for k, v in us.items()},
        "cores_for_160k_per_s": round(us["total"] * FEED_RATE / 1e6, 1),
    }


def check_children(games_root: Path, positions: int) -> str:
    """Every legal child of the first ``positions`` positions: the packed planes unpack to
    exactly today's float encoder's (``encode_after`` without ``packed``), and so do the parents."""
    import pyarrow as pa

    from pipeline.chess_game.encode import encode_after, encode_games

    config = bench_config("chess")
    chunk = plan_chunks(games_root, config)[0]
    moves = read_games_rows(games_root, chunk.part)["moves"].combine_chunks()
    pos = encode_games(moves)
    n = min(positions, len(pos))
    packed = encode_games(moves, packed=True).packed
    assert np.array_equal(packed.unpack(0, n), pos.planes[:n]), "parents differ"
    rows = np.repeat(np.arange(n), np.diff(pos.legal_offsets[: n + 1]))
    codes = pos.legal_move[: pos.legal_offsets[n]]
    args = (moves, pos.game_index[rows], pos.ply[rows], codes)
    want = encode_after(*args)
    got = encode_after(*args, packed=True)
    assert np.array_equal(got.outcome, want.outcome), "outcomes differ"
    assert np.array_equal(got.packed.unpack(), want.planes), "children differ"
    assert isinstance(moves, pa.Array)
    return f"{n} positions, {len(rows)} children (every legal move): planes and outcomes equal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", choices=["chess", "go", "go+el", "both", "all"], default="both")
    parser.add_argument("--max-games", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", type=Path, default=None, help="one game's ingested games")
    parser.add_argument("--check", action="store_true", help="chess: children == today's planes")
    parser.add_argument("--check-positions", type=int, default=300)
    parser.add_argument(
        "--nets-cache", type=Path, default=None,
        help="keep the nets' stand-in outputs here between runs (same games, same variant)",
    )  # fmt: skip
    args = parser.parse_args()
    variants = {"both": ["chess", "go"], "all": ["chess", "go", "go+el"]}.get(
        args.game, [args.game]
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        roots: dict[str, Path] = {}
        results = []
        for variant in variants:
            game = "chess" if variant == "chess" else "go"
            if game not in roots:
                roots[game] = args.games or ingest(game, tmp / f"games-{game}", TESTING[game])
            results.append(bench(variant, roots[game], args, tmp))
        if args.check:
            print("check:", check_children(roots.get("chess") or ingest("chess", tmp / "gc", TESTING["chess"]),
                                           args.check_positions))  # fmt: skip
    print(f"\nCPU µs per position (median of {args.repeats}; target {TARGET_US:.0f} µs in total)")
    header = ["stage", *[r["variant"] for r in results]]
    print(" | ".join(f"{h:>14}" for h in header))
    for stage in [*STAGES, "total"]:
        cells = [f"{r['us_per_position'][stage]:>14.1f}" for r in results]
        print(" | ".join([f"{stage:>14}", *cells]))
    print(
        " | ".join(
            [f"{'cores@160k/s':>14}", *[f"{r['cores_for_160k_per_s']:>14}" for r in results]]
        )
    )
    for r in results:
        print(
            f"{r['variant']}: {r['games']} games, {r['chunks']} chunks, {r['positions']} positions,"
            f" children {r['children']}, nets' stand-in computed in {r['net_stand_in_wall_s']} s"
        )


if __name__ == "__main__":
    main()
