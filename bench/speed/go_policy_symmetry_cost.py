"""What ``--random-symmetries`` costs a training step of the Go policy: plain against turned.

``kibitz train policy go --random-symmetries`` shows each board under a random one of its 8
symmetries and turns the features back (``GoRankPolicyNet.turned_features``). The trunk pass is
the same size either way; this measures what the turns add to a forward and backward pass, on
real held-out Fox positions, the two kinds interleaved so that a noisy machine slows both::

    python bench/speed/go_policy_symmetry_cost.py [--model kibitz-go-policy] [--batch 32]

Prints the median seconds of each and their ratio (turned / plain).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

# The held-out games are the accuracy benches' (bench/accuracy/sscore_held_out.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "accuracy"))

from sscore_held_out import held_out_sets

from pipeline.nets.go_rank_policy import BOARD_SYMMETRIES
from pipeline.nets.loading import load_net
from pipeline.train.sscore_batches import build_pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="kibitz-go-policy", help="registry name or file")
    parser.add_argument("--batch", type=int, default=32, help="positions a step (default 32)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps of each kind")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    net = load_net(args.model).train()
    games = next(iter(held_out_sets("go").values()))
    pool = build_pool(games.slice(0, args.batch), "go", positions_per_instance=1, seed=0)
    rows = np.arange(min(args.batch, len(pool)))
    spatial = torch.from_numpy(pool.planes[rows]).float()
    global_ = torch.from_numpy(pool.global_[rows])
    symmetry = torch.from_numpy(np.random.default_rng(0).integers(0, BOARD_SYMMETRIES, len(rows)))

    def step(turned: bool) -> float:
        t = time.perf_counter()
        h = (
            net.turned_features(spatial, global_, symmetry)
            if turned
            else net.features(spatial, global_)
        )
        h.square().mean().backward()
        net.zero_grad(set_to_none=True)
        return time.perf_counter() - t

    step(False), step(True)  # warm-up
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for turned in (False, True):
            times[turned].append(step(turned))
    plain, turned = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"{args.model}, {len(rows)} positions, {args.threads} thread(s), forward and backward: "
        f"plain {plain:.3f} s, turned {turned:.3f} s (medians of {args.repeats}), "
        f"ratio {turned / plain:.3f}"
    )


if __name__ == "__main__":
    main()
