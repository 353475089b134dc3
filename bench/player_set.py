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
(``player-aggregates/``), so a refit from the shipped files reproduces the player rows too. The
shipped ``kibitz-meta-go`` was made with ``--players 10 --player-games 20`` (2,177 games).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
from eval_meta import count_per_group, grow_games, player_subset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--games", type=Path, required=True, help="games table to pick from")
    parser.add_argument("--players", type=int, default=5, help="players per rank group")
    parser.add_argument("--player-games", type=int, default=15, help="games per chosen player")
    parser.add_argument("--out", type=Path, required=True, help="games table to write or grow")
    args = parser.parse_args(argv)

    nothing = pa.table({"game_id": pa.array([], pa.string())})
    wanted = player_subset(args.games, args.game, nothing, args.players, args.player_games)
    added = grow_games(wanted, args.game, args.out)
    print(f"player set: {wanted.num_rows} games ({added.num_rows} added) in {args.out}")
    print(f"per group: {count_per_group(wanted)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
