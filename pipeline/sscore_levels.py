"""An s-score estimator on the policies of several imitation levels (format ``kibitz-sscore-levels``).

Kibitz's s-score nets trained from scratch, and a score head on one frozen Maia-1 net, leave
held-out chess 2400-2600 level with 2200-2400 (docs/train.md); yet how a played move's
likelihood changes from one Maia-1 level to the next does separate them. This estimator keeps
Chen et al.'s training (grouped batches of one player instance per rank, the Bradley-Terry loss,
the random-move rank r∞: ``pipeline/train_sscore_levels.py``) and replaces the trunk by the
registry's frozen imitation nets: per (position, move) it reads, under each level, the
log-likelihood of the move and the entropy of the policy, and a small MLP (``LevelsHead``) turns
those 2 · levels numbers into the s-score. This is Kuboki et al.'s multi-level idea inside the
s-score.

A ``model.kibitz.pt`` of this format holds only the head and, in its header, the levels'
registry names and sha256: the imitation nets (Maia-1, GPL-3.0) are loaded from the registry and
checked against those sha256 at load time, so Kibitz's file carries none of their weights.
Loaded, the model takes (planes, played one-hot) and gives ``sscore`` like ``SScoreNet``, so
extraction, ONNX Runtime and TensorRT run it as any strength net.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline import chess_spec
from pipeline.model_export import LEVELS_FORMAT
from pipeline.sscore_net import policy_features

__all__ = ["LEVELS_FORMAT", "MAIA_LEVELS", "LevelsHead", "LevelsHeadConfig", "LevelsSScore"]
MAIA_LEVELS = tuple(f"maia-{rating}" for rating in range(1100, 2000, 100))


class LevelsModelError(ValueError):
    """A levels s-score whose imitation nets are missing or not the ones it was trained on."""


@dataclass(frozen=True)
class LevelsHeadConfig:
    """The head's shape: which imitation levels it reads (registry names) and its MLP width."""

    levels: tuple[str, ...] = MAIA_LEVELS
    hidden: int = 64

    def __post_init__(self) -> None:
        if len(self.levels) < 2 or len(set(self.levels)) != len(self.levels):
            raise LevelsModelError(f"need two or more distinct levels, got {self.levels!r}")
        if self.hidden < 1:
            raise LevelsModelError(f"hidden must be positive, got {self.hidden!r}")

    @property
    def features(self) -> int:
        return 2 * len(self.levels)

    def to_dict(self) -> dict[str, Any]:
        return {"levels": list(self.levels), "hidden": self.hidden}


class LevelsHead(nn.Module):
    """s-score of a move from its per-level features (``level_features``): standardised by the
    training pool's played moves (buffers, set by the trainer), then a 2-layer ReLU MLP."""

    input_names = ("features",)
    output_names = ("sscore",)

    def __init__(self, config: LevelsHeadConfig) -> None:
        super().__init__()
        self.config = config
        n = config.features
        self.register_buffer("mean", torch.zeros(n))
        self.register_buffer("std", torch.ones(n))
        self.mlp = nn.Sequential(
            nn.Linear(n, config.hidden), nn.ReLU(),
            nn.Linear(config.hidden, config.hidden), nn.ReLU(),
            nn.Linear(config.hidden, 1),
        )  # fmt: skip

    def standardise_by(self, features: np.ndarray) -> None:
        """Set the input scaling from (N, F) features of the training pool's played moves."""
        self.mean.copy_(torch.from_numpy(features.mean(axis=0)))
        self.std.copy_(torch.from_numpy(features.std(axis=0) + 1e-6))

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        return (torch.zeros(batch, self.config.features),)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, 2·levels) → (B, 1)."""
        return self.mlp((features - self.mean) / self.std)


def level_features(logits: Sequence[torch.Tensor], played: torch.Tensor) -> torch.Tensor:
    """(B, 2·L): log p of the one-hot ``played`` (B, A) move under each of the L policies'
    ``logits`` (B, A), then each policy's entropy; what ``LevelsHead`` reads."""
    per_level = torch.stack([policy_features(x.float(), played) for x in logits], dim=2)
    return per_level.flatten(1)  # (B, 2, L) → (B, 2L)


class LevelsSScore(nn.Module):
    """The loaded model: frozen imitation nets + ``LevelsHead``; chess (planes, played one-hot)
    → (sscore (B, 1),), the inputs and output of a ``kibitz-sscore`` net."""

    input_names = ("planes", "played")
    output_names = ("sscore",)

    def __init__(self, nets: Sequence[nn.Module], head: LevelsHead) -> None:
        super().__init__()
        if len(nets) != len(head.config.levels):
            raise LevelsModelError(f"{len(nets)} nets for levels {head.config.levels!r}")
        self.nets = nn.ModuleList(nets).requires_grad_(False).eval()
        self.head = head

    def policies(self, planes: torch.Tensor) -> list[torch.Tensor]:
        """Each level's policy logits (B, 1858) of (B, 112, 8, 8) planes."""
        return [net(planes)[0] for net in self.nets]

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        played = torch.zeros(batch, chess_spec.POLICY_SIZE)
        played[:, 0] = 1.0
        return (torch.zeros(batch, chess_spec.NUM_PLANES, 8, 8), played)

    def forward(self, planes: torch.Tensor, played: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.head(level_features(self.policies(planes), played)),)


def level_nets(config: LevelsHeadConfig, sha256: dict[str, str] | None = None) -> list[nn.Module]:
    """The levels' nets from the registry (each file checked against the registry's sha256), and
    against ``sha256`` (the files a model was trained on) when given."""
    from pipeline import model_registry

    nets = []
    for name in config.levels:
        if sha256 is not None:
            have = model_registry.model_sha256(name)
            if have != sha256.get(name):
                raise LevelsModelError(
                    f"imitation level {name!r}: the registry's file has sha256 {have}, but the "
                    f"model was trained on sha256 {sha256.get(name)}; use the same net"
                )
        nets.append(model_registry.load_net(name).eval())
    return nets


def build_levels_sscore(
    header: dict[str, Any], head_state: dict[str, torch.Tensor]
) -> LevelsSScore:
    """The model a ``kibitz-sscore-levels`` file describes: its head, on the registry's nets."""
    head = levels_head(header, head_state)
    return LevelsSScore(level_nets(head.config, header["net"]["level_sha256"]), head)


def levels_head(header: dict[str, Any], head_state: dict[str, torch.Tensor]) -> LevelsHead:
    """The head alone of a ``kibitz-sscore-levels`` file, in eval mode (no net is loaded)."""
    config = LevelsHeadConfig(tuple(header["net"]["levels"]), int(header["net"]["hidden"]))
    head = LevelsHead(config)
    head.load_state_dict(head_state)
    return head.eval()
