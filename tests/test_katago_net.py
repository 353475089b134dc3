"""KataGo model-file parser and torch net: the real g170 net, and a synthetic v15 HumanSL-style net.

The real net (model v8) is checked end to end against KataGo itself in tests/test_go_outputs.py.
What no real file here exercises — v15's SGF-metadata encoder, nested bottleneck blocks, the v15
pass head, mish/identity activations, two policy channels, a partial-board mask — is checked by
writing a small random v15 model (and the same weights as a v12 model) in KataGo's exact file
format (the ``ModelWriter`` below follows ``python/export_model_pytorch.py``), loading it, and
comparing the torch forward pass with an independent float64 numpy forward pass written from
KataGo's C++ reference backend.

Run: ``pytest tests/test_katago_net.py``
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.core import settings
from pipeline.nets.katago_model_file import (
    GlobalPoolingBlock,
    ModelFileError,
    NestedBottleneckBlock,
    OrdinaryBlock,
    UnsupportedModelError,
    parse_model_bytes,
    read_model_file,
)
from pipeline.nets.katago_net import KataGoNet, load_katago_net

G170 = "katago/g170-b6c96-s175395328-d26788732.bin.gz"
G170_INPUTS = "katago-g170-inputs.npz"
BOARD = 19


def g170_path() -> Path:
    path = settings.models_dir() / G170
    if not path.is_file():
        pytest.fail(f"real KataGo net missing: {path} (set KIBITZ_MODELS_DIR)")
    return path


def reference_inputs() -> tuple[np.ndarray, np.ndarray]:
    path = settings.reference_dir() / G170_INPUTS
    if not path.is_file():
        pytest.fail(f"KataGo reference inputs missing: {path}")
    data = np.load(path)
    return data["binaryInputNCHW"], data["globalInputNC"]


# ---------------------------------------------------------------------------------------------
# A writer for KataGo's model format, and random v15 weights


@dataclass
class ModelWriter:
    """Emits records exactly as KataGo's exporter does (names, shapes, ``@BIN@`` or text)."""

    binary: bool = True
    out: io.BytesIO = field(default_factory=io.BytesIO)

    def line(self, value: object) -> None:
        self.out.write(f"{value}\n".encode("ascii"))

    def floats(self, values: np.ndarray) -> None:
        flat = np.asarray(values, dtype=np.float32).reshape(-1)
        if self.binary:
            self.out.write(b"@BIN@" + flat.astype("<f4").tobytes() + b"\n")
        else:
            self.out.write((" ".join(repr(float(v)) for v in flat) + "\n").encode("ascii"))

    def conv(self, name: str, weight: np.ndarray) -> None:  # weight (out, in, y, x)
        out_c, in_c, ky, kx = weight.shape
        for value in (name, ky, kx, in_c, out_c, 1, 1):
            self.line(value)
        self.floats(weight.transpose(2, 3, 1, 0))  # file order y, x, in, out

    def bn(self, name: str, bn: dict) -> None:
        for value in (name, len(bn["mean"]), bn["eps"], 1, 1):
            self.line(value)
        for key in ("mean", "var", "scale", "bias"):
            self.floats(bn[key])

    def act(self, name: str, kind: str) -> None:
        self.line(name)
        self.line(f"ACTIVATION_{kind.upper()}")

    def matmul(self, name: str, weight: np.ndarray) -> None:  # weight (out, in)
        self.line(name)
        self.line(weight.shape[1])
        self.line(weight.shape[0])
        self.floats(weight.T)  # file order in, out

    def matbias(self, name: str, bias: np.ndarray) -> None:
        self.line(name)
        self.line(len(bias))
        self.floats(bias)

    def block(self, name: str, block: dict) -> None:
        kind = block["kind"]
        self.line({"ordinary": "ordinary_block", "gpool": "gpool_block"}.get(kind, kind))
        self.line(name)
        if kind == "ordinary":
            self.bn(f"{name}/norm1", block["pre_bn"])
            self.act(f"{name}/act1", block["pre_act"])
            self.conv(f"{name}/w1", block["w1"])
            self.bn(f"{name}/norm2", block["mid_bn"])
            self.act(f"{name}/act2", block["mid_act"])
            self.conv(f"{name}/w2", block["w2"])
        elif kind == "gpool":
            self.bn(f"{name}/norm1", block["pre_bn"])
            self.act(f"{name}/act1", block["pre_act"])
            self.conv(f"{name}/w1a", block["w_regular"])
            self.conv(f"{name}/w1b", block["w_gpool"])
            self.bn(f"{name}/norm1b", block["gpool_bn"])
            self.act(f"{name}/act1b", block["gpool_act"])
            self.matmul(f"{name}/w1r", block["gpool_mul"])
            self.bn(f"{name}/norm2", block["mid_bn"])
            self.act(f"{name}/act2", block["mid_act"])
            self.conv(f"{name}/w2", block["w_final"])
        else:
            self.line(len(block["blocks"]))
            self.bn(f"{name}/normpre", block["pre_bn"])
            self.act(f"{name}/actpre", block["pre_act"])
            self.conv(f"{name}/wpre", block["w_pre"])
            for i, inner in enumerate(block["blocks"]):
                self.block(f"{name}/inner{i}", inner)
            self.bn(f"{name}/normpost", block["post_bn"])
            self.act(f"{name}/actpost", block["post_act"])
            self.conv(f"{name}/wpost", block["w_post"])

    def model(self, m: dict, *, version: int = 15) -> bytes:
        """v12 to v15 (v12: fixed multipliers; v15: metadata encoder and pass hidden layer)."""
        header = [m["name"], version, 22, 19]
        if version >= 13:
            header += m["multipliers"]
        if version >= 15:
            header += [1, *[0] * 7]  # metadata encoder version 1, reserved
        for value in header:
            self.line(value)
        trunk = m["trunk"]
        for value in ("trunk", len(trunk["blocks"]), m["c"], m["c"], m["c"], 0, m["c"]):
            self.line(value)
        if version >= 15:
            for value in [0] * 6:  # reserved
                self.line(value)
        self.conv("conv_spatial", trunk["w_spatial"])
        self.matmul("linear_global", trunk["w_global"])
        if version >= 15:
            enc = trunk["meta"]
            self.line("sgf_metadata_encoder")
            self.matmul("meta/mul1", enc["mul1"])
            self.matbias("meta/bias1", enc["bias1"])
            self.act("meta/act1", enc["act"])
            self.matmul("meta/mul2", enc["mul2"])
            self.matbias("meta/bias2", enc["bias2"])
            self.act("meta/act2", enc["act"])
            self.matmul("meta/mul3", enc["mul3"])
        for i, block in enumerate(trunk["blocks"]):
            self.block(f"rconv{i + 1}", block)
        self.bn("trunk/norm", trunk["tip_bn"])
        self.act("trunk/act", trunk["tip_act"])
        p = m["policy"]
        self.line("policyhead")
        self.conv("p1", p["p1"])
        self.conv("g1", p["g1"])
        self.bn("g1/norm", p["g1_bn"])
        self.act("g1/act", p["act"])
        self.matmul("g1/mul", p["g1_mul"])
        self.bn("p1/norm", p["p1_bn"])
        self.act("p1/act", p["act"])
        self.conv("p2", p["p2"])
        if version >= 15:
            self.matmul("pass/mul", p["pass_mul"])
            self.matbias("pass/bias", p["pass_bias"])
            self.act("pass/act", p["act"])
            self.matmul("pass/mul2", p["pass_mul2"])
        else:
            self.matmul("pass/mul", p["pass_direct"])
        v = m["value"]
        self.line("valuehead")
        self.conv("v1", v["v1"])
        self.bn("v1/norm", v["v1_bn"])
        self.act("v1/act", v["act"])
        self.matmul("v2/mul", v["v2_mul"])
        self.matbias("v2/bias", v["v2_bias"])
        self.act("v2/act", v["act"])
        self.matmul("v3/mul", v["v3_mul"])
        self.matbias("v3/bias", v["v3_bias"])
        self.matmul("sv3/mul", v["sv3_mul"])
        self.matbias("sv3/bias", v["sv3_bias"])
        self.conv("vownership", v["own"])
        return self.out.getvalue()


def random_v15_model(seed: int = 7, c: int = 8) -> dict:
    """Small random weights for every v15 record kind (trunk width ``c``)."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return (rng.normal(0.0, 1.0, shape) / np.sqrt(fan_in)).astype(np.float32)

    def bn(n: int) -> dict:
        # Small variances and a large epsilon make a wrong epsilon visible.
        return {
            "mean": rng.normal(0, 0.2, n).astype(np.float32),
            "var": rng.uniform(0.05, 0.5, n).astype(np.float32),
            "scale": rng.uniform(0.5, 1.5, n).astype(np.float32),
            "bias": rng.normal(0, 0.2, n).astype(np.float32),
            "eps": 0.1,
        }

    def ordinary(n: int, act: str) -> dict:
        return {
            "kind": "ordinary",
            "pre_bn": bn(n),
            "pre_act": act,
            "w1": w(n, n, 3, 3),
            "mid_bn": bn(n),
            "mid_act": act,
            "w2": w(n, n, 3, 3),
        }

    def gpool(n: int, act: str) -> dict:
        return {
            "kind": "gpool",
            "pre_bn": bn(n),
            "pre_act": act,
            "w_regular": w(n - 2, n, 3, 3),
            "w_gpool": w(3, n, 3, 3),
            "gpool_bn": bn(3),
            "gpool_act": act,
            "gpool_mul": w(n - 2, 9),
            "mid_bn": bn(n - 2),
            "mid_act": act,
            "w_final": w(n, n - 2, 3, 3),
        }

    mid = c // 2
    nested = {
        "kind": "nested_bottleneck_block",
        "pre_bn": bn(c),
        "pre_act": "mish",
        "w_pre": w(mid, c, 1, 1),
        "blocks": [ordinary(mid, "mish"), gpool(mid, "mish")],
        "post_bn": bn(mid),
        "post_act": "mish",
        "w_post": w(c, mid, 1, 1),
    }
    return {
        "name": "synthetic-b3c8-v15",
        "c": c,
        # td score, score mean, score stdev, lead, variance time, shortterm value, shortterm score
        "multipliers": (20.0, 18.0, 21.0, 17.0, 41.0, 0.3, 29.0),
        "trunk": {
            "w_spatial": w(c, 22, 3, 3),
            "w_global": w(c, 19),
            "meta": {
                "mul1": w(6, 192),
                "bias1": rng.normal(0, 0.2, 6).astype(np.float32),
                "act": "mish",
                "mul2": w(5, 6),
                "bias2": rng.normal(0, 0.2, 5).astype(np.float32),
                "mul3": w(c, 5),
            },
            "blocks": [ordinary(c, "relu"), nested, gpool(c, "mish")],
            "tip_bn": bn(c),
            "tip_act": "mish",
        },
        "policy": {
            "p1": w(4, c, 1, 1),
            "g1": w(3, c, 1, 1),
            "g1_bn": bn(3),
            "act": "mish",
            "g1_mul": w(4, 9),
            "p1_bn": bn(4),
            "p2": w(2, 4, 1, 1),
            "pass_mul": w(4, 9),
            "pass_bias": rng.normal(0, 0.2, 4).astype(np.float32),
            "pass_mul2": w(2, 4),
            "pass_direct": w(2, 9),  # v12-v14: one matmul to the 2 pass logits
        },
        "value": {
            "v1": w(3, c, 1, 1),
            "v1_bn": bn(3),
            "act": "identity",
            "v2_mul": w(5, 9),
            "v2_bias": rng.normal(0, 0.2, 5).astype(np.float32),
            "v3_mul": w(3, 5),
            "v3_bias": rng.normal(0, 0.2, 3).astype(np.float32),
            "sv3_mul": w(6, 5),
            "sv3_bias": rng.normal(0, 0.2, 6).astype(np.float32),
            "own": w(1, 3, 1, 1),
        },
    }


# ---------------------------------------------------------------------------------------------
# An independent float64 numpy forward pass (KataGo's eigen backend, written out plainly)


def np_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    ky, kx = w.shape[2:]
    py, px = ky // 2, kx // 2
    height, width = x.shape[2:]
    padded = np.pad(x, ((0, 0), (0, 0), (py, py), (px, px)))
    out = np.zeros((x.shape[0], w.shape[0], height, width))
    for dy in range(ky):
        for dx in range(kx):
            window = padded[:, :, dy : dy + height, dx : dx + width]
            out += np.einsum("bihw,oi->bohw", window, w[:, :, dy, dx].astype(np.float64))
    return out


def np_act(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "mish":
        return x * np.tanh(np.log1p(np.exp(x)))
    return x


def np_bn_act(x: np.ndarray, bn: dict, act: str, mask: np.ndarray) -> np.ndarray:
    c = (slice(None), None, None)
    y = (x - bn["mean"][c]) / np.sqrt(bn["var"][c].astype(np.float64) + bn["eps"])
    return np_act(y * bn["scale"][c] + bn["bias"][c], act) * mask


def np_gpool(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    area = mask.sum(axis=(2, 3))  # (B, 1)
    mean = x.sum(axis=(2, 3)) / area
    maximum = np.where(mask > 0, x, -np.inf).max(axis=(2, 3))
    return np.concatenate([mean, mean * (np.sqrt(area) - 14) / 10, maximum], axis=1)


def np_value_pool(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    area = mask.sum(axis=(2, 3))
    mean = x.sum(axis=(2, 3)) / area
    b = np.sqrt(area) - 14
    return np.concatenate([mean, mean * b / 10, mean * (b * b / 100 - 0.1)], axis=1)


def np_block(x: np.ndarray, block: dict, mask: np.ndarray) -> np.ndarray:
    kind = block["kind"]
    if kind == "ordinary":
        h = np_conv(np_bn_act(x, block["pre_bn"], block["pre_act"], mask), block["w1"])
        return x + np_conv(np_bn_act(h, block["mid_bn"], block["mid_act"], mask), block["w2"])
    if kind == "gpool":
        a = np_bn_act(x, block["pre_bn"], block["pre_act"], mask)
        regular = np_conv(a, block["w_regular"])
        g = np_bn_act(np_conv(a, block["w_gpool"]), block["gpool_bn"], block["gpool_act"], mask)
        regular = regular + (np_gpool(g, mask) @ block["gpool_mul"].T)[:, :, None, None]
        h = np_bn_act(regular, block["mid_bn"], block["mid_act"], mask)
        return x + np_conv(h, block["w_final"])
    h = np_conv(np_bn_act(x, block["pre_bn"], block["pre_act"], mask), block["w_pre"])
    for inner in block["blocks"]:
        h = np_block(h, inner, mask)
    return x + np_conv(np_bn_act(h, block["post_bn"], block["post_act"], mask), block["w_post"])


def np_forward(
    m: dict, spatial: np.ndarray, global_: np.ndarray, meta: np.ndarray, version: int = 15
) -> tuple:
    spatial, global_, meta = (a.astype(np.float64) for a in (spatial, global_, meta))
    mask = spatial[:, 0:1]
    t, enc = m["trunk"], m["trunk"]["meta"]
    bias = global_ @ t["w_global"].T
    if version >= 15:
        h1 = np_act(meta @ enc["mul1"].T + enc["bias1"], enc["act"])
        h2 = np_act(h1 @ enc["mul2"].T + enc["bias2"], enc["act"])
        bias = bias + h2 @ enc["mul3"].T
    x = np_conv(spatial, t["w_spatial"]) + bias[:, :, None, None]
    for block in t["blocks"]:
        x = np_block(x, block, mask)
    x = np_bn_act(x, t["tip_bn"], t["tip_act"], mask)
    p = m["policy"]
    g1 = np_bn_act(np_conv(x, p["g1"]), p["g1_bn"], p["act"], mask)
    pooled = np_gpool(g1, mask)
    p1 = np_conv(x, p["p1"]) + (pooled @ p["g1_mul"].T)[:, :, None, None]
    board = np_conv(np_bn_act(p1, p["p1_bn"], p["act"], mask), p["p2"])
    if version >= 15:
        passes = np_act(pooled @ p["pass_mul"].T + p["pass_bias"], p["act"]) @ p["pass_mul2"].T
    else:
        passes = pooled @ p["pass_direct"].T
    policy = np.concatenate([board.reshape(len(x), 2, -1), passes[:, :, None]], axis=2)
    v = m["value"]
    v1 = np_bn_act(np_conv(x, v["v1"]), v["v1_bn"], v["act"], mask)
    v2 = np_act(np_value_pool(v1, mask) @ v["v2_mul"].T + v["v2_bias"], v["act"])
    value = v2 @ v["v3_mul"].T + v["v3_bias"]
    misc = v2 @ v["sv3_mul"].T + v["sv3_bias"]
    ownership = np_conv(v1, v["own"]).reshape(len(x), -1)
    return policy, value, misc, ownership


def synthetic_inputs(batch: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random inputs; the second half of the batch sits on a 13x13 board (mask in the corner)."""
    rng = np.random.default_rng(seed)
    spatial = (rng.random((batch, 22, BOARD, BOARD)) < 0.2).astype(np.float32)
    mask = np.ones((batch, 1, BOARD, BOARD), np.float32)
    mask[batch // 2 :, :, 13:, :] = 0.0
    mask[batch // 2 :, :, :, 13:] = 0.0
    spatial = spatial * mask
    spatial[:, 0:1] = mask
    global_ = rng.uniform(-0.5, 0.5, (batch, 19)).astype(np.float32)
    meta = (rng.random((batch, 192)) < 0.1).astype(np.float32)
    return spatial, global_, meta


@pytest.fixture(scope="module")
def synthetic() -> tuple[dict, bytes]:
    model = random_v15_model()
    return model, ModelWriter(binary=True).model(model)


# ---------------------------------------------------------------------------------------------
# Tests: real file


def test_g170_file_structure() -> None:
    desc = read_model_file(g170_path())
    assert (desc.name, desc.version) == ("g170-b6c96-s175395328-d26788732", 8)
    assert (desc.spatial_channels, desc.global_channels, desc.meta_channels) == (22, 19, 0)
    assert desc.trunk.channels == 96
    kinds = [type(b) for b in desc.trunk.blocks]
    assert kinds.count(OrdinaryBlock) == 4 and kinds.count(GlobalPoolingBlock) == 2
    assert desc.trunk.initial_conv.weight.shape == (96, 22, 5, 5)
    assert desc.policy_head.policy_channels == 1
    assert desc.value_head.sv3_mul.out_channels == 4  # v8: mean, stdev, lead, varTime
    assert desc.meta.post_process.lead_multiplier == 20.0  # fixed before v13


def test_g170_net_interface() -> None:
    net = load_katago_net(g170_path())
    assert net.input_names == ("spatial", "global")
    assert net.output_names == ("policy", "value", "misc", "ownership")
    spatial, global_ = reference_inputs()
    with torch.inference_mode():
        policy, value, misc, ownership = net(torch.from_numpy(spatial), torch.from_numpy(global_))
    n = len(spatial)
    assert policy.shape == (n, 1, 362) and value.shape == (n, 3)
    assert misc.shape == (n, 4) and ownership.shape == (n, 361)
    assert all(t.shape[0] == 2 for t in net.example_inputs(2))


def test_onnx_runtime_matches_torch_on_reference_batch(tmp_path: Path) -> None:
    from pipeline.nets.evaluator import make_evaluator

    net = load_katago_net(g170_path())
    spatial, global_ = reference_inputs()
    inputs = {"spatial": spatial, "global": global_}
    expected = make_evaluator(net, backend="torch")(inputs)
    actual = make_evaluator(net, backend="onnx", cache_dir=tmp_path)(inputs)
    for name in net.output_names:
        np.testing.assert_allclose(actual[name], expected[name], atol=1e-4, rtol=0, err_msg=name)


# ---------------------------------------------------------------------------------------------
# Tests: synthetic v15 (HumanSL-style) model


def test_v15_synthetic_parses_every_record_kind(synthetic: tuple[dict, bytes]) -> None:
    model, data = synthetic
    desc = parse_model_bytes(data, source="synthetic")
    assert desc.version == 15 and desc.meta_encoder_version == 1 and desc.meta_channels == 192
    assert desc.post_process.lead_multiplier == 17.0
    assert desc.post_process.shortterm_score_error_multiplier == 29.0
    nested = desc.trunk.blocks[1]
    assert isinstance(nested, NestedBottleneckBlock)
    assert [type(b) for b in nested.blocks] == [OrdinaryBlock, GlobalPoolingBlock]
    assert nested.pre_act.kind == "mish" and desc.value_head.v1_act.kind == "identity"
    assert desc.policy_head.policy_channels == 2
    # File order (y, x, in, out) comes back in torch order (out, in, y, x).
    np.testing.assert_array_equal(desc.trunk.initial_conv.weight, model["trunk"]["w_spatial"])
    np.testing.assert_array_equal(
        desc.trunk.metadata_encoder.mul1.weight, model["trunk"]["meta"]["mul1"]
    )


def test_v15_text_floats_parse_like_binary(synthetic: tuple[dict, bytes]) -> None:
    model, data = synthetic
    text = ModelWriter(binary=False).model(model)
    assert b"@BIN@" not in text
    from_text = KataGoNet(parse_model_bytes(text, source="text")).state_dict()
    from_binary = KataGoNet(parse_model_bytes(data, source="binary")).state_dict()
    assert from_text.keys() == from_binary.keys()
    for key, value in from_binary.items():
        assert torch.equal(from_text[key], value), key


@pytest.mark.parametrize("version", [12, 15])
def test_torch_forward_matches_numpy_forward(version: int, tmp_path: Path) -> None:
    model = random_v15_model()
    path = tmp_path / "synthetic.bin.gz"
    path.write_bytes(gzip.compress(ModelWriter().model(model, version=version)))
    net = load_katago_net(path)
    assert net.meta.version == version
    spatial, global_, meta = synthetic_inputs(4)
    inputs = (spatial, global_, meta) if version >= 15 else (spatial, global_)
    assert len(net.input_names) == len(inputs)
    with torch.inference_mode():
        got = net(*(torch.from_numpy(a) for a in inputs))
    want = np_forward(model, spatial, global_, meta, version)
    for name, g, w in zip(net.output_names, got, want, strict=True):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g.numpy(), w, atol=2e-5, rtol=1e-4, err_msg=name)
    if version >= 15:  # the metadata row really reaches the trunk
        with torch.inference_mode():
            other = net(*(torch.from_numpy(a) for a in (spatial, global_, np.zeros_like(meta))))
        assert not torch.allclose(other[1], got[1])


def test_v15_onnx_with_meta_input_matches_torch(
    synthetic: tuple[dict, bytes], tmp_path: Path
) -> None:
    from pipeline.nets.evaluator import make_evaluator

    net = KataGoNet(parse_model_bytes(synthetic[1], source="synthetic"))
    spatial, global_, meta = synthetic_inputs(4)
    inputs = {"spatial": spatial, "global": global_, "meta": meta}
    expected = make_evaluator(net, backend="torch")(inputs)
    actual = make_evaluator(net, backend="onnx", cache_dir=tmp_path)(inputs)
    for name in net.output_names:
        np.testing.assert_allclose(actual[name], expected[name], atol=1e-4, rtol=0, err_msg=name)


# ---------------------------------------------------------------------------------------------
# Tests: errors


@pytest.mark.parametrize("version", [7, 16, 17])
def test_unsupported_versions_are_refused_by_header(version: int) -> None:
    header = f"b18c384-transformer\n{version}\n22\n19\n".encode()
    with pytest.raises(UnsupportedModelError, match=rf"model version {version} .*8 to 15"):
        parse_model_bytes(header, source="net.bin.gz")


def test_v17_file_on_disk_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kata-v17.bin.gz"
    path.write_bytes(gzip.compress(b"kata1-v17-net\n17\n22\n19\n20\n20\n20\n20\n40\n0.25\n30\n"))
    with pytest.raises(UnsupportedModelError, match=r"kata-v17\.bin\.gz.*transformer"):
        load_katago_net(path)


def test_truncated_file_names_the_layer(synthetic: tuple[dict, bytes]) -> None:
    _, data = synthetic
    cut = data[: data.index(b"rconv2/inner1") + 400]
    with pytest.raises(ModelFileError, match=r"rconv2/inner1"):
        parse_model_bytes(cut, source="cut.bin")


def test_unknown_block_kind_is_unsupported(synthetic: tuple[dict, bytes]) -> None:
    _, data = synthetic
    bad = data.replace(b"ordinary_block\nrconv1", b"transformer_block\nrconv1", 1)
    with pytest.raises(UnsupportedModelError, match=r"transformer_block"):
        parse_model_bytes(bad, source="bad.bin")


# ---------------------------------------------------------------------------------------------
# GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tensorrt_fp16_close_to_torch(tmp_path: Path) -> None:
    pytest.importorskip("tensorrt")
    from pipeline.nets.evaluator import make_evaluator

    net = load_katago_net(g170_path())
    spatial, global_ = reference_inputs()
    inputs = {"spatial": spatial, "global": global_}
    expected = make_evaluator(net, backend="torch")(inputs)
    fp32 = make_evaluator(net, backend="tensorrt", device="cuda", cache_dir=tmp_path)(inputs)
    fp16 = make_evaluator(
        net, backend="tensorrt", device="cuda", precision="fp16", cache_dir=tmp_path
    )(inputs)
    for name in net.output_names:
        np.testing.assert_allclose(fp32[name], expected[name], atol=1e-3, rtol=0, err_msg=name)
    # FP16 trunk, FP32 heads: logits within a few hundredths, as KataGo's TensorRT backend.
    for name in ("value", "misc"):
        np.testing.assert_allclose(fp16[name], expected[name], atol=0.05, rtol=0.02, err_msg=name)
