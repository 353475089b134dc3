"""Does a trunk that already judges human moves separate the top chess bands? An s-score head on
a frozen Maia-1 net, trained with the Bradley-Terry loss, scored on held-out games.

    python bench/accuracy/sscore_maia_trunk.py --games kibitz-out/games-chess [--maia maia-1900]
    python bench/accuracy/sscore_maia_trunk.py --games kibitz-out/games-chess --fine-tune --device cuda

``kibitz-sscore-chess`` (4 × 32, trained from scratch) ranks 2400-2600 below 2200-2400 on both
held-out sets (docs/research/log-nets.md). This experiment keeps Kibitz's score head (``ScoreHead``: move
planes + trunk features + the policy's log-likelihood and entropy of the move) and the s-score
batches and loss (``pipeline/train/sscore_batches.py``, ``pipeline/train/sscore.py``), but takes the
trunk features and the policy from a Maia-1 net (6 × 64 SE, trained by CSSLab on millions of
Lichess games) and keeps them frozen. Because the trunk does not train, its features and log
policy are computed once per position (float16 in memory) and only the head trains, which is
what makes the experiment fit on a CPU. It trains the head with and without r∞ and prints each
held-out set's mean per band with the gap to the band below in standard errors, with
``bench/accuracy/sscore_held_out.py``'s held-out sets and tables, and Chen et al.'s rank prediction on the
evaluation split (references: the mean per band of all training instances, 24 moves each).

``--fine-tune`` (meant for a GPU) trains Maia's trunk and policy together with the head: the
Bradley-Terry loss plus the policy cross-entropy of the played moves (``policy_weight``, as
``kibitz train sscore``), the trunk at ``--trunk-lr``. It prints the held-out top-band gap every
``--report-every`` steps, then the full report of the final weights. A fine-tuned Maia is a
derivative of Maia and so GPL-3.0; this bench keeps nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.chess_game import spec as chess_spec
from pipeline.nets.loading import load_net
from pipeline.nets.sscore_net import ScoreHead
from pipeline.train.bradley_terry import bradley_terry_loss
from pipeline.train.games import load_split_games, read_games
from pipeline.train.loop import lr_at
from pipeline.train.sscore import SScoreTrainConfig
from pipeline.train.sscore_batches import PositionPool, build_pool, eligible_instances, sample_batch
from pipeline.train.sscore_eval import (
    adjacent_gap_z,
    group_means,
    group_sems,
    instance_means,
    rank_prediction_accuracy,
)

sys.path.insert(0, str(Path(__file__).parent))
from sscore_held_out import held_out_sets, report

FROM = torch.from_numpy(chess_spec.POLICY_FROM.astype(np.int64))
TO = torch.from_numpy(chess_spec.POLICY_TO.astype(np.int64))


def maia_features(maia: torch.nn.Module, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Maia's body features (B, F, 8, 8) and policy logits (B, 1858) of (B, 112, 8, 8) planes."""
    x = maia.tower(maia.act(maia.input_conv(planes)))  # (B, F, 8, 8)
    p = maia.policy_conv(maia.act(maia.policy_conv1(x))).flatten(1)  # (B, 80 * 64)
    return x, p.index_select(1, maia.policy_gather)


def move_planes(moves: torch.Tensor) -> torch.Tensor:
    """(B, 2, 8, 8) from-square and to-square planes of (B,) policy indices."""
    b = len(moves)
    planes = torch.zeros(b, 2, 64, device=moves.device)
    planes[torch.arange(b, device=moves.device), 0, FROM.to(moves.device)[moves]] = 1.0
    planes[torch.arange(b, device=moves.device), 1, TO.to(moves.device)[moves]] = 1.0
    return planes.reshape(b, 2, 8, 8)


class FrozenTrunk:
    """Maia's body features (N, F, 8, 8) and log policy (N, 1858) of every pool position."""

    def __init__(
        self, maia: torch.nn.Module, pool: PositionPool, batch: int = 512, device: str = "cpu"
    ) -> None:
        n, f = len(pool), maia.filters
        self.body = torch.empty(n, f, 8, 8, dtype=torch.float16)
        self.logp = torch.empty(n, chess_spec.POLICY_SIZE, dtype=torch.float16)
        self.entropy = torch.empty(n)
        with torch.inference_mode():
            for start in range(0, n, batch):
                rows = slice(start, min(start + batch, n))
                planes = torch.from_numpy(pool.planes[rows]).to(device).float()  # (b, 112, 8, 8)
                x, logits = maia_features(maia, planes)
                logp = torch.log_softmax(logits, dim=1)  # (b, 1858)
                self.body[rows] = x.half().cpu()
                self.logp[rows] = logp.half().cpu()
                self.entropy[rows] = -(logp.exp() * logp).sum(dim=1).cpu()

    def head_inputs(
        self, rows: np.ndarray, moves: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(features, move planes, policy features) of flat rows shown flat moves."""
        r, m = torch.from_numpy(rows.reshape(-1)), torch.from_numpy(moves.reshape(-1))
        loglik = self.logp[r, m].float()
        extra = torch.stack([loglik, self.entropy[r]], dim=1)  # (b, 2)
        return self.body[r].float(), move_planes(m), extra


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


class MaiaSScore(torch.nn.Module):
    """Maia's trunk and policy, trainable, under the score head: (s-score (B, 1), logits (B, 1858)).

    The head reads the same inputs as on the frozen trunk; the policy features are detached, as
    in ``SScoreNet``, so the Bradley-Terry loss reaches the trunk only through its features.
    """

    def __init__(self, maia: torch.nn.Module, score_channels: int) -> None:
        super().__init__()
        self.maia = maia.requires_grad_(True)
        self.head = ScoreHead(maia.filters, 2, score_channels, extra=2)

    def forward(
        self, planes: torch.Tensor, moves: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x, logits = maia_features(self.maia, planes)
        logp = torch.log_softmax(logits.float(), dim=1)  # (B, 1858)
        loglik = logp.gather(1, moves[:, None])  # (B, 1)
        entropy = -(logp.exp() * logp).sum(dim=1, keepdim=True)  # (B, 1)
        extra = torch.cat([loglik, entropy], dim=1).detach()
        return self.head(x, move_planes(moves), extra), logits


def fine_tune(
    model: MaiaSScore,
    pool: PositionPool,
    config: SScoreTrainConfig,
    trunk_lr: float,
    device: str,
    on_report: Callable[[int], None],
    report_every: int,
) -> None:
    """Train trunk, policy and head: Bradley-Terry + policy_weight × policy cross-entropy."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    planes = torch.from_numpy(pool.planes).to(device)  # (N, 112, 8, 8) uint8, on the device
    played = torch.from_numpy(pool.played).to(device)  # (N,)
    groups = [
        {"params": model.head.parameters(), "lr": config.lr, "base_lr": config.lr},
        {"params": model.maia.parameters(), "lr": trunk_lr, "base_lr": trunk_lr},
    ]
    opt = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    eligible = eligible_instances(pool, config.positions)
    model.train()
    for step in range(config.max_steps):
        scale = lr_at(step, base_lr=1.0, total_steps=config.max_steps,
                      warmup_steps=config.warmup_steps, final_fraction=config.final_lr_fraction)  # fmt: skip
        for group in opt.param_groups:
            group["lr"] = group["base_lr"] * scale
        batch = sample_batch(pool, rng, groups=config.groups, positions=config.positions,
                             with_r_inf=config.with_r_inf, eligible=eligible)  # fmt: skip
        rows = torch.from_numpy(batch.rows.reshape(-1)).to(device)
        moves = torch.from_numpy(batch.moves.reshape(-1)).to(device)
        real = torch.from_numpy(batch.real.reshape(-1)).to(device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device != "cpu"):
            s, logits = model(planes[rows].float(), moves)  # (B, 1), (B, 1858)
        beta = s.float().reshape(batch.rows.shape).mean(dim=2)  # (G, R)
        policy_loss = F.cross_entropy(logits[real].float(), played[rows][real])
        loss = bradley_terry_loss(beta) + config.policy_weight * policy_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % report_every == 0 or step + 1 == config.max_steps:
            on_report(step + 1)
    model.eval()


@torch.inference_mode()
def model_instance_scores(
    model: MaiaSScore, pool: PositionPool, device: str, batch: int = 4096
) -> np.ndarray:
    """(I,) mean s-score of each instance's played moves under the (fine-tuned) model."""
    was_training = model.training
    model.eval()
    scores = []
    for start in range(0, len(pool), batch):
        planes = torch.from_numpy(pool.planes[start : start + batch]).to(device).float()
        moves = torch.from_numpy(pool.played[start : start + batch]).to(device)
        scores.append(model(planes, moves)[0][:, 0].float().cpu().numpy())
    model.train(was_training)
    return instance_means(pool, np.concatenate(scores))


def top_gaps(score: Callable[[PositionPool], np.ndarray], held_out: dict[str, PositionPool]) -> str:
    """One line: each held-out set's (and the pooled) top gap in s.e. and its rising steps."""
    parts = [(score(p), p.instance_group.astype(np.int64)) for p in held_out.values()]
    parts.append(tuple(np.concatenate(x) for x in zip(*parts, strict=True)))
    r = len(next(iter(held_out.values())).rank_groups)
    cells = []
    for scores, groups in parts:
        means, _ = group_means(scores, groups, r)
        z = adjacent_gap_z(means, group_sems(scores, groups, r))
        cells.append(f"top {z[-1]:+.1f} s.e., rises {int(np.sum(z > 0))}/{r - 1}")
    return " | ".join(cells)


def print_results(
    score: Callable[[PositionPool], np.ndarray],
    pool: PositionPool,
    held_out: dict[str, PositionPool],
) -> None:
    """Held-out tables, Chen et al.'s rank prediction on the evaluation split, pooled table."""
    labels = pool.rank_groups
    parts = []
    for name, held in held_out.items():
        scores, groups = score(held), held.instance_group.astype(np.int64)
        report(name, scores, groups, labels)
        parts.append((scores, groups))
    reference, _ = group_means(score(pool), pool.instance_group.astype(np.int64), len(labels))
    exact, near = rank_prediction_accuracy(reference, *parts[0])
    print("rank prediction on the evaluation split, n = 1/5/10/15/20: "
          + " / ".join(f"{v:.1f}" for v in exact.values()) + " % (±1: "
          + " / ".join(f"{v:.1f}" for v in near.values()) + " %)")  # fmt: skip
    report("both, pooled", np.concatenate([s for s, _ in parts]),
           np.concatenate([g for _, g in parts]).astype(np.int64), labels)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", required=True, help="chess games table (kibitz ingest)")
    parser.add_argument("--maia", default="maia-1900", help="registry name of the Maia net")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--positions-per-instance", type=int, default=24)
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")
    parser.add_argument("--fine-tune", action="store_true", help="train Maia's trunk too")
    parser.add_argument("--trunk-lr", type=float, default=1e-4, help="--fine-tune: trunk LR")
    parser.add_argument("--groups", type=int, default=4, help="G groups per batch")
    parser.add_argument("--report-every", type=int, default=1000, help="--fine-tune: steps")
    parser.add_argument("--r-inf", choices=["both", "with", "without"], default="both")
    args = parser.parse_args()
    base = SScoreTrainConfig(game="chess", max_steps=args.steps)
    games_dir = Path(args.games)
    t0 = time.perf_counter()
    train_games = load_split_games(games_dir, "chess", "train", split_config=base.split_config(),
                                   table=read_games(games_dir, "chess"))  # fmt: skip
    pool = build_pool(train_games, "chess", positions_per_instance=args.positions_per_instance,
                      seed=0)  # fmt: skip
    held_out = {
        name: build_pool(games, "chess", positions_per_instance=None, seed=3)
        for name, games in held_out_sets("chess").items()
    }
    print(f"pools: {len(pool):,} training positions, held-out "
          f"{', '.join(f'{len(h):,}' for h in held_out.values())} ({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    variants = {"both": (True, False), "with": (True,), "without": (False,)}[args.r_inf]
    if not args.fine_tune:
        maia = load_net(args.maia).eval().to(args.device)
        t0 = time.perf_counter()
        trunks = {
            id(p): FrozenTrunk(maia, p, device=args.device) for p in (pool, *held_out.values())
        }
        print(f"{args.maia} features: {time.perf_counter() - t0:.0f} s")
    for with_r_inf in variants:
        config = SScoreTrainConfig(game="chess", max_steps=args.steps, with_r_inf=with_r_inf,
                                   groups=args.groups)  # fmt: skip
        kind = f"{'with' if with_r_inf else 'without'} r∞, {args.steps} steps, G = {args.groups}"
        t0 = time.perf_counter()
        if args.fine_tune:
            model = MaiaSScore(load_net(args.maia), config.score_channels)
            model = model.to(args.device)

            def score(p: PositionPool, model: MaiaSScore = model) -> np.ndarray:
                return model_instance_scores(model, p, args.device)

            def on_report(step: int, t0: float = t0, score=score) -> None:
                print(f"  step {step} ({time.perf_counter() - t0:.0f} s): {top_gaps(score, held_out)}",
                      flush=True)  # fmt: skip

            print(f"\nfine-tuning {args.maia}, {kind}, trunk LR {args.trunk_lr:g}; held-out top "
                  "gap (evaluation split | candidating | pooled):")  # fmt: skip
            fine_tune(model, pool, config, args.trunk_lr, args.device, on_report, args.report_every)
        else:
            head = train_head(trunks[id(pool)], pool, config, maia.filters)

            def score(p: PositionPool, head: ScoreHead = head) -> np.ndarray:
                return head_instance_scores(head, trunks[id(p)], p)

            print(f"\nhead on frozen {args.maia}, {kind} ({time.perf_counter() - t0:.0f} s)")
        print(f"held-out means per band of the final weights ({time.perf_counter() - t0:.0f} s):")
        print_results(score, pool, held_out)


if __name__ == "__main__":
    main()
