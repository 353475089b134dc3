"""An s-score estimator on the policies of several imitation levels (format ``kibitz-sscore-levels``).

Kibitz's s-score nets trained from scratch, and a score head on one frozen Maia-1 net, leave
held-out chess 2400-2600 level with 2200-2400 (docs/research/log-nets.md); yet how a played move's
likelihood changes from one Maia-1 level to the next does separate them. This estimator keeps
Chen et al.'s training (grouped batches of one player instance per rank, the Bradley-Terry loss,
the random-move rank r∞: ``pipeline/train/sscore_levels.py``) and replaces the trunk by the
registry's frozen imitation nets: per (position, move) it reads, under each level, the
log-likelihood of the move and the entropy of the policy, and a small MLP (``LevelsHead``) turns
those 2 · levels numbers into the s-score. This is Kuboki et al.'s multi-level idea inside the
s-score.

A level is a registry name (chess: ``maia-1500``; Go: ``katago-g170-b6c96``, its policy channel
0) or, for a rank-conditioned Go policy, the name and a rank (``kibitz-go-policy@3d``): every
Go level of one model comes from one trunk pass (``GoRankPolicyNet.rank_logits``), as in
extraction. The policies are softmaxes as extraction reads them: chess over the whole policy,
Go over the legal moves (``LevelsHeadConfig.softmax``).

A ``model.kibitz.pt`` of this format holds only the head and, in its header, the levels' names
and their files' sha256: the imitation nets (Maia-1, GPL-3.0; Kibitz's Go policy; KataGo's) are
loaded from the registry and checked against those sha256 at load time, so the file carries
none of their weights. Loaded, the model takes the game's inputs and the played move (chess:
planes, played; Go: spatial, global, legal mask, played) and gives ``sscore`` like
``SScoreNet``, so extraction, ONNX Runtime and TensorRT run it as any strength net. The levels'
nets are loaded by a ``load`` function the caller passes (``pipeline.nets.loading.load_net``),
since loading a file of this format is itself one of that function's formats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline.chess_game import spec as chess_spec
from pipeline.core.errors import KibitzError
from pipeline.go_game import spec as go_spec
from pipeline.nets import registry as model_registry
from pipeline.nets.go_rank_policy import GoRankPolicyNet, UnknownRankError, rank_index
from pipeline.nets.legal_softmax import masked_logits
from pipeline.nets.sscore_net import policy_features

__all__ = [
    "DEFAULT_LEVELS", "GO_LEVELS", "MAIA_LEVELS", "LevelsHead",
    "LevelsHeadConfig", "LevelsSScore",
]  # fmt: skip
MAIA_LEVELS = tuple(f"maia-{rating}" for rating in range(1100, 2000, 100))
# The Go preset's imitation levels (pipeline/presets/extract-go.yaml): the rank policy at one
# rank per rank group, then KataGo g170's policy. Without KataGo's judgement of the move the
# head reaches 29.5 % at n = 20 instead of 44.0 % (docs/research/log-nets.md): adjacent ranks of the Kibitz
# policy differ by about a millinat per move.
GO_RANK_LEVELS = tuple(
    f"kibitz-go-policy@{rank}" for rank in ("4k", "2k", *(f"{n}d" for n in range(1, 10)))
)
GO_LEVELS = (*GO_RANK_LEVELS, "katago-g170-b6c96")
DEFAULT_LEVELS = {"chess": MAIA_LEVELS, "go": GO_LEVELS}
SOFTMAX = ("whole", "legal")
DEFAULT_SOFTMAX = {"chess": "whole", "go": "legal"}


class LevelsModelError(KibitzError, ValueError):
    """A levels s-score whose imitation nets are missing or not the ones it was trained on."""


def split_level(level: str) -> tuple[str, str | None]:
    """(registry name, rank profile or None): ``maia-1500`` → ("maia-1500", None),
    ``kibitz-go-policy@3d`` → ("kibitz-go-policy", "3d")."""
    model, sep, profile = level.partition("@")
    return model, (profile if sep else None)


def level_identity(level: str, sha256: str) -> str:
    """What makes two levels the same whatever their names: the weights' sha256, and the rank
    profile for a rank-conditioned net (``SHA@3d``)."""
    profile = split_level(level)[1]
    return sha256 if profile is None else f"{sha256}@{profile}"


def level_sha256(levels: Sequence[str]) -> dict[str, str]:
    """Level → sha256 of its registry file: what a head's header records and caches key on."""
    return {level: model_registry.model_sha256(split_level(level)[0]) for level in levels}


@dataclass(frozen=True)
class LevelsHeadConfig:
    """The head's shape: which imitation levels it reads (registry names) and its MLP width."""

    levels: tuple[str, ...] = MAIA_LEVELS
    hidden: int = 64
    # The softmax the features are read under: "whole" (every policy entry) or "legal" (the
    # position's legal moves only). Use the one the nets were trained with: Kibitz's Go policy
    # learned legal moves only, so its logits at occupied points mean nothing; the chess head
    # reads the Maia-1 nets' whole policy.
    softmax: str = "whole"

    def __post_init__(self) -> None:
        if len(self.levels) < 2 or len(set(self.levels)) != len(self.levels):
            raise LevelsModelError(f"need two or more distinct levels, got {self.levels!r}")
        if self.hidden < 1:
            raise LevelsModelError(f"hidden must be positive, got {self.hidden!r}")
        if self.softmax not in SOFTMAX:
            raise LevelsModelError(f"softmax must be one of {SOFTMAX!r}, got {self.softmax!r}")

    @property
    def features(self) -> int:
        return 2 * len(self.levels)

    def to_dict(self) -> dict[str, Any]:
        return {"levels": list(self.levels), "hidden": self.hidden, "softmax": self.softmax}


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


def level_features(
    logits: Sequence[torch.Tensor], played: torch.Tensor, legal: torch.Tensor | None = None
) -> torch.Tensor:
    """(B, 2·L): log p of the one-hot ``played`` (B, A) move under each of the L policies'
    ``logits`` (B, A), then each policy's entropy; what ``LevelsHead`` reads. With a (B, A)
    bool ``legal`` mask, the softmax runs over the legal moves only."""
    if legal is not None:
        logits = [masked_logits(x.float(), legal) for x in logits]
    per_level = torch.stack([policy_features(x.float(), played) for x in logits], dim=2)
    return per_level.flatten(1)  # (B, 2, L) → (B, 2L)


# A registry name → the net it names, eval mode (``pipeline.nets.loading.load_net``).
NetLoader = Callable[[str], nn.Module]


@dataclass
class LevelNets:
    """The distinct nets behind a head's levels and where each level's policy comes from."""

    nets: list[nn.Module]  # one per distinct registry name, in the levels' order
    ranks: list[list[int]]  # per net: the rank-axis entries its levels read ([] : one policy)
    picks: list[tuple[int, int]]  # per level: (net, place among that net's policies)


def level_nets(
    config: LevelsHeadConfig, sha256: dict[str, str] | None = None, *, load: NetLoader
) -> LevelNets:
    """The levels' nets from the registry, each loaded by ``load`` (a registry name → module
    function that checks the file against the registry's sha256: ``pipeline.nets.loading``'s
    ``load_net``), and checked against ``sha256`` (the files a model was trained on) when given.
    A rank-conditioned net named by several levels is loaded once."""
    found = LevelNets([], [], [])
    slot: dict[str, int] = {}
    for level in config.levels:
        name, profile = split_level(level)
        if sha256 is not None:
            have = model_registry.model_sha256(name)
            if have != sha256.get(level):
                raise LevelsModelError(
                    f"imitation level {level!r}: the registry's file has sha256 {have}, but the "
                    f"model was trained on sha256 {sha256.get(level)}; use the same net"
                )
        if name not in slot:
            slot[name] = len(found.nets)
            found.nets.append(load(name).eval())
            found.ranks.append([])
        i = slot[name]
        ranked = isinstance(found.nets[i], GoRankPolicyNet)
        if ranked and profile is None:
            raise LevelsModelError(f"imitation level {level!r}: {name!r} is rank-conditioned; "
                                   f"name a rank, e.g. {name}@3d")  # fmt: skip
        if profile is not None and not ranked:
            raise LevelsModelError(f"imitation level {level!r}: {name!r} is not rank-conditioned; "
                                   f"name it without @{profile}")  # fmt: skip
        if ranked:
            try:
                found.ranks[i].append(rank_index(profile))
            except UnknownRankError as err:
                raise LevelsModelError(f"imitation level {level!r}: {err}") from None
        found.picks.append((i, max(len(found.ranks[i]) - 1, 0)))
    return found


class LevelsSScore(nn.Module):
    """The loaded model: frozen imitation nets + ``LevelsHead``; the game's inputs and the
    played move one-hot → (sscore (B, 1),), the inputs and output of a ``kibitz-sscore`` net
    (``ChessLevelsSScore``, ``GoLevelsSScore``)."""

    game: str
    output_names = ("sscore",)

    def __init__(self, levels: LevelNets, head: LevelsHead) -> None:
        super().__init__()
        if len(levels.picks) != len(head.config.levels):
            raise LevelsModelError(
                f"{len(levels.picks)} policies for levels {head.config.levels!r}"
            )
        if head.config.softmax != DEFAULT_SOFTMAX[self.game]:
            raise LevelsModelError(
                f"a {self.game} levels head reads the {DEFAULT_SOFTMAX[self.game]!r} softmax,"
                f" not {head.config.softmax!r}"
            )
        self.nets = nn.ModuleList(levels.nets).requires_grad_(False).eval()
        self.ranks = levels.ranks
        self.picks = levels.picks
        self.head = head

    @property
    def legal(self) -> bool:
        """Whether the levels' policies are softmaxes over the legal moves only."""
        return self.head.config.softmax == "legal"

    def policies(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """Each level's policy logits (B, A) of the nets' inputs: one pass per distinct net."""
        out = []
        for net, ranks in zip(self.nets, self.ranks, strict=True):
            if ranks:  # rank-conditioned: one trunk pass, then only these ranks' layers
                index = torch.tensor(ranks, device=inputs[0].device)
                out.append(net.rank_logits(net.features(*inputs), index).unbind(1))
            else:  # a KataGo net's (B, C, 362) policy: channel 0, as extraction reads it
                policy = net(*inputs)[0]
                out.append((policy[:, 0] if policy.ndim == 3 else policy,))
        return [out[i][k] for i, k in self.picks]

    def played_move(self, batch: int, size: int) -> torch.Tensor:
        """(batch, size) one-hot of move 0: the example ``played`` input of an export."""
        played = torch.zeros(batch, size)
        played[:, 0] = 1.0
        return played


class ChessLevelsSScore(LevelsSScore):
    """("planes", "played") (B, 112, 8, 8), (B, 1858) → sscore; the whole policies' features."""

    game = "chess"
    input_names = ("planes", "played")

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        planes = torch.zeros(batch, chess_spec.NUM_PLANES, 8, 8)
        return planes, self.played_move(batch, chess_spec.POLICY_SIZE)

    def forward(self, planes: torch.Tensor, played: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.head(level_features(self.policies(planes), played)),)


class GoLevelsSScore(LevelsSScore):
    """("spatial", "global", "legal", "played") (B, 22, 19, 19), (B, 19), (B, 362) 1.0 where
    legal, (B, 362) → sscore; features of the policies over the legal moves (as extraction's).
    The mask is float like every evaluator input (contract C4)."""

    game = "go"
    input_names = ("spatial", "global", "legal", "played")

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        spatial = torch.zeros(batch, go_spec.NUM_SPATIAL, go_spec.NN_LEN, go_spec.NN_LEN)
        spatial[:, 0] = 1.0  # the on-board plane
        legal = torch.ones(batch, go_spec.POLICY_SIZE)
        global_ = torch.zeros(batch, go_spec.NUM_GLOBAL)
        return spatial, global_, legal, self.played_move(batch, go_spec.POLICY_SIZE)

    def forward(
        self, spatial: torch.Tensor, global_: torch.Tensor, legal: torch.Tensor,
        played: torch.Tensor,
    ) -> tuple[torch.Tensor]:  # fmt: skip
        policies = self.policies(spatial, global_)
        return (self.head(level_features(policies, played, legal > 0.5)),)


LEVELS_MODELS: dict[str, type[LevelsSScore]] = {"chess": ChessLevelsSScore, "go": GoLevelsSScore}


def levels_sscore(game: str, levels: LevelNets, head: LevelsHead) -> LevelsSScore:
    """The loaded model of ``game`` for ``head`` on the nets ``levels``."""
    return LEVELS_MODELS[game](levels, head)


def build_levels_sscore(
    header: dict[str, Any], head_state: dict[str, torch.Tensor], *, load: NetLoader
) -> LevelsSScore:
    """The model a ``kibitz-sscore-levels`` file describes: its head, on the registry's nets
    (loaded by ``load``, as in ``level_nets``)."""
    head = levels_head(header, head_state)
    levels = level_nets(head.config, header["net"]["level_sha256"], load=load)
    return levels_sscore(header.get("game", "chess"), levels, head)


def levels_head(header: dict[str, Any], head_state: dict[str, torch.Tensor]) -> LevelsHead:
    """The head alone of a ``kibitz-sscore-levels`` file, in eval mode (no net is loaded)."""
    net = header["net"]
    # files written before the softmax was a setting read the whole policy
    config = LevelsHeadConfig(tuple(net["levels"]), int(net["hidden"]), net.get("softmax", "whole"))
    head = LevelsHead(config)
    head.load_state_dict(head_state)
    return head.eval()
