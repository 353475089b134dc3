"""Train a levels s-score (``pipeline/nets/sscore_levels.py``): ``kibitz train sscore-levels chess|go``.

Chen et al.'s training, on the frozen imitation nets of several skill levels instead of a trunk:
the batches are ``sample_batch``'s (G groups × R ranks × P positions, each rank's P positions
from one player instance; rank 0 is r∞, random other legal moves of real positions, unless
``with_r_inf`` is off) and the loss is ``bradley_terry_loss`` of the ranks' mean scores. Only the
``LevelsHead`` trains; the levels' policies of every position of the training, validation,
reference and evaluation pools are computed once (``pipeline/train/level_policies.py``) and cached
under ``OUT/level-policies/``, so a run's time is the nets' one pass, then seconds of training.

The rest is the machinery it shares with ``kibitz train sscore``
(``pipeline/train/sscore_runs.py``, ``pipeline/train/bradley_terry.py``,
``pipeline/train/loop.py``): the split of ``pipeline/core/data_split.py``, validation every epoch
(BT loss, ordered pairs, each rank group's gap to the one below in standard errors), checkpoints
and ``--resume``, the time budget, MLflow, Chen et al.'s protocol on the evaluation split, export
(the head's weights, the levels' names and sha256, and the head as ONNX) and the model card.

    kibitz train sscore-levels chess --games kibitz-out/games-chess --out kibitz-out/sscore-levels
    kibitz train sscore-levels go --games kibitz-out/games-go --out kibitz-out/sscore-go-levels
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.core import tracking
from pipeline.nets.formats import LEVELS_FORMAT
from pipeline.nets.loading import load_net
from pipeline.nets.sscore_levels import (
    DEFAULT_LEVELS,
    DEFAULT_SOFTMAX,
    LevelsHead,
    LevelsHeadConfig,
    level_nets,
    level_sha256,
    levels_sscore,
)
from pipeline.train.bradley_terry import bradley_terry_loss, ordered_pair_share
from pipeline.train.device import module_device
from pipeline.train.level_policies import LevelPolicies, cached_level_policies
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
    random_other_slot,
    sample_batch,
)
from pipeline.train.sscore_eval import evaluate_instance_scores, instance_means
from pipeline.train.sscore_runs import (
    TrainResult,
    evaluation_pools,
    log_evaluation,
    rank_gaps_of,
    split_pools,
)

logger = logging.getLogger(__name__)

EXPERIMENT = "kibitz-train-sscore-levels"
CACHE_DIR = "level-policies"


@dataclass(kw_only=True)
class LevelsTrainConfig(TrainSettings):
    """Everything that decides a levels run; saved in checkpoints, MLflow and the model card."""

    game: str = "chess"
    # the imitation levels, weakest first: registry names, ``NAME@RANK`` for a rank-conditioned
    # net; empty: the game's default (sscore_levels.DEFAULT_LEVELS)
    levels: tuple[str, ...] = ()
    hidden: int = 64  # width of the head's MLP
    groups: int = 32  # G: groups per batch (a step is cheap: features are gathered, not computed)
    positions: int = 8  # P: positions per rank and group, all from one player instance
    with_r_inf: bool = True
    max_reference_games: int = 1200
    validation_batches: int = 24
    positions_per_instance: int = 12
    lr: float = 2e-3
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        if self.game not in DEFAULT_LEVELS:
            raise ValueError(f"game must be one of {sorted(DEFAULT_LEVELS)!r}, got {self.game!r}")
        self.levels = tuple(self.levels) or DEFAULT_LEVELS[self.game]

    def head_config(self) -> LevelsHeadConfig:
        return LevelsHeadConfig(tuple(self.levels), self.hidden, DEFAULT_SOFTMAX[self.game])


class ScoredPool:
    """A pool with its levels' policies: batch features and instance scores by the head."""

    def __init__(self, pool: PositionPool, policies: LevelPolicies) -> None:
        self.pool, self.policies = pool, policies

    def batch_features(
        self, rows: np.ndarray, with_r_inf: bool, rng: np.random.Generator
    ) -> torch.Tensor:
        """(G·R·P, 2L) features of a batch's moves: played ones, and r∞'s random other moves."""
        slots = self.pool.played_pos[rows].astype(np.int64)  # (G, R, P)
        if with_r_inf:
            slots[:, 0] = random_other_slot(self.pool, rows[:, 0], rng)
        return torch.from_numpy(
            self.policies.move_features(self.pool, rows.reshape(-1), slots.reshape(-1))
        )

    @torch.inference_mode()
    def instance_scores(self, head: LevelsHead, batch: int = 65536) -> np.ndarray:
        """(I,) mean s-score of each instance's played moves."""
        was_training = head.training
        head.eval()
        device = module_device(head)
        scores = np.concatenate([
            head(torch.from_numpy(self.policies.played_features(self.pool, rows)).to(device))[:, 0]
            .cpu().numpy()
            for rows in np.array_split(np.arange(len(self.pool)), max(1, len(self.pool) // batch))
        ])  # fmt: skip
        head.train(was_training)
        return instance_means(self.pool, scores)


def _batch_loss(
    head: LevelsHead, scored: ScoredPool, config: LevelsTrainConfig, rng: np.random.Generator,
    eligible: tuple[np.ndarray, np.ndarray],
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(BT loss, β (G, R)) of one sampled batch."""
    batch = sample_batch(scored.pool, rng, groups=config.groups, positions=config.positions,
                         with_r_inf=config.with_r_inf, eligible=eligible)  # fmt: skip
    x = scored.batch_features(batch.rows, config.with_r_inf, rng).to(module_device(head))
    beta = head(x).reshape(batch.rows.shape).mean(dim=2)  # (G, R)
    return bradley_terry_loss(beta), beta


@torch.inference_mode()
def validate(head: LevelsHead, scored: ScoredPool, config: LevelsTrainConfig) -> dict[str, float]:
    """BT loss, ordered pairs (fixed batches) and each group's gap on the validation pool."""
    rng = np.random.default_rng(config.seed + 1)
    eligible = eligible_instances(scored.pool, config.positions)
    head.eval()
    losses, betas = [], []
    for _ in range(config.validation_batches):
        loss, beta = _batch_loss(head, scored, config, rng, eligible)
        losses.append(float(loss))
        betas.append(beta.cpu().numpy())
    head.train()
    beta = np.concatenate(betas)  # (V·G, R)
    first_real = 1 if config.with_r_inf else 0
    return {
        "val_bt_loss": float(np.mean(losses)),
        "val_pair_accuracy": ordered_pair_share(beta[:, first_real:]),
        "val_pair_accuracy_with_r_inf": ordered_pair_share(beta),
        **rank_gaps_of(scored.instance_scores(head), scored.pool),
    }


def train(
    config: LevelsTrainConfig,
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
    """Train (or resume) a levels head into ``out_dir``, as ``train_sscore.train`` does."""
    out_dir = Path(out_dir)
    budget = TimeBudget(max_minutes)
    ckpt_dir = out_dir / "checkpoints"
    head_config = config.head_config()
    head, optimizer, state = start_run(
        lambda: LevelsHead(head_config), config, ckpt_dir, resume=resume, command=command
    )
    device = module_device(head)
    level_sha = level_sha256(config.levels)
    model = levels_sscore(config.game, level_nets(head_config, load=load_net), head).to(device)

    policies_record: dict[str, dict[str, float | int | None]] = {}

    def scored(name: str, pool: PositionPool) -> ScoredPool:
        policies = cached_level_policies(model, pool, level_sha, out_dir / CACHE_DIR, name)
        policies_record[name] = {"positions": len(pool), "seconds": policies.seconds}
        return ScoredPool(pool, policies)

    pools = {name: scored(name, pool) for name, pool in split_pools(games_dir, config).items()}
    train_pool, val_pool = pools["train"], pools["validation"]
    head.standardise_by(train_pool.policies.played_features(train_pool.pool))
    eligible = eligible_instances(train_pool.pool, config.positions)
    real_ranks = len(train_pool.pool.rank_groups)
    epoch_steps = config.epoch_steps or max(1, -(-len(eligible[0]) // (config.groups * real_ranks)))
    batch_positions = config.groups * (real_ranks + int(config.with_r_inf)) * config.positions
    params = run_params(config, head, games_dir, epoch_steps=epoch_steps,
                        **{f"{k}_instances": v.pool.num_instances for k, v in pools.items()})  # fmt: skip

    def step(rng: np.random.Generator) -> StepOutput:
        loss, _ = _batch_loss(head, train_pool, config, rng, eligible)
        return StepOutput(loss, {"bt": float(loss.detach())}, batch_positions)

    with tracking.tracked_run(
        EXPERIMENT, run_name=f"sscore-levels-{config.game}", tracking_uri=tracking_uri,
        params=params,
    ):  # fmt: skip
        rate = run_loop(
            head, optimizer, state, config, step=step,
            validate=lambda: validate(head, val_pool, config), epoch_steps=epoch_steps,
            checkpoint_dir=ckpt_dir, budget=budget, stop_after=stop_after, progress=progress,
            desc=f"sscore-levels {config.game}",
        )  # fmt: skip
        restore_best(head, state)
        result = TrainResult(
            steps=state.step,
            train_seconds=state.train_seconds,
            positions_per_second=rate,
            history=state.history,
            pools={k: v.pool.num_instances for k, v in pools.items()},
        )
        if evaluate:
            ref, ev = (scored(n, p) for n, p in zip(("reference", "evaluation"),
                                                    evaluation_pools(games_dir, config), strict=True))  # fmt: skip
            result.evaluation = evaluate_instance_scores(
                ref.pool, ref.instance_scores(head), ev.pool, ev.instance_scores(head),
                seed=config.seed,
            )  # fmt: skip
            log_evaluation(result.evaluation)
        if export:
            header = {
                "format": LEVELS_FORMAT,
                "game": config.game,
                "net": {**head_config.to_dict(), "level_sha256": level_sha},
                # the nets' one pass over each pool, this invocation (seconds None: cached)
                "train": {
                    **run_record(params, state, batch_positions, games_dir),
                    "level_policies": policies_record,
                },
                "quality": result.evaluation.to_dict() if result.evaluation else None,
                "history": state.history,
            }
            result.exported = export_tracked(head, out_dir, header)
    return result
