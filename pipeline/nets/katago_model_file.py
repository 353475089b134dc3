"""Parser for KataGo's ``.bin.gz`` / ``.txt.gz`` model files (model versions 8 to 15).

KataGo's exporter (``python/export_model_pytorch.py``) writes a whitespace-separated text stream:
a header (model name, version, input channel counts, post-process multipliers for v13+, the
metadata-encoder version and seven reserved integers for v15+), then the trunk, the policy head
and the value head as nested records. Every record starts with its name and its shape integers;
its numbers follow either as ``@BIN@`` + little-endian float32 bytes (``.bin.gz``) or as text
floats (``.txt.gz``, older files). The engine's reader is ``cpp/neuralnet/desc.cpp``; this module
reads the same records in the same order and keeps their names, so a parse error names the layer.

What each model version changed (``cpp/neuralnet/modelversion.cpp``):

====  ==========================================================================================
 v8   input features v7 (22 spatial + 19 global); score head: scoreMean, scoreStdev, lead, varTime
 v9   score head gains shortterm winloss / score error (6 outputs)
 v10  shortterm errors computed "more properly" (post-processing only)
 v11  activation records name their kind (``ACTIVATION_RELU`` / ``_MISH`` / ``_IDENTITY``)
 v12  optimistic policy: the policy conv and the pass matmul have 2 output channels
 v13  post-process multipliers stored in the header instead of fixed (20, 20, 20, 20, 40, .25, 30)
 v14  squared-softplus shortterm errors (post-processing only)
 v15  pass output gets a hidden layer (matmul, bias, activation, matmul); header carries the
      SGF-metadata encoder version (1 = HumanSL, 192 inputs) and 7 reserved ints, the trunk
      6 reserved ints; the metadata encoder (matmul, bias, act, matmul, bias, act, matmul) is
      stored after the trunk's initial matmul
 v16  Q-value policy outputs  -> not supported here
 v17  transformer blocks      -> not supported here
====  ==========================================================================================

Run ``python -m pipeline.nets.katago_model_file MODEL.bin.gz`` to print a summary of a model file.
Keep in sync with ``pipeline/nets/katago_net.py`` (which builds the torch module from these records).
"""

from __future__ import annotations

import gzip
import re
import sys
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.errors import KibitzError

MIN_MODEL_VERSION = 8
MAX_MODEL_VERSION = 15
METADATA_INPUT_CHANNELS = 192  # KataGo's SGFMetadata::METADATA_INPUT_NUM_CHANNELS
_WHITESPACE = b" \t\r\n"
_TOKEN = re.compile(rb"\S+")
_ACTIVATIONS = {
    "ACTIVATION_IDENTITY": "identity",
    "ACTIVATION_RELU": "relu",
    "ACTIVATION_MISH": "mish",
}


class ModelFileError(KibitzError, ValueError):
    """The file is not a well-formed KataGo model file."""


class UnsupportedModelError(ModelFileError):
    """A well-formed KataGo model that Kibitz cannot run (version or layer kind)."""


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class ConvLayer:
    name: str
    weight: np.ndarray  # (out, in, y, x) float32, torch's layout
    dilation: tuple[int, int]  # (y, x)

    @property
    def in_channels(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_channels(self) -> int:
        return int(self.weight.shape[0])


@dataclass(frozen=True)
class BatchNormLayer:
    """Inference batch norm: ``(x - mean) / sqrt(variance + epsilon) * scale + bias``."""

    name: str
    mean: np.ndarray
    variance: np.ndarray
    scale: np.ndarray
    bias: np.ndarray
    epsilon: float

    @property
    def channels(self) -> int:
        return int(self.mean.shape[0])

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """(scale', bias') with ``y = x * scale' + bias'``, computed as KataGo's backends do."""
        merged_scale = self.scale / np.sqrt(self.variance + np.float32(self.epsilon))
        merged_bias = self.bias - merged_scale * self.mean
        return merged_scale.astype(np.float32), merged_bias.astype(np.float32)


@dataclass(frozen=True)
class Activation:
    name: str
    kind: str  # "identity" | "relu" | "mish"


@dataclass(frozen=True)
class MatMulLayer:
    name: str
    weight: np.ndarray  # (out, in) float32, torch's nn.Linear layout

    @property
    def in_channels(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_channels(self) -> int:
        return int(self.weight.shape[0])


@dataclass(frozen=True)
class MatBiasLayer:
    name: str
    bias: np.ndarray  # (channels,) float32


@dataclass(frozen=True)
class OrdinaryBlock:
    """Pre-activation residual block: x + conv2(act(bn2(conv1(act(bn1(x))))))."""

    name: str
    pre_bn: BatchNormLayer
    pre_act: Activation
    regular_conv: ConvLayer
    mid_bn: BatchNormLayer
    mid_act: Activation
    final_conv: ConvLayer


@dataclass(frozen=True)
class GlobalPoolingBlock:
    """Residual block whose middle gets a per-channel bias from globally pooled features."""

    name: str
    pre_bn: BatchNormLayer
    pre_act: Activation
    regular_conv: ConvLayer
    gpool_conv: ConvLayer
    gpool_bn: BatchNormLayer
    gpool_act: Activation
    gpool_to_bias: MatMulLayer
    mid_bn: BatchNormLayer
    mid_act: Activation
    final_conv: ConvLayer


@dataclass(frozen=True)
class NestedBottleneckBlock:
    """x + post_conv(act(bn(inner_blocks(pre_conv(act(bn(x))))))) at a narrower width."""

    name: str
    pre_bn: BatchNormLayer
    pre_act: Activation
    pre_conv: ConvLayer
    blocks: tuple[Block, ...]
    post_bn: BatchNormLayer
    post_act: Activation
    post_conv: ConvLayer


Block = OrdinaryBlock | GlobalPoolingBlock | NestedBottleneckBlock


@dataclass(frozen=True)
class MetadataEncoder:
    """HumanSL's SGF-metadata encoder: 192 inputs -> a per-channel bias on the trunk."""

    name: str
    mul1: MatMulLayer
    bias1: MatBiasLayer
    act1: Activation
    mul2: MatMulLayer
    bias2: MatBiasLayer
    act2: Activation
    mul3: MatMulLayer


@dataclass(frozen=True)
class Trunk:
    name: str
    channels: int
    initial_conv: ConvLayer
    initial_matmul: MatMulLayer
    metadata_encoder: MetadataEncoder | None
    blocks: tuple[Block, ...]
    tip_bn: BatchNormLayer
    tip_act: Activation


@dataclass(frozen=True)
class PolicyHead:
    name: str
    p1_conv: ConvLayer
    g1_conv: ConvLayer
    g1_bn: BatchNormLayer
    g1_act: Activation
    gpool_to_bias: MatMulLayer
    p1_bn: BatchNormLayer
    p1_act: Activation
    p2_conv: ConvLayer
    gpool_to_pass: MatMulLayer
    # v15+: pass = gpool_to_pass2(pass_act(gpool_to_pass(g) + pass_bias))
    pass_bias: MatBiasLayer | None
    pass_act: Activation | None
    gpool_to_pass2: MatMulLayer | None

    @property
    def policy_channels(self) -> int:
        """1 before v12; 2 from v12 (channel 0 = policy, channel 1 = optimistic policy)."""
        return self.p2_conv.out_channels


@dataclass(frozen=True)
class ValueHead:
    name: str
    v1_conv: ConvLayer
    v1_bn: BatchNormLayer
    v1_act: Activation
    v2_mul: MatMulLayer
    v2_bias: MatBiasLayer
    v2_act: Activation
    v3_mul: MatMulLayer  # -> win / loss / no-result logits
    v3_bias: MatBiasLayer
    sv3_mul: MatMulLayer  # -> scoreMean, scoreStdev, lead, varTime (+ 2 shortterm errors, v9+)
    sv3_bias: MatBiasLayer
    ownership_conv: ConvLayer


@dataclass(frozen=True)
class PostProcessParams:
    """Output multipliers; fixed before v13, read from the header from v13 (KataGo's defaults)."""

    td_score_multiplier: float = 20.0
    score_mean_multiplier: float = 20.0
    score_stdev_multiplier: float = 20.0
    lead_multiplier: float = 20.0
    variance_time_multiplier: float = 40.0
    shortterm_value_error_multiplier: float = 0.25
    shortterm_score_error_multiplier: float = 30.0


@dataclass(frozen=True)
class KataGoModelMeta:
    """What output post-processing needs to know about a model (no weights)."""

    name: str
    version: int
    post_process: PostProcessParams
    policy_channels: int
    score_channels: int
    meta_encoder_version: int  # 0 = none, 1 = HumanSL SGF-metadata encoder (192 inputs)


@dataclass(frozen=True)
class ModelDescription:
    name: str
    version: int
    spatial_channels: int
    global_channels: int
    post_process: PostProcessParams
    meta_encoder_version: int
    trunk: Trunk
    policy_head: PolicyHead
    value_head: ValueHead
    source: str = field(default="", compare=False)

    @property
    def meta_channels(self) -> int:
        return METADATA_INPUT_CHANNELS if self.meta_encoder_version > 0 else 0

    @property
    def meta(self) -> KataGoModelMeta:
        return KataGoModelMeta(
            name=self.name,
            version=self.version,
            post_process=self.post_process,
            policy_channels=self.policy_head.policy_channels,
            score_channels=self.value_head.sv3_mul.out_channels,
            meta_encoder_version=self.meta_encoder_version,
        )

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for block in self.trunk.blocks:
            kinds[type(block).__name__] = kinds.get(type(block).__name__, 0) + 1
        blocks = ", ".join(f"{n} {k}" for k, n in kinds.items())
        return (
            f"{self.name}: KataGo model v{self.version}, inputs {self.spatial_channels} spatial + "
            f"{self.global_channels} global + {self.meta_channels} meta, trunk "
            f"{self.trunk.channels} channels x {len(self.trunk.blocks)} blocks ({blocks}), "
            f"policy channels {self.policy_head.policy_channels}, score outputs "
            f"{self.value_head.sv3_mul.out_channels}"
        )


# ---------------------------------------------------------------------------------------------
# Reader


class _Reader:
    """Token and float-block reader over the uncompressed model bytes."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.pos = 0
        self.source = source

    def error(self, context: str, message: str) -> ModelFileError:
        return ModelFileError(f"{self.source}: {context}: {message} (at byte {self.pos})")

    def token(self, context: str) -> str:
        data, n = self.data, len(self.data)
        pos = self.pos
        while pos < n and data[pos] in _WHITESPACE:
            pos += 1
        end = pos
        while end < n and data[end] not in _WHITESPACE:
            end += 1
        if end == pos:
            self.pos = pos
            raise self.error(context, "unexpected end of file")
        self.pos = end
        return data[pos:end].decode("ascii", errors="replace")

    def int(self, context: str) -> int:
        text = self.token(context)
        try:
            return int(text)
        except ValueError:
            raise self.error(context, f"expected an integer, found {text!r}") from None

    def float(self, context: str) -> float:
        text = self.token(context)
        try:
            return float(text)
        except ValueError:
            raise self.error(context, f"expected a number, found {text!r}") from None

    def positive(self, context: str) -> int:
        value = self.int(context)
        if value <= 0:
            raise self.error(context, f"expected a positive integer, found {value!r}")
        return value

    def floats(self, count: int, context: str) -> np.ndarray:
        """``count`` float32 numbers, binary (``@BIN@``) or text, whichever the file holds."""
        data = self.data
        pos = self.pos
        skipped = 0
        while pos < len(data) and data[pos] in _WHITESPACE:
            pos += 1
            skipped += 1
        if data.startswith(b"@BIN@", pos):
            start = pos + 5
            end = start + 4 * count
            if end > len(data):
                self.pos = pos
                raise self.error(context, f"binary block of {count} floats runs past end of file")
            values = np.frombuffer(data, dtype="<f4", count=count, offset=start).astype(np.float32)
            self.pos = end
        else:
            values = np.empty(count, dtype=np.float32)
            matches = _TOKEN.finditer(data, pos)
            for i in range(count):
                match = next(matches, None)
                if match is None:
                    raise self.error(context, f"expected {count} text floats, found {i}")
                try:
                    values[i] = float(match.group())
                except ValueError:
                    self.pos = match.start()
                    raise self.error(context, f"bad float {match.group()!r}") from None
                self.pos = match.end()
        if not np.all(np.isfinite(values)):
            raise self.error(context, "NaN or infinite weight")
        return values

    # -- layers ------------------------------------------------------------------------------

    def conv(self) -> ConvLayer:
        name = self.token("conv layer name")
        ysize, xsize = self.positive(name), self.positive(name)
        in_c, out_c = self.positive(name), self.positive(name)
        dil_y, dil_x = self.positive(name), self.positive(name)
        if ysize % 2 != 1 or xsize % 2 != 1:
            raise self.error(name, f"convolution sizes must be odd, found {ysize}x{xsize}")
        flat = self.floats(ysize * xsize * in_c * out_c, name)
        # File order is (y, x, in, out); torch wants (out, in, y, x).
        weight = flat.reshape(ysize, xsize, in_c, out_c).transpose(3, 2, 0, 1)
        return ConvLayer(name, np.ascontiguousarray(weight), (dil_y, dil_x))

    def batch_norm(self) -> BatchNormLayer:
        name = self.token("batch norm name")
        channels = self.positive(name)
        epsilon = self.float(name)
        has_scale, has_bias = self.int(name), self.int(name)
        if epsilon <= 0:
            raise self.error(name, f"epsilon must be positive, found {epsilon!r}")
        mean = self.floats(channels, name)
        variance = self.floats(channels, name)
        scale = self.floats(channels, name) if has_scale else np.ones(channels, np.float32)
        bias = self.floats(channels, name) if has_bias else np.zeros(channels, np.float32)
        return BatchNormLayer(name, mean, variance, scale, bias, epsilon)

    def activation(self, version: int) -> Activation:
        name = self.token("activation name")
        if version < 11:
            return Activation(name, "relu")
        kind = self.token(name)
        if kind not in _ACTIVATIONS:
            raise UnsupportedModelError(f"{self.source}: {name}: unsupported activation {kind!r}")
        return Activation(name, _ACTIVATIONS[kind])

    def matmul(self) -> MatMulLayer:
        name = self.token("matmul name")
        in_c, out_c = self.positive(name), self.positive(name)
        flat = self.floats(in_c * out_c, name)
        # File order is (in, out); nn.Linear wants (out, in).
        weight = np.ascontiguousarray(flat.reshape(in_c, out_c).T)
        return MatMulLayer(name, weight)

    def matbias(self) -> MatBiasLayer:
        name = self.token("matbias name")
        channels = self.positive(name)
        return MatBiasLayer(name, self.floats(channels, name))

    # -- blocks ------------------------------------------------------------------------------

    def block_stack(self, count: int, channels: int, version: int, owner: str) -> tuple[Block, ...]:
        blocks: list[Block] = []
        for _ in range(count):
            kind = self.token(f"{owner}: block kind")
            if kind == "ordinary_block":
                block: Block = self.ordinary_block(version)
                outer = (block.pre_bn.channels, block.final_conv.out_channels)
            elif kind == "gpool_block":
                block = self.gpool_block(version)
                outer = (block.pre_bn.channels, block.final_conv.out_channels)
            elif kind == "nested_bottleneck_block":
                block = self.nested_block(version)
                outer = (block.pre_bn.channels, block.post_conv.out_channels)
            else:
                raise UnsupportedModelError(
                    f"{self.source}: {owner}: unsupported block kind {kind!r} "
                    "(Kibitz runs ordinary, gpool and nested bottleneck blocks)"
                )
            if outer != (channels, channels):
                raise self.error(block.name, f"block maps {outer} channels, trunk has {channels}")
            blocks.append(block)
        return tuple(blocks)

    def ordinary_block(self, version: int) -> OrdinaryBlock:
        name = self.token("block name")
        block = OrdinaryBlock(
            name,
            self.batch_norm(),
            self.activation(version),
            self.conv(),
            self.batch_norm(),
            self.activation(version),
            self.conv(),
        )
        self.expect(block.mid_bn.channels == block.regular_conv.out_channels, name, "mid BN")
        self.expect(block.final_conv.in_channels == block.mid_bn.channels, name, "final conv")
        return block

    def gpool_block(self, version: int) -> GlobalPoolingBlock:
        name = self.token("block name")
        block = GlobalPoolingBlock(
            name,
            self.batch_norm(),
            self.activation(version),
            self.conv(),
            self.conv(),
            self.batch_norm(),
            self.activation(version),
            self.matmul(),
            self.batch_norm(),
            self.activation(version),
            self.conv(),
        )
        self.expect(block.gpool_bn.channels * 3 == block.gpool_to_bias.in_channels, name, "gpool")
        self.expect(
            block.gpool_to_bias.out_channels == block.regular_conv.out_channels, name, "bias"
        )
        self.expect(block.mid_bn.channels == block.regular_conv.out_channels, name, "mid BN")
        return block

    def nested_block(self, version: int) -> NestedBottleneckBlock:
        name = self.token("block name")
        count = self.positive(name)
        pre_bn, pre_act, pre_conv = self.batch_norm(), self.activation(version), self.conv()
        inner = self.block_stack(count, pre_conv.out_channels, version, name)
        block = NestedBottleneckBlock(
            name,
            pre_bn,
            pre_act,
            pre_conv,
            inner,
            self.batch_norm(),
            self.activation(version),
            self.conv(),
        )
        self.expect(block.post_bn.channels == pre_conv.out_channels, name, "post BN")
        return block

    def expect(self, condition: bool, name: str, what: str) -> None:
        if not condition:
            raise self.error(name, f"inconsistent channel counts ({what})")

    # -- model parts -------------------------------------------------------------------------

    def metadata_encoder(self, version: int) -> MetadataEncoder:
        name = self.token("metadata encoder name")
        encoder = MetadataEncoder(
            name,
            self.matmul(),
            self.matbias(),
            self.activation(version),
            self.matmul(),
            self.matbias(),
            self.activation(version),
            self.matmul(),
        )
        self.expect(encoder.mul1.in_channels == METADATA_INPUT_CHANNELS, name, "inputs")
        self.expect(encoder.mul2.in_channels == encoder.mul1.out_channels, name, "mul2")
        self.expect(encoder.mul3.in_channels == encoder.mul2.out_channels, name, "mul3")
        return encoder

    def trunk(self, version: int, meta_encoder_version: int) -> Trunk:
        name = self.token("trunk name")
        num_blocks = self.positive(name)
        channels = self.positive(name)
        for _ in range(4):  # mid, regular, dilated (unused), gpool channel counts
            self.int(name)
        if version >= 15:
            for _ in range(6):  # reserved
                self.int(name)
        initial_conv = self.conv()
        initial_matmul = self.matmul()
        self.expect(initial_conv.out_channels == channels, name, "initial conv")
        self.expect(initial_matmul.out_channels == channels, name, "initial matmul")
        encoder = self.metadata_encoder(version) if meta_encoder_version > 0 else None
        if encoder is not None:
            self.expect(encoder.mul3.out_channels == channels, name, "metadata encoder")
        blocks = self.block_stack(num_blocks, channels, version, name)
        tip_bn, tip_act = self.batch_norm(), self.activation(version)
        self.expect(tip_bn.channels == channels, name, "trunk tip")
        return Trunk(name, channels, initial_conv, initial_matmul, encoder, blocks, tip_bn, tip_act)

    def policy_head(self, version: int) -> PolicyHead:
        name = self.token("policy head name")
        p1_conv, g1_conv = self.conv(), self.conv()
        g1_bn, g1_act = self.batch_norm(), self.activation(version)
        gpool_to_bias = self.matmul()
        p1_bn, p1_act = self.batch_norm(), self.activation(version)
        p2_conv = self.conv()
        gpool_to_pass = self.matmul()
        pass_bias = pass_act = gpool_to_pass2 = None
        if version >= 15:
            pass_bias, pass_act, gpool_to_pass2 = (
                self.matbias(),
                self.activation(version),
                self.matmul(),
            )
        head = PolicyHead(
            name,
            p1_conv,
            g1_conv,
            g1_bn,
            g1_act,
            gpool_to_bias,
            p1_bn,
            p1_act,
            p2_conv,
            gpool_to_pass,
            pass_bias,
            pass_act,
            gpool_to_pass2,
        )
        channels = 2 if version >= 12 else 1
        pass_out = gpool_to_pass2 if gpool_to_pass2 is not None else gpool_to_pass
        self.expect(gpool_to_bias.in_channels == 3 * g1_bn.channels, name, "gpool")
        self.expect(p2_conv.out_channels == channels, name, f"{channels} policy channels")
        self.expect(pass_out.out_channels == channels, name, f"{channels} pass outputs")
        return head

    def value_head(self, version: int) -> ValueHead:
        name = self.token("value head name")
        head = ValueHead(
            name,
            self.conv(),
            self.batch_norm(),
            self.activation(version),
            self.matmul(),
            self.matbias(),
            self.activation(version),
            self.matmul(),
            self.matbias(),
            self.matmul(),
            self.matbias(),
            self.conv(),
        )
        score_outputs = 6 if version >= 9 else 4
        self.expect(head.v2_mul.in_channels == 3 * head.v1_bn.channels, name, "v2")
        self.expect(head.v3_mul.out_channels == 3, name, "3 value outputs")
        self.expect(head.sv3_mul.out_channels == score_outputs, name, f"{score_outputs} scores")
        self.expect(head.ownership_conv.out_channels == 1, name, "ownership")
        return head

    def model(self) -> ModelDescription:
        name = self.token("model name")
        version = self.int(f"{name}: model version")
        check_supported_version(version, self.source)
        spatial = self.positive(f"{name}: spatial input channels")
        global_ = self.positive(f"{name}: global input channels")
        post = PostProcessParams()
        if version >= 13:
            values = [self.float(f"{name}: post-process multiplier") for _ in range(7)]
            if min(values) <= 0:
                raise self.error(name, f"post-process multipliers must be positive: {values!r}")
            post = PostProcessParams(*values)
        meta_encoder_version = 0
        if version >= 15:
            meta_encoder_version = self.int(f"{name}: metadata encoder version")
            if meta_encoder_version not in (0, 1):
                raise UnsupportedModelError(
                    f"{self.source}: metadata encoder version {meta_encoder_version!r} "
                    "is not supported (Kibitz runs 0 = none and 1 = HumanSL)"
                )
            for _ in range(7):  # reserved
                self.int(name)
        trunk = self.trunk(version, meta_encoder_version)
        policy_head = self.policy_head(version)
        value_head = self.value_head(version)
        self.expect(trunk.initial_conv.in_channels == spatial, name, "spatial inputs")
        self.expect(trunk.initial_matmul.in_channels == global_, name, "global inputs")
        for head_conv in (policy_head.p1_conv, policy_head.g1_conv, value_head.v1_conv):
            self.expect(head_conv.in_channels == trunk.channels, head_conv.name, "head input")
        return ModelDescription(
            name=name,
            version=version,
            spatial_channels=spatial,
            global_channels=global_,
            post_process=post,
            meta_encoder_version=meta_encoder_version,
            trunk=trunk,
            policy_head=policy_head,
            value_head=value_head,
            source=self.source,
        )


# ---------------------------------------------------------------------------------------------
# Trunk layouts: a trunk's records without their numbers


def trunk_layout(trunk: Trunk) -> dict[str, Any]:
    """The trunk's records as plain JSON types, every array replaced by ``{"shape": [...]}``.

    Everything but the weights: block kinds, layer names, shapes, dilations, activations, batch
    norm epsilons. A Kibitz model whose trunk is KataGo's stores this in its header, so the
    trunk's modules can be rebuilt (:func:`trunk_from_layout`) and its weights loaded from the
    model's own state dict, without the KataGo file.
    """

    def describe(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return {"shape": list(value.shape)}
        if is_dataclass(value):
            return {"record": type(value).__name__,
                    **{f.name: describe(getattr(value, f.name)) for f in fields(value)}}  # fmt: skip
        if isinstance(value, tuple):
            return [describe(v) for v in value]
        return value

    return describe(trunk)


_LAYOUT_RECORDS = {
    cls.__name__: cls
    for cls in (ConvLayer, BatchNormLayer, Activation, MatMulLayer, MatBiasLayer, OrdinaryBlock,
                GlobalPoolingBlock, NestedBottleneckBlock, MetadataEncoder, Trunk)
}  # fmt: skip


def trunk_from_layout(layout: dict[str, Any]) -> Trunk:
    """Trunk records of :func:`trunk_layout`'s shape with zero arrays (a weightless skeleton whose
    modules take their weights from a state dict)."""

    def build(value: Any) -> Any:
        if isinstance(value, dict) and "record" in value:
            cls = _LAYOUT_RECORDS[value["record"]]
            return cls(**{f.name: build(value[f.name]) for f in fields(cls)})
        if isinstance(value, dict):
            return np.zeros(value["shape"], dtype=np.float32)
        if isinstance(value, list):
            return tuple(build(v) for v in value)
        return value

    return build(layout)


def check_supported_version(version: int, source: str) -> None:
    """Raise UnsupportedModelError naming the file unless 8 <= version <= 15."""
    if MIN_MODEL_VERSION <= version <= MAX_MODEL_VERSION:
        return
    if version > MAX_MODEL_VERSION:
        why = (
            "v16 adds Q-value policy outputs and v17 transformer blocks"
            if version <= 17
            else "it is newer than any format Kibitz knows"
        )
    else:
        why = "it predates KataGo's input features v7"
    raise UnsupportedModelError(
        f"{source}: KataGo model version {version!r} is not supported ({why}); "
        f"Kibitz runs model versions {MIN_MODEL_VERSION} to {MAX_MODEL_VERSION}"
    )


def parse_model_bytes(data: bytes, *, source: str = "<bytes>") -> ModelDescription:
    """Parse uncompressed model-file bytes (binary or text floats, detected per block)."""
    return _Reader(data, source).model()


def read_model_file(path: str | Path) -> ModelDescription:
    """Read a KataGo ``.bin.gz`` / ``.txt.gz`` (or uncompressed ``.bin`` / ``.txt``) model."""
    path = Path(path)
    raw = path.read_bytes()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return parse_model_bytes(data, source=str(path))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for name in args:
        print(read_model_file(name).summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
