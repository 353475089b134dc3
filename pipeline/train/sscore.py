"""Train an s-score net (Chen, Shih & Wu 2025) on a games table: ``kibitz train sscore chess|go``.

Loss of one batch (``pipeline/train/sscore_batches.py``: G groups × R ranks × P positions, rank axis
weakest → strongest, index 0 = r∞ when on): with ``β[g, i]`` the mean s-score of group g's P
positions of rank i (i = 1…R, 1 the weakest), the Bradley-Terry term is

    L_BT = mean over g and over i = 1…R of  −log softmax(β[g, 1..i])[i]
         = mean_{g,i} ( logsumexp(β[g, 1..i]) − β[g, i] )

i.e. each rank must beat every weaker rank of its group (the i = 1 term is always 0 and is
counted in the mean). Added to it: the policy cross-entropy (softmax over the whole policy
vector, as the score head reads it: ``pipeline/nets/sscore_net.py``) and the value MSE (game result
from the mover's view, +1/0/−1), both on the real-move positions only (not r∞), weighted by
``policy_weight`` / ``value_weight``. The shared loop (LR schedule, logging, validation,
checkpoints) is ``pipeline/train/loop.py``; this module supplies the batches and the loss
(``L_BT`` is ``pipeline/train/bradley_terry.py``'s; the pools, rank-group gaps and result it
shares with ``kibitz train sscore-levels`` are ``pipeline/train/sscore_runs.py``'s).

Data: ``--games DIR`` is a games table (``kibitz ingest``); train / validation / evaluation are
the shared split of ``pipeline/core/data_split.py``. Validation (every epoch) reports the BT loss and
the share of correctly ordered rank pairs on validation games; at the end the Chen et al.
protocol runs on evaluation games (``pipeline/train/sscore_eval.py``) and goes into the model card.

    kibitz train sscore chess --games kibitz-out/games-chess --out kibitz-out/sscore-chess
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.core import tracking
from pipeline.nets.formats import SSCORE_FORMAT
from pipeline.nets.sscore_net import SScoreNet, SScoreNetConfig
from pipeline.train.bradley_terry import bradley_terry_loss, ordered_pair_share
from pipeline.train.device import module_device
from pipeline.train.loop import (
    StepOutput,
    TimeBudget,
    TrainSettings,
    export_tracked,
    restore_best,
    run_loop,
    run_params,
    run_record,
    start_run,
)
from pipeline.train.sscore_batches import (
    PositionPool,
    eligible_instances,
    net_inputs,
    sample_batch,
)
from pipeline.train.sscore_eval import evaluate_sscore, instance_scores
from pipeline.train.sscore_runs import (
    TrainResult,
    evaluation_pools,
    log_evaluation,
    rank_gaps_of,
    split_pools,
)

logger = logging.getLogger(__name__)

EXPERIMENT = "kibitz-train-sscore"


@dataclass(kw_only=True)
class SScoreTrainConfig(TrainSettings):
    """Everything that decides a training run; saved in checkpoints, MLflow and the model card."""

    game: str  # "chess" | "go"
    blocks: int = 6
    channels: int = 64
    score_channels: int = 32
    policy_features: bool = True  # the score head reads the policy's move likelihood (sscore_net)
    score_dropout: float = 0.0  # training-time dropout in the score head's MLP (a regulariser)
    groups: int = 4  # G: groups per batch
    positions: int = 4  # P: positions per rank and group, all from one player instance
    with_r_inf: bool = True  # Chen et al.'s extra weakest rank of random legal moves
    max_reference_games: int = 1200  # training games whose means are the protocol's references
    policy_weight: float = 0.5
    value_weight: float = 0.5
    validation_batches: int = 24

    def net_config(self) -> SScoreNetConfig:
        return SScoreNetConfig(
            self.game, self.blocks, self.channels, self.score_channels,
            policy_features=self.policy_features,
        )  # fmt: skip


def _step_losses(
    net: SScoreNet,
    pool: PositionPool,
    rows: np.ndarray,
    moves: np.ndarray,
    real: np.ndarray,
    shape: tuple[int, ...],
) -> dict[str, torch.Tensor]:
    device = module_device(net)
    inputs = net_inputs(pool, rows, moves, device)
    sscore, policy, value = net(*inputs)  # (B, 1), (B, A), (B, 1)
    beta = sscore.reshape(shape).mean(dim=2)  # (G, R)
    real_rows = rows.reshape(-1)[real.reshape(-1)]
    keep = torch.from_numpy(real.reshape(-1)).to(device)
    logp = torch.log_softmax(policy[keep], dim=1)  # (B', A) unmasked, as the score head reads it
    target = torch.from_numpy(pool.played[real_rows]).to(device)
    policy_loss = -logp[torch.arange(len(real_rows), device=device), target].mean()
    outcome = torch.from_numpy(pool.value[real_rows]).to(device)
    value_loss = ((value[keep, 0] - outcome) ** 2).mean()
    return {
        "bt": bradley_terry_loss(beta),
        "policy": policy_loss,
        "value": value_loss,
        "beta": beta,
    }


@torch.inference_mode()
def validate(net: SScoreNet, pool: PositionPool, config: SScoreTrainConfig) -> dict[str, float]:
    """BT loss and ordered-pair share on validation games (fixed sample, same every epoch)."""
    rng = np.random.default_rng(config.seed + 1)
    eligible = eligible_instances(pool, config.positions)
    net.eval()
    betas, losses = [], {"bt": [], "policy": [], "value": []}
    for _ in range(config.validation_batches):
        batch = sample_batch(
            pool,
            rng,
            groups=config.groups,
            positions=config.positions,
            with_r_inf=config.with_r_inf,
            eligible=eligible,
        )
        out = _step_losses(net, pool, batch.rows, batch.moves, batch.real, batch.rows.shape)
        for k in losses:
            losses[k].append(float(out[k]))
        betas.append(out["beta"].cpu().numpy())
    net.train()
    beta = np.concatenate(betas)  # (V*G, R)
    first_real = 1 if config.with_r_inf else 0
    return {
        "val_bt_loss": float(np.mean(losses["bt"])),
        "val_policy_loss": float(np.mean(losses["policy"])),
        "val_value_loss": float(np.mean(losses["value"])),
        "val_pair_accuracy": ordered_pair_share(beta[:, first_real:]),
        "val_pair_accuracy_with_r_inf": ordered_pair_share(beta),
        **rank_gaps(net, pool),
    }


def rank_gaps(net: SScoreNet, pool: PositionPool) -> dict[str, float]:
    """Gap of each rank group's mean instance score over the group below, over the whole pool, in
    standard errors (negative: a stronger group scores lower), as ``val_gap_z_<group>``, and the
    smallest of them as ``val_min_gap_z``: the monotonicity the issue asks of held-out games,
    followed epoch by epoch (and a criterion for ``select_best``)."""
    return rank_gaps_of(instance_scores(net, pool), pool)


def train(
    config: SScoreTrainConfig,
    games_dir: Path,
    out_dir: Path,
    *,
    max_minutes: float | None = None,
    resume: bool = False,
    progress: bool = True,
    tracking_uri: str | None = None,
    evaluate: bool = True,
    export: bool = True,
    stop_after: int | None = None,
    command: str | None = None,
) -> TrainResult:
    """Train (or resume) into ``out_dir``: checkpoints/, model files, MLflow run.

    ``stop_after``: end this invocation after that many steps (a deterministic stand-in for the
    time budget, for staged runs and tests); the schedule still spans ``config.max_steps``.
    ``command``: the command line, recorded in the model header for the model card.
    """
    out_dir = Path(out_dir)
    budget = TimeBudget(max_minutes)
    ckpt_dir = out_dir / "checkpoints"
    net, optimizer, state = start_run(
        lambda: SScoreNet(config.net_config(), score_dropout=config.score_dropout), config, ckpt_dir, resume=resume, command=command,
        init_shape=(SSCORE_FORMAT, config.net_config().to_dict()),
    )  # fmt: skip
    pools = split_pools(games_dir, config)
    train_pool, val_pool = pools["train"], pools["validation"]
    eligible = eligible_instances(train_pool, config.positions)
    ranks = len(train_pool.rank_groups) + int(config.with_r_inf)
    epoch_steps = config.epoch_steps or max(
        1, -(-len(eligible[0]) // (config.groups * (ranks - config.with_r_inf)))
    )
    batch_positions = config.groups * ranks * config.positions
    params = run_params(config, net, games_dir, epoch_steps=epoch_steps,
                        **{f"{k}_instances": v.num_instances for k, v in pools.items()})  # fmt: skip

    def step(rng: np.random.Generator) -> StepOutput:
        batch = sample_batch(
            train_pool, rng, groups=config.groups, positions=config.positions,
            with_r_inf=config.with_r_inf, eligible=eligible,
        )  # fmt: skip
        out = _step_losses(net, train_pool, batch.rows, batch.moves, batch.real, batch.rows.shape)
        loss = out["bt"] + config.policy_weight * out["policy"] + config.value_weight * out["value"]
        metrics = {k: float(out[k].detach()) for k in ("bt", "policy", "value")}
        return StepOutput(loss, metrics, batch_positions)

    with tracking.tracked_run(
        EXPERIMENT, run_name=f"sscore-{config.game}", tracking_uri=tracking_uri, params=params
    ):
        rate = run_loop(
            net, optimizer, state, config, step=step,
            validate=lambda: validate(net, val_pool, config), epoch_steps=epoch_steps,
            checkpoint_dir=ckpt_dir, budget=budget, stop_after=stop_after, progress=progress,
            desc=f"sscore {config.game}",
        )  # fmt: skip
        restore_best(net, state)  # select_best: the best validation's weights
        result = TrainResult(
            steps=state.step,
            train_seconds=state.train_seconds,
            positions_per_second=rate,
            history=state.history,
            pools={k: v.num_instances for k, v in pools.items()},
        )
        if evaluate:
            ref, ev = evaluation_pools(games_dir, config)
            result.evaluation = evaluate_sscore(net, ref, ev, seed=config.seed)
            log_evaluation(result.evaluation)
        if export:
            header = {
                "format": SSCORE_FORMAT,
                "game": config.game,
                "net": config.net_config().to_dict(),
                "train": run_record(params, state, batch_positions, games_dir),
                "quality": result.evaluation.to_dict() if result.evaluation else None,
                "history": state.history,
            }
            result.exported = export_tracked(net, out_dir, header)
    return result
