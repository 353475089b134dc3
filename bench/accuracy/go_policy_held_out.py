"""The rank-conditioned Go policy on every game it never saw: quality per rank group and the
matrix "conditioned on group a, games of group b", per held-out set and pooled.

    python bench/accuracy/go_policy_held_out.py                       # kibitz-go-policy, all moves
    python bench/accuracy/go_policy_held_out.py --model kibitz-out/go-policy/model.kibitz.pt
    python bench/accuracy/go_policy_held_out.py --model kibitz-out/go-policy-katago/model.kibitz.pt --device cuda
    python bench/accuracy/go_policy_held_out.py --positions 1 --symmetries 8
    python bench/accuracy/go_policy_held_out.py --positions 16 --skip 16
    python bench/accuracy/go_policy_held_out.py --model kibitz-out/go-policy/model.kibitz.pt --against kibitz-go-policy

Two held-out sets, then both pooled (the same sets as ``bench/accuracy/sscore_held_out.py``):
- the evaluation split (``pipeline/core/data_split.py``) of the Fox ``testing/`` files;
- the whole ``candidating/`` split, which no Kibitz net trains on.

Issue #8 asks the matrix's diagonal to be best: for the games of each group, the net predicts
moves best when conditioned on that group. Each column's last line is the diagonal's margin over
the best other conditioning, in millinats per move, with its standard error paired (the two
conditionings score the same moves) and clustered by player instance (moves of one game are
correlated), so a user sees which columns are decided and which are within noise.

``--against BASE`` scores the same moves with a second net and prints the first net's own-rank
gain over it (accuracy points, millinats a move), paired and clustered by player instance: two
nets' pooled figures differ by less than each one's standard error, yet the paired difference,
free of which moves are hard, can be decided (``PositionScores.own_rank_gain``).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from sscore_held_out import held_out_sets

from pipeline.nets.go_rank_policy import SYMMETRY_COUNTS
from pipeline.nets.loading import load_net
from pipeline.train.device import resolve_device
from pipeline.train.go_policy import (
    PositionScores,
    score_positions,
    summarise,
)
from pipeline.train.sscore_batches import build_pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="kibitz-go-policy", help="registry name or file")
    parser.add_argument(
        "--positions", type=int, default=None, help="random moves per instance (default: all)"
    )
    parser.add_argument(
        "--skip", type=int, default=0,
        help="leave out each instance's first SKIP random moves: with --positions 16 --skip 16, "
        "16 moves per instance that the default sample (the one models were chosen on) lacks",
    )  # fmt: skip
    parser.add_argument(
        "--device", default="cpu", help="where the net runs: cpu, cuda or cuda:N (default cpu)"
    )
    parser.add_argument(
        "--symmetries", type=int, choices=SYMMETRY_COUNTS, default=None,
        help="board symmetries to average the features over (default: the model's own)",
    )  # fmt: skip
    parser.add_argument(
        "--against", default=None,
        help="a second net (name or file) scored on the same moves: the first one's paired gain",
    )  # fmt: skip
    args = parser.parse_args()
    device = resolve_device(args.device)
    net = load_net(args.model).to(device)  # batches follow the net
    if args.symmetries is not None:
        net.config = replace(net.config, symmetries=args.symmetries)
    print(f"{args.model}: features averaged over {net.config.symmetries} board symmetries")
    base = load_net(args.against).to(device) if args.against else None
    pooled, pooled_base = [], []
    for name, games in held_out_sets("go").items():
        pool = build_pool(
            games, "go", positions_per_instance=args.positions, seed=3, skip_per_instance=args.skip
        )
        scores = score_positions(net, pool)
        print(f"\n## {name}: {len(scores.group)} positions\n")
        report(scores)
        pooled.append(scores)
        if base is not None:
            pooled_base.append(score_positions(base, pool))
            report_gain(scores, pooled_base[-1], args.against)
    print("\n## both, pooled\n")
    report(PositionScores.concat(pooled))
    if base is not None:
        report_gain(PositionScores.concat(pooled), PositionScores.concat(pooled_base), args.against)


def report(scores: PositionScores) -> None:
    """The tables, then the own-rank figures over every group's positions (#28's target) with
    their standard errors, clustered by player instance."""
    evaluation = summarise(scores)
    print(evaluation.to_markdown())
    accuracy, loglik = evaluation.pooled()
    accuracy_sem, loglik_sem = scores.own_rank_sem()
    n = int(evaluation.positions.sum())
    print(
        f"\nlog-likelihood falling strictly away from the own group: "
        f"{evaluation.strictly_falling_columns} of {len(evaluation.groups)} columns"
    )
    print(
        f"\nown rank, all groups: {accuracy:.2f} ± {accuracy_sem:.2f} % / "
        f"{loglik:.4f} ± {loglik_sem:.4f} over {n:,} positions"
    )


def report_gain(scores: PositionScores, base: PositionScores, base_name: str) -> None:
    """The own-rank gain over ``base`` on the same moves, with paired standard errors."""
    accuracy, accuracy_sem, loglik, loglik_sem = scores.own_rank_gain(base)
    print(
        f"\nown rank against {base_name}: {accuracy:+.2f} ± {accuracy_sem:.2f} points / "
        f"{1000 * loglik:+.1f} ± {1000 * loglik_sem:.1f} millinats a move (paired)"
    )


if __name__ == "__main__":
    main()
