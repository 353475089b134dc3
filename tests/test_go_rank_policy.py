"""The rank-conditioned Go policy: one trunk pass equals per-rank forwards; shipped net quality."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from scipy.stats import spearmanr
from train_real_games import evaluation_pool, go_games

from pipeline import model_registry
from pipeline.go_rank_policy import (
    GO_POLICY_RANKS,
    GoRankPolicyConfig,
    GoRankPolicyNet,
    UnknownRankError,
    rank_index,
    rank_number,
)
from pipeline.sscore_batches import build_pool
from pipeline.train_go_policy import evaluate_policy

# The held-out subset of test_sscore.py's Go monotonicity test (evaluation-split games among the
# first HELD_OUT_READ of each group's file, 16 moves per instance), shared within a session.
HELD_OUT_READ = 400
SHIPPED_MIN_ACCURACY = 38.0  # measured 40.2 % over this subset (docs/train.md)


@pytest.fixture(scope="module")
def pool():
    return build_pool(go_games(3), "go", positions_per_instance=8, seed=0)


def test_rank_scale():
    assert (
        GO_POLICY_RANKS[0] == "10k" and GO_POLICY_RANKS[-1] == "9d" and len(GO_POLICY_RANKS) == 19
    )
    assert rank_number("1k") == 0 and rank_number("5k") == -4 and rank_number("9d") == 9
    assert rank_index("1d") == 10
    with pytest.raises(UnknownRankError, match="'pro'"):
        rank_index("pro")


def test_one_trunk_pass_equals_per_rank_forwards(pool):
    torch.manual_seed(0)
    net = GoRankPolicyNet(GoRankPolicyConfig(blocks=2, channels=16, head_channels=8))
    for p in net.parameters():  # non-trivial rank parameters so the ranks really differ
        torch.nn.init.normal_(p, std=0.2)
    net.eval()
    rows = np.arange(12)
    spatial = torch.from_numpy(pool.planes[rows]).float()
    global_ = torch.from_numpy(pool.global_[rows])
    calls = []
    net.trunk.register_forward_hook(lambda *_: calls.append(1))
    with torch.inference_mode():
        all_ranks = net(spatial, global_)  # (B, R, 362)
        assert len(calls) == 1
        assert all_ranks.shape == (12, 19, 362)
        for r in range(len(GO_POLICY_RANKS)):
            one = net.forward_rank(spatial, global_, r)  # (B, 362)
            torch.testing.assert_close(all_ranks[:, r], one, atol=1e-5, rtol=1e-5)
            view = net.at_rank(GO_POLICY_RANKS[r])(spatial, global_)
            torch.testing.assert_close(view, one, atol=0, rtol=0)
    assert len(calls) == 1 + 2 * len(GO_POLICY_RANKS)  # the per-rank baseline: one trunk each
    assert not torch.allclose(all_ranks[:, 0], all_ranks[:, -1])
    # Training reads only each position's own rank: the same logits, one rank's head each.
    movers = torch.tensor([0, 5, 18, 9, 9, 12, 1, 2, 3, 4, 17, 16])
    with torch.inference_mode():
        own = net.mover_logits(net.features(spatial, global_), movers)  # (B, 362)
    torch.testing.assert_close(own, all_ranks[torch.arange(12), movers], atol=1e-5, rtol=1e-5)


def test_untrained_ranks_are_the_linear_extrapolation():
    net = model_registry.load_net("kibitz-go-policy")
    trained = net.header["trained_ranks"]
    assert trained == ["5k", "4k", "3k", "2k", "1k", *[f"{n}d" for n in range(1, 10)]]
    untrained = [rank_index(r) for r in GO_POLICY_RANKS if r not in trained]
    assert [GO_POLICY_RANKS[i] for i in untrained] == ["10k", "9k", "8k", "7k", "6k"]
    for param in (net.gamma, net.beta, net.weight, net.pass_weight, net.bias):
        assert torch.count_nonzero(param.delta[untrained]) == 0
        assert torch.count_nonzero(param.delta[[rank_index(r) for r in trained]]) > 0


def test_shipped_policy_quality_and_rank_conditioning_on_held_out_games():
    """Issue 8's matrix: conditioned on rank group a, games of group b.

    What the shipped CPU net resolves: every group's games are predicted better conditioned on
    their own group than on the far end of the rank range, and the best conditioning of a column
    rises with the column's rank. Whether the diagonal is the exact best is below the noise of
    this net (adjacent ranks differ by a few millinats per move; docs/train.md, issue #8 open).
    """
    entry = model_registry.resolve("kibitz-go-policy")
    assert entry.format == "kibitz-go-policy" and entry.game == "go"
    net = model_registry.load_net("kibitz-go-policy")
    result = evaluate_policy(net, evaluation_pool("go", HELD_OUT_READ, 16))
    overall = float((result.accuracy * result.positions).sum() / result.positions.sum())
    assert overall >= SHIPPED_MIN_ACCURACY
    assert np.all(result.loglik > -np.log(362))  # better than uniform over all points
    m, r = result.matrix_loglik, len(result.groups)
    own = np.diag(m)
    far_end = np.where(np.arange(r) < r / 2, r - 1, 0)  # the end of the range farther away
    assert np.all(own > m[far_end, np.arange(r)]), (own - m[far_end, np.arange(r)]).round(4)
    best = m.argmax(axis=0)  # best conditioning of each games' group
    assert spearmanr(best, np.arange(r)).statistic >= 0.6, best


def test_shipped_policy_onnx_matches_torch(pool):
    entry = model_registry.resolve("kibitz-go-policy")
    net = model_registry.load_net("kibitz-go-policy")
    rows = np.arange(8)
    spatial, global_ = pool.planes[rows].astype(np.float32), pool.global_[rows]
    with torch.inference_mode():
        expected = net(torch.from_numpy(spatial), torch.from_numpy(global_)).numpy()
    session = ort.InferenceSession(
        str(entry.file.parent / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(["policy"], {"spatial": spatial, "global": global_})
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
