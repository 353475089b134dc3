"""``kibitz serve`` under load: games/s and latency per game at 1, 4 and 16 concurrent clients.

Against localhost only, bounded in games and time. For each game kind (chess: the Lichess
testing split; Go: the Fox testing split, games no model was fitted on):

1. **Baseline, same run**: the service's own extraction and aggregation in this process
   (``pipeline.serve.instances.InstanceMaker``), one game at a time, no HTTP, no Ray: what a
   game costs at the least, by stage (encode, nets, engine, assemble, aggregate SQL).
2. **The service**: ``kibitz serve`` started as a user starts it (a fresh state file), then
   for c = 1, 4, 16 clients, each posting finished games one after another over HTTP: games/s
   sustained (games answered / wall time) and p50 / p99 latency per game. Every game is new to
   the service (no duplicate is posted), so every post is extracted.
3. **A GPU node's projection** from the measured stages: the nets' share at the GPU
   throughput docs/guide/gpu.md measured, the engine over the node's 16 cores.

    python bench/speed/bench_serve.py                       # both kinds, ~10 min on 2 cores
    python bench/speed/bench_serve.py --game chess --games 48 --out serve.json
    python bench/speed/bench_serve.py --game chess --chess-model M --games 16   # another model

``--chess-model`` serves (and times in process) a chess meta-model other than the shipped one:
one fitted on a cheaper evaluator's losses (``bench/accuracy/evaluator_table.py --write``).

Prints a table and writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import zstandard

from pipeline.core.settings import data_dir
from pipeline.meta.registered import resolve_meta_models
from pipeline.serve.instances import InstanceMaker
from pipeline.serve.records import read_posted

CLIENTS = (1, 4, 16)
# A GPU node (docs/guide/gpu.md, "steady positions/s"): one H100's net stage of the chess
# preset (Stockfish's run: 25,457) and the Go preset in BF16 (37,176); a node's 16 Stockfish
# engines run 9.82 times one (bench/speed/bench_stockfish.py).
GPU_NET_POSITIONS_S = {"chess": 25_457, "go": 37_176}
NODE_CORES = 16
ENGINE_SCALING = 9.82


def chess_games(limit: int) -> list[bytes]:
    """Games of every band of the Lichess testing split, in turn."""
    per_band = []
    for path in sorted((data_dir() / "chess/lichess-2024-02-blitz/testing").glob("*.pgn.zst")):
        with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z:
            text = io.TextIOWrapper(z, encoding="utf-8").read(4_000_000)
        games = ["[Event " + g.removeprefix("[Event ") for g in text.split("\n\n[Event ")][:-1]
        per_band.append(games)
    mixed = [g for row in zip(*per_band, strict=False) for g in row]
    return [g.encode() for g in mixed[:limit]]


def go_games(limit: int) -> list[bytes]:
    """Games of every rank file of the Fox testing split, in turn (one game a line)."""
    per_rank = [
        path.read_bytes().splitlines()[: limit // 2 + 1]
        for path in sorted((data_dir() / "go/fox-selected/testing").glob("*.sgf"))
    ]
    mixed = [g for row in zip(*per_rank, strict=False) for g in row if g.strip()]
    return mixed[:limit]


GAMES = {"chess": chess_games, "go": go_games}

# The chess evaluators of the evaluator table (#65): the model's (Stockfish at 500 nodes), the
# deeper one it replaced and the cheaper ones, timed on the same games with the model's nets
# (speed only: a model must be fitted on an evaluator's losses before the service applies it).
EVALUATORS = {
    "Stockfish 500 nodes (the model's)": {"evaluator": "stockfish", "nodes": 500},
    "Stockfish 2,000 nodes": {"evaluator": "stockfish", "nodes": 2000},
    "Stockfish 100 nodes": {"evaluator": "stockfish", "nodes": 100},
    "Maia-1900's value head": {"evaluator": "net", "model": "maia-1900"},
}


def evaluator_costs(texts: list[bytes]) -> dict[str, float]:
    """Seconds a chess game takes to extract in this process (median), by evaluator."""
    from pipeline.estimate.in_process import InProcessExtractor, extraction_config
    from pipeline.extract.config import config_from_dict

    base = extraction_config(resolve_meta_models(None, "chess"), None, None).to_dict()
    games = [read_posted("chess", t, "", max_moves=10_000).games for t in texts]
    costs = {}
    for name, value in EVALUATORS.items():
        config = config_from_dict(base | {"value": base["value"] | value}).validate()
        with InProcessExtractor(config) as extract:
            extract(games[0])  # warm
            times = []
            for table in games:
                started = time.perf_counter()
                extract(table)
                times.append(time.perf_counter() - started)
        costs[name] = statistics.median(times)
    return costs


def baseline(game: str, texts: list[bytes], model: str | None) -> dict:
    """The extraction and aggregation of each game in this process: seconds a game, by stage."""
    maker = InstanceMaker(resolve_meta_models(model, game))
    try:
        maker([read_posted(game, texts[0], "", max_moves=10_000).games])  # warm
        stages, totals, positions = [], [], 0
        for text in texts:
            posted = read_posted(game, text, "", max_moves=10_000)
            started = time.perf_counter()
            maker([posted.games])
            totals.append(time.perf_counter() - started)
            stages.append(maker.seconds)
            positions += posted.plies
    finally:
        maker.close()
    by_stage = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
    return {
        "games": len(texts),
        "s_per_game_median": statistics.median(totals),
        "games_per_s": len(texts) / sum(totals),
        "stage_s_median": by_stage,
        "positions_per_game": positions / len(texts),
    }


class Service:
    def __init__(self, models: dict[str, str | None], state: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        kinds = [a for g in models for a in ("--game", g)]
        kinds += [a for g, m in models.items() if m for a in (f"--model-{g}", m)]
        self.process = subprocess.Popen(
            ["kibitz", "serve", *kinds, "--port", str(self.port), "--state", str(state)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        for line in self.process.stdout:
            if line.startswith("kibitz serve:"):
                threading.Thread(target=self.process.stdout.read, daemon=True).start()
                return
        raise SystemExit("kibitz serve did not start")

    def post(self, game: str, text: bytes) -> tuple[float, dict[str, float]]:
        """(latency, the answer's seconds by stage in the service)."""
        started = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        connection.request("POST", f"/v1/{game}/games", body=text)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {body[:200]!r}")
        return time.perf_counter() - started, json.loads(body)["seconds"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


def load(service: Service, game: str, texts: list[bytes], clients: int) -> dict:
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(lambda t: service.post(game, t), texts))
    wall = time.perf_counter() - started
    latencies = sorted(latency for latency, _ in answers)
    stages = {k: statistics.median(s[k] for _, s in answers) for k in answers[0][1]}
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    return {
        "clients": clients,
        "games": len(texts),
        "games_per_s": len(texts) / wall,
        "p50_s": statistics.median(latencies),
        "p99_s": p99,
        "service_stage_s_median": stages,
    }


def projection(game: str, base: dict) -> dict:
    """Games/s of one GPU node with an Extractor a core: the nets at the GPU's positions/s,
    the CPU stages as measured here (encode, assemble, SQL on every core, the engine at its
    measured scaling), whichever bounds it."""
    stages = base["stage_s_median"]
    nets_s = base["positions_per_game"] / GPU_NET_POSITIONS_S[game]
    rest_s = stages["encode"] + stages["assemble"] + stages["aggregate"]
    cpu_s = rest_s + stages["engine"] * NODE_CORES / ENGINE_SCALING  # core-seconds a game
    return {
        "nets_s_per_game_gpu": nets_s,
        "cpu_core_s_per_game": cpu_s,
        "games_per_s": min(1 / nets_s, NODE_CORES / cpu_s),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", action="append", choices=sorted(GAMES))
    parser.add_argument("--games", type=int, default=32, help="games per client level (default 32)")
    parser.add_argument("--baseline-games", type=int, default=6)
    parser.add_argument("--chess-model", help="a chess meta-model folder (default: the shipped)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    kinds = args.game or sorted(GAMES)
    models = {g: args.chess_model if g == "chess" else None for g in kinds}
    need = args.baseline_games + 2 + args.games * len(CLIENTS)
    texts = {g: GAMES[g](need) for g in kinds}
    report = {"machine": {"cpus": os.cpu_count()}, "kinds": {}}
    for game in kinds:
        report["kinds"][game] = {"baseline": baseline(game, texts[game][: args.baseline_games], models[game])}
        print(json.dumps({game: report["kinds"][game]["baseline"]}, indent=1), flush=True)
    if "chess" in kinds:
        report["chess_evaluators_s_per_game"] = evaluator_costs(
            texts["chess"][: args.baseline_games]
        )
        print(json.dumps(report["chess_evaluators_s_per_game"], indent=1), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(models, Path(tmp) / "state.duckdb")
        try:
            for game in kinds:
                pool = texts[game][args.baseline_games :]
                for text in pool[:2]:  # warm: first posts compile and load lazily
                    service.post(game, text)
                pool, rows = pool[2:], []
                for i, clients in enumerate(CLIENTS):
                    batch = pool[i * args.games : (i + 1) * args.games]
                    rows.append(load(service, game, batch, clients))
                    print(game, rows[-1], flush=True)
                report["kinds"][game]["service"] = rows
                report["kinds"][game]["gpu_node"] = projection(
                    game, report["kinds"][game]["baseline"]
                )
        finally:
            service.stop()
    print("\n| game | clients | games | games/s | p50 s | p99 s |\n|---|---|---|---|---|---|")
    for game, result in report["kinds"].items():
        for row in result["service"]:
            print(
                f"| {game} | {row['clients']} | {row['games']} | {row['games_per_s']:.2f} |"
                f" {row['p50_s']:.2f} | {row['p99_s']:.2f} |"
            )
        base = result["baseline"]
        print(
            f"| {game} | baseline, in process | {base['games']} | {base['games_per_s']:.2f} |"
            f" {base['s_per_game_median']:.2f} | – |"
        )
    for game, result in report["kinds"].items():
        stages = ", ".join(f"{k} {v:.3f}" for k, v in result["baseline"]["stage_s_median"].items())
        print(f"{game}: s a game by stage (median): {stages}; GPU node: {result['gpu_node']}")
    for name, cost in report.get("chess_evaluators_s_per_game", {}).items():
        print(f"chess, {name}: {cost:.2f} s a game in process ({1 / cost:.2f} games/s)")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
