"""End-to-end benchmark of ``kibitz extract`` on the candidating splits, with a baseline.

    python bench/speed/bench_extract.py                         # chess (960 games) and Go (1,100 games)
    python bench/speed/bench_extract.py --max-games 16 --nodes 500 --game chess     # a short run
    python bench/speed/bench_extract.py --game go --config bench/configs/extract-go-gpu.yaml  # one GPU

Prints, per game kind: positions/s end to end, seconds per stage, the nets' share of the net
stage's wall time, and the ratio of the net stage to a baseline measured in the same run on a
subset the way existing research tooling works (one game at a time, python-chess / a replay per
position, one position per net call). Chess with Stockfish values also prints Stockfish
throughput with 1, 2, 4, … engines up to the machine's cores (``bench_stockfish.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import chess
import torch
from bench_stockfish import stockfish_scaling

from actors.extract_runner import plan_actors
from pipeline.chess_game.encode import encode_games as encode_chess_games
from pipeline.cli.ingest import DEFAULT_GAMES_PER_CHUNK, DEFAULT_PRESETS
from pipeline.core import settings
from pipeline.extract.config import load_config, preset
from pipeline.extract.steps import read_games_rows
from pipeline.go_game.encode import encode_games as encode_go_games
from pipeline.go_game.rules import GoGameSpec
from pipeline.ingest.selection import load_preset
from pipeline.ingest.work import IngestConfig, format_summary, resolve_sources
from pipeline.jobs.extract import plan_chunks, run_extract
from pipeline.jobs.ingest import run_ingest
from pipeline.nets.evaluator import make_evaluator
from pipeline.nets.loading import load_net

SPLITS = {
    "chess": settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "candidating",
    "go": settings.data_dir() / "go" / "fox-selected" / "candidating",
}


def baseline_device(config, cpus: int) -> dict:
    """Where the baseline runs its nets: where extraction's net actor runs them, on the GPU
    (FP32) or on the CPU with the actor's threads (``plan_actors``: a node's CPUs for Go)."""
    if torch.cuda.is_available():
        return {"device": "cuda"}
    return {
        "device": "cpu",
        "num_threads": plan_actors(config, cpus=cpus, gpus=0).evaluator_threads,
    }


def ingest(game: str, out: Path, split: Path | None = None) -> Path:
    """``kibitz ingest GAME SPLIT --out OUT`` with the default selection rules, in-process
    (``split``: default the candidating split of :data:`SPLITS`)."""
    split = split or SPLITS[game]
    config = IngestConfig(
        game=game,
        sources=resolve_sources([str(split)]),
        out_dir=out,
        rules=load_preset(DEFAULT_PRESETS[game]),
        games_per_chunk=DEFAULT_GAMES_PER_CHUNK[game],
        show_progress=False,
    )
    summary = run_ingest(config)
    if summary["chunks"]["failed"]:
        raise RuntimeError(f"ingesting {split} failed: {format_summary(summary)}")
    return out


def first_games(games_root: Path, config, n: int):
    chunk = plan_chunks(games_root, config, max_games=n)[0]
    return read_games_rows(games_root, chunk.part).to_pylist()


def baseline_chess(games_root: Path, config, positions: int, device: dict) -> float:
    """Positions/s of 'one position per net call': board per position, 9 nets at batch 1."""
    nets = [make_evaluator(load_net(n.model), **device) for n in config.imitation_nets]
    done, t0 = 0, time.perf_counter()
    for game in first_games(games_root, config, 4):
        moves = game["moves"]
        for ply in range(len(moves)):
            planes = encode_chess_games([moves[: ply + 1]]).planes[ply : ply + 1]  # (1,112,8,8)
            board = chess.Board()  # what the research scripts keep per position
            for m in moves[:ply]:
                board.push_uci(m)
            for net in nets:
                net({"planes": planes})
            done += 1
            if done >= positions:
                return done / (time.perf_counter() - t0)
    return done / (time.perf_counter() - t0)


def baseline_go(games_root: Path, config, positions: int, device: dict) -> float:
    """Positions/s of one position per KataGo call, replaying the game for each position."""
    net = make_evaluator(load_net(config.value.model), **device)
    done, t0 = 0, time.perf_counter()
    for game in first_games(games_root, config, 2):
        moves = game["moves"]
        for ply in range(len(moves)):
            spec = GoGameSpec(moves=moves[: ply + 1], komi=game["komi"] or 6.5)
            pos = encode_go_games([spec])
            net({"spatial": pos.spatial[ply : ply + 1], "global": pos.global_[ply : ply + 1]})
            done += 1
            if done >= positions:
                return done / (time.perf_counter() - t0)
    return done / (time.perf_counter() - t0)


def bench(game: str, args: argparse.Namespace, work: Path) -> dict:
    config = load_config(args.config) if args.config else preset(game)
    if args.nodes:
        config.value.nodes = args.nodes
    games_root = args.games or ingest(game, work / f"games-{game}")
    summary = run_extract(
        config, games_root, work / f"features-{game}", max_games=args.max_games,
        num_cpus=args.num_cpus, show_progress=True,
    )  # fmt: skip
    run = summary["this_run"]
    nets_stage_rate = run["positions"] / run["stage_s"]["nets"]
    base = (baseline_chess if game == "chess" else baseline_go)(
        games_root, config, args.baseline_positions,
        baseline_device(config, args.num_cpus or os.cpu_count() or 1),
    )  # fmt: skip
    result = {
        "game": game,
        "games": run["games"],
        "positions": run["positions"],
        "wall_s": run["wall_s"],
        "positions_per_s": run["positions_per_s"],
        "stage_s": run["stage_s"],
        "steady_positions_per_s": run["steady_positions_per_s"],
        "first_result_s": run["first_result_s"],
        "net_share_of_net_stage": run["net_share_of_net_stage"],
        "net_stage_positions_per_s": round(nets_stage_rate, 1),
        "baseline_net_stage_positions_per_s": round(base, 1),
        "net_stage_ratio_vs_baseline": round(nets_stage_rate / base, 1),
        "nets": [n.name for n in config.imitation_nets],
    }
    if game == "chess" and config.value.evaluator == "stockfish":
        result["stockfish_nodes"] = config.value.nodes
        result["stockfish_searches"] = run["stockfish_searches"]
        result["stockfish_positions_per_s_by_engines"] = {
            k: round(v, 1) for k, v in stockfish_scaling(config.value.nodes).items()
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", choices=["chess", "go", "both"], default="both")
    parser.add_argument("--max-games", type=int, default=None)
    parser.add_argument("--nodes", type=int, default=None, help="Stockfish nodes (preset: 2000)")
    parser.add_argument("--num-cpus", type=int, default=None)
    parser.add_argument("--baseline-positions", type=int, default=60)
    parser.add_argument(
        "--config", type=Path, default=None, help="an extraction config (default: the preset)"
    )
    parser.add_argument(
        "--games", type=Path, default=None, help="the split already ingested (kibitz ingest --out)"
    )
    args = parser.parse_args()
    games = ["chess", "go"] if args.game == "both" else [args.game]
    if (args.config or args.games) and len(games) > 1:
        parser.error("--config / --games are one game's: pass --game chess or --game go")
    with tempfile.TemporaryDirectory() as tmp:
        for game in games:
            result = bench(game, args, Path(tmp))
            print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
