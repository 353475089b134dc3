"""Training speed of Kibitz's own nets, and the saving of the all-ranks-in-one-pass Go policy.

Prints, as medians over repeats:
- s-score training positions/s (forward + backward + AdamW step) for chess and Go at the shipped
  sizes and at the 6 × 64 default, on real positions (first games of each rank group);
- Go policy inference: all 19 ranks from one trunk pass vs one full forward per rank, and
  the ratio (the saving extraction gets when it needs priors at many ranks).

Runs on CPU; with ``--device cuda`` (a GPU machine) the same measurements run there.

    python bench/speed/bench_train.py [--repeats 5] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from train_real_games import chess_games, go_games

from pipeline.nets.go_rank_policy import GO_POLICY_RANKS, GoRankPolicyConfig, GoRankPolicyNet
from pipeline.nets.sscore_net import SScoreNet, SScoreNetConfig
from pipeline.train.sscore_batches import build_pool, net_inputs, sample_batch


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train_rate(pool, config: SScoreNetConfig, *, repeats: int, device: str) -> float:
    """Median training positions/s of one s-score step on a grouped batch (G=2, P=4)."""
    torch.manual_seed(0)
    net = SScoreNet(config).to(device).train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    times, n = [], 0
    for i in range(repeats + 1):
        batch = sample_batch(pool, rng, groups=2, positions=4)
        inputs = [t.to(device) for t in net_inputs(pool, batch.rows, batch.moves)]
        n = batch.rows.size
        _sync(device)
        t0 = time.perf_counter()
        sscore, policy, value = net(*inputs)
        loss = sscore.mean() + policy.logsumexp(1).mean() + value.square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        _sync(device)
        if i:  # the first step warms up allocators and kernels
            times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


@torch.inference_mode()
def rank_policy_rates(
    pool, config: GoRankPolicyConfig, *, batch: int, repeats: int, device: str
) -> tuple[float, float]:
    """(positions/s with all ranks in one pass, positions/s with one full forward per rank)."""
    torch.manual_seed(0)
    net = GoRankPolicyNet(config).to(device).eval()
    rows = np.arange(batch)
    spatial = torch.from_numpy(pool.planes[rows]).float().to(device)
    global_ = torch.from_numpy(pool.global_[rows]).to(device)
    one_pass, per_rank = [], []
    for i in range(repeats + 1):
        _sync(device)
        t0 = time.perf_counter()
        net(spatial, global_)
        _sync(device)
        t1 = time.perf_counter()
        for r in range(len(GO_POLICY_RANKS)):
            net.forward_rank(spatial, global_, r)
        _sync(device)
        t2 = time.perf_counter()
        if i:
            one_pass.append(t1 - t0)
            per_rank.append(t2 - t1)
    return batch / statistics.median(one_pass), batch / statistics.median(per_rank)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    print(
        f"device {args.device}, torch threads {torch.get_num_threads()}, medians of {args.repeats}"
    )
    pools = {
        "chess": build_pool(chess_games(6), "chess", positions_per_instance=8, seed=0),
        "go": build_pool(go_games(3), "go", positions_per_instance=8, seed=0),
    }
    print("\ns-score training (G=2 groups x ranks+r-inf x P=4 positions per step)")
    print("| game | net | train positions/s | vs 6x64 |")
    print("|---|---|---|---|")
    for game, shipped in (("chess", (4, 32)), ("go", (4, 32))):
        base = train_rate(
            pools[game], SScoreNetConfig(game, 6, 64), repeats=args.repeats, device=args.device
        )
        small = train_rate(
            pools[game], SScoreNetConfig(game, *shipped), repeats=args.repeats, device=args.device
        )
        print(f"| {game} | 6x64 (default) | {base:.0f} | 1.00 |")
        print(
            f"| {game} | {shipped[0]}x{shipped[1]} (shipped) | {small:.0f} | {small / base:.2f} |"
        )
    print(f"\nGo policy inference, {len(GO_POLICY_RANKS)} ranks, batch 64")
    print("| net | all ranks, one trunk pass (pos/s) | one forward per rank (pos/s) | saving |")
    print("|---|---|---|---|")
    for blocks, channels in ((4, 32), (6, 64)):
        cfg = GoRankPolicyConfig(blocks, channels)
        one, per = rank_policy_rates(
            pools["go"], cfg, batch=64, repeats=args.repeats, device=args.device
        )
        print(f"| {blocks}x{channels} | {one:.0f} | {per:.0f} | {one / per:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
