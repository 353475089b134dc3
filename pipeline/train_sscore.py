"""Train an s-score net (Chen, Shih & Wu 2025) on a games table: ``kibitz train sscore chess|go``.

Loss of one batch (``pipeline/sscore_batches.py``: G groups × R ranks × P positions, rank axis
weakest → strongest, index 0 = r∞ when on): with ``β[g, i]`` the mean s-score of group g's P
positions of rank i (i = 1…R, 1 the weakest), the Bradley-Terry term is

    L_BT = mean over g and over i = 1…R of  −log softmax(β[g, 1..i])[i]
         = mean_{g,i} ( logsumexp(β[g, 1..i]) − β[g, i] )

i.e. each rank must beat every weaker rank of its group (the i = 1 term is always 0 and is
counted in the mean). Added to it: policy cross-entropy over the legal moves and the value
MSE (game result from the mover's view, +1/0/−1), both on the real-move positions only (not r∞),
weighted by ``policy_weight`` / ``value_weight``.

Data: ``--games DIR`` is a games table (``kibitz ingest``); train / validation / evaluation are
the shared split of ``pipeline/data_split.py``. Validation (every epoch) reports the BT loss and
the share of correctly ordered rank pairs on validation games; at the end the Chen et al.
protocol runs on evaluation games (``pipeline/sscore_eval.py``) and goes into the model card.

    kibitz train sscore chess --games kibitz-out/games --out runs/sscore-chess --max-minutes 15
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from pipeline import tracking
from pipeline.data_split import SplitConfig
from pipeline.model_export import SSCORE_FORMAT, ExportedModel, export_model, register_model
from pipeline.sscore_batches import (
    GO_DEFAULT_KOMI,
    PositionPool,
    build_pool,
    eligible_instances,
    net_inputs,
    sample_batch,
)
from pipeline.sscore_eval import SScoreEvaluation, evaluate_sscore
from pipeline.sscore_net import SScoreNet, SScoreNetConfig
from pipeline.train_loop import (
    TimeBudget,
    TrainState,
    legal_mask,
    load_checkpoint,
    lr_at,
    masked_log_softmax,
    save_checkpoint,
    seed_everything,
    set_lr,
)
from pipeline.training_games import load_split_games, read_games

logger = logging.getLogger(__name__)

EXPERIMENT = "kibitz-train-sscore"


@dataclass
class SScoreTrainConfig:
    """Everything that decides a training run; saved in checkpoints, MLflow and the model card."""

    game: str  # "chess" | "go"
    blocks: int = 6
    channels: int = 64
    score_channels: int = 32
    groups: int = 4  # G: groups per batch
    positions: int = 4  # P: positions per rank and group, all from one player instance
    with_r_inf: bool = True  # Chen et al.'s extra weakest rank of random legal moves
    positions_per_instance: int = 16  # pool keeps this many random positions of each instance
    max_train_games: int | None = None  # None: every training game (Go encodes ~5k positions/s)
    max_validation_games: int = 600
    max_evaluation_games: int = 1200
    evaluation_positions_per_instance: int = 16  # moves averaged into an instance's score
    lr: float = 2e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 50
    max_steps: int = 4000  # length of the cosine schedule and hard stop
    final_lr_fraction: float = 0.05
    epoch_steps: int | None = None  # None: one pass over the training instances per epoch
    policy_weight: float = 0.5
    value_weight: float = 0.5
    validation_batches: int = 24
    checkpoint_every: int = 100
    seed: int = 0
    komi: float = GO_DEFAULT_KOMI  # Go: komi of Fox's KM[0] games
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)  # train, validation, evaluation
    split_salt: str = SplitConfig().salt
    log_every: int = 20

    def split_config(self) -> SplitConfig:
        train, validation, evaluation = self.split_fractions
        return SplitConfig(train, validation, evaluation, self.split_salt)

    def net_config(self) -> SScoreNetConfig:
        return SScoreNetConfig(self.game, self.blocks, self.channels, self.score_channels)

    def resume_keys(self) -> dict[str, Any]:
        """Settings a resumed run must share with the checkpoint (the time budget may differ)."""
        d = asdict(self)
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items() if k != "log_every"
        }


@dataclass
class TrainResult:
    """What a finished (or time-stopped) run produced."""

    steps: int
    train_seconds: float
    positions_per_second: float
    history: list[dict[str, float]]
    evaluation: SScoreEvaluation | None = None
    exported: ExportedModel | None = None
    pools: dict[str, int] = field(default_factory=dict)


def bradley_terry_loss(beta: torch.Tensor) -> torch.Tensor:
    """Mean over groups and ranks of −log softmax(β_1..β_i)[i]; β: (G, R) weakest → strongest."""
    return (torch.logcumsumexp(beta, dim=1) - beta).mean()


def ordered_pair_share(beta: np.ndarray) -> float:
    """Share of rank pairs i < j (within each group) with β_i < β_j; β: (G, R)."""
    i, j = np.triu_indices(beta.shape[1], k=1)
    return float((beta[:, i] < beta[:, j]).mean())


def _step_losses(
    net: SScoreNet,
    pool: PositionPool,
    rows: np.ndarray,
    moves: np.ndarray,
    real: np.ndarray,
    shape: tuple[int, ...],
) -> dict[str, torch.Tensor]:
    sscore, policy, value = net(*net_inputs(pool, rows, moves))  # (B, 1), (B, A), (B, 1)
    beta = sscore.reshape(shape).mean(dim=2)  # (G, R)
    real_rows = rows.reshape(-1)[real.reshape(-1)]
    keep = torch.from_numpy(real.reshape(-1))
    mask = legal_mask(pool.legal_offsets, pool.legal_index, real_rows, policy.shape[1])  # (B', A)
    logp = masked_log_softmax(policy[keep], mask)  # (B', A)
    target = torch.from_numpy(pool.played[real_rows])
    policy_loss = -logp[torch.arange(len(real_rows)), target].mean()
    value_loss = ((value[keep, 0] - torch.from_numpy(pool.value[real_rows])) ** 2).mean()
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
        betas.append(out["beta"].numpy())
    net.train()
    beta = np.concatenate(betas)  # (V*G, R)
    first_real = 1 if config.with_r_inf else 0
    return {
        "val_bt_loss": float(np.mean(losses["bt"])),
        "val_policy_loss": float(np.mean(losses["policy"])),
        "val_value_loss": float(np.mean(losses["value"])),
        "val_pair_accuracy": ordered_pair_share(beta[:, first_real:]),
        "val_pair_accuracy_with_r_inf": ordered_pair_share(beta),
    }


def _pools(games_dir: Path, config: SScoreTrainConfig) -> dict[str, PositionPool]:
    table = read_games(games_dir, config.game)
    split = {"split_config": config.split_config(), "table": table}
    pools = {}
    for name, max_games, per_instance in (
        ("train", config.max_train_games, config.positions_per_instance),
        ("validation", config.max_validation_games, config.positions_per_instance),
    ):
        games = load_split_games(games_dir, config.game, name, max_games=max_games, **split)
        t0 = time.perf_counter()
        pools[name] = build_pool(
            games,
            config.game,
            positions_per_instance=per_instance,
            seed=config.seed,
            komi=config.komi,
        )
        logger.info(
            "%s pool: %d games, %d instances, %d positions (%.0f s)",
            name, games.num_rows, pools[name].num_instances, len(pools[name]), time.perf_counter() - t0,
        )  # fmt: skip
    return pools


def evaluation_pools(
    games_dir: Path, config: SScoreTrainConfig
) -> tuple[PositionPool, PositionPool]:
    """(reference pool from training games, evaluation pool), ``evaluation_positions_per_instance`` moves each."""
    table = read_games(games_dir, config.game)
    split = {"split_config": config.split_config(), "table": table}
    per = config.evaluation_positions_per_instance
    ref_games = load_split_games(
        games_dir, config.game, "train", max_games=config.max_evaluation_games, **split
    )
    eval_games = load_split_games(
        games_dir, config.game, "evaluation", max_games=config.max_evaluation_games, **split
    )
    ref = build_pool(
        ref_games, config.game, positions_per_instance=per, seed=config.seed + 2, komi=config.komi
    )
    ev = build_pool(
        eval_games, config.game, positions_per_instance=per, seed=config.seed + 3, komi=config.komi
    )
    return ref, ev


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
) -> TrainResult:
    """Train (or resume) into ``out_dir``: checkpoints/, model files, MLflow run.

    ``stop_after``: end this invocation after that many steps (a deterministic stand-in for the
    time budget, for staged runs and tests); the schedule still spans ``config.max_steps``.
    """
    out_dir = Path(out_dir)
    budget = TimeBudget(max_minutes)
    rng = seed_everything(config.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    net = SScoreNet(config.net_config())
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    state = TrainState(0, rng, [], 0.0)
    ckpt_dir = out_dir / "checkpoints"
    if resume:
        state = load_checkpoint(ckpt_dir, net, optimizer, config.resume_keys())
        logger.info("resumed at step %d", state.step)
    pools = _pools(games_dir, config)
    train_pool, val_pool = pools["train"], pools["validation"]
    eligible = eligible_instances(train_pool, config.positions)
    ranks = len(train_pool.rank_groups) + int(config.with_r_inf)
    batch_positions = config.groups * ranks * config.positions
    epoch_steps = config.epoch_steps or max(
        1, -(-len(eligible[0]) // (config.groups * (ranks - config.with_r_inf)))
    )
    params = {**config.resume_keys(), "games_dir": str(games_dir), "epoch_steps": epoch_steps}
    params.update({f"{k}_instances": v.num_instances for k, v in pools.items()})
    with tracking.tracked_run(
        EXPERIMENT, run_name=f"sscore-{config.game}", tracking_uri=tracking_uri, params=params
    ):
        net.train()
        bar = tqdm(
            total=config.max_steps,
            initial=state.step,
            disable=not progress,
            desc=f"sscore {config.game}",
        )
        t_start = time.perf_counter()
        seconds_before = state.train_seconds
        positions_seen, window_t, window_pos = 0, time.perf_counter(), 0
        stop_step = (
            config.max_steps
            if stop_after is None
            else min(config.max_steps, state.step + stop_after)
        )
        while state.step < stop_step and not budget.spent:
            set_lr(optimizer, lr_at(state.step, base_lr=config.lr, total_steps=config.max_steps,
                                    warmup_steps=config.warmup_steps, final_fraction=config.final_lr_fraction))  # fmt: skip
            batch = sample_batch(
                train_pool, state.rng, groups=config.groups, positions=config.positions,
                with_r_inf=config.with_r_inf, eligible=eligible,
            )  # fmt: skip
            out = _step_losses(
                net, train_pool, batch.rows, batch.moves, batch.real, batch.rows.shape
            )
            loss = (
                out["bt"]
                + config.policy_weight * out["policy"]
                + config.value_weight * out["value"]
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state.step += 1
            positions_seen += batch_positions
            window_pos += batch_positions
            if state.step % config.log_every == 0:
                rate = window_pos / max(time.perf_counter() - window_t, 1e-9)
                window_t, window_pos = time.perf_counter(), 0
                metrics = {k: float(out[k]) for k in ("bt", "policy", "value")}
                tracking.log_metrics(
                    {**{f"train_{k}": v for k, v in metrics.items()}, "positions_per_s": rate},
                    step=state.step,
                )
                bar.set_postfix(
                    loss=f"{float(loss):.3f}", bt=f"{metrics['bt']:.3f}", pos_s=f"{rate:.0f}"
                )
            bar.update(1)
            at_epoch_end = state.step % epoch_steps == 0
            if at_epoch_end or state.step % config.checkpoint_every == 0:
                state.train_seconds = seconds_before + time.perf_counter() - t_start
                if at_epoch_end:
                    row = {
                        "step": state.step,
                        "epoch": state.step // epoch_steps,
                        **validate(net, val_pool, config),
                    }
                    state.history.append(row)
                    tracking.log_metrics(row, step=state.step)
                    logger.info("epoch %d: %s", row["epoch"], json.dumps(row))
                save_checkpoint(ckpt_dir, net, optimizer, state, config.resume_keys())
        bar.close()
        run_seconds = time.perf_counter() - t_start
        state.train_seconds = seconds_before + run_seconds
        if not state.history or state.history[-1]["step"] != state.step:
            row = {
                "step": state.step,
                "epoch": state.step / epoch_steps,
                **validate(net, val_pool, config),
            }
            state.history.append(row)
            tracking.log_metrics(row, step=state.step)
        save_checkpoint(ckpt_dir, net, optimizer, state, config.resume_keys())
        result = TrainResult(
            steps=state.step,
            train_seconds=state.train_seconds,
            positions_per_second=positions_seen / max(run_seconds, 1e-9),
            history=state.history,
            pools={k: v.num_instances for k, v in pools.items()},
        )
        if evaluate:
            ref, ev = evaluation_pools(games_dir, config)
            result.evaluation = evaluate_sscore(net, ref, ev, seed=config.seed)
            tracking.log_metrics(
                {f"eval_accuracy_n{n}": v for n, v in result.evaluation.accuracy.items()}
            )
            tracking.log_metrics(
                {f"eval_accuracy_pm1_n{n}": v for n, v in result.evaluation.accuracy_pm1.items()}
            )
            tracking.log_metrics({"eval_spearman": result.evaluation.spearman})
        if export:
            header = {
                "format": SSCORE_FORMAT,
                "game": config.game,
                "net": config.net_config().to_dict(),
                "train": {
                    **params,
                    "steps": state.step,
                    "train_seconds": round(state.train_seconds, 1),
                },
                "quality": result.evaluation.to_dict() if result.evaluation else None,
                "history": state.history,
            }
            result.exported = export_model(net, out_dir, header=header, card=None)
            tracking.log_file(result.exported.weights, artifact_path="model")
            tracking.log_file(result.exported.onnx, artifact_path="model")
    return result


def install(result: TrainResult, *, name: str, models_root: Path, game: str, card: str) -> Path:
    """Write the card next to the export and register it under ``models_root/name``."""
    exported = result.exported
    if exported is None:
        raise ValueError("nothing to register: the run was not exported")
    (exported.folder / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    return register_model(
        exported, name=name, models_root=models_root, game=game,
        description=f"Kibitz s-score net (Chen et al. 2025 Bradley-Terry strength estimator), {game}",
    )  # fmt: skip
