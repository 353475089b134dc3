"""How does each Maia-1 level rate the moves of each Lichess band? Held-out gaps per level.

    python bench/accuracy/maia_levels_by_band.py [--cache kibitz-out/maia-levels] [--games kibitz-out/games-chess]

For every move of the two held-out sets of ``bench/accuracy/sscore_held_out.py`` (the testing files'
evaluation split and ``candidating/``), the log-likelihood of the played move under each of the
9 Maia-1 nets (``pipeline/train/level_policies.py``); per player instance the mean; per band the mean
and its standard error; printed as each band's gap to the band below in standard errors, per
level and for the 1900 − 1800 contrast. This is the evidence behind ``kibitz train
sscore-levels`` (docs/research/log-nets.md): every level finds 2400-2600's moves *less* likely than
2200-2400's, while the contrast between the top levels rises there. About 25 min on this 2-core
machine (142k positions through 9 nets); ``--cache`` keeps the policies for a re-run.
``--games`` adds the pool ``kibitz train sscore-levels`` trains on (the training split, 12
random moves per instance: another 184k positions), to compare where the head learns.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.nets.loading import load_net
from pipeline.nets.sscore_levels import (
    MAIA_LEVELS,
    LevelsHead,
    LevelsHeadConfig,
    level_nets,
    level_sha256,
    levels_sscore,
)
from pipeline.train.games import load_split_games, read_games
from pipeline.train.level_policies import cached_level_policies
from pipeline.train.sscore_batches import build_pool
from pipeline.train.sscore_eval import adjacent_gap_z, group_means, group_sems, instance_means
from pipeline.train.sscore_levels import LevelsTrainConfig

sys.path.insert(0, str(Path(__file__).parent))
from sscore_held_out import held_out_sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None, help="folder for the policies")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--games", type=Path, default=None, help="also the training pool of these games' split"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = LevelsHeadConfig(MAIA_LEVELS)
    # the head is not used: only the levels' statistics are read
    model = levels_sscore("chess", level_nets(config, load=load_net), LevelsHead(config))
    levels = level_sha256(MAIA_LEVELS)
    n = len(MAIA_LEVELS)
    sets = [(name, games, None, 3, f"held-out-{i}")
            for i, (name, games) in enumerate(held_out_sets("chess").items())]  # fmt: skip
    if args.games:  # the pool `kibitz train sscore-levels` trains on (cache name "train")
        config = LevelsTrainConfig()
        games = load_split_games(args.games, "chess", "train", split_config=config.split_config(),
                                 table=read_games(args.games, "chess"))  # fmt: skip
        sets.append(("training pool", games, config.positions_per_instance, config.seed, "train"))
    parts = []
    for name, games, per_instance, seed, cache_name in sets:
        t0 = time.perf_counter()
        pool = build_pool(games, "chess", positions_per_instance=per_instance, seed=seed)
        policies = cached_level_policies(model, pool, levels, args.cache, cache_name)
        loglik = policies.played_features(pool)[:, :n]  # (N, levels)
        print(f"{name}: {len(pool):,} positions ({time.perf_counter() - t0:.0f} s)")
        parts.append((name.split(" (")[0], pool, loglik))
    labels = parts[0][1].rank_groups
    print("\nplayed move's mean log-likelihood: gap to the band below, in standard errors")
    print("| set | statistic | " + " | ".join(labels[1:]) + " |")
    print("|---|---" + "|---" * (len(labels) - 1) + "|")
    held = parts[:2]  # pooled: the two held-out sets
    pooled_groups = np.concatenate([p.instance_group for _, p, _ in held]).astype(np.int64)
    stats = {level: (lambda x, i=i: x[:, i]) for i, level in enumerate(MAIA_LEVELS)}
    stats[f"{MAIA_LEVELS[-1]} − {MAIA_LEVELS[-2]}"] = lambda x: x[:, -1] - x[:, -2]
    for stat, of in stats.items():
        per_set = [(name, instance_means(pool, of(x)), pool.instance_group.astype(np.int64))
                   for name, pool, x in parts]  # fmt: skip
        pooled = np.concatenate([s for _, s, _ in per_set[:2]])
        rows = [*per_set[:2], ("pooled", pooled, pooled_groups), *per_set[2:]]
        for name, scores, groups in rows:
            means, _ = group_means(scores, groups, len(labels))
            z = adjacent_gap_z(means, group_sems(scores, groups, len(labels)))
            print(f"| {name} | {stat} | " + " | ".join(f"{v:+.1f}" for v in z) + " |")


if __name__ == "__main__":
    main()
