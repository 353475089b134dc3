"""What a rank-conditioned Go policy costs a position, by trunk: multiply-adds and weights.

The Go policy of issue #28 puts Kibitz's late rank head on KataGo g170-b6c96's trunk; this
counts one forward of one position with torch's FLOP counter (a multiply-add is two FLOPs) for
that net and for from-scratch trunks of 6 × 64 and 4 × 32 (``kibitz-go-policy-4x32``'s
shape), each with and without the head::

    python bench/gpu/go_policy_trunk_cost.py

Prints one line per trunk: millions of multiply-adds a position with the head and without it,
and the trunk's weights.
"""

from __future__ import annotations

import torch
from bench_gpu_nets import flops_per_position

from pipeline.nets.go_rank_policy import (
    GoRankPolicyConfig,
    build_go_rank_policy,
    policy_on_katago_trunk,
)
from pipeline.nets.loading import load_net

KATAGO = "katago-g170-b6c96"
HEAD_CHANNELS = 32


def main() -> None:
    nets = {
        f"{KATAGO} trunk": policy_on_katago_trunk(load_net(KATAGO), HEAD_CHANNELS),
        "6 x 64 trunk": build_go_rank_policy(GoRankPolicyConfig(6, 64, HEAD_CHANNELS)),
        "4 x 32 trunk (kibitz-go-policy-4x32)": build_go_rank_policy(
            GoRankPolicyConfig(4, 32, HEAD_CHANNELS)
        ),
    }
    for name, net in nets.items():
        net.eval()
        inputs = net.example_inputs(1)
        with torch.no_grad():
            whole = flops_per_position(net, inputs) / 2
            trunk = flops_per_position(net.trunk, inputs) / 2
        weights = sum(p.numel() for p in net.trunk.parameters())
        print(f"{name}: {whole / 1e6:.1f} M multiply-adds a position with the rank head"
              f" ({HEAD_CHANNELS} channels), {trunk / 1e6:.1f} M the trunk alone;"
              f" trunk {weights:,} weights")  # fmt: skip


if __name__ == "__main__":
    main()
