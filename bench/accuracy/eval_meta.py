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
extraction, and re-running with larger quotas extracts only the added games.

The paper's player-specific protocol needs players with many games of their own: with
``--players P`` the script also takes ``--player-games`` games of each of P players per rank
group from outside the subset (on the Fox selection, the ``by-player`` players), extracts and
aggregates them apart, and passes them to ``kibitz train meta --player-aggregates``. Run::

    kibitz ingest chess ../shared/data/chess/lichess-2024-02-blitz/testing --out kibitz-out/games-chess
    python bench/accuracy/eval_meta.py chess --games kibitz-out/games-chess --work kibitz-out/eval-meta-chess \\
        --train 120 --validation 15 --evaluation 40 --config bench/accuracy/eval-meta-chess.yaml
    kibitz ingest go ../shared/data/go/fox-selected/testing ../shared/data/go/fox-selected/by-player \\
        --out kibitz-out/games-go
    python bench/accuracy/eval_meta.py go --games kibitz-out/games-go --work kibitz-out/eval-meta-go \\
        --train 60 --validation 5 --evaluation 25 --players 3 --player-games 15
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

from pipeline.core.data_split import EVALUATION, TRAIN, VALIDATION, SplitConfig, assign_splits
from pipeline.meta.aggregate import load_mart
from pipeline.meta.model import instance_data
from pipeline.train.games import read_games


def balanced_subset(
    games: Path, game: str, quotas: dict[int, int], exclude: pa.Array | None = None
) -> pa.Table:
    """The first ``quotas[split]`` games (by game id) of every rank group and split, skipping
    the game ids in ``exclude``: larger quotas give a superset, so a run can grow."""
    table = read_games(games, game)
    keep = pc.is_valid(table["rank_group"])
    if exclude is not None:
        keep = pc.and_(keep, pc.invert(pc.is_in(table["game_id"], exclude)))
    table = table.filter(keep)  # read_games orders by game_id
    splits = assign_splits(table["game_id"].to_pylist(), SplitConfig())
    groups = pc.dictionary_encode(table["rank_group"]).combine_chunks().indices.to_numpy()
    key = groups.astype(np.int64) * 3 + splits  # (N,) one key per (group, split)
    order = np.argsort(key, kind="stable")  # by key, then by game id
    first = np.searchsorted(key[order], key[order])  # first row of each row's key
    rank = np.empty(len(key), dtype=np.int64)
    rank[order] = np.arange(len(key)) - first  # 0-based rank of the game in its key
    limit = np.array([quotas[TRAIN], quotas[VALIDATION], quotas[EVALUATION]])[splits]
    keep = np.flatnonzero(rank < limit)
    return table.take(pa.array(keep))


def player_subset(
    games: Path, game: str, exclude: pa.Table, players: int, per_player: int
) -> pa.Table:
    """``per_player`` games of each of ``players`` players per rank group, for the paper's
    player-specific protocol.

    Only players with at least ``per_player`` games outside ``exclude`` (the balanced subset,
    whose games the meta-model trains on) qualify; they are taken in md5 order of their name,
    so the choice is deterministic and not biased to the most active players. On the Fox
    selection these are the ``by-player`` players (the testing split has none with 15 games).
    """
    import duckdb  # a dependency of Kibitz; only this protocol needs SQL here

    table = read_games(games, game)
    con = duckdb.connect()
    con.register("games", table)
    con.register("excluded", exclude.select(["game_id"]))
    picked = con.sql(
        """
        with free_games as (
            select * from games
            where rank_group is not null and game_id not in (select game_id from excluded)
        ),
        instances as (
            select game_id, white as player, white_rank_group as rank_group from free_games
            union all
            select game_id, black as player, black_rank_group as rank_group from free_games
        ),
        numbered as (
            select
                *,
                row_number() over (partition by player, rank_group order by game_id) as nth,
                count(*) over (partition by player, rank_group) as available
            from instances
            where rank_group is not null
        ),
        eligible as (
            select distinct player, rank_group from numbered where available >= $per_player
        ),
        chosen as (
            select player, rank_group from eligible
            qualify row_number() over (partition by rank_group order by md5(player)) <= $players
        ),
        final as (
            select distinct numbered.game_id
            from numbered
            inner join chosen using (player, rank_group)
            where numbered.nth <= $per_player
        )
        select game_id from final
        """,
        params={"players": players, "per_player": per_player},
    ).to_arrow_table()
    return table.filter(pc.is_in(table["game_id"], picked["game_id"]))


def grow_games(wanted: pa.Table, game: str, out: Path) -> pa.Table:
    """Add the games of ``wanted`` that ``out`` lacks as the next file of each month they were
    played in; return the new games.

    Extraction chunks are row ranges of each games file, so files already extracted are never
    rewritten: a run with larger quotas extracts only the added games and resumes the rest.
    """
    have = pa.array([], pa.string())
    if out.exists():
        have = ds.dataset(out, format="parquet", partitioning="hive").to_table(["game_id"])
        have = have["game_id"].combine_chunks()
        extra = pc.invert(pc.is_in(have, wanted["game_id"]))
        if pc.any(extra).as_py():
            raise SystemExit(f"{out} holds games outside the quotas: use another --work")
    added = wanted.filter(pc.invert(pc.is_in(wanted["game_id"], have)))
    if added.num_rows == 0:
        return added
    added = added.sort_by([("rank_group", "ascending"), ("game_id", "ascending")])
    columns = [c for c in added.column_names if c not in ("game", "source", "month")]
    partitions = added.group_by(["source", "month"]).aggregate([]).sort_by("month").to_pylist()
    for source, month in (tuple(p.values()) for p in partitions):
        # one new file in each (source, month) partition the added games belong to
        mine = pc.and_(pc.equal(added["source"], source), pc.equal(added["month"], month))
        folder = out / f"game={game}" / f"source={source}" / f"month={month}"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"part-{len(list(folder.glob('*.parquet')))}.parquet"
        pq.write_table(added.filter(mine).select(columns), folder / name)
    return added


def count_per_group(table: pa.Table) -> str:
    counts = table.group_by("rank_group").aggregate([("game_id", "count")]).sort_by("rank_group")
    return ", ".join(f"{g} {c}" for g, c in zip(*counts.to_pydict().values(), strict=True))


def sscore_leak(aggregates: Path, game: str) -> str:
    """Spearman correlation of each strength net's mean s-score with the rank group, on the
    train, validation and evaluation instances.

    Kibitz's strength nets train on train-split games: a feature that is much sharper on the
    train instances than on the others is in-sample for its net there, which is why
    ``kibitz train meta --fit-split validation`` fits the meta-models on the validation split.
    """
    from scipy.stats import spearmanr  # a LightGBM dependency; only this check needs it

    data = instance_data(
        load_mart(aggregates, "player_instance_features"), load_mart(aggregates, "rank_groups"),
        game=game,
    )  # fmt: skip
    lines = []
    for i, column in enumerate(data.columns):
        if not (column.startswith("sscore_") and column.endswith("_mean_all")):
            continue
        rho = [
            spearmanr(data.features[data.split == s, i], data.group[data.split == s])[0]
            for s in (TRAIN, VALIDATION, EVALUATION)
        ]
        lines.append(f"{column}: Spearman with the group, instances of the train split "
                     f"{rho[0]:.3f}, validation {rho[1]:.3f}, evaluation {rho[2]:.3f}")  # fmt: skip
    return "\n".join(lines)


def run(command: list[str]) -> None:
    """Run one kibitz command as a user would, echoing it; stop on failure."""
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True)
    print(f"  ({time.perf_counter() - started:.0f} s)", flush=True)


def extract_and_aggregate(
    game: str, games: Path, work: Path, prefix: str, extract_options: list[str]
) -> Path:
    """``kibitz extract`` then ``kibitz aggregate`` of one games table; the aggregates folder."""
    features, aggregates = work / f"{prefix}features", work / f"{prefix}aggregates"
    run(["kibitz", "extract", game, "--games", str(games), "--out", str(features),
         *extract_options, "--no-progress"])  # fmt: skip
    run(["kibitz", "aggregate", "--features", str(features), "--out", str(aggregates)])
    return aggregates


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
    parser.add_argument(
        "--players", type=int, default=0,
        help="player-specific protocol: players per rank group taken outside the subset (0: off)",
    )  # fmt: skip
    parser.add_argument("--player-games", type=int, default=15, help="games per chosen player")
    parser.add_argument(
        "--fit-split",
        choices=("train", "validation"),
        default="train",
        help="kibitz train meta --fit-split",
    )
    args = parser.parse_args()

    subset_dir, player_dir = args.work / "games", args.work / "player-games"
    quotas = {TRAIN: args.train, VALIDATION: args.validation, EVALUATION: args.evaluation}
    # The player set is chosen once, outside the subset of that run; a grown subset skips its
    # games, so no player loses instances to training. (The player set's games all rank after
    # the subset's within their group and split, so skipping them keeps the subset a superset.)
    chosen = None
    if args.players and player_dir.exists():
        chosen = ds.dataset(player_dir, format="parquet", partitioning="hive").to_table(["game_id"])
    subset = balanced_subset(
        args.games, args.game, quotas, None if chosen is None else chosen["game_id"]
    )
    added = grow_games(subset, args.game, subset_dir)
    print(
        f"subset: {subset.num_rows} games ({added.num_rows} new), per group: {count_per_group(subset)}"
    )
    extract_options = ["--config", args.config] if args.config else []
    if args.num_cpus:
        extract_options += ["--num-cpus", str(args.num_cpus)]
    aggregates = extract_and_aggregate(args.game, subset_dir, args.work, "", extract_options)
    train = ["kibitz", "train", "meta", args.game, "--aggregates", str(aggregates)]
    train += ["--fit-split", args.fit_split]
    if args.players:
        if chosen is None:
            players = player_subset(args.games, args.game, subset, args.players, args.player_games)
            grow_games(players, args.game, player_dir)
            print(
                f"player-specific set: {players.num_rows} games, per group: {count_per_group(players)}"
            )
        player_aggregates = extract_and_aggregate(
            args.game, player_dir, args.work, "player-", extract_options
        )
        train += ["--player-aggregates", str(player_aggregates)]
    run([*train, "--out", str(args.work / "meta")])
    for name in ("table2_rank_group.md", "table67_player.md"):
        print(f"\n{name}\n{(args.work / 'meta' / 'tables' / name).read_text()}")
    print(f"\ns-score leak check\n{sscore_leak(aggregates, args.game)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
