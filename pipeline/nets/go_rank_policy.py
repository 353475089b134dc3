"""A rank-conditioned Go imitation policy whose trunk runs once for all ranks.

KataGo's HumanSL net takes the rank as an input, so ten imitation levels cost ten full forward
passes. Here the rank enters late: a shared residual trunk and a shared 3×3 head conv compute
features once, then cheap rank-specific layers produce every rank's move logits at once:

    h   = head(trunk(spatial, global))                   (B, H, 19, 19)   once
    z_r = relu(γ_r ⊙ h + β_r)                            (B, R, H, 361)   FiLM per rank
    p_r = Σ_h w_r[h] z_r[h] + bias_r                     (B, R, 362)      1×1 conv + bias per rank

The rank parameters (γ, β, w, pass weights, bias) are each ``base + t_r · slope + delta_r`` with
``t_r`` the rank on Kibitz's numeric scale (``1k = 0``, ``n k = 1 − n``, ``n d = n``) divided by 10.
Ranks with training data learn their own ``delta_r``; ranks without data (10k…6k: the Fox
selection covers 5k…9d) keep ``delta_r = 0`` and get the linear extrapolation of the trained
trend, which the model card states plainly.

The trunk is Kibitz's own residual tower (``blocks`` × ``channels``, trained from scratch: the
shipped ``kibitz-go-policy``) or a KataGo net's trunk (``trunk_layout``: KataGo's
``katago_net.KataGoTrunk``, whose weights :func:`policy_on_katago_trunk` copies exactly from a
loaded KataGo net). Both read the inputs Kibitz's Go encoder makes for KataGo (input features
v7), so either trunk sees the same positions. Training keeps the trunk frozen
(:meth:`GoRankPolicyNet.freeze_trunk`: only the head learns) or fine-tunes it, optionally at a
lower learning rate (:meth:`GoRankPolicyNet.parameter_groups`); the late rank layers are the
same either way.

Contract C4: inputs ("spatial", "global") (B, 22, 19, 19), (B, 19) → output ("policy",)
(B, R, 362) raw logits, rank axis in :data:`GO_POLICY_RANKS` order. :meth:`GoRankPolicyNet.at_rank`
gives a one-rank C4 net with output ("policy",) (B, 362) for tools that want one level.

    python -c "from pipeline.nets.go_rank_policy import *; print(GO_POLICY_RANKS)"
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.core.errors import KibitzError
from pipeline.go_game import spec as go_spec
from pipeline.nets.katago_net import KataGoNet, KataGoTrunk
from pipeline.nets.sscore_net import ResidualTrunk

# 10k … 1k, 1d … 9d, weakest first (keep in sync with docs/research/log-nets.md).
GO_POLICY_RANKS = tuple([f"{n}k" for n in range(10, 0, -1)] + [f"{n}d" for n in range(1, 10)])
# How training treats a KataGo trunk: "frozen" trains the head only, "finetune" the trunk too,
# "rank-layers" only the per-rank layers on a trained policy's shared features (trunk and head
# conv frozen): a refit of its rank layers to the features its trunk ended with.
TRUNK_MODES = ("frozen", "finetune", "rank-layers")
# The board's symmetries (:func:`board_symmetry`: four turns, each mirrored or not), and how
# many of them a policy may average over.
BOARD_SYMMETRIES = 8
SYMMETRY_COUNTS = (1, 2, 4, 8)


class UnknownRankError(KibitzError, ValueError):
    """A rank label that is not one of GO_POLICY_RANKS."""


class TrunkError(KibitzError, ValueError):
    """A trunk that cannot carry the rank-conditioned policy (wrong net, inputs or shape)."""


def rank_number(rank: str) -> float:
    """Kibitz's numeric rank scale (games_schema): ``1k = 0``, ``n k = 1 − n``, ``n d = n``."""
    if rank not in GO_POLICY_RANKS:
        raise UnknownRankError(f"rank {rank!r} is not one of {GO_POLICY_RANKS!r}")
    n = int(rank[:-1])
    return float(n if rank.endswith("d") else 1 - n)


def rank_index(rank: str) -> int:
    """Position of ``rank`` on the net's rank axis."""
    if rank not in GO_POLICY_RANKS:
        raise UnknownRankError(f"rank {rank!r} is not one of {GO_POLICY_RANKS!r}")
    return GO_POLICY_RANKS.index(rank)


@dataclass(frozen=True)
class GoRankPolicyConfig:
    """Shape of a rank-conditioned policy; stored in every exported model's header."""

    blocks: int = 6
    channels: int = 64
    head_channels: int = (
        32  # width of the per-rank FiLM features (the per-rank cost scales with it)
    )
    # A KataGo trunk's layout (``katago_model_file.trunk_layout``); blocks and channels are then
    # its own. None: Kibitz's residual trunk of blocks × channels.
    trunk_layout: dict[str, Any] | None = None
    # Board symmetries the features are averaged over at inference (1, 2, 4 or 8; see
    # :func:`board_symmetry`): not a shape, the weights are the same. Training sees one.
    symmetries: int = 1

    def __post_init__(self) -> None:
        if self.symmetries not in SYMMETRY_COUNTS:
            raise ValueError(f"symmetries must be one of {SYMMETRY_COUNTS}, got {self.symmetries}")

    def to_dict(self) -> dict[str, Any]:
        """Without ``trunk_layout`` when it is None and ``symmetries`` when 1: the header of a
        net written before either existed stays what it was, so ``--init-from`` still matches
        the shipped model's shape."""
        d = asdict(self)
        if d["trunk_layout"] is None:
            del d["trunk_layout"]
        if d["symmetries"] == 1:
            del d["symmetries"]
        return d


def board_symmetry(x: torch.Tensor, s: int, *, inverse: bool = False) -> torch.Tensor:
    """The board (the last two axes) under symmetry ``s`` of the dihedral group: ``s % 4``
    quarter turns, then a mirror when ``s >= 4``; ``inverse`` undoes it. Symmetries 0-1 are the
    board and its quarter turn, 0-3 the four turns, 0-7 all eight.

    >>> b = torch.arange(4.0).reshape(2, 2)
    >>> board_symmetry(board_symmetry(b, 5), 5, inverse=True).equal(b)
    True
    """
    turns, mirror = s % 4, s >= 4
    if inverse:
        if mirror:
            x = torch.flip(x, dims=(-1,))
        return torch.rot90(x, -turns, dims=(-2, -1))
    x = torch.rot90(x, turns, dims=(-2, -1))
    return torch.flip(x, dims=(-1,)) if mirror else x


class RankParameter(nn.Module):
    """A per-rank parameter ``base + t_r · slope + delta_r`` of shape (R, *shape)."""

    def __init__(self, shape: tuple[int, ...], t: torch.Tensor, base_init: float = 0.0) -> None:
        super().__init__()
        self.base = nn.Parameter(torch.full(shape, base_init))
        self.slope = nn.Parameter(torch.zeros(shape))
        self.delta = nn.Parameter(torch.zeros(len(t), *shape))
        self.register_buffer("t", t.reshape(-1, *([1] * len(shape))), persistent=False)  # (R, 1…)

    def forward(self) -> torch.Tensor:
        return self.base + self.t * self.slope + self.delta  # (R, *shape)


class GoRankPolicyNet(nn.Module):
    """Shared trunk + per-rank FiLM heads; forward gives every rank's logits (B, R, 362)."""

    input_names = ("spatial", "global")
    output_names = ("policy",)
    ranks = GO_POLICY_RANKS

    def __init__(self, config: GoRankPolicyConfig) -> None:
        super().__init__()
        self.config = config
        c, h = config.channels, config.head_channels
        t = torch.tensor([rank_number(r) / 10.0 for r in GO_POLICY_RANKS])  # (R,)
        self.trunk: nn.Module = (
            ResidualTrunk(go_spec.NUM_SPATIAL, go_spec.NUM_GLOBAL, config.blocks, c)
            if config.trunk_layout is None
            else _katago_trunk(config)
        )
        # parts kept in eval mode without gradient (freeze_trunk, freeze_features)
        self.frozen: list[nn.Module] = []
        self.head_conv = nn.Conv2d(c, h, 3, padding=1, bias=False)
        self.head_bn = nn.BatchNorm2d(h)
        self.gamma = RankParameter((h,), t, base_init=1.0)
        self.beta = RankParameter((h,), t)
        self.weight = RankParameter((h,), t)
        self.pass_weight = RankParameter((h,), t)
        self.bias = RankParameter((go_spec.POLICY_SIZE,), t)
        nn.init.normal_(self.weight.base, std=h**-0.5)
        nn.init.normal_(self.pass_weight.base, std=h**-0.5)

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        spatial = torch.zeros(batch, go_spec.NUM_SPATIAL, go_spec.NN_LEN, go_spec.NN_LEN)
        spatial[:, 0] = 1.0  # the on-board plane
        return spatial, torch.zeros(batch, go_spec.NUM_GLOBAL)

    def freeze_trunk(self) -> None:
        """Train the head only: the trunk's weights take no gradient (so the optimiser never
        touches them and no activations are kept for a backward pass through it), and it stays in
        eval mode (batch norms keep their statistics)."""
        self._freeze(self.trunk)

    def freeze_features(self) -> None:
        """Train the per-rank layers only: the trunk and the shared head conv and batch norm
        (:meth:`features`, rank-independent) are frozen as :meth:`freeze_trunk` freezes the
        trunk, so the rank layers refit to the features a trained policy computes."""
        for module in (self.trunk, self.head_conv, self.head_bn):
            self._freeze(module)

    def _freeze(self, module: nn.Module) -> None:
        module.requires_grad_(False)
        module.eval()
        self.frozen.append(module)

    def train(self, mode: bool = True) -> GoRankPolicyNet:
        """As nn.Module's, but frozen parts stay in eval mode."""
        super().train(mode)
        for module in self.frozen:
            module.eval()
        return self

    def parameter_groups(self, trunk_lr_scale: float) -> list[dict[str, Any]]:
        """Optimiser groups: the head's trainable weights at the schedule's LR, the trunk's (none
        when frozen) at ``trunk_lr_scale`` times it (``lr_scale``, read by the training loop)."""
        head = [
            p
            for name, p in self.named_parameters()
            if not name.startswith("trunk.") and p.requires_grad
        ]
        trunk = [p for p in self.trunk.parameters() if p.requires_grad]
        groups = [{"params": head, "lr_scale": 1.0}]
        if trunk:
            groups.append({"params": trunk, "lr_scale": trunk_lr_scale})
        return groups

    def _board_features(self, spatial: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
        """Trunk, head conv and batch norm on boards as given: (B, H, 19, 19). The one place
        the rank-independent stack is composed, whichever orientation the callers turn to."""
        return self.head_bn(self.head_conv(self.trunk(spatial, global_)))

    def features(self, spatial: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
        """The rank-independent part: (B, H, 361).

        With ``config.symmetries`` n > 1 the trunk and head conv see the board under the first
        n symmetries, and the features, turned back, are averaged: Go is the same game under
        every symmetry but a net trained on one orientation reads each a little differently, so
        the mean is a small ensemble (KataGo averages its policy the same way). It costs n trunk
        passes; the rank layers still run once. The passes run one symmetry after another on
        the batch, summed as they come: one batch of n·B boards would hold n times the
        activations, and on a CPU that no longer fits the caches (eight symmetries of 128 boards
        ran 19.3 positions/s in float32 and 24.4 in bfloat16 in one batch of 1,024, 29.4 and
        51.7 in eight passes of 128: ``python bench/speed/bench_policy_precision.py`` before and after).
        """
        n = self.config.symmetries
        total = self._board_features(spatial, global_)  # (B, H, 19, 19)
        for s in range(1, n):
            x = self._board_features(board_symmetry(spatial, s), global_)
            total = total + board_symmetry(x, s, inverse=True)
        return (total if n == 1 else total / n).flatten(2)  # (B, H, 361)

    def turned_features(
        self, spatial: torch.Tensor, global_: torch.Tensor, symmetry: torch.Tensor
    ) -> torch.Tensor:
        """:meth:`features` (one orientation) of each board seen under its own symmetry
        ``symmetry[b]`` (0-7, :func:`board_symmetry`) and turned back: (B, H, 361).

        Training on random symmetries teaches the trunk and head conv that Go is the same game
        turned or mirrored. The features come back in the board's own orientation, so the rank
        layers still learn where players open: their per-point bias is a prior that Fox's custom
        of opening in the upper right makes orientation-dependent (docs/research/log-nets.md). One trunk
        pass for the whole batch: the boards are grouped by symmetry, so it costs 8 turns and 8
        turns back, none per position.
        """
        order = torch.argsort(symmetry, stable=True)
        counts = torch.bincount(symmetry, minlength=BOARD_SYMMETRIES).tolist()
        parts = spatial[order].split(counts)
        turned = torch.cat([board_symmetry(p, s) for s, p in enumerate(parts)])
        x = self._board_features(turned, global_[order])  # (B, H, 19, 19)
        back = [board_symmetry(p, s, inverse=True) for s, p in enumerate(x.split(counts))]
        return torch.cat(back)[torch.argsort(order)].flatten(2)  # (B, H, 361)

    def rank_logits(self, h: torch.Tensor, ranks: torch.Tensor | slice) -> torch.Tensor:
        """Logits of the selected ranks from shared features: (B, R', 362)."""
        gamma, beta = self.gamma()[ranks], self.beta()[ranks]  # (R', H)
        z = torch.relu(
            gamma[None, :, :, None] * h[:, None] + beta[None, :, :, None]
        )  # (B, R', H, 361)
        board = torch.einsum("brhx,rh->brx", z, self.weight()[ranks])  # (B, R', 361)
        passes = torch.einsum("brh,rh->br", z.mean(dim=3), self.pass_weight()[ranks])  # (B, R')
        return (
            torch.cat([board, passes[:, :, None]], dim=2) + self.bias()[ranks][None]
        )  # (B, R', 362)

    def mover_logits(self, h: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
        """Each position's logits at its own rank ``ranks`` (B,): (B, 362).

        Training needs only the mover's rank; this costs one rank's head per position instead
        of all R (the same values as ``rank_logits(h, slice(None))[arange(B), ranks]``).
        """
        gamma, beta = self.gamma()[ranks], self.beta()[ranks]  # (B, H)
        z = torch.relu(gamma[:, :, None] * h + beta[:, :, None])  # (B, H, 361)
        board = torch.einsum("bhx,bh->bx", z, self.weight()[ranks])  # (B, 361)
        passes = (z.mean(dim=2) * self.pass_weight()[ranks]).sum(dim=1, keepdim=True)  # (B, 1)
        return torch.cat([board, passes], dim=1) + self.bias()[ranks]  # (B, 362)

    def forward(self, spatial: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
        return self.rank_logits(self.features(spatial, global_), slice(None))  # (B, R, 362)

    def forward_rank(self, spatial: torch.Tensor, global_: torch.Tensor, rank: int) -> torch.Tensor:
        """One rank's logits with its own full forward: (B, 362). The per-rank baseline."""
        return self.rank_logits(self.features(spatial, global_), slice(rank, rank + 1))[:, 0]

    def at_rank(self, rank: str) -> GoRankPolicyAtRank:
        """A one-rank view (contract C4, output ("policy",) (B, 362)) sharing these weights."""
        return GoRankPolicyAtRank(self, rank_index(rank))


class GoRankPolicyAtRank(nn.Module):
    """The policy at one rank: ("spatial", "global") → ("policy",) (B, 362) logits."""

    input_names = ("spatial", "global")
    output_names = ("policy",)

    def __init__(self, net: GoRankPolicyNet, rank: int) -> None:
        super().__init__()
        self.net = net
        self.rank = rank

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        return self.net.example_inputs(batch)

    def forward(self, spatial: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
        return self.net.forward_rank(spatial, global_, self.rank)


def _katago_trunk(config: GoRankPolicyConfig) -> KataGoTrunk:
    """The KataGo trunk of ``config`` (zero weights), checked against the Go encoder's inputs and
    the config's shape."""
    try:
        trunk = KataGoTrunk(config.trunk_layout)
    except ValueError as error:
        raise TrunkError(str(error)) from None
    inputs = (trunk.spatial_channels, trunk.global_channels)
    if inputs != (go_spec.NUM_SPATIAL, go_spec.NUM_GLOBAL):
        raise TrunkError(
            f"KataGo trunk reads {inputs[0]} spatial + {inputs[1]} global inputs; Kibitz's Go "
            f"encoder makes {go_spec.NUM_SPATIAL} + {go_spec.NUM_GLOBAL} (input features v7)"
        )
    if (trunk.blocks, trunk.channels) != (config.blocks, config.channels):
        raise TrunkError(
            f"config says {config.blocks} blocks × {config.channels} channels, its KataGo trunk "
            f"has {trunk.blocks} × {trunk.channels}"
        )
    return trunk


def katago_trunk_config(katago: nn.Module, head_channels: int) -> GoRankPolicyConfig:
    """The config of a rank head on ``katago``'s trunk: blocks and channels are the trunk's."""
    if not isinstance(katago, KataGoNet):
        raise TrunkError(f"a trunk must come from a KataGo net, got a {type(katago).__name__}")
    layout = katago.trunk_layout
    return GoRankPolicyConfig(
        blocks=len(layout["blocks"]), channels=int(layout["channels"]),
        head_channels=head_channels, trunk_layout=layout,
    )  # fmt: skip


def policy_on_katago_trunk(katago: nn.Module, head_channels: int) -> GoRankPolicyNet:
    """A fresh rank head on ``katago``'s trunk, whose weights are copied exactly (the net's
    trunk features equal the KataGo net's on every position)."""
    net = GoRankPolicyNet(katago_trunk_config(katago, head_channels))
    net.trunk.trunk.load_state_dict(katago.trunk.state_dict())
    return net


def build_go_rank_policy(config: GoRankPolicyConfig | dict) -> GoRankPolicyNet:
    """A fresh net from a config or its dict (as stored in model headers): a KataGo trunk is
    rebuilt from its layout, so a model's own state dict fills it without the KataGo file."""
    if isinstance(config, dict):
        config = GoRankPolicyConfig(**config)
    return GoRankPolicyNet(config)


def rank_indices(labels: np.ndarray) -> np.ndarray:
    """(N,) rank axis index of each label; -1 for labels outside GO_POLICY_RANKS (e.g. "pro")."""
    lookup = {r: i for i, r in enumerate(GO_POLICY_RANKS)}
    return np.array([lookup.get(str(v), -1) for v in labels], dtype=np.int64)
