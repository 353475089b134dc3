"""Kibitz's strength-score (s-score) net: a residual conv net with policy, value and score heads.

The net of Chen, Shih & Wu (2025, "strength estimator") scores a (position, move) pair: the
higher the s-score, the stronger the player who would choose that move there. Trained with a
Bradley-Terry loss over rank groups (``pipeline/train/sscore.py``), the mean s-score of a
player's moves orders players by strength. Like theirs, the net also has a policy head and a
value head, trained as auxiliary tasks on the same trunk.

How the move enters: the trunk sees the position only; the played move, given as a one-hot
vector over the game's policy (``played``: chess (B, 1858) lc0 indices, Go (B, 362)), is turned
into board planes (chess: from-square and to-square planes, Go: the stone's point and a pass
flag) that are concatenated with the trunk's features at the score head. So the s-score is a
function of (position, move) as in Chen et al.'s state-action input, while the policy head can
never read the answer it is trained to predict; and one trunk pass could score any number of
candidate moves.

The score head also reads two numbers from the policy head (detached, so the Bradley-Terry loss
never bends the policy): the log-likelihood of the shown move and the entropy of the policy.
The policy head imitates the moves of ALL rank groups, so these are the "how expected was this
move, and how open was the position" quantities that strength features are built on (Kuboki et
al. 2025's move-matching and likelihood features); a small net trained on CPU finds them far
sooner through the dense imitation signal than through the weak per-move Bradley-Terry signal.
The policy is a softmax over the whole policy vector (no legal-move mask: the net has no legal
list as input), so training uses the unmasked cross-entropy too.

Inputs and outputs follow contract C4, so the evaluators, ONNX and TensorRT run it like any net
(keep in sync with pipeline/extract/chess.py, which feeds ``played``)::

    chess: ("planes", "played")            (B, 112, 8, 8), (B, 1858)
    go:    ("spatial", "global", "played") (B, 22, 19, 19), (B, 19), (B, 362)
    out:   ("sscore", "policy", "value")   (B, 1), (B, 1858 | 362) logits, (B, 1) tanh (mover)

    python -c "from pipeline.nets.sscore_net import SScoreNet, SScoreNetConfig; \
        print(SScoreNet(SScoreNetConfig('chess')))"
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from pipeline.chess_game import spec as chess_spec
from pipeline.core.errors import KibitzError
from pipeline.go_game import spec as go_spec
from pipeline.nets.lc0_net import conv_policy_gather_index

GAMES = ("chess", "go")
CHESS_POLICY_PLANES = 80  # lc0's convolutional policy head: 80 move-type planes per square


class SScoreConfigError(KibitzError, ValueError):
    """An s-score net configuration that cannot be built."""


@dataclass(frozen=True)
class SScoreNetConfig:
    """Shape of an s-score net; stored in every exported model's header."""

    game: str  # "chess" | "go"
    blocks: int = 6  # residual blocks in the trunk
    channels: int = 64  # trunk width; 6 x 64 trains at a few hundred positions/s on 2 CPU cores
    score_channels: int = 32  # width of the move-conditioned score head
    value_hidden: int = 64
    # The score head reads the policy's log-likelihood of the move and its entropy (see above).
    policy_features: bool = True

    def validate(self) -> SScoreNetConfig:
        if self.game not in GAMES:
            raise SScoreConfigError(f"game must be one of {GAMES!r}, got {self.game!r}")
        for name in ("blocks", "channels", "score_channels", "value_hidden"):
            if int(getattr(self, name)) < 1:
                raise SScoreConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        return self

    def to_dict(self) -> dict[str, int | str]:
        return asdict(self)


class ResidualBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus skip, then ReLU (AlphaZero's block)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class ResidualTrunk(nn.Module):
    """Stem conv, optional global-input bias (Go), residual tower: (B, C_in, H, W) → (B, C, H, W)."""

    def __init__(self, in_planes: int, global_inputs: int, blocks: int, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(in_planes, channels, 3, padding=1, bias=False)
        # Go's 19 global inputs (komi, pass history, rules) enter as a per-channel bias.
        self.global_bias = nn.Linear(global_inputs, channels, bias=False) if global_inputs else None
        self.stem_bn = nn.BatchNorm2d(channels)
        self.blocks = nn.Sequential(*(ResidualBlock(channels) for _ in range(blocks)))

    def forward(self, planes: torch.Tensor, global_: torch.Tensor | None = None) -> torch.Tensor:
        x = self.stem(planes)  # (B, C, H, W)
        if self.global_bias is not None and global_ is not None:
            x = x + self.global_bias(global_)[:, :, None, None]  # (B, C, 1, 1) broadcast
        return self.blocks(torch.relu(self.stem_bn(x)))


class ValueHead(nn.Module):
    """Mean-pooled features → MLP → tanh: the game outcome from the side to move's view."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(channels, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = x.mean(dim=(2, 3))  # (B, C)
        return torch.tanh(self.fc2(torch.relu(self.fc1(pooled))))  # (B, 1)


class ScoreHead(nn.Module):
    """Trunk features + move planes → two convs → mean/max pool (+ extra) → MLP → scalar.

    ``dropout`` acts on the MLP's hidden layer in training only: a regulariser of the head that
    the Bradley-Terry loss drives (it has no weights, so exported models do not depend on it).
    """

    def __init__(
        self, channels: int, move_planes: int, width: int, extra: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels + move_planes, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.fc1 = nn.Linear(2 * width + extra, width)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(width, 1)

    def forward(
        self, x: torch.Tensor, move: torch.Tensor, extra: torch.Tensor | None
    ) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(torch.cat([x, move], dim=1))))  # (B, S, H, W)
        y = torch.relu(self.bn2(self.conv2(y)))  # (B, S, H, W)
        pooled = [y.mean(dim=(2, 3)), y.amax(dim=(2, 3))]  # 2 x (B, S)
        if extra is not None:
            pooled.append(extra)  # (B, E)
        hidden = torch.relu(self.fc1(torch.cat(pooled, dim=1)))  # (B, S)
        return self.fc2(self.dropout(hidden))  # (B, 1)


class SScoreNet(nn.Module):
    """The s-score net for one game (contract C4); see the module docstring for I/O."""

    output_names = ("sscore", "policy", "value")

    def __init__(self, config: SScoreNetConfig, score_dropout: float = 0.0) -> None:
        """``score_dropout``: training-time dropout in the score head (``ScoreHead``)."""
        super().__init__()
        self.config = config.validate()
        c = config.channels
        if config.game == "chess":
            self.board = 8
            self.policy_size = chess_spec.POLICY_SIZE
            self.trunk = ResidualTrunk(chess_spec.NUM_PLANES, 0, config.blocks, c)
            self.policy_conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.policy_bn = nn.BatchNorm2d(c)
            self.policy_conv2 = nn.Conv2d(c, CHESS_POLICY_PLANES, 3, padding=1)
            gather = torch.from_numpy(conv_policy_gather_index().astype(np.int64))
            self.register_buffer("policy_gather", gather, persistent=False)  # (1858,)
            # played (B, 1858) @ move_table (1858, 128) = from-square and to-square planes.
            table = np.zeros((self.policy_size, 2, 64), np.float32)
            rows = np.arange(self.policy_size)
            table[rows, 0, chess_spec.POLICY_FROM.astype(np.int64)] = 1.0
            table[rows, 1, chess_spec.POLICY_TO.astype(np.int64)] = 1.0
            self.register_buffer(
                "move_table",
                torch.from_numpy(table.reshape(self.policy_size, 128)),
                persistent=False,
            )
            self.score = ScoreHead(
                c, 2, config.score_channels, extra=self._policy_extra, dropout=score_dropout
            )
        else:
            self.board = go_spec.NN_LEN
            self.policy_size = go_spec.POLICY_SIZE
            self.trunk = ResidualTrunk(go_spec.NUM_SPATIAL, go_spec.NUM_GLOBAL, config.blocks, c)
            self.policy_conv1 = nn.Conv2d(c, c // 2, 1, bias=False)
            self.policy_bn = nn.BatchNorm2d(c // 2)
            self.policy_conv2 = nn.Conv2d(c // 2, 1, 1)
            self.pass_fc = nn.Linear(c, 1)
            # extra: the pass flag (+ the policy features)
            self.score = ScoreHead(
                c, 1, config.score_channels, extra=1 + self._policy_extra, dropout=score_dropout
            )
        self.value = ValueHead(c, config.value_hidden)

    @property
    def _policy_extra(self) -> int:
        """Inputs the policy features add to the score head's MLP."""
        return 2 if self.config.policy_features else 0

    @property
    def input_names(self) -> tuple[str, ...]:
        return (
            ("planes", "played") if self.config.game == "chess" else ("spatial", "global", "played")
        )

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        """Real-shaped float32 inputs for ONNX export: empty-ish boards and a one-hot move."""
        played = torch.zeros(batch, self.policy_size)
        played[:, 0] = 1.0
        if self.config.game == "chess":
            return (torch.zeros(batch, chess_spec.NUM_PLANES, 8, 8), played)
        spatial = torch.zeros(batch, go_spec.NUM_SPATIAL, self.board, self.board)
        spatial[:, 0] = 1.0  # the on-board plane
        return (spatial, torch.zeros(batch, go_spec.NUM_GLOBAL), played)

    def _policy(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.policy_bn(self.policy_conv1(x)))
        if self.config.game == "chess":
            planes = self.policy_conv2(y).flatten(1)  # (B, 80 * 64)
            return planes[:, self.policy_gather]  # (B, 1858)
        board = self.policy_conv2(y).flatten(1)  # (B, 361)
        return torch.cat([board, self.pass_fc(x.mean(dim=(2, 3)))], dim=1)  # (B, 362)

    def _move_planes(self, played: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        b = played.shape[0]
        if self.config.game == "chess":
            return (played @ self.move_table).reshape(b, 2, 8, 8), None  # (B, 2, 8, 8)
        n = self.board
        board = played[:, : n * n].reshape(b, 1, n, n)  # (B, 1, 19, 19)
        return board, played[:, n * n :]  # (B, 1) pass flag

    def forward(
        self, board: torch.Tensor, second: torch.Tensor, third: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Chess: (planes, played); Go: (spatial, global, played) — the order of input_names."""
        if self.config.game == "chess":
            x = self.trunk(board)  # (B, C, 8, 8)
            played = second
        else:
            x = self.trunk(board, second)  # (B, C, 19, 19)
            played = third
        move, extra = self._move_planes(played)
        policy = self._policy(x)  # (B, A)
        if self.config.policy_features:
            features = policy_features(policy.detach(), played)  # (B, 2)
            extra = features if extra is None else torch.cat([extra, features], dim=1)
        return self.score(x, move, extra), policy, self.value(x)


def policy_features(policy: torch.Tensor, played: torch.Tensor) -> torch.Tensor:
    """(B, 2): log-likelihood of the one-hot ``played`` move and the entropy of the policy."""
    logp = torch.log_softmax(policy, dim=1)  # (B, A)
    loglik = (logp * played).sum(dim=1, keepdim=True)  # (B, 1)
    entropy = -(logp.exp() * logp).sum(dim=1, keepdim=True)  # (B, 1)
    return torch.cat([loglik, entropy], dim=1)


def build_sscore_net(config: SScoreNetConfig | dict) -> SScoreNet:
    """A fresh net from a config or its dict (as stored in model headers)."""
    if isinstance(config, dict):
        config = SScoreNetConfig(**config)
    return SScoreNet(config)
