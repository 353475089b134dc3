"""The player-specific set: ``--player-games`` games of each of ``--players`` players per rank
group, written as a games table that ``kibitz extract`` reads (Kuboki et al., Tables 6/7).

The shipped meta-models are fitted on the testing split's games; the paper's player-specific
protocol needs players with many games of their own, which on the Fox selection only the
``by-player`` split has (about 50 players a group, ≥ 20 games each; the Lichess testing split has
one player with 15 games in a band). Extracting all 10,332 ``by-player`` games is GPU-day work;
this takes a deterministic sample of players (md5 order of the name, not the most active), so a
CPU machine measures the shipped model's player-specific accuracy and interval coverage from a
few hundred games. A larger ``--players`` gives a superset: rerunning grows the table and
``kibitz extract`` resumes, extracting only the added games. Run::

    kibitz ingest go ../shared/data/go/fox-selected/by-player --out kibitz-out/games-go-by-player
    python bench/player_set.py go --games kibitz-out/games-go-by-player \\
        --players 10 --player-games 20 --out kibitz-out/games-go-players
    kibitz extract go --games kibitz-out/games-go-players --out kibitz-out/features-go-players
    kibitz aggregate --features kibitz-out/features-go-players --out kibitz-out/aggregates-go-players
    kibitz train meta go --aggregates models/kibitz-meta-go/aggregates \\
        --player-aggregates kibitz-out/aggregates-go-players --out kibitz-out/meta-go-players

(the last with the shipped model's own options, from its MODEL_CARD.md: the ``player`` rows of
its results are this protocol on these players, minus any game the meta-model trained on).
``kibitz train meta … --register`` ships the set's instances with the model
(``player-aggregates/``), so a refit from the shipped files reproduces the player rows too.

Where the features of an earlier set are gone (a lost machine) but its instances shipped, grow
it without re-extracting: pick the larger set minus the shipped games (``--exclude``), extract
and aggregate only those, then ``--merge`` the two instance tables (same extraction config, no
game in both)::

    python bench/player_set.py go --games kibitz-out/games-go-by-player --players 20 \
        --player-games 20 --exclude models/kibitz-meta-go/player-aggregates \
        --out kibitz-out/games-go-players-b
    kibitz extract go --games kibitz-out/games-go-players-b --out kibitz-out/features-go-players-b
    kibitz aggregate --features kibitz-out/features-go-players-b \
        --out kibitz-out/aggregates-go-players-b
    python bench/player_set.py go --merge models/kibitz-meta-go/player-aggregates \
        kibitz-out/aggregates-go-players-b --out kibitz-out/aggregates-go-players

The shipped ``kibitz-meta-go`` set was made that way: ``--players 10 --player-games 20`` (2,177
games), then grown to ``--players 20`` (2,019 games more; 4,196 in all, 214 player-and-group
units with 20 games, 7d having only 14 such players).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from eval_meta import count_per_group, grow_games, player_subset

from pipeline.meta.aggregate import SUMMARY_FILE, load_mart, load_summary

INSTANCES = "player_instance_features"


def merge_instances(sources: list[Path], out: Path) -> pa.Table:
    """The instance tables of ``sources`` as one aggregates folder (``INSTANCES`` only, what a
    player-specific set needs); refuses other extraction configs or a game in two sources."""
    summaries = [load_summary(s) for s in sources]
    hashes = {s["features_config_hash"] for s in summaries}
    if len(hashes) != 1:
        raise SystemExit(f"the sources come from other extraction configs: {sorted(hashes)}")
    tables = [load_mart(s, INSTANCES) for s in sources]
    games = [set(t["game_id"].to_pylist()) for t in tables]
    shared = set.intersection(*games) if len(games) > 1 else set()
    if shared:
        raise SystemExit(f"{len(shared)} games are in more than one source, e.g. {min(shared)}")
    merged = pa.concat_tables(tables, promote_options="default")
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(merged, out / f"{INSTANCES}.parquet")
    summary = {
        **summaries[0],
        "features_dir": None,
        "merged_from": [
            {"aggregates_dir": str(s), "features_dir": m.get("features_dir"), "moves": m["moves"]}
            for s, m in zip(sources, summaries, strict=True)
        ],
        "moves": sum(m["moves"] for m in summaries),
        "rows": {INSTANCES: merged.num_rows},
        "catalog": None,
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--games", type=Path, help="games table to pick from")
    parser.add_argument("--players", type=int, default=5, help="players per rank group")
    parser.add_argument("--player-games", type=int, default=15, help="games per chosen player")
    parser.add_argument(
        "--exclude", type=Path, help="an aggregates folder whose games are not picked again"
    )
    parser.add_argument(
        "--merge", type=Path, nargs="+", help="aggregates folders to merge into --out instead"
    )
    parser.add_argument("--out", type=Path, required=True, help="games table to write or grow")
    args = parser.parse_args(argv)

    if args.merge:
        merged = merge_instances(args.merge, args.out)
        units = merged.group_by(["player", "rank_group"]).aggregate([("game_id", "count")])
        print(f"merged {len(args.merge)} folders: {merged.num_rows} instances,"
              f" {pc.sum(pc.greater_equal(units['game_id_count'], args.player_games)).as_py()}"
              f" (player, rank group) units with ≥ {args.player_games} games, in {args.out}")  # fmt: skip
        return 0
    if args.games is None:
        parser.error("--games is required unless --merge")
    nothing = pa.table({"game_id": pa.array([], pa.string())})
    wanted = player_subset(args.games, args.game, nothing, args.players, args.player_games)
    if args.exclude is not None:
        seen = load_mart(args.exclude, INSTANCES)["game_id"].unique()
        wanted = wanted.filter(pc.invert(pc.is_in(wanted["game_id"], seen)))
    added = grow_games(wanted, args.game, args.out)
    print(f"player set: {wanted.num_rows} games ({added.num_rows} added) in {args.out}")
    print(f"per group: {count_per_group(wanted)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
