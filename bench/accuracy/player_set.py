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
    python bench/accuracy/player_set.py go --games kibitz-out/games-go-by-player \\
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
and aggregate only those, then merge the two aggregates (``kibitz aggregate --merge``: same
extraction config, no game in both)::

    python bench/accuracy/player_set.py go --games kibitz-out/games-go-by-player --players 20 \
        --player-games 20 --exclude models/kibitz-meta-go/player-aggregates \
        --out kibitz-out/games-go-players-b
    kibitz extract go --games kibitz-out/games-go-players-b --out kibitz-out/features-go-players-b
    kibitz aggregate --features kibitz-out/features-go-players-b \
        --out kibitz-out/aggregates-go-players-b
    kibitz aggregate --merge models/kibitz-meta-go/player-aggregates \
        kibitz-out/aggregates-go-players-b --out kibitz-out/aggregates-go-players

The shipped ``kibitz-meta-go`` set was made that way: ``--players 10 --player-games 20`` (2,177
games), then grown to ``--players 20`` (2,019 games more; 4,196 in all, 214 player-and-group
units with 20 games, 7d having only 14 such players).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from eval_meta import count_per_group, grow_games, player_subset

from pipeline.meta.aggregate import INSTANCES, load_mart


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--games", type=Path, required=True, help="games table to pick from")
    parser.add_argument("--players", type=int, default=5, help="players per rank group")
    parser.add_argument("--player-games", type=int, default=15, help="games per chosen player")
    parser.add_argument(
        "--exclude", type=Path, help="an aggregates folder whose games are not picked again"
    )
    parser.add_argument("--out", type=Path, required=True, help="games table to write or grow")
    args = parser.parse_args(argv)

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
