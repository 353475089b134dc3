"""The parts of an s-score training run that both s-score trainers share.

``kibitz train sscore`` (``pipeline/train/sscore.py``) and ``kibitz train sscore-levels``
(``pipeline/train/sscore_levels.py``) read the same position pools from a games table (training
and validation; the reference and evaluation pools of Chen et al.'s protocol), follow the same
rank-group gaps every epoch, log the same evaluation metrics and return the same result. These
live here, below both trainers, so the levels trainer does not import the whole-net one.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from pipeline.core import tracking
from pipeline.core.data_split import SplitConfig
from pipeline.nets.model_export import ExportedModel
from pipeline.train.games import load_split_games, read_games
from pipeline.train.sscore_batches import PositionPool, build_pool
from pipeline.train.sscore_eval import (
    SScoreEvaluation,
    adjacent_gap_z,
    group_means,
    group_sems,
)

logger = logging.getLogger(__name__)


class PoolSettings(Protocol):
    """What the pools of a run depend on: the fields ``SScoreTrainConfig`` and
    ``LevelsTrainConfig`` share (``TrainSettings``' and the game's)."""

    game: str
    seed: int
    komi: float
    positions_per_instance: int
    evaluation_positions_per_instance: int | None
    max_train_games: int | None
    max_validation_games: int
    max_reference_games: int
    max_evaluation_games: int | None

    def split_config(self) -> SplitConfig: ...


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


def rank_gaps_of(scores: np.ndarray, pool: PositionPool) -> dict[str, float]:
    """Gap of each rank group's mean instance score over the group below, from the pool's (I,)
    instance ``scores``, in standard errors (negative: a stronger group scores lower), as
    ``val_gap_z_<group>``, and the smallest of them as ``val_min_gap_z``: the monotonicity
    followed epoch by epoch (and a criterion for ``select_best``)."""
    groups = pool.instance_group.astype(np.int64)
    num_groups = len(pool.rank_groups)
    mean, _ = group_means(scores, groups, num_groups)
    gaps = adjacent_gap_z(mean, group_sems(scores, groups, num_groups))  # (R-1,)
    named = {f"val_gap_z_{g}": float(z) for g, z in zip(pool.rank_groups[1:], gaps, strict=True)}
    return {"val_min_gap_z": float(gaps.min()), **named}


def split_pools(games_dir: Path, config: PoolSettings) -> dict[str, PositionPool]:
    """The training and validation pools of a run (``positions_per_instance`` moves each)."""
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


def evaluation_pools(games_dir: Path, config: PoolSettings) -> tuple[PositionPool, PositionPool]:
    """(reference pool: ``max_reference_games`` training games, evaluation pool: the evaluation
    split or ``max_evaluation_games`` of it), ``evaluation_positions_per_instance`` moves each."""
    table = read_games(games_dir, config.game)
    split = {"split_config": config.split_config(), "table": table}
    per = config.evaluation_positions_per_instance
    ref_games = load_split_games(
        games_dir, config.game, "train", max_games=config.max_reference_games, **split
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


def log_evaluation(evaluation: SScoreEvaluation) -> None:
    """Chen et al.'s accuracies and the Spearman correlation as metrics of the active run."""
    tracking.log_metrics({f"eval_accuracy_n{n}": v for n, v in evaluation.accuracy.items()})
    tracking.log_metrics({f"eval_accuracy_pm1_n{n}": v for n, v in evaluation.accuracy_pm1.items()})
    tracking.log_metrics({"eval_spearman": evaluation.spearman})
