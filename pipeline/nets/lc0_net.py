"""Lc0 convolutional nets (Maia and any SE-ResNet Lc0 net) as a PyTorch module.

The module follows contract C4: input ``planes`` (B, 112, 8, 8) float32, exactly lc0's input,
and outputs ``policy`` (B, 1858) raw logits in lc0's policy order plus either ``wdl`` (B, 3)
logits (win, draw, loss from the side to move) or ``value`` (B, 1) tanh for scalar-value
nets. Batch norm is folded into the convolutions at load time (in float64, as lc0 itself
folds it) so inference is a plain conv / ReLU graph that ONNX and TensorRT run unchanged.

Usage::

    from pipeline.nets.lc0_net import load_lc0_net
    net = load_lc0_net("../shared/models/maia/maia-1500.pb.gz")
    policy, wdl = net(planes)          # planes: (B, 112, 8, 8) float32 tensor

Run ``python -m pipeline.nets.lc0_net NET.pb.gz`` to load a net and print its shape and outputs
for the start position.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.chess_game.spec import NUM_PLANES, POLICY_INDEX_OF, POLICY_MOVES, POLICY_SIZE
from pipeline.nets.lc0_weights import (
    INPUT_CLASSICAL_112_PLANE,
    POLICY_CONVOLUTION,
    VALUE_WDL,
    ConvBlockWeights,
    DenseWeights,
    Lc0Weights,
    ResidualWeights,
    UnsupportedNetError,
    read_lc0_weights,
)

# lc0 folds batch norm with this epsilon (and bn_stddivs holds the variance).
BN_EPSILON = 1e-5
# Output planes of lc0's convolutional policy head: 56 queen-like + 8 knight + 9 under-
# promotion planes are used, padded to 80.
CONV_POLICY_PLANES = 80

_FILES = "abcdefgh"
# (file, rank) steps in the order of lc0's conv-policy planes: N, NE, E, SE, S, SW, W, NW.
_QUEEN_DIRECTIONS = [(0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1)]
# Knight jumps in the order of conv-policy planes 56-63.
_KNIGHT_DIRECTIONS = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]


def _square_name(file: int, rank: int) -> str:
    """Square name in lc0's (and python-chess's) notation, e.g. file 4, rank 1 -> "e2".

    The policy move order itself (1858 names) lives in pipeline/chess_game/spec.py.
    """
    return f"{_FILES[file]}{rank + 1}"


def conv_policy_gather_index() -> np.ndarray:
    """Flat positions in the (80, 8, 8) conv-policy output of each of the 1858 moves.

    Follows lc0's ``kConvPolicyMap`` layout (lczero-training ``lc0_az_policy_map.py``):
    planes 0-55 are queen-like moves (direction N, NE, E, SE, S, SW, W, NW, then distance
    1..7), 56-63 knight moves, 64-72 under-promotions (directions NW, N, NE x pieces r, b,
    q); within a plane the from-square is rank * 8 + file.
    """
    moves = POLICY_MOVES
    index_of = POLICY_INDEX_OF
    gather = np.full(POLICY_SIZE, -1, dtype=np.int64)
    plane = 0

    def place(plane: int, file: int, rank: int, move: str) -> None:
        target = index_of.get(move)
        if target is not None:
            gather[target] = plane * 64 + rank * 8 + file

    for df, dr in _QUEEN_DIRECTIONS:
        for steps in range(1, 8):
            for rank in range(8):
                for file in range(8):
                    tf, tr = file + df * steps, rank + dr * steps
                    if 0 <= tf < 8 and 0 <= tr < 8:
                        place(plane, file, rank, _square_name(file, rank) + _square_name(tf, tr))
            plane += 1
    for df, dr in _KNIGHT_DIRECTIONS:
        for rank in range(8):
            for file in range(8):
                tf, tr = file + df, rank + dr
                if 0 <= tf < 8 and 0 <= tr < 8:
                    place(plane, file, rank, _square_name(file, rank) + _square_name(tf, tr))
        plane += 1
    for df in (-1, 0, 1):
        for piece in "rbq":
            for file in range(8):
                if 0 <= file + df < 8:
                    move = _square_name(file, 6) + _square_name(file + df, 7) + piece
                    place(plane, file, 6, move)
            plane += 1
    if (gather < 0).any():
        missing = [moves[i] for i in np.flatnonzero(gather < 0)[:5]]
        raise RuntimeError(f"conv policy map misses policy moves {missing!r}")
    return gather


def _fold_conv(block: ConvBlockWeights) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold bias and batch norm into one conv weight and bias (float64 arithmetic).

    lc0 computes y = gamma * (conv(x) + bias - mean) / sqrt(var + eps) + beta; missing
    gamma/beta default to 1/0 and a missing bias to 0, as in lc0's loader.
    """
    weight = block.weights.astype(np.float64)  # (out, in, k, k)
    out = block.out_channels
    bias = np.zeros(out) if block.biases is None else block.biases.astype(np.float64)
    if block.bn_means is not None and block.bn_variances is not None:
        gamma = np.ones(out) if block.bn_gammas is None else block.bn_gammas.astype(np.float64)
        beta = np.zeros(out) if block.bn_betas is None else block.bn_betas.astype(np.float64)
        scale = gamma / np.sqrt(block.bn_variances.astype(np.float64) + BN_EPSILON)
        weight = weight * scale[:, None, None, None]
        bias = (bias - block.bn_means.astype(np.float64)) * scale + beta
    return (
        torch.from_numpy(weight.astype(np.float32)),
        torch.from_numpy(bias.astype(np.float32)),
    )


def _conv(block: ConvBlockWeights) -> nn.Conv2d:
    weight, bias = _fold_conv(block)
    conv = nn.Conv2d(
        block.in_channels, block.out_channels, block.kernel_size, padding=block.kernel_size // 2
    )
    with torch.no_grad():
        conv.weight.copy_(weight)
        conv.bias.copy_(bias)
    return conv


def _linear(dense: DenseWeights) -> nn.Linear:
    out_features, in_features = dense.weight.shape
    layer = nn.Linear(in_features, out_features)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(dense.weight))
        layer.bias.copy_(torch.from_numpy(dense.bias))
    return layer


def _activation(name: str) -> nn.Module:
    return nn.Mish() if name == "mish" else nn.ReLU()


class SEResidualBlock(nn.Module):
    """conv-BN-act, conv-BN, squeeze-excitation, + skip, act (lc0's residual block).

    The SE unit's second layer gives gamma (first F) and beta (next F):
    y = sigmoid(gamma) * y + beta + skip.
    """

    def __init__(self, weights: ResidualWeights, activation: str) -> None:
        super().__init__()
        self.conv1 = _conv(weights.conv1)
        self.conv2 = _conv(weights.conv2)
        self.act = _activation(activation)
        self.filters = weights.conv2.out_channels
        if weights.se is None:
            self.se_fc1 = None
            self.se_fc2 = None
        else:
            se = weights.se
            self.se_fc1 = _linear(DenseWeights(se.w1, se.b1))
            self.se_fc2 = _linear(DenseWeights(se.w2, se.b2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.conv1(x))  # (B, F, 8, 8)
        y = self.conv2(y)  # (B, F, 8, 8)
        if self.se_fc1 is not None and self.se_fc2 is not None:
            pooled = y.mean(dim=(2, 3))  # (B, F)
            se = self.se_fc2(self.act(self.se_fc1(pooled)))  # (B, 2F)
            gamma, beta = se.split(self.filters, dim=1)  # (B, F) each
            y = torch.sigmoid(gamma)[:, :, None, None] * y + beta[:, :, None, None]
        return self.act(y + x)


class Lc0Net(nn.Module):
    """An Lc0 (SE-)ResNet with convolutional or classical policy and WDL or scalar value.

    Keep the input/output names in sync with pipeline/nets/evaluator.py and the ONNX export.
    """

    input_names: tuple[str, ...] = ("planes",)
    # Chess nets run fully in FP16 under TensorRT, as lc0's own CUDA backend does.
    fp32_layer_patterns: tuple[str, ...] = ()

    def __init__(self, weights: Lc0Weights) -> None:
        super().__init__()
        fmt = weights.format
        self.description = weights.describe()
        self.source_path = str(weights.path)
        self.input_format = fmt.input
        self.has_moves_left = weights.has_moves_left
        self.wdl = fmt.value == VALUE_WDL
        self.output_names: tuple[str, ...] = ("policy", "wdl") if self.wdl else ("policy", "value")
        self.conv_policy = fmt.policy == POLICY_CONVOLUTION
        self.filters = weights.filters
        self.blocks = weights.blocks

        self.act = _activation(fmt.activation)
        self.input_conv = _conv(weights.input)
        self.tower = nn.Sequential(*(SEResidualBlock(r, fmt.activation) for r in weights.residual))
        if self.conv_policy:
            if weights.policy1 is None or weights.policy.out_channels != CONV_POLICY_PLANES:
                raise UnsupportedNetError(
                    f"{weights.path}: convolutional policy head with "
                    f"{weights.policy.out_channels} planes, expected {CONV_POLICY_PLANES}"
                )
            self.policy_conv1: nn.Conv2d | None = _conv(weights.policy1)
            self.policy_conv = _conv(weights.policy)
            self.policy_fc: nn.Linear | None = None
            gather = torch.from_numpy(conv_policy_gather_index())
        else:
            if weights.ip_pol is None:
                raise UnsupportedNetError(f"{weights.path}: classical policy head without ip_pol")
            self.policy_conv1 = None
            self.policy_conv = _conv(weights.policy)
            self.policy_fc = _linear(weights.ip_pol)
            gather = torch.zeros(0, dtype=torch.int64)
        self.register_buffer("policy_gather", gather, persistent=False)
        self.value_conv = _conv(weights.value)
        self.value_fc1 = _linear(weights.ip1_val)
        self.value_fc2 = _linear(weights.ip2_val)
        self.eval()

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        """Random 0/1 planes of the right shape (for ONNX export and engine builds)."""
        generator = torch.Generator().manual_seed(0)
        planes = (torch.rand(batch, NUM_PLANES, 8, 8, generator=generator) < 0.1).float()
        return (planes,)  # (B, 112, 8, 8)

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.act(self.input_conv(planes))  # (B, F, 8, 8)
        x = self.tower(x)  # (B, F, 8, 8)

        if self.policy_conv1 is not None:
            p = self.act(self.policy_conv1(x))  # (B, F, 8, 8)
            p = self.policy_conv(p).flatten(1)  # (B, 80 * 64)
            policy = p.index_select(1, self.policy_gather)  # (B, 1858)
        else:
            p = self.act(self.policy_conv(x)).flatten(1)  # (B, C * 64)
            policy = self.policy_fc(p)  # type: ignore[misc]  # (B, 1858)

        v = self.act(self.value_conv(x)).flatten(1)  # (B, 32 * 64)
        v = self.value_fc2(self.act(self.value_fc1(v)))  # (B, 3) or (B, 1)
        if not self.wdl:
            v = torch.tanh(v)  # (B, 1)
        return policy, v


def load_lc0_net(path: str | Path, *, strict_input: bool = True) -> Lc0Net:
    """Load an Lc0 ``.pb.gz`` conv net as an eval-mode float32 :class:`Lc0Net`.

    ``strict_input`` rejects nets whose input format is not INPUT_CLASSICAL_112_PLANE,
    because Kibitz's encoder writes exactly that encoding; other 112-plane encodings
    (canonicalised boards, hectoplies) would be fed wrong planes without an error.
    """
    weights = read_lc0_weights(path)
    if strict_input and weights.format.input != INPUT_CLASSICAL_112_PLANE:
        raise UnsupportedNetError(
            f"{path}: input format {weights.format.input_name}; the Kibitz chess encoder "
            "writes INPUT_CLASSICAL_112_PLANE only (pass strict_input=False to load it anyway)"
        )
    net = Lc0Net(weights)
    net.requires_grad_(False)
    return net


def main(argv: list[str] | None = None) -> int:
    for name in argv if argv is not None else sys.argv[1:]:
        net = load_lc0_net(name)
        planes = net.example_inputs(1)[0]
        with torch.inference_mode():
            policy, value = net(planes)
        print(f"{name}: {net.description}; outputs {net.output_names}")
        print(f"  policy {tuple(policy.shape)}, {net.output_names[1]} {value.tolist()}")
        if net.wdl:
            print(f"  softmax wdl {F.softmax(value, dim=1).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
