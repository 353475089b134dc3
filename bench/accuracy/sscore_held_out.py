"""Mean s-score per rank group on every game a shipped s-score net never saw, with standard errors.

    python bench/accuracy/sscore_held_out.py chess            # kibitz-sscore-chess, all moves
    python bench/accuracy/sscore_held_out.py go --positions 16
    python bench/accuracy/sscore_held_out.py chess --model OUT/model.kibitz.pt --device cuda
    python bench/accuracy/sscore_held_out.py chess --model kibitz-sscore-chess-levels --cache kibitz-out/maia-levels

Two held-out sets, then both pooled:
- the evaluation split (``pipeline/core/data_split.py``) of the ``testing/`` files the net trained on;
- the whole ``candidating/`` split, which no Kibitz net trains on.

Issue #8 asks the mean s-score to rise with rank group on held-out games. Each line gives the
gap to the group below in standard errors of the difference, so a user sees which neighbours
the net separates and which are within noise, and whether a second held-out set agrees.

``--seen-players`` (chess) also splits each set's instances by whether their player has a
training game in the same rank group (splits are by game, so a player's other games may be
trained on): if the net had learnt players rather than strength, held-out means would rise only
for players it saw. It first prints how many distinct players each group's training games
have. Chess only: ``kibitz-sscore-chess`` trained on every training-split game of
the testing files, so those are exactly the games it saw; the Go net trained on a subset that
also draws on ``by-player/``.

``--move-effect K`` also splits each instance's mean s-score s(p, played) into a *position*
part, the mean of s(p, a) over K random other legal moves a of the same positions (what the
net gives any move there: which positions a group reaches), and a *move* part, the rest
(how much better than those the played move is judged): where a group's gap comes from.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core import settings
from pipeline.core.data_split import EVALUATION, TRAIN, assign_splits
from pipeline.ingest import pgn as ingest_pgn
from pipeline.ingest import sgf as ingest_sgf
from pipeline.nets.loading import load_net
from pipeline.nets.sscore_levels import LevelsSScore, level_sha256
from pipeline.train.level_policies import cached_level_policies
from pipeline.train.sscore_batches import RANK_GROUPS, PositionPool, build_pool, random_other_legal
from pipeline.train.sscore_eval import (
    adjacent_gap_z,
    group_means,
    group_sems,
    instance_means,
    instance_scores,
    score_rows,
)
from pipeline.train.sscore_levels import ScoredPool

SPLITS = {
    "chess": ("chess/lichess-2024-02-blitz", ".pgn.zst", ingest_pgn),
    "go": ("go/fox-selected", ".sgf", ingest_sgf),
}


def read_split(game: str, split: str) -> pa.Table:
    """Every game of one split's rank-group files, as ``kibitz ingest`` reads them."""
    folder, suffix, reader = SPLITS[game]
    root = settings.data_dir() / folder / split
    files = [root / f"{group}{suffix}" for group in RANK_GROUPS[game]]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"real game files missing (KIBITZ_DATA_DIR): {missing}")
    chunks = reader.plan_chunks(files, games_per_chunk=100_000)
    return pa.concat_tables(reader.read_chunk(c).games for c in chunks)


def held_out_sets(game: str) -> dict[str, pa.Table]:
    """The held-out sets by name: the testing files' evaluation split, and ``candidating/``."""
    testing = read_split(game, "testing")
    testing = testing.filter(pa.array(assign_splits(testing["game_id"].to_pylist()) == EVALUATION))
    candidating = read_split(game, "candidating")
    return {
        f"testing/ evaluation split ({testing.num_rows} games)": testing,
        f"candidating/ ({candidating.num_rows} games)": candidating,
    }


def held_out_scores(
    net, games: pa.Table, game: str, positions: int | None, cache: Path | None, name: str
):
    """(instance scores, the pool they were scored on) of ``games``. A levels s-score scores
    through its levels' policies, kept in ``cache`` (``pipeline/train/level_policies.py``)."""
    pool = build_pool(games, game, positions_per_instance=positions, seed=3)
    if isinstance(net, LevelsSScore):
        levels = level_sha256(net.head.config.levels)
        policies = cached_level_policies(net, pool, levels, cache, name)
        return ScoredPool(pool, policies).instance_scores(net.head), pool
    return instance_scores(net, pool), pool


def player_keys(players: pa.Array, groups: pa.Array) -> pa.Array:
    """``player NUL rank group``: one key per (player, group), as a training game counts."""
    return pc.binary_join_element_wise(players, groups, "\x00")


def seen_in_training(
    pool: PositionPool, games: pa.Table, train: pa.Table, labels: tuple[str, ...]
) -> np.ndarray:
    """(I,) bool: the instance's player has a game in ``train`` in the instance's rank group."""
    seen = pa.concat_arrays(
        [
            player_keys(train[side].combine_chunks(), train[f"{side}_rank_group"].combine_chunks())
            for side in ("white", "black")
        ]
    )
    at = pc.index_in(pa.array(pool.instance_game_id), games["game_id"]).to_numpy()
    white = games["white"].to_numpy(zero_copy_only=False)[at]
    black = games["black"].to_numpy(zero_copy_only=False)[at]
    player = pa.array(np.where(pool.instance_black, black, white))
    group = pool.instance_group.astype(np.int64)
    label = np.where(group >= 0, np.asarray(labels, dtype=object)[group], "")
    keys = player_keys(player, pa.array(label.astype(str)))
    return pc.is_in(keys, value_set=seen).to_numpy(zero_copy_only=False)


def report_training_players(train: pa.Table, labels: tuple[str, ...]) -> None:
    """Per group of the training games: player-games, distinct players and the most games of
    one player (a group of few players lets the net see the same players again)."""
    sides = pa.concat_tables(
        pa.table({"group": train[f"{side}_rank_group"], "player": train[side]})
        for side in ("white", "black")
    )
    per_player = sides.group_by(["group", "player"]).aggregate([([], "count_all")])
    stats = per_player.group_by("group").aggregate(
        [("count_all", "sum"), ("count_all", "count"), ("count_all", "max")]
    )
    rows = {g: i for i, g in enumerate(stats["group"].to_pylist())}
    print(f"\ntraining split ({train.num_rows} games), players per group:")
    print("| group | player-games | players | player-games a player | most of one player |")
    print("|---|---|---|---|---|")
    for label in labels:
        i = rows[label]
        games, players = stats["count_all_sum"][i].as_py(), stats["count_all_count"][i].as_py()
        most = stats["count_all_max"][i].as_py()
        print(f"| {label} | {games} | {players} | {games / players:.2f} | {most} |")


def report_seen(scores: np.ndarray, groups: np.ndarray, seen: np.ndarray, labels) -> None:
    """Mean s-score per group of players seen in training against players not seen."""
    n = len(labels)
    stats = [
        (*group_means(scores[m], groups[m], n), group_sems(scores[m], groups[m], n))
        for m in (seen, ~seen)
    ]
    print("| group | seen players: instances | mean ± s.e. | unseen: instances | mean ± s.e. |")
    print("|---|---|---|---|---|")
    for i, label in enumerate(labels):
        cells = [f"{counts[i]} | {means[i]:+.3f} ± {sems[i]:.3f}" for means, counts, sems in stats]
        print(f"| {label} | {' | '.join(cells)} |")


def position_scores(net, pool: PositionPool, moves: int, seed: int = 0) -> np.ndarray:
    """(I,) per instance: the mean over its positions of the mean s-score of ``moves`` random
    other legal moves (the position part of ``--move-effect``)."""
    rng = np.random.default_rng(seed)
    rows = np.arange(len(pool))
    other = np.mean(
        [score_rows(net, pool, rows, random_other_legal(pool, rows, rng)) for _ in range(moves)],
        axis=0,
    )  # (N,)
    return instance_means(pool, other)


def report_gaps(name: str, parts: dict[str, np.ndarray], groups: np.ndarray, labels) -> None:
    """Per part (e.g. position / move): each group's gap to the one below, in s.e."""
    print(f"\n{name}: gap to the group below in s.e., by part")
    print("| part | " + " | ".join(labels[1:]) + " |")
    print("|---" * len(labels) + "|")
    for part, scores in parts.items():
        means, _ = group_means(scores, groups, len(labels))
        gaps = adjacent_gap_z(means, group_sems(scores, groups, len(labels)))
        print(f"| {part} | " + " | ".join(f"{z:+.1f}" for z in gaps) + " |")


def report(name: str, scores: np.ndarray, groups: np.ndarray, labels: tuple[str, ...]) -> None:
    means, counts = group_means(scores, groups, len(labels))
    sems = group_sems(scores, groups, len(labels))
    print(f"\n{name}: {int(counts.sum())} instances")
    print("| group | instances | mean s-score | s.e. | gap to the group below, s.e. |")
    print("|---|---|---|---|---|")
    gaps = ["", *(f"{z:+.1f}" for z in adjacent_gap_z(means, sems))]
    for i, label in enumerate(labels):
        print(f"| {label} | {counts[i]} | {means[i]:+.3f} | {sems[i]:.3f} | {gaps[i]} |")
    rising = int(np.sum(np.diff(means) > 0))
    print(f"rises at {rising} of {len(labels) - 1} steps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=sorted(SPLITS))
    parser.add_argument("--model", default=None, help="default: kibitz-sscore-GAME")
    parser.add_argument(
        "--positions", type=int, default=None, help="random moves per instance (default: all)"
    )
    parser.add_argument(
        "--seen-players",
        action="store_true",
        help="chess: also split each set by whether the player has a training game in the group",
    )
    parser.add_argument(
        "--move-effect",
        type=int,
        metavar="K",
        help="also split each mean into a position part (K random other moves) and a move part",
    )
    parser.add_argument("--device", default="cpu", help="torch device the net scores on, e.g. cuda")
    parser.add_argument(
        "--cache", type=Path, default=None, help="levels s-score: folder for the levels' policies"
    )
    args = parser.parse_args()
    if args.seen_players and args.game != "chess":
        parser.error("--seen-players is chess only (see the module docstring)")
    net = load_net(args.model or f"kibitz-sscore-{args.game}").to(args.device)
    labels = tuple(RANK_GROUPS[args.game])

    if args.seen_players:
        testing = read_split(args.game, "testing")
        train = testing.filter(pa.array(assign_splits(testing["game_id"].to_pylist()) == TRAIN))
        report_training_players(train, labels)
    pooled_scores, pooled_groups = [], []
    for i, (name, games) in enumerate(held_out_sets(args.game).items()):
        scores, pool = held_out_scores(
            net, games, args.game, args.positions, args.cache, f"held-out-{i}"
        )
        groups = pool.instance_group.astype(np.int64)
        report(name, scores, groups, labels)
        if args.seen_players:
            report_seen(scores, groups, seen_in_training(pool, games, train, labels), labels)
        if args.move_effect:
            position = position_scores(net, pool, args.move_effect)
            split = {"played move": scores, "position": position, "move": scores - position}
            report_gaps(name, split, groups, labels)
        pooled_scores.append(scores)
        pooled_groups.append(groups)
    report("both, pooled", np.concatenate(pooled_scores), np.concatenate(pooled_groups), labels)


if __name__ == "__main__":
    main()
