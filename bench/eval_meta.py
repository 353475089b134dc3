"""Meta-model accuracy on real data: the whole path a user runs, on a balanced subset.

Kuboki et al. (2025) report rank-group sampling accuracy at n = 20 (chess 88.2 %, Go 91.7 %)
and player-specific accuracy at n = 15 (chess 58.6 %, Go 61.6 %) from features of thousands of
games per group. Extracting every position of the testing split through nine nets and
Stockfish takes hours on a small CPU, so this script takes, from an ingested games table, a
subset balanced per rank group and split (every group gets the same number of training,
validation and evaluation games under Kibitz's shared hash split), then runs the commands a
user would type::

    kibitz extract GAME --games SUBSET --out FEATURES --config CONFIG
    kibitz aggregate --features FEATURES --out AGGREGATES
    kibitz train meta GAME --aggregates AGGREGATES --out META

and prints Table 2 (rank-group) and Tables 6/7 (player-specific). Re-running resumes the
extraction. Run::

    kibitz ingest chess ../shared/data/chess/lichess-2024-02-blitz/testing --out kibitz-out/games-chess
    python bench/eval_meta.py chess --games kibitz-out/games-chess --work kibitz-out/eval-meta-chess \\
        --train 60 --validation 15 --evaluation 40 --config bench/eval-meta-chess.yaml
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.data_split import EVALUATION, TRAIN, VALIDATION, SplitConfig, assign_splits


def balanced_subset(games: Path, game: str, quotas: dict[int, int], out: Path) -> pa.Table:
    """The first ``quotas[split]`` games (by game id) of every rank group and split, written as a
    games table under ``out`` (one file, the layout ``kibitz ingest`` writes)."""
    table = ds.dataset(games / f"game={game}", format="parquet", partitioning="hive").to_table()
    table = table.filter(pc.is_valid(table["rank_group"])).sort_by("game_id")
    splits = assign_splits(table["game_id"].to_pylist(), SplitConfig())
    groups = pc.dictionary_encode(table["rank_group"]).combine_chunks().indices.to_numpy()
    key = groups.astype(np.int64) * 3 + splits  # (N,) one key per (group, split)
    order = np.argsort(key, kind="stable")  # by key, then by game id
    first = np.searchsorted(key[order], key[order])  # first row of each row's key
    rank = np.empty(len(key), dtype=np.int64)
    rank[order] = np.arange(len(key)) - first  # 0-based rank of the game in its key
    limit = np.array([quotas[TRAIN], quotas[VALIDATION], quotas[EVALUATION]])[splits]
    keep = np.flatnonzero(rank < limit)
    subset = table.take(pa.array(keep)).sort_by(
        [("rank_group", "ascending"), ("game_id", "ascending")]
    )
    source = subset["source"][0].as_py()
    month = subset["month"][0].as_py()
    folder = out / f"game={game}" / f"source={source}" / f"month={month}"
    folder.mkdir(parents=True, exist_ok=True)
    columns = [c for c in subset.column_names if c not in ("source", "month")]
    pq.write_table(subset.select(columns), folder / "part-0.parquet")
    return subset


def run(command: list[str]) -> None:
    """Run one kibitz command as a user would, echoing it; stop on failure."""
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True)
    print(f"  ({time.perf_counter() - started:.0f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--games", type=Path, required=True, help="ingested games table")
    parser.add_argument("--work", type=Path, required=True, help="output folder of the run")
    parser.add_argument("--config", help="extraction config (default: the preset)")
    parser.add_argument("--train", type=int, default=90, help="training games per group")
    parser.add_argument("--validation", type=int, default=20, help="validation games per group")
    parser.add_argument("--evaluation", type=int, default=60, help="evaluation games per group")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray")
    args = parser.parse_args()

    subset_dir = args.work / "games"
    if not subset_dir.exists():
        quotas = {TRAIN: args.train, VALIDATION: args.validation, EVALUATION: args.evaluation}
        subset = balanced_subset(args.games, args.game, quotas, subset_dir)
        counts = subset.group_by("rank_group").aggregate([("game_id", "count")]).to_pylist()
        print(f"subset: {subset.num_rows} games, per group {counts}")
    features, aggregates, meta = (args.work / d for d in ("features", "aggregates", "meta"))
    extract = ["kibitz", "extract", args.game, "--games", str(subset_dir), "--out", str(features)]
    if args.config:
        extract += ["--config", args.config]
    if args.num_cpus:
        extract += ["--num-cpus", str(args.num_cpus)]
    run([*extract, "--no-progress"])
    run(["kibitz", "aggregate", "--features", str(features), "--out", str(aggregates)])
    run(["kibitz", "train", "meta", args.game, "--aggregates", str(aggregates), "--out", str(meta)])
    for name in ("table2_rank_group.md", "table67_player.md"):
        print(f"\n{name}\n{(meta / 'tables' / name).read_text()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
