"""Decode Lc0 ``.pb.gz`` weight files (protobuf ``pblczero.Net``) into numpy arrays.

Lc0 ships its nets as a gzip-compressed protobuf message. Kibitz reads it with a small
wire-format reader and the field numbers of lc0's public ``proto/net.proto`` instead of a
generated protobuf module, so loading a net needs neither ``protoc`` nor a pinned protobuf
runtime. Only the convolutional (ResNet / SE-ResNet) family is decoded into tensors; files
whose body is an attention transformer or an embedded ONNX model raise
:class:`UnsupportedNetError` naming what they are.

Run ``python -m pipeline.nets.lc0_weights NET.pb.gz`` to print a net's format and shapes.
"""

from __future__ import annotations

import gzip
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.errors import KibitzError

# Net.magic: lc0 writes this fixed32 into every weights file it produces.
LC0_MAGIC = 0x1C0

# Wire types of the protobuf encoding.
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

# --- enums of NetworkFormat / Format / Layer (lc0 proto/net.proto; keep in sync with it) ---
INPUT_CLASSICAL_112_PLANE = 1
INPUT_FORMAT_NAMES = {
    0: "INPUT_UNKNOWN",
    1: "INPUT_CLASSICAL_112_PLANE",
    2: "INPUT_112_WITH_CASTLING_PLANE",
    3: "INPUT_112_WITH_CANONICALIZATION",
    4: "INPUT_112_WITH_CANONICALIZATION_HECTOPLIES",
    132: "INPUT_112_WITH_CANONICALIZATION_HECTOPLIES_ARMAGEDDON",
    5: "INPUT_112_WITH_CANONICALIZATION_V2",
    133: "INPUT_112_WITH_CANONICALIZATION_V2_ARMAGEDDON",
}
OUTPUT_CLASSICAL, OUTPUT_WDL = 1, 2
NETWORK_CLASSICAL, NETWORK_SE = 1, 2
NETWORK_CLASSICAL_WITH_HEADFORMAT, NETWORK_SE_WITH_HEADFORMAT = 3, 4
NETWORK_STRUCTURE_NAMES = {
    0: "NETWORK_UNKNOWN",
    1: "NETWORK_CLASSICAL",
    2: "NETWORK_SE",
    3: "NETWORK_CLASSICAL_WITH_HEADFORMAT",
    4: "NETWORK_SE_WITH_HEADFORMAT",
    5: "NETWORK_ONNX",
    6: "NETWORK_ATTENTIONBODY_WITH_HEADFORMAT",
    7: "NETWORK_ATTENTIONBODY_WITH_MULTIHEADFORMAT",
    134: "NETWORK_AB_LEGACY_WITH_MULTIHEADFORMAT",
}
POLICY_CLASSICAL, POLICY_CONVOLUTION = 1, 2
POLICY_FORMAT_NAMES = {
    0: "POLICY_UNKNOWN",
    1: "POLICY_CLASSICAL",
    2: "POLICY_CONVOLUTION",
    3: "POLICY_ATTENTION",
}
VALUE_CLASSICAL, VALUE_WDL = 1, 2
VALUE_FORMAT_NAMES = {0: "VALUE_UNKNOWN", 1: "VALUE_CLASSICAL", 2: "VALUE_WDL", 3: "VALUE_PARAM"}
MOVES_LEFT_NONE, MOVES_LEFT_V1 = 0, 1
ACTIVATION_NAMES = {0: "relu", 1: "mish"}  # NetworkFormat.DefaultActivation

# Layer.Encoding; a Layer's own encoding overrides Format.weights_encoding.
ENC_UNKNOWN, ENC_LINEAR16, ENC_FLOAT16, ENC_BFLOAT16, ENC_FLOAT32 = 0, 1, 2, 3, 4

# Message schemas: field number -> (name, kind, repeated). Kinds: a message name, or
# "uint" (varint), "float" (fixed32 float), "fixed32", "bytes", "string".
_Schema = dict[int, tuple[str, str, bool]]
_SCHEMAS: dict[str, _Schema] = {
    "Net": {
        1: ("magic", "fixed32", False),
        2: ("license", "string", False),
        3: ("min_version", "EngineVersion", False),
        4: ("format", "Format", False),
        10: ("weights", "Weights", False),
        11: ("onnx_model", "bytes", False),
    },
    "EngineVersion": {
        1: ("major", "uint", False),
        2: ("minor", "uint", False),
        3: ("patch", "uint", False),
    },
    "Format": {
        1: ("weights_encoding", "uint", False),
        2: ("network_format", "NetworkFormat", False),
    },
    "NetworkFormat": {
        1: ("input", "uint", False),
        2: ("output", "uint", False),
        3: ("network", "uint", False),
        4: ("policy", "uint", False),
        5: ("value", "uint", False),
        6: ("moves_left", "uint", False),
        7: ("default_activation", "uint", False),
        8: ("smolgen_activation", "uint", False),
        9: ("ffn_activation", "uint", False),
        10: ("input_embedding", "uint", False),
    },
    "Layer": {
        1: ("min_val", "float", False),
        2: ("max_val", "float", False),
        3: ("params", "bytes", False),
        4: ("encoding", "uint", False),
        5: ("dims", "uint", True),
    },
    "ConvBlock": {
        1: ("weights", "Layer", False),
        2: ("biases", "Layer", False),
        3: ("bn_means", "Layer", False),
        4: ("bn_stddivs", "Layer", False),
        5: ("bn_gammas", "Layer", False),
        6: ("bn_betas", "Layer", False),
    },
    "SEunit": {
        1: ("w1", "Layer", False),
        2: ("b1", "Layer", False),
        3: ("w2", "Layer", False),
        4: ("b2", "Layer", False),
    },
    "Residual": {
        1: ("conv1", "ConvBlock", False),
        2: ("conv2", "ConvBlock", False),
        3: ("se", "SEunit", False),
    },
    # Only the fields of the convolutional family are decoded; the presence of any
    # attention-body field (embedding, encoders, smolgen, multi-head maps) marks a net
    # Kibitz cannot run, see _ATTENTION_FIELDS.
    "Weights": {
        1: ("input", "ConvBlock", False),
        2: ("residual", "Residual", True),
        11: ("policy1", "ConvBlock", False),
        3: ("policy", "ConvBlock", False),
        4: ("ip_pol_w", "Layer", False),
        5: ("ip_pol_b", "Layer", False),
        6: ("value", "ConvBlock", False),
        7: ("ip1_val_w", "Layer", False),
        8: ("ip1_val_b", "Layer", False),
        9: ("ip2_val_w", "Layer", False),
        10: ("ip2_val_b", "Layer", False),
        12: ("moves_left", "ConvBlock", False),
        13: ("ip1_mov_w", "Layer", False),
        14: ("ip1_mov_b", "Layer", False),
        15: ("ip2_mov_w", "Layer", False),
        16: ("ip2_mov_b", "Layer", False),
    },
}
# Weights fields that only attention-body / attention-policy nets carry (net.proto numbers):
# ip2..ip4_pol (17-20, 22), pol_encoder (21, 24), ip_emb (25, 26, 37-43), encoder (27, 28),
# ip_val / ip_mov embeddings (29-32), input gating (33, 34), smolgen (35, 36),
# value_heads / policy_heads (44, 45).
_ATTENTION_FIELDS = frozenset([17, 18, 19, 20, 21, 22, 24, *range(25, 46)])


class Lc0FormatError(KibitzError, ValueError):
    """The file is not a readable Lc0 protobuf weights file."""


class UnsupportedNetError(KibitzError, ValueError):
    """The file is a valid Lc0 net of a kind Kibitz cannot run (attention body, ONNX, ...)."""


@dataclass(frozen=True)
class NetworkFormat:
    """The architecture switches of an Lc0 net, with lc0's defaults for old files."""

    input: int = INPUT_CLASSICAL_112_PLANE
    output: int = OUTPUT_CLASSICAL
    network: int = NETWORK_CLASSICAL
    policy: int = POLICY_CLASSICAL
    value: int = VALUE_CLASSICAL
    moves_left: int = MOVES_LEFT_NONE
    default_activation: int = 0

    @property
    def input_name(self) -> str:
        return INPUT_FORMAT_NAMES.get(self.input, f"input format {self.input}")

    @property
    def activation(self) -> str:
        return ACTIVATION_NAMES[self.default_activation]


@dataclass
class ConvBlockWeights:
    """One convolution with optional batch norm, shapes as lc0 stores them.

    ``weights`` is (out, in, k, k); ``bn_variances`` is lc0's ``bn_stddivs`` field, which
    holds the variance despite its name.
    """

    weights: np.ndarray
    biases: np.ndarray | None
    bn_means: np.ndarray | None
    bn_variances: np.ndarray | None
    bn_gammas: np.ndarray | None
    bn_betas: np.ndarray | None

    @property
    def out_channels(self) -> int:
        return int(self.weights.shape[0])

    @property
    def in_channels(self) -> int:
        return int(self.weights.shape[1])

    @property
    def kernel_size(self) -> int:
        return int(self.weights.shape[2])


@dataclass
class SEWeights:
    """Squeeze-excitation unit: fc1 (se, F), fc2 (2F, se) stored as (out, in)."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray


@dataclass
class ResidualWeights:
    conv1: ConvBlockWeights
    conv2: ConvBlockWeights
    se: SEWeights | None


@dataclass
class DenseWeights:
    """A fully connected layer stored as lc0 does: weight (out, in), bias (out,)."""

    weight: np.ndarray
    bias: np.ndarray


@dataclass
class Lc0Weights:
    """Everything Kibitz needs from an Lc0 convolutional net, decoded to float32 arrays."""

    path: Path
    format: NetworkFormat
    license: str
    min_version: tuple[int, int, int]
    input: ConvBlockWeights
    residual: list[ResidualWeights]
    policy1: ConvBlockWeights | None  # first conv of the convolutional policy head
    policy: ConvBlockWeights
    ip_pol: DenseWeights | None  # dense layer of the classical policy head
    value: ConvBlockWeights
    ip1_val: DenseWeights
    ip2_val: DenseWeights
    has_moves_left: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def filters(self) -> int:
        return self.input.out_channels

    @property
    def blocks(self) -> int:
        return len(self.residual)

    @property
    def se_channels(self) -> int | None:
        se = self.residual[0].se if self.residual else None
        return None if se is None else int(se.w1.shape[0])

    def describe(self) -> str:
        """One line naming the architecture, e.g. for ``kibitz models list`` and errors."""
        fmt = self.format
        se = f", SE ratio {self.filters // self.se_channels}" if self.se_channels else ""
        return (
            f"{self.filters}x{self.blocks}{se}, {fmt.input_name}, "
            f"{POLICY_FORMAT_NAMES.get(fmt.policy, fmt.policy)}, "
            f"{VALUE_FORMAT_NAMES.get(fmt.value, fmt.value)}, activation {fmt.activation}"
        )


# ----------------------------------------------------------------------- wire format


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise Lc0FormatError(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Lc0FormatError(f"varint longer than 10 bytes at byte {pos}")


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield ``(field_number, wire_type, value)`` for each field of one protobuf message.

    Varints and fixed-width values come back as ints (the raw bits for fixed32/64),
    length-delimited fields as bytes.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire == _FIXED64:
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == _LENGTH:
            size, pos = _read_varint(buf, pos)
            if pos + size > end:
                raise Lc0FormatError(f"field {number} runs past the message end")
            value = buf[pos : pos + size]
            pos += size
        elif wire == _FIXED32:
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise Lc0FormatError(f"unsupported wire type {wire} for field {number}")
        if pos > end:
            raise Lc0FormatError(f"field {number} runs past the message end")
        yield number, wire, value


def _decode_packed_varints(data: bytes) -> list[int]:
    values = []
    pos = 0
    while pos < len(data):
        value, pos = _read_varint(data, pos)
        values.append(value)
    return values


def decode_message(buf: bytes, schema_name: str) -> dict[str, Any]:
    """Decode one message into a dict by the schema table; unknown fields are kept by number.

    Unknown field numbers land in ``"_unknown"`` (a set) so callers can detect formats that
    carry data this reader does not interpret.
    """
    schema = _SCHEMAS[schema_name]
    out: dict[str, Any] = {}
    unknown: set[int] = set()
    for number, wire, value in iter_fields(buf):
        spec = schema.get(number)
        if spec is None:
            unknown.add(number)
            continue
        name, kind, repeated = spec
        if kind == "uint":
            if wire == _LENGTH:  # packed repeated varints
                decoded: Any = _decode_packed_varints(value)
            else:
                decoded = value
        elif kind == "float":
            decoded = struct.unpack("<f", int(value).to_bytes(4, "little"))[0]
        elif kind == "fixed32":
            decoded = value
        elif kind == "bytes":
            decoded = bytes(value)
        elif kind == "string":
            decoded = bytes(value).decode("utf-8", errors="replace")
        else:
            if wire != _LENGTH:
                raise Lc0FormatError(f"{schema_name}.{name} is not a message (wire {wire})")
            decoded = decode_message(value, kind)
        if repeated:
            items = out.setdefault(name, [])
            if isinstance(decoded, list):
                items.extend(decoded)
            else:
                items.append(decoded)
        else:
            out[name] = decoded
    if unknown:
        out["_unknown"] = unknown
    return out


# ----------------------------------------------------------------------- layers


def decode_layer(layer: dict[str, Any], *, default_encoding: int, name: str) -> np.ndarray:
    """Decode one ``Weights.Layer`` into a flat float32 array.

    LINEAR16 stores u16 codes mapped linearly onto [min_val, max_val]:
    value = min + (max - min) * u / 65535 (little-endian), as lc0's loader does.
    """
    params = layer.get("params", b"")
    if not isinstance(params, bytes):
        raise Lc0FormatError(f"layer {name!r}: params is not a byte string")
    encoding = int(layer.get("encoding", ENC_UNKNOWN))
    if encoding == ENC_UNKNOWN:
        encoding = default_encoding if default_encoding != ENC_UNKNOWN else ENC_LINEAR16
    if encoding == ENC_LINEAR16:
        if len(params) % 2:
            raise Lc0FormatError(f"layer {name!r}: LINEAR16 params have odd length {len(params)}")
        codes = np.frombuffer(params, dtype="<u2").astype(np.float32)
        lo = np.float32(layer.get("min_val", 0.0))
        hi = np.float32(layer.get("max_val", 0.0))
        return (codes / np.float32(65535.0)) * (hi - lo) + lo
    if encoding == ENC_FLOAT16:
        return np.frombuffer(params, dtype="<f2").astype(np.float32)
    if encoding == ENC_BFLOAT16:
        bits = np.frombuffer(params, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).copy()
    if encoding == ENC_FLOAT32:
        return np.frombuffer(params, dtype="<f4").astype(np.float32)
    raise Lc0FormatError(f"layer {name!r}: unknown weights encoding {encoding}")


class _Decoder:
    """Turns decoded message dicts into typed weights, tracking names for clear errors."""

    def __init__(self, path: Path, default_encoding: int) -> None:
        self.path = path
        self.default_encoding = default_encoding

    def optional_layer(self, msg: dict[str, Any], name: str) -> np.ndarray | None:
        layer = msg.get(name.rsplit(".", 1)[-1])
        if not isinstance(layer, dict) or not layer.get("params"):
            return None
        return decode_layer(layer, default_encoding=self.default_encoding, name=name)

    def layer(self, msg: dict[str, Any], name: str) -> np.ndarray:
        values = self.optional_layer(msg, name)
        if values is None:
            raise Lc0FormatError(f"{self.path}: layer {name!r} is missing")
        return values

    def conv_block(
        self, msg: dict[str, Any] | None, name: str, *, in_channels: int
    ) -> ConvBlockWeights:
        if not isinstance(msg, dict):
            raise Lc0FormatError(f"{self.path}: conv block {name!r} is missing")
        flat = self.layer(msg, f"{name}.weights")
        biases = self.optional_layer(msg, f"{name}.biases")
        means = self.optional_layer(msg, f"{name}.bn_means")
        variances = self.optional_layer(msg, f"{name}.bn_stddivs")
        gammas = self.optional_layer(msg, f"{name}.bn_gammas")
        betas = self.optional_layer(msg, f"{name}.bn_betas")
        out_sizes = {len(a) for a in (biases, means, variances, gammas, betas) if a is not None}
        if len(out_sizes) != 1:
            raise Lc0FormatError(
                f"{self.path}: conv block {name!r} has inconsistent bias/BN sizes {sorted(out_sizes)}"
            )
        (out_channels,) = out_sizes
        per_output = flat.size / (out_channels * in_channels)
        kernel = round(per_output**0.5)
        if kernel * kernel * out_channels * in_channels != flat.size:
            raise Lc0FormatError(
                f"{self.path}: conv block {name!r} has {flat.size} weights, not "
                f"{out_channels} x {in_channels} x k x k for any square kernel"
            )
        if (means is None) != (variances is None):
            raise Lc0FormatError(f"{self.path}: conv block {name!r} has half a batch norm")
        return ConvBlockWeights(
            weights=flat.reshape(out_channels, in_channels, kernel, kernel),
            biases=biases,
            bn_means=means,
            bn_variances=variances,
            bn_gammas=gammas,
            bn_betas=betas,
        )

    def dense(
        self, msg: dict[str, Any], w_name: str, b_name: str, *, in_features: int
    ) -> DenseWeights:
        w = self.layer(msg, w_name)
        b = self.layer(msg, b_name)
        if w.size != b.size * in_features:
            raise Lc0FormatError(
                f"{self.path}: dense layer {w_name!r} has {w.size} weights, expected "
                f"{b.size} outputs x {in_features} inputs"
            )
        return DenseWeights(weight=w.reshape(b.size, in_features), bias=b)

    def se_unit(self, msg: dict[str, Any] | None, name: str, *, filters: int) -> SEWeights | None:
        if not isinstance(msg, dict) or not msg.get("w1"):
            return None
        fc1 = self.dense(msg, f"{name}.w1", f"{name}.b1", in_features=filters)
        fc2 = self.dense(msg, f"{name}.w2", f"{name}.b2", in_features=fc1.bias.size)
        if fc2.bias.size != 2 * filters:
            raise Lc0FormatError(
                f"{self.path}: SE unit {name!r} outputs {fc2.bias.size} values, expected "
                f"2 x {filters} (gamma and beta)"
            )
        return SEWeights(w1=fc1.weight, b1=fc1.bias, w2=fc2.weight, b2=fc2.bias)


def _network_format(fmt_msg: dict[str, Any]) -> NetworkFormat:
    nf = fmt_msg.get("network_format")
    if not isinstance(nf, dict):
        # net.proto: a missing network_format means INPUT_CLASSICAL_112_PLANE /
        # OUTPUT_CLASSICAL / NETWORK_CLASSICAL.
        return NetworkFormat()
    output = int(nf.get("output", OUTPUT_CLASSICAL))
    network = int(nf.get("network", NETWORK_CLASSICAL))
    if network in (NETWORK_CLASSICAL, NETWORK_SE):
        # Nets older than the head-format fields: policy is the classical dense head and
        # the value head follows the output format.
        policy = POLICY_CLASSICAL
        value = VALUE_WDL if output == OUTPUT_WDL else VALUE_CLASSICAL
    else:
        policy = int(nf.get("policy", POLICY_CLASSICAL))
        value = int(nf.get("value", VALUE_CLASSICAL))
    return NetworkFormat(
        input=int(nf.get("input", INPUT_CLASSICAL_112_PLANE)),
        output=output,
        network=network,
        policy=policy,
        value=value,
        moves_left=int(nf.get("moves_left", MOVES_LEFT_NONE)),
        default_activation=int(nf.get("default_activation", 0)),
    )


def _check_supported(
    path: Path, fmt: NetworkFormat, net: dict[str, Any], weights: dict[str, Any]
) -> None:
    """Raise UnsupportedNetError for the Lc0 families Kibitz does not implement."""
    structure = NETWORK_STRUCTURE_NAMES.get(fmt.network, f"network structure {fmt.network}")
    if "onnx_model" in net or fmt.network == 5:
        raise UnsupportedNetError(
            f"{path}: an Lc0 net that embeds an ONNX model ({structure}); Kibitz loads "
            "convolutional (SE-)ResNet weights only"
        )
    attention_fields = sorted(set(weights.get("_unknown", set())) & _ATTENTION_FIELDS)
    if fmt.network not in (1, 2, 3, 4) or attention_fields:
        raise UnsupportedNetError(
            f"{path}: an attention-body (transformer) Lc0 net ({structure}); Kibitz runs "
            "convolutional (SE-)ResNet Lc0 nets only (e.g. Maia, T60-T78 style nets)"
        )
    if fmt.policy not in (POLICY_CLASSICAL, POLICY_CONVOLUTION):
        raise UnsupportedNetError(
            f"{path}: policy head {POLICY_FORMAT_NAMES.get(fmt.policy, fmt.policy)} is not "
            "supported; Kibitz runs POLICY_CONVOLUTION and POLICY_CLASSICAL heads"
        )
    if fmt.value not in (VALUE_CLASSICAL, VALUE_WDL):
        raise UnsupportedNetError(
            f"{path}: value head {VALUE_FORMAT_NAMES.get(fmt.value, fmt.value)} is not "
            "supported; Kibitz runs VALUE_WDL and VALUE_CLASSICAL heads"
        )
    if fmt.default_activation not in ACTIVATION_NAMES:
        raise UnsupportedNetError(
            f"{path}: default activation {fmt.default_activation} is not supported "
            "(Kibitz runs ReLU and Mish nets)"
        )


def parse_lc0_bytes(data: bytes, *, path: Path) -> Lc0Weights:
    """Decode an uncompressed ``pblczero.Net`` message (``path`` is only for messages)."""
    net = decode_message(data, "Net")
    magic = net.get("magic")
    if magic != LC0_MAGIC:
        raise Lc0FormatError(
            f"{path}: not an Lc0 weights file (magic {magic!r}, expected {LC0_MAGIC:#x})"
        )
    fmt_msg = net.get("format") if isinstance(net.get("format"), dict) else {}
    fmt = _network_format(fmt_msg)
    weights = net.get("weights")
    if not isinstance(weights, dict):
        if "onnx_model" in net:
            _check_supported(path, fmt, net, {})
        raise Lc0FormatError(f"{path}: the file holds no weights")
    _check_supported(path, fmt, net, weights)

    dec = _Decoder(path, int(fmt_msg.get("weights_encoding", ENC_UNKNOWN)))
    input_block = dec.conv_block(weights.get("input"), "input", in_channels=112)
    filters = input_block.out_channels
    residual = []
    for i, res in enumerate(weights.get("residual", [])):
        conv1 = dec.conv_block(res.get("conv1"), f"residual[{i}].conv1", in_channels=filters)
        conv2 = dec.conv_block(res.get("conv2"), f"residual[{i}].conv2", in_channels=filters)
        se = dec.se_unit(res.get("se"), f"residual[{i}].se", filters=filters)
        if conv1.out_channels != filters or conv2.out_channels != filters:
            raise Lc0FormatError(f"{path}: residual block {i} changes the channel count")
        residual.append(ResidualWeights(conv1=conv1, conv2=conv2, se=se))

    if fmt.policy == POLICY_CONVOLUTION:
        policy1 = dec.conv_block(weights.get("policy1"), "policy1", in_channels=filters)
        policy = dec.conv_block(
            weights.get("policy"),
            "policy",
            in_channels=policy1.out_channels,
        )
        ip_pol = None
    else:
        policy1 = None
        policy = dec.conv_block(weights.get("policy"), "policy", in_channels=filters)
        ip_pol = dec.dense(weights, "ip_pol_w", "ip_pol_b", in_features=policy.out_channels * 64)

    value = dec.conv_block(weights.get("value"), "value", in_channels=filters)
    ip1_val = dec.dense(weights, "ip1_val_w", "ip1_val_b", in_features=value.out_channels * 64)
    ip2_val = dec.dense(weights, "ip2_val_w", "ip2_val_b", in_features=ip1_val.bias.size)
    expected_value_outputs = 3 if fmt.value == VALUE_WDL else 1
    if ip2_val.bias.size != expected_value_outputs:
        raise Lc0FormatError(
            f"{path}: value head has {ip2_val.bias.size} outputs, expected "
            f"{expected_value_outputs} for {VALUE_FORMAT_NAMES[fmt.value]}"
        )

    version = net.get("min_version") if isinstance(net.get("min_version"), dict) else {}
    return Lc0Weights(
        path=path,
        format=fmt,
        license=str(net.get("license", "")),
        min_version=(
            int(version.get("major", 0)),
            int(version.get("minor", 0)),
            int(version.get("patch", 0)),
        ),
        input=input_block,
        residual=residual,
        policy1=policy1,
        policy=policy,
        ip_pol=ip_pol,
        value=value,
        ip1_val=ip1_val,
        ip2_val=ip2_val,
        has_moves_left=fmt.moves_left == MOVES_LEFT_V1 and "moves_left" in weights,
    )


def read_lc0_weights(path: str | Path) -> Lc0Weights:
    """Read an Lc0 ``.pb.gz`` (or uncompressed ``.pb``) weights file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"Lc0 weights file not found: {str(path)!r}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise Lc0FormatError(f"{path}: corrupt gzip stream ({exc})") from exc
    return parse_lc0_bytes(raw, path=path)


def main(argv: list[str] | None = None) -> int:
    for name in argv if argv is not None else sys.argv[1:]:
        weights = read_lc0_weights(name)
        print(f"{name}: {weights.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
