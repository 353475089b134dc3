"""The parts every Kibitz training command shares: seeding, LR schedule, checkpoints, time budget.

Determinism: all sampling draws from one numpy ``Generator`` whose state is saved in every
checkpoint together with the net, the optimiser and the step, and the schedule depends on the
step only (never on the clock), so ``--resume`` continues bit-for-bit where an uninterrupted run
with the same seed would be (on the same machine and thread count). The time budget only decides
WHERE a run stops, which is why a stopped run can always be resumed.

Checkpoints are written atomically (``*.tmp`` then ``os.replace``): a run killed while writing
keeps its previous checkpoint.
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

CHECKPOINT_NAME = "last.pt"


class CheckpointError(FileNotFoundError):
    """``--resume`` without a usable checkpoint, or one of a different configuration."""


def seed_everything(seed: int) -> np.random.Generator:
    """Seed torch, numpy and random; the returned generator drives all batch sampling."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    return np.random.default_rng(seed)


def lr_at(
    step: int, *, base_lr: float, total_steps: int, warmup_steps: int, final_fraction: float
) -> float:
    """Linear warm-up, then cosine decay from ``base_lr`` to ``base_lr * final_fraction``."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return base_lr * (
        final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))
    )


@dataclass
class TrainState:
    """What a checkpoint restores."""

    step: int
    rng: np.random.Generator
    history: list[dict[str, float]]  # one row per validation (epoch)
    train_seconds: float  # training time summed over all resumed runs


def save_checkpoint(
    folder: Path,
    net: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    config: dict[str, Any],
) -> Path:
    """Write ``folder/last.pt`` atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CHECKPOINT_NAME
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "net": net.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": state.step,
            "rng": state.rng.bit_generator.state,
            "history": state.history,
            "train_seconds": state.train_seconds,
            "config": config,
        },
        tmp,
    )
    os.replace(tmp, path)
    return path


def load_checkpoint(
    folder: Path, net: nn.Module, optimizer: torch.optim.Optimizer, config: dict[str, Any]
) -> TrainState:
    """Restore net, optimiser and sampling state; the run's config must match the saved one."""
    path = folder / CHECKPOINT_NAME
    if not path.is_file():
        raise CheckpointError(f"--resume: no checkpoint {str(path)!r}")
    saved = torch.load(path, map_location="cpu", weights_only=False)
    differ = {
        k: (saved["config"].get(k), v) for k, v in config.items() if saved["config"].get(k) != v
    }
    if differ:
        raise CheckpointError(
            f"--resume: {str(path)!r} was written with other settings (saved, now): {differ!r}"
        )
    net.load_state_dict(saved["net"])
    optimizer.load_state_dict(saved["optimizer"])
    rng = np.random.default_rng()
    rng.bit_generator.state = saved["rng"]
    return TrainState(saved["step"], rng, list(saved["history"]), float(saved["train_seconds"]))


class TimeBudget:
    """Wall-clock budget of one invocation; ``None`` minutes means no limit."""

    def __init__(self, minutes: float | None) -> None:
        self.deadline = None if minutes is None else time.monotonic() + 60.0 * minutes

    @property
    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def legal_mask(
    legal_offsets: np.ndarray, legal_index: np.ndarray, rows: np.ndarray, size: int
) -> torch.Tensor:
    """(B, size) bool: the legal moves of ``rows`` from a CSR legal list, without a row loop."""
    starts, stops = legal_offsets[rows], legal_offsets[rows + 1]
    counts = stops - starts
    flat = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(
        int(counts.sum())
    )
    mask = torch.zeros(len(rows), size, dtype=torch.bool)
    mask[
        torch.from_numpy(np.repeat(np.arange(len(rows)), counts)),
        torch.from_numpy(legal_index[flat].astype(np.int64)),
    ] = True
    return mask


def masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the legal moves only (illegal moves get a large negative logit)."""
    return torch.log_softmax(logits.masked_fill(~mask, -1e9), dim=-1)
