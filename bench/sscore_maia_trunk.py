"""Does a trunk that already judges human moves separate the top chess bands? An s-score head on
a frozen Maia-1 net, trained with the Bradley-Terry loss, scored on held-out games.

    python bench/sscore_maia_trunk.py --games kibitz-out/games-chess [--maia maia-1900]

``kibitz-sscore-chess`` (4 × 32, trained from scratch) ranks 2400-2600 below 2200-2400 on both
held-out sets (docs/train.md). This experiment keeps Kibitz's score head (``ScoreHead``: move
planes + trunk features + the policy's log-likelihood and entropy of the move) and the s-score
batches and loss (``pipeline/sscore_batches.py``, ``pipeline/train_sscore.py``), but takes the
trunk features and the policy from a Maia-1 net (6 × 64 SE, trained by CSSLab on millions of
Lichess games) and keeps them frozen. Because the trunk does not train, its features and log
policy are computed once per position (float16 in memory) and only the head trains, which is
what makes the experiment fit on a CPU. It trains the head with and without r∞ and prints each
held-out set's mean per band with the gap to the band below in standard errors, with
``bench/sscore_held_out.py``'s held-out sets and tables, and Chen et al.'s rank prediction on the
evaluation split (references: the mean per band of all training instances, 24 moves each).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pipeline import chess_spec, model_registry
from pipeline.sscore_batches import PositionPool, build_pool, eligible_instances, sample_batch
from pipeline.sscore_eval import group_means, instance_means, rank_prediction_accuracy
from pipeline.sscore_net import ScoreHead
from pipeline.train_loop import lr_at
from pipeline.train_sscore import SScoreTrainConfig, bradley_terry_loss
from pipeline.training_games import load_split_games, read_games

sys.path.insert(0, str(Path(__file__).parent))
from sscore_held_out import held_out_sets, report

FROM = torch.from_numpy(chess_spec.POLICY_FROM.astype(np.int64))
TO = torch.from_numpy(chess_spec.POLICY_TO.astype(np.int64))


class FrozenTrunk:
    """Maia's body features (N, F, 8, 8) and log policy (N, 1858) of every pool position."""

    def __init__(self, maia: torch.nn.Module, pool: PositionPool, batch: int = 512) -> None:
        n, f = len(pool), maia.filters
        self.body = torch.empty(n, f, 8, 8, dtype=torch.float16)
        self.logp = torch.empty(n, chess_spec.POLICY_SIZE, dtype=torch.float16)
        self.entropy = torch.empty(n)
        with torch.inference_mode():
            for start in range(0, n, batch):
                rows = slice(start, min(start + batch, n))
                planes = torch.from_numpy(pool.planes[rows].astype(np.float32))  # (b, 112, 8, 8)
                x = maia.tower(maia.act(maia.input_conv(planes)))  # (b, F, 8, 8)
                p = maia.policy_conv(maia.act(maia.policy_conv1(x))).flatten(1)
                logits = p.index_select(1, maia.policy_gather)  # (b, 1858)
                logp = torch.log_softmax(logits, dim=1)  # (b, 1858)
                self.body[rows] = x.half()
                self.logp[rows] = logp.half()
                self.entropy[rows] = -(logp.exp() * logp).sum(dim=1)

    def head_inputs(
        self, rows: np.ndarray, moves: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(features, move planes, policy features) of flat rows shown flat moves."""
        r, m = torch.from_numpy(rows.reshape(-1)), torch.from_numpy(moves.reshape(-1))
        b = len(r)
        planes = torch.zeros(b, 2, 64)
        planes[torch.arange(b), 0, FROM[m]] = 1.0
        planes[torch.arange(b), 1, TO[m]] = 1.0
        loglik = self.logp[r, m].float()
        extra = torch.stack([loglik, self.entropy[r]], dim=1)  # (b, 2)
        return self.body[r].float(), planes.reshape(b, 2, 8, 8), extra


def train_head(
    trunk: FrozenTrunk, pool: PositionPool, config: SScoreTrainConfig, filters: int
) -> ScoreHead:
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    head = ScoreHead(filters, 2, config.score_channels, extra=2)
    opt = torch.optim.AdamW(head.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    eligible = eligible_instances(pool, config.positions)
    for step in range(config.max_steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, base_lr=config.lr, total_steps=config.max_steps,
                                warmup_steps=config.warmup_steps,
                                final_fraction=config.final_lr_fraction)  # fmt: skip
        batch = sample_batch(pool, rng, groups=config.groups, positions=config.positions,
                             with_r_inf=config.with_r_inf, eligible=eligible)  # fmt: skip
        s = head(*trunk.head_inputs(batch.rows, batch.moves))  # (B, 1)
        loss = bradley_terry_loss(s.reshape(batch.rows.shape).mean(dim=2))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return head.eval()


@torch.inference_mode()
def head_instance_scores(head: ScoreHead, trunk: FrozenTrunk, pool: PositionPool) -> np.ndarray:
    """(I,) mean score of the played moves of each instance, as ``instance_scores`` for a net."""
    rows = np.arange(len(pool))
    scores = np.concatenate([
        head(*trunk.head_inputs(rows[i : i + 2048], pool.played[rows[i : i + 2048]]))[:, 0].numpy()
        for i in range(0, len(rows), 2048)
    ])  # fmt: skip
    return instance_means(pool, scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", required=True, help="chess games table (kibitz ingest)")
    parser.add_argument("--maia", default="maia-1900", help="registry name of the Maia net")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--positions-per-instance", type=int, default=24)
    args = parser.parse_args()
    maia = model_registry.load_net(args.maia).eval()
    base = SScoreTrainConfig(game="chess", max_steps=args.steps)
    games_dir = Path(args.games)
    t0 = time.perf_counter()
    train_games = load_split_games(games_dir, "chess", "train", split_config=base.split_config(),
                                   table=read_games(games_dir, "chess"))  # fmt: skip
    pool = build_pool(train_games, "chess", positions_per_instance=args.positions_per_instance,
                      seed=0)  # fmt: skip
    trunk = FrozenTrunk(maia, pool)
    print(f"{args.maia} features of {len(pool):,} training positions: "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    held_out = {}
    for name, games in held_out_sets("chess").items():
        held = build_pool(games, "chess", positions_per_instance=None, seed=3)
        held_out[name] = (held, FrozenTrunk(maia, held))
    for with_r_inf in (True, False):
        config = SScoreTrainConfig(game="chess", max_steps=args.steps, with_r_inf=with_r_inf)
        t0 = time.perf_counter()
        head = train_head(trunk, pool, config, maia.filters)
        print(f"\nhead on frozen {args.maia}, {'with' if with_r_inf else 'without'} r∞, "
              f"{args.steps} steps ({time.perf_counter() - t0:.0f} s); held-out means per band:")  # fmt: skip
        labels = pool.rank_groups
        parts = []
        for name, (held, held_trunk) in held_out.items():
            scores, groups = head_instance_scores(head, held_trunk, held), held.instance_group
            report(name, scores, groups.astype(np.int64), labels)
            parts.append((scores, groups))
        reference, _ = group_means(head_instance_scores(head, trunk, pool),
                                   pool.instance_group.astype(np.int64), len(labels))  # fmt: skip
        exact, near = rank_prediction_accuracy(reference, *parts[0])
        print("rank prediction on the evaluation split, n = 1/5/10/15/20: "
              + " / ".join(f"{v:.1f}" for v in exact.values()) + " % (±1: "
              + " / ".join(f"{v:.1f}" for v in near.values()) + " %)")  # fmt: skip
        report("both, pooled", np.concatenate([s for s, _ in parts]),
               np.concatenate([g for _, g in parts]).astype(np.int64), labels)  # fmt: skip


if __name__ == "__main__":
    main()
