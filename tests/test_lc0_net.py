"""Lc0 weights → PyTorch: the nine real Maia nets against lc0's own outputs, plus synthetic nets.

Reference: ``reference/maia-lc0.jsonl`` (lc0 v0.31.2, 9 nets x 40 positions), the raw 1858
logits in ``maia-lc0-logits1858.npz`` and lc0's own input planes in
``maia-lc0-input-planes.json``. Feeding lc0's planes isolates the net from the encoder.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from lc0_reference import lc0_reference

from pipeline.chess_game.spec import POLICY_INDEX_OF, POLICY_MOVES
from pipeline.core import settings
from pipeline.nets.lc0_net import conv_policy_gather_index, load_lc0_net
from pipeline.nets.lc0_weights import Lc0FormatError, UnsupportedNetError, read_lc0_weights

MAIA_NETS = [f"maia-{level}" for level in range(1100, 2000, 100)]


# --------------------------------------------------------------------------- reference data


@pytest.fixture(scope="module")
def reference() -> dict:
    ref = settings.reference_dir()
    records = [json.loads(line) for line in (ref / "maia-lc0.jsonl").read_text().splitlines()]
    lc0 = lc0_reference()
    return {
        "records": records,
        "planes": lc0.planes,
        "keys": lc0.keys,
        "nets": lc0.nets,
        "logits": lc0.logits,
    }


@pytest.mark.parametrize("net_name", MAIA_NETS)
def test_maia_matches_lc0(reference: dict, net_name: str) -> None:
    net = load_lc0_net(settings.models_dir() / "maia" / f"{net_name}.pb.gz")
    assert net.output_names == ("policy", "wdl")
    with torch.inference_mode():
        policy, wdl = net(torch.from_numpy(reference["planes"]))
    policy = policy.numpy()  # (40, 1858)
    probs = torch.softmax(wdl, dim=1).numpy()  # (40, 3) win, draw, loss

    expected = reference["logits"][reference["nets"].index(net_name)]
    assert np.abs(policy - expected).max() < 1e-3

    records = {
        f"{r['game_site']}#{r['ply']}": r for r in reference["records"] if r["net"] == net_name
    }
    assert len(records) == 40
    for row, key in enumerate(reference["keys"]):
        record = records[key]
        moves = list(record["lc0_nn_index"])
        index = np.array([record["lc0_nn_index"][m] for m in moves])
        legal_logits = policy[row, index].astype(np.float64)
        priors = np.exp(legal_logits - legal_logits.max())
        priors = 100 * priors / priors.sum()
        exact = np.array([record["hp_priors_exact_pct"][m] for m in moves])
        assert np.abs(priors - exact).max() < 0.01, key
        hp_logits = np.array([record["hp_policy_logits"][m] for m in moves])
        assert np.abs(legal_logits - hp_logits).max() < 1e-3, key
        assert abs((probs[row, 0] - probs[row, 2]) - record["hp_q"]) < 1e-3, key
        assert abs(probs[row, 1] - record["hp_d"]) < 1e-3, key


def test_maia_format_is_read(reference: dict) -> None:
    weights = read_lc0_weights(settings.models_dir() / "maia" / "maia-1500.pb.gz")
    assert (weights.filters, weights.blocks, weights.se_channels) == (64, 6, 8)
    assert weights.describe() == (
        "64x6, SE ratio 8, INPUT_CLASSICAL_112_PLANE, POLICY_CONVOLUTION, VALUE_WDL, "
        "activation relu"
    )
    assert weights.policy.out_channels == 80
    assert weights.value.out_channels == 32


def test_conv_policy_map_agrees_with_lc0_layout() -> None:
    gather = conv_policy_gather_index()
    assert len(set(gather.tolist())) == 1858
    # e2e4: direction N (plane group 0), distance 2 -> plane 1; from-square e2 = 12.
    assert gather[POLICY_INDEX_OF["e2e4"]] == 1 * 64 + 12
    # g1f3: knight jump (-1, +2) is the 8th knight direction -> plane 63; g1 = 6.
    assert gather[POLICY_INDEX_OF["g1f3"]] == 63 * 64 + 6
    # a7a8r: under-promotion straight ahead (N) with a rook -> plane 64 + 3 + 0; a7 = 48.
    assert gather[POLICY_INDEX_OF["a7a8r"]] == 67 * 64 + 48
    # h7g8b: under-promotion to the NW with a bishop -> plane 64 + 0 + 1; h7 = 55.
    assert gather[POLICY_INDEX_OF["h7g8b"]] == 65 * 64 + 55
    assert POLICY_MOVES[103] == "e1h1" and POLICY_MOVES[1401] == "a7a8"


# --------------------------------------------------------------------------- synthetic nets
# A tiny protobuf writer (the test must not share code with the reader it checks).


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _field_fixed32(number: int, raw: bytes) -> bytes:
    return _varint(number << 3 | 5) + raw


def linear16_range(values: np.ndarray) -> tuple[np.float32, np.float32]:
    """min and max of a LINEAR16 layer; a constant layer gets a unit range (codes all 0)."""
    lo, hi = np.float32(values.min()), np.float32(values.max())
    return lo, hi if hi > lo else lo + np.float32(1.0)


def layer_msg(values: np.ndarray, encoding: str) -> bytes:
    values = np.asarray(values, dtype=np.float32).ravel()
    if encoding == "linear16":
        lo, hi = linear16_range(values)
        codes = np.round((values - lo) / (hi - lo) * 65535).astype("<u2")
        return (
            _field_fixed32(1, struct.pack("<f", float(lo)))
            + _field_fixed32(2, struct.pack("<f", float(hi)))
            + _field_bytes(3, codes.tobytes())
        )
    if encoding == "float16":
        return _field_bytes(3, values.astype("<f2").tobytes()) + _field_varint(4, 2)
    return _field_bytes(3, values.astype("<f4").tobytes()) + _field_varint(4, 4)


def decoded_as(values: np.ndarray, encoding: str) -> np.ndarray:
    """What the file will hold after quantisation, for the reference forward."""
    values = np.asarray(values, dtype=np.float32)
    if encoding == "linear16":
        lo, hi = linear16_range(values)
        codes = np.round((values - lo) / (hi - lo) * 65535)
        return (lo + (hi - lo) * codes / 65535).astype(np.float32)
    if encoding == "float16":
        return values.astype(np.float16).astype(np.float32)
    return values


class NetBuilder:
    """Random weights for a small Lc0 net, written as protobuf and kept as numpy for checking."""

    def __init__(self, seed: int, encoding: str) -> None:
        self.rng = np.random.default_rng(seed)
        self.encoding = encoding

    def tensor(self, *shape: int, scale: float = 0.2) -> tuple[bytes, np.ndarray]:
        values = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return layer_msg(values, self.encoding), decoded_as(values, self.encoding)

    def conv_block(self, cin: int, cout: int, k: int, *, bn: bool) -> tuple[bytes, dict]:
        msg = b""
        ref: dict = {}
        for number, name, shape, scale in [
            (1, "w", (cout, cin, k, k), 0.3),
            (2, "b", (cout,), 0.1),
        ]:
            raw, ref[name] = self.tensor(*shape, scale=scale)
            msg += _field_bytes(number, raw)
        if bn:
            raw, ref["mean"] = self.tensor(cout, scale=0.1)
            msg += _field_bytes(3, raw)
            variance = self.rng.uniform(0.5, 2.0, cout).astype(np.float32)
            ref["var"] = decoded_as(variance, self.encoding)
            msg += _field_bytes(4, layer_msg(variance, self.encoding))
            gammas = self.rng.uniform(0.5, 1.5, cout).astype(np.float32)
            ref["gamma"] = decoded_as(gammas, self.encoding)
            msg += _field_bytes(5, layer_msg(gammas, self.encoding))
            raw, ref["beta"] = self.tensor(cout, scale=0.1)
            msg += _field_bytes(6, raw)
        return msg, ref

    def dense(self, fin: int, fout: int) -> tuple[bytes, bytes, dict]:
        w_raw, w = self.tensor(fout, fin, scale=1.0 / np.sqrt(fin))
        b_raw, b = self.tensor(fout, scale=0.1)
        return w_raw, b_raw, {"w": w, "b": b}


def build_classical_net(
    *,
    filters: int = 8,
    blocks: int = 2,
    se_channels: int = 4,
    encoding: str = "linear16",
    network: int = 4,
    input_format: int = 1,
    extra_weights: bytes = b"",
) -> tuple[bytes, dict]:
    """An SE net with the classical dense policy head and the scalar value head."""
    nb = NetBuilder(seed=7, encoding=encoding)
    ref: dict = {"filters": filters, "residual": []}
    weights = b""
    raw, ref["input"] = nb.conv_block(112, filters, 3, bn=True)
    weights += _field_bytes(1, raw)
    for _ in range(blocks):
        c1, r1 = nb.conv_block(filters, filters, 3, bn=True)
        c2, r2 = nb.conv_block(filters, filters, 3, bn=True)
        w1, b1, fc1 = nb.dense(filters, se_channels)
        w2, b2, fc2 = nb.dense(se_channels, 2 * filters)
        se = _field_bytes(1, w1) + _field_bytes(2, b1) + _field_bytes(3, w2) + _field_bytes(4, b2)
        weights += _field_bytes(2, _field_bytes(1, c1) + _field_bytes(2, c2) + _field_bytes(3, se))
        ref["residual"].append({"conv1": r1, "conv2": r2, "fc1": fc1, "fc2": fc2})
    raw, ref["policy"] = nb.conv_block(filters, 4, 1, bn=True)
    weights += _field_bytes(3, raw)
    w, b, ref["ip_pol"] = nb.dense(4 * 64, 1858)
    weights += _field_bytes(4, w) + _field_bytes(5, b)
    raw, ref["value"] = nb.conv_block(filters, 2, 1, bn=True)
    weights += _field_bytes(6, raw)
    w, b, ref["ip1_val"] = nb.dense(2 * 64, 16)
    weights += _field_bytes(7, w) + _field_bytes(8, b)
    w, b, ref["ip2_val"] = nb.dense(16, 1)
    weights += _field_bytes(9, w) + _field_bytes(10, b)
    weights += extra_weights

    network_format = (
        _field_varint(1, input_format)
        + _field_varint(2, 1)  # OUTPUT_CLASSICAL
        + _field_varint(3, network)
        + _field_varint(4, 1)  # POLICY_CLASSICAL
        + _field_varint(5, 1)  # VALUE_CLASSICAL
    )
    fmt = _field_varint(1, 1) + _field_bytes(2, network_format)
    net = (
        _field_fixed32(1, struct.pack("<I", 0x1C0))
        + _field_bytes(2, b"test-license")
        + _field_bytes(4, fmt)
        + _field_bytes(10, weights)
    )
    return net, ref


def np_conv(x: np.ndarray, block: dict) -> np.ndarray:
    """Reference conv + (unfolded) batch norm in float64: x (B, C, 8, 8)."""
    w = block["w"].astype(np.float64)
    k = w.shape[2]
    pad = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((x.shape[0], w.shape[0], 8, 8))
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("bchw,oc->bohw", xp[:, :, dy : dy + 8, dx : dx + 8], w[:, :, dy, dx])
    out += block["b"][None, :, None, None]
    if "mean" in block:
        scale = block["gamma"] / np.sqrt(block["var"].astype(np.float64) + 1e-5)
        out = (out - block["mean"][None, :, None, None]) * scale[None, :, None, None]
        out += block["beta"][None, :, None, None]
    return out


def np_forward(ref: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    relu = lambda a: np.maximum(a, 0.0)  # noqa: E731
    h = relu(np_conv(x, ref["input"]))
    for block in ref["residual"]:
        y = relu(np_conv(h, block["conv1"]))
        y = np_conv(y, block["conv2"])
        pooled = y.mean(axis=(2, 3))
        s = relu(pooled @ block["fc1"]["w"].T + block["fc1"]["b"])
        s = s @ block["fc2"]["w"].T + block["fc2"]["b"]
        gamma, beta = s[:, : ref["filters"]], s[:, ref["filters"] :]
        y = y / (1 + np.exp(-gamma))[:, :, None, None] + beta[:, :, None, None]
        h = relu(y + h)
    p = relu(np_conv(h, ref["policy"])).reshape(len(x), -1)
    policy = p @ ref["ip_pol"]["w"].T + ref["ip_pol"]["b"]
    v = relu(np_conv(h, ref["value"])).reshape(len(x), -1)
    v = relu(v @ ref["ip1_val"]["w"].T + ref["ip1_val"]["b"])
    value = np.tanh(v @ ref["ip2_val"]["w"].T + ref["ip2_val"]["b"])
    return policy, value


def write_net(tmp_path: Path, data: bytes, name: str = "net.pb.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data))
    return path


@pytest.mark.parametrize("encoding", ["linear16", "float16", "float32"])
def test_classical_policy_scalar_value_net(tmp_path: Path, encoding: str) -> None:
    data, ref = build_classical_net(encoding=encoding)
    net = load_lc0_net(write_net(tmp_path, data))
    assert net.output_names == ("policy", "value")
    assert not net.conv_policy
    x = (np.random.default_rng(3).random((5, 112, 8, 8)) < 0.2).astype(np.float32)
    with torch.inference_mode():
        policy, value = net(torch.from_numpy(x))
    expected_policy, expected_value = np_forward(ref, x.astype(np.float64))
    assert policy.shape == (5, 1858) and value.shape == (5, 1)
    np.testing.assert_allclose(policy.numpy(), expected_policy, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(value.numpy(), expected_value, atol=1e-5)


def test_attention_body_net_is_rejected(tmp_path: Path) -> None:
    # NETWORK_ATTENTIONBODY_WITH_HEADFORMAT and an encoder layer (Weights field 27).
    data, _ = build_classical_net(network=6, extra_weights=_field_bytes(27, b""))
    with pytest.raises(UnsupportedNetError, match="attention-body"):
        load_lc0_net(write_net(tmp_path, data))


def test_attention_fields_in_se_net_are_rejected(tmp_path: Path) -> None:
    # A file that claims an SE structure but carries attention embedding weights (field 25).
    data, _ = build_classical_net(extra_weights=_field_bytes(25, layer_msg(np.ones(4), "float32")))
    with pytest.raises(UnsupportedNetError, match="attention"):
        load_lc0_net(write_net(tmp_path, data))


def test_other_input_format_needs_opt_in(tmp_path: Path) -> None:
    data, _ = build_classical_net(input_format=3)  # INPUT_112_WITH_CANONICALIZATION
    path = write_net(tmp_path, data)
    with pytest.raises(UnsupportedNetError, match="INPUT_112_WITH_CANONICALIZATION"):
        load_lc0_net(path)
    assert load_lc0_net(path, strict_input=False).input_format == 3


def test_not_an_lc0_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.pb.gz"
    path.write_bytes(gzip.compress(_field_fixed32(1, struct.pack("<I", 0x1234))))
    with pytest.raises(Lc0FormatError, match="not an Lc0 weights file"):
        read_lc0_weights(path)
    path.write_bytes(gzip.compress(b"\x0a\xff\xff"))  # length runs past the end
    with pytest.raises(Lc0FormatError):
        read_lc0_weights(path)
