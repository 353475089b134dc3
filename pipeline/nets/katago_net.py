"""KataGo nets (model versions 8 to 15) as PyTorch modules, computing what KataGo computes.

``load_katago_net(path)`` parses a ``.bin.gz`` file (``pipeline.nets.katago_model_file``) and builds a
``KataGoNet``: a Kibitz net in the sense of ``pipeline.nets.evaluator`` (contract C4), so the same
Evaluator runs it on PyTorch, ONNX Runtime or TensorRT.

Inputs (float32, exactly KataGo's NCHW input tensors, input features v7):

- ``spatial`` (B, 22, 19, 19); channel 0 is the on-board mask (all ones on a 19x19 board),
- ``global``  (B, 19),
- ``meta``    (B, 192), only for nets with an SGF-metadata encoder (v15 HumanSL).

Outputs (raw net outputs, from the side to move's point of view; ``pipeline.nets.katago_outputs`` turns
them into probabilities, points and White's view):

- ``policy``    (B, P, 362) logits, index y*19 + x (y = 0 the top row), 361 = pass. P = 1 before
  v12; from v12 P = 2 where channel 1 is KataGo's "optimistic" policy (mixed in by
  policyOptimism, default 0: channel 0 alone),
- ``value``     (B, 3) win / loss / no-result logits,
- ``misc``      (B, 4) v8 or (B, 6) v9+: scoreMean, scoreStdev (pre-softplus), lead, varTime
  (pre-softplus), then shortterm winloss error, shortterm score error (pre-softplus),
- ``ownership`` (B, 361) pre-tanh ownership, +1 = side to move owns.

The math follows KataGo's reference backends (``cpp/neuralnet/eigenbackend.cpp``): batch norm
folded to ``x * scale / sqrt(var + eps) + (bias - mean * scale')`` with the file's epsilon,
activation, then multiplied by the mask; global pooling = [mean, mean * (sqrt(area) - 14) / 10,
max] over the board; the value head pools [mean, mean * (sqrt(area) - 14) / 10,
mean * ((sqrt(area) - 14)^2 / 100 - 0.1)]; the trunk gets the global features (and the
metadata encoder's output) as a per-channel bias after the initial convolution.

``KataGoTrunk`` is a net's trunk alone, the feature extractor under Kibitz's rank-conditioned Go
policy when it is trained on KataGo's trunk (``pipeline.nets.go_rank_policy``).

Run ``python -m pipeline.nets.katago_net MODEL.bin.gz`` to print the output shapes of a forward pass.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.go_game.spec import NN_LEN
from pipeline.nets.katago_model_file import (
    Activation,
    BatchNormLayer,
    Block,
    ConvLayer,
    GlobalPoolingBlock,
    KataGoModelMeta,
    MatBiasLayer,
    MatMulLayer,
    MetadataEncoder,
    ModelDescription,
    NestedBottleneckBlock,
    OrdinaryBlock,
    read_model_file,
    trunk_from_layout,
    trunk_layout,
)
from pipeline.nets.katago_model_file import Trunk as TrunkRecord

# ---------------------------------------------------------------------------------------------
# Layers


def _conv(layer: ConvLayer) -> nn.Conv2d:
    """A bias-free "same" convolution carrying the file's weights."""
    out_c, in_c, ky, kx = layer.weight.shape
    dy, dx = layer.dilation
    conv = nn.Conv2d(
        in_c,
        out_c,
        (ky, kx),
        padding=(dy * (ky // 2), dx * (kx // 2)),
        dilation=(dy, dx),
        bias=False,
    )
    conv.weight.data.copy_(torch.from_numpy(layer.weight))
    return conv


def _linear(matmul: MatMulLayer, bias: MatBiasLayer | None = None) -> nn.Linear:
    linear = nn.Linear(matmul.in_channels, matmul.out_channels, bias=bias is not None)
    linear.weight.data.copy_(torch.from_numpy(matmul.weight))
    if bias is not None:
        linear.bias.data.copy_(torch.from_numpy(bias.bias))
    return linear


def _activation(activation: Activation) -> nn.Module:
    if activation.kind == "relu":
        return nn.ReLU()
    if activation.kind == "mish":
        return nn.Mish()  # x * tanh(softplus(x)), softplus linear above 20 as in KataGo
    return nn.Identity()


class NormActMask(nn.Module):
    """KataGo's batch norm (inference form) + activation, zero off the board."""

    def __init__(self, bn: BatchNormLayer, activation: Activation) -> None:
        super().__init__()
        scale, bias = bn.merged()
        self.register_buffer("scale", torch.from_numpy(scale).view(1, -1, 1, 1))
        self.register_buffer("bias", torch.from_numpy(bias).view(1, -1, 1, 1))
        self.act = _activation(activation)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.act(x * self.scale + self.bias) * mask  # (B, C, H, W)


def global_pool(x: torch.Tensor, mask: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
    """[mean, mean * (width - 14) / 10, max] per channel; x is already zero off the board."""
    mean = x.sum(dim=(2, 3)) / (width * width)  # (B, C)
    # Off-board points are pushed to -1 so they never win the max (activations are >= -0.31).
    maximum = (x + (mask - 1.0)).amax(dim=(2, 3))  # (B, C)
    return torch.cat([mean, mean * (width - 14.0) * 0.1, maximum], dim=1)  # (B, 3C)


def value_pool(x: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
    """[mean, mean * (width - 14) / 10, mean * ((width - 14)^2 / 100 - 0.1)] per channel."""
    mean = x.sum(dim=(2, 3)) / (width * width)  # (B, C)
    shifted = width - 14.0
    return torch.cat(
        [mean, mean * shifted * 0.1, mean * (shifted * shifted * 0.01 - 0.1)], dim=1
    )  # (B, 3C)


# ---------------------------------------------------------------------------------------------
# Blocks


class OrdinaryResBlock(nn.Module):
    def __init__(self, block: OrdinaryBlock) -> None:
        super().__init__()
        self.pre = NormActMask(block.pre_bn, block.pre_act)
        self.regular_conv = _conv(block.regular_conv)
        self.mid = NormActMask(block.mid_bn, block.mid_act)
        self.final_conv = _conv(block.final_conv)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
        out = self.regular_conv(self.pre(x, mask))  # (B, Cmid, H, W)
        return x + self.final_conv(self.mid(out, mask))  # (B, C, H, W)


class GlobalPoolingResBlock(nn.Module):
    def __init__(self, block: GlobalPoolingBlock) -> None:
        super().__init__()
        self.pre = NormActMask(block.pre_bn, block.pre_act)
        self.regular_conv = _conv(block.regular_conv)
        self.gpool_conv = _conv(block.gpool_conv)
        self.gpool_norm = NormActMask(block.gpool_bn, block.gpool_act)
        self.gpool_to_bias = _linear(block.gpool_to_bias)
        self.mid = NormActMask(block.mid_bn, block.mid_act)
        self.final_conv = _conv(block.final_conv)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
        a = self.pre(x, mask)  # (B, C, H, W)
        regular = self.regular_conv(a)  # (B, Creg, H, W)
        g = self.gpool_norm(self.gpool_conv(a), mask)  # (B, Cg, H, W)
        bias = self.gpool_to_bias(global_pool(g, mask, width))  # (B, Creg)
        regular = regular + bias[:, :, None, None]
        return x + self.final_conv(self.mid(regular, mask))  # (B, C, H, W)


class NestedBottleneckResBlock(nn.Module):
    def __init__(self, block: NestedBottleneckBlock) -> None:
        super().__init__()
        self.pre = NormActMask(block.pre_bn, block.pre_act)
        self.pre_conv = _conv(block.pre_conv)
        self.blocks = nn.ModuleList(_block(inner) for inner in block.blocks)
        self.post = NormActMask(block.post_bn, block.post_act)
        self.post_conv = _conv(block.post_conv)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
        inner = self.pre_conv(self.pre(x, mask))  # (B, Cmid, H, W)
        for block in self.blocks:
            inner = block(inner, mask, width)
        return x + self.post_conv(self.post(inner, mask))  # (B, C, H, W)


def _block(block: Block) -> nn.Module:
    if isinstance(block, OrdinaryBlock):
        return OrdinaryResBlock(block)
    if isinstance(block, GlobalPoolingBlock):
        return GlobalPoolingResBlock(block)
    return NestedBottleneckResBlock(block)


# ---------------------------------------------------------------------------------------------
# Trunk and heads


class MetadataEncoderNet(nn.Module):
    """(B, 192) SGF metadata -> (B, trunk channels) bias, HumanSL only."""

    def __init__(self, encoder: MetadataEncoder) -> None:
        super().__init__()
        self.layer1 = _linear(encoder.mul1, encoder.bias1)
        self.act1 = _activation(encoder.act1)
        self.layer2 = _linear(encoder.mul2, encoder.bias2)
        self.act2 = _activation(encoder.act2)
        self.layer3 = _linear(encoder.mul3)

    def forward(self, meta: torch.Tensor) -> torch.Tensor:
        hidden = self.act2(self.layer2(self.act1(self.layer1(meta))))  # (B, Cinternal)
        return self.layer3(hidden)  # (B, C)


class Trunk(nn.Module):
    def __init__(self, trunk: TrunkRecord) -> None:
        super().__init__()
        self.initial_conv = _conv(trunk.initial_conv)
        self.initial_matmul = _linear(trunk.initial_matmul)
        self.metadata_encoder = (
            MetadataEncoderNet(trunk.metadata_encoder)
            if trunk.metadata_encoder is not None
            else None
        )
        self.blocks = nn.ModuleList(_block(block) for block in trunk.blocks)
        self.tip = NormActMask(trunk.tip_bn, trunk.tip_act)

    def forward(
        self,
        spatial: torch.Tensor,
        global_input: torch.Tensor,
        meta: torch.Tensor | None,
        mask: torch.Tensor,
        width: torch.Tensor,
    ) -> torch.Tensor:
        bias = self.initial_matmul(global_input)  # (B, C)
        if self.metadata_encoder is not None:
            if meta is None:
                raise ValueError("this net has a metadata encoder: pass the (B, 192) meta input")
            bias = bias + self.metadata_encoder(meta)
        x = self.initial_conv(spatial) + bias[:, :, None, None]  # (B, C, H, W)
        for block in self.blocks:
            x = block(x, mask, width)
        return self.tip(x, mask)  # (B, C, H, W)


class PolicyHead(nn.Module):
    def __init__(self, desc: ModelDescription) -> None:
        super().__init__()
        head = desc.policy_head
        self.p1_conv = _conv(head.p1_conv)
        self.g1_conv = _conv(head.g1_conv)
        self.g1_norm = NormActMask(head.g1_bn, head.g1_act)
        self.gpool_to_bias = _linear(head.gpool_to_bias)
        self.p1_norm = NormActMask(head.p1_bn, head.p1_act)
        self.p2_conv = _conv(head.p2_conv)
        self.gpool_to_pass: nn.Module = _linear(head.gpool_to_pass)  # before v15: one matmul
        if (
            head.pass_bias is not None
            and head.pass_act is not None
            and head.gpool_to_pass2 is not None
        ):
            # v15: matmul + bias, activation, matmul
            self.gpool_to_pass = nn.Sequential(
                _linear(head.gpool_to_pass, head.pass_bias),
                _activation(head.pass_act),
                _linear(head.gpool_to_pass2),
            )

    def forward(self, trunk: torch.Tensor, mask: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
        p1 = self.p1_conv(trunk)  # (B, Cp, H, W)
        g1 = self.g1_norm(self.g1_conv(trunk), mask)  # (B, Cg, H, W)
        pooled = global_pool(g1, mask, width)  # (B, 3Cg)
        p1 = p1 + self.gpool_to_bias(pooled)[:, :, None, None]
        board = self.p2_conv(self.p1_norm(p1, mask))  # (B, P, H, W)
        passes = self.gpool_to_pass(pooled)  # (B, P)
        return torch.cat([board.flatten(2), passes[:, :, None]], dim=2)  # (B, P, HW + 1)


class ValueHead(nn.Module):
    def __init__(self, desc: ModelDescription) -> None:
        super().__init__()
        head = desc.value_head
        self.v1_conv = _conv(head.v1_conv)
        self.v1_norm = NormActMask(head.v1_bn, head.v1_act)
        self.v2 = _linear(head.v2_mul, head.v2_bias)
        self.v2_act = _activation(head.v2_act)
        self.v3 = _linear(head.v3_mul, head.v3_bias)
        self.sv3 = _linear(head.sv3_mul, head.sv3_bias)
        self.ownership_conv = _conv(head.ownership_conv)

    def forward(
        self, trunk: torch.Tensor, mask: torch.Tensor, width: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        v1 = self.v1_norm(self.v1_conv(trunk), mask)  # (B, Cv, H, W)
        v2 = self.v2_act(self.v2(value_pool(v1, width)))  # (B, Cv2)
        ownership = self.ownership_conv(v1).flatten(1)  # (B, HW)
        return self.v3(v2), self.sv3(v2), ownership  # (B, 3), (B, 4|6), (B, HW)


class BoardMask(nn.Module):
    """The on-board mask (input channel 0) and sqrt of the board area, for masking and pooling."""

    def forward(self, spatial: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mask = spatial[:, 0:1]  # (B, 1, H, W)
        return mask, torch.sqrt(mask.sum(dim=(2, 3)))  # (B, 1, H, W), (B, 1)


class KataGoNet(nn.Module):
    """A KataGo net; see the module docstring for inputs and outputs."""

    output_names: tuple[str, ...] = ("policy", "value", "misc", "ownership")
    # KataGo's TensorRT backend runs the trunk in FP16 but casts the trunk tip to FP32 and builds
    # the whole policy and value heads (pooling, matmuls, the pass and score outputs) in FP32:
    # pooled sums over 361 points and the score outputs overflow or lose too much in FP16.
    # Matched against ONNX node names, which carry the module path (pipeline/nets/onnx_export.py).
    fp32_layer_patterns: tuple[str, ...] = (
        "/board_mask/",
        r"/trunk\.tip/",
        "/policy_head/",
        "/value_head/",
    )

    def __init__(self, desc: ModelDescription) -> None:
        super().__init__()
        self.meta: KataGoModelMeta = desc.meta
        self.spatial_channels = desc.spatial_channels
        self.global_channels = desc.global_channels
        self.meta_channels = desc.meta_channels
        # What rebuilding the trunk alone needs (KataGoTrunk), without the file's numbers.
        self.trunk_layout: dict[str, Any] = trunk_layout(desc.trunk)
        self.board_mask = BoardMask()
        self.trunk = Trunk(desc.trunk)
        self.policy_head = PolicyHead(desc)
        self.value_head = ValueHead(desc)
        self.eval()

    @property
    def input_names(self) -> tuple[str, ...]:
        if self.meta_channels:
            return ("spatial", "global", "meta")
        return ("spatial", "global")

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        """Plausible float32 inputs: full-board mask, sparse stones, small globals."""
        generator = torch.Generator().manual_seed(batch)
        shape = (batch, self.spatial_channels, NN_LEN, NN_LEN)
        spatial = (torch.rand(shape, generator=generator) < 0.15).float()  # (B, C, 19, 19)
        spatial[:, 0] = 1.0
        global_input = torch.rand((batch, self.global_channels), generator=generator) * 0.5
        inputs: tuple[torch.Tensor, ...] = (spatial, global_input)
        if self.meta_channels:
            meta = (torch.rand((batch, self.meta_channels), generator=generator) < 0.1).float()
            inputs = (*inputs, meta)
        return inputs

    def forward(
        self,
        spatial: torch.Tensor,
        global_input: torch.Tensor,
        meta: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mask, width = self.board_mask(spatial)  # (B, 1, H, W), (B, 1)
        trunk = self.trunk(spatial, global_input, meta, mask, width)  # (B, C, H, W)
        policy = self.policy_head(trunk, mask, width)  # (B, P, HW + 1)
        value, misc, ownership = self.value_head(trunk, mask, width)
        return policy, value, misc, ownership


class KataGoTrunk(nn.Module):
    """A KataGo net's trunk alone, as a feature extractor for Kibitz's own heads:
    (spatial (B, 22, 19, 19), global (B, 19)) -> (B, C, 19, 19), the trunk tip KataGo's policy
    and value heads read (after its batch norm, activation and board mask).

    Built from a trunk layout (``katago_model_file.trunk_layout``) with zero weights, so a model
    that embeds the trunk rebuilds it from its header and loads the weights from its own state
    dict; :meth:`from_net` copies a loaded net's weights exactly. The trunk's batch norms are the
    file's inference form (fixed per-channel scale and bias buffers): fine-tuning trains the
    convolutions and matmuls, not the norms. Nets with an SGF-metadata input (HumanSL) are
    refused: their trunk needs the (B, 192) metadata row, which a Kibitz head does not give.
    """

    def __init__(self, layout: dict[str, Any]) -> None:
        super().__init__()
        record = trunk_from_layout(layout)
        if record.metadata_encoder is not None:
            raise ValueError(
                f"KataGo trunk {record.name!r} has an SGF-metadata encoder (HumanSL): its "
                "features depend on a metadata input a Kibitz head does not give"
            )
        self.channels = record.channels
        self.blocks = len(record.blocks)
        self.spatial_channels = record.initial_conv.in_channels
        self.global_channels = record.initial_matmul.in_channels
        self.board_mask = BoardMask()
        self.trunk = Trunk(record)

    @classmethod
    def from_net(cls, net: KataGoNet) -> KataGoTrunk:
        """The trunk of ``net``, weights and norms copied exactly."""
        trunk = cls(net.trunk_layout)
        trunk.trunk.load_state_dict(net.trunk.state_dict())
        return trunk

    def forward(self, spatial: torch.Tensor, global_input: torch.Tensor) -> torch.Tensor:
        mask, width = self.board_mask(spatial)  # (B, 1, H, W), (B, 1)
        return self.trunk(spatial, global_input, None, mask, width)  # (B, C, H, W)


def load_katago_net(path: str | Path) -> KataGoNet:
    """Load a KataGo ``.bin.gz`` model (versions 8 to 15) as an eval-mode KataGoNet."""
    return KataGoNet(read_model_file(path))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for name in args:
        net = load_katago_net(name)
        with torch.inference_mode():
            outputs = net(*net.example_inputs(2))
        shapes = ", ".join(
            f"{n} {tuple(o.shape)}" for n, o in zip(net.output_names, outputs, strict=True)
        )
        print(f"{net.meta.name} v{net.meta.version}: {shapes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
