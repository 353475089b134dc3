"""Evaluators: PyTorch and ONNX Runtime agree on real positions; TensorRT on a GPU.

Real positions are lc0's own input planes for the 40 reference positions
(``reference/maia-lc0-input-planes.json``) of real Lichess games.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from lc0_reference import lc0_reference

from pipeline.core import settings
from pipeline.nets.backend_io import BackendUnavailableError, EvaluatorInputError
from pipeline.nets.evaluator import (
    OnnxEvaluator,
    TorchEvaluator,
    graph_batch,
    make_evaluator,
    pad_rows,
    runnable_precision,
    runs_natively,
)
from pipeline.nets.lc0_net import load_lc0_net
from pipeline.nets.onnx_export import cached_onnx, net_fingerprint


def maia(level: int):
    return load_lc0_net(settings.models_dir() / "maia" / f"maia-{level}.pb.gz")


@pytest.fixture(scope="module")
def real_planes() -> np.ndarray:
    """(40, 112, 8, 8) lc0's own planes for real positions (both colours, promotions, ...)."""
    return lc0_reference().planes


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kibitz-cache")


def test_onnx_runtime_matches_torch_on_real_positions(
    real_planes: np.ndarray, cache_dir: Path
) -> None:
    net = maia(1500)
    torch_eval = make_evaluator(net, backend="torch")
    onnx_eval = make_evaluator(net, backend="onnx", cache_dir=cache_dir, max_batch=16)
    assert isinstance(onnx_eval, OnnxEvaluator)
    expected = torch_eval({"planes": real_planes})
    got = onnx_eval({"planes": real_planes})  # 40 rows in chunks of 16, 16, 8
    assert set(got) == {"policy", "wdl"}
    assert got["policy"].shape == (40, 1858) and got["wdl"].shape == (40, 3)
    assert np.abs(got["policy"] - expected["policy"]).max() < 1e-4
    assert np.abs(got["wdl"] - expected["wdl"]).max() < 1e-4

    # The export is cached by the net's fingerprint: same file, not re-exported.
    path, fingerprint = cached_onnx(net, cache_dir=cache_dir)
    assert path == onnx_eval.onnx_path and fingerprint == net_fingerprint(net)
    mtime = path.stat().st_mtime_ns
    make_evaluator(net, backend="onnx", cache_dir=cache_dir)
    assert path.stat().st_mtime_ns == mtime

    model = onnx.load(path)
    assert model.opset_import[0].version >= 17
    assert [i.name for i in model.graph.input] == ["planes"]
    assert [o.name for o in model.graph.output] == ["policy", "wdl"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # dynamic batch
    assert any(n.name.startswith("/value_fc2/") for n in model.graph.node)  # module-scoped names


def test_fingerprint_separates_nets() -> None:
    a, b = maia(1100), maia(1200)
    assert net_fingerprint(a) != net_fingerprint(b)
    assert net_fingerprint(a) == net_fingerprint(maia(1100))


def test_torch_evaluator_chunks_and_is_deterministic(real_planes: np.ndarray) -> None:
    net = maia(1900)
    whole = TorchEvaluator(net, max_batch=1024)({"planes": real_planes})
    chunked = TorchEvaluator(net, max_batch=7)({"planes": real_planes})
    again = TorchEvaluator(net, max_batch=7)({"planes": real_planes})
    np.testing.assert_array_equal(chunked["policy"], again["policy"])
    assert np.abs(chunked["policy"] - whole["policy"]).max() < 1e-4
    with torch.inference_mode():
        policy, _ = net(torch.from_numpy(real_planes[:1]))
    assert np.abs(whole["policy"][:1] - policy.numpy()).max() < 1e-4
    empty = TorchEvaluator(net)({"planes": real_planes[:0]})
    assert empty["policy"].shape == (0, 1858) and empty["wdl"].shape == (0, 3)


def test_bad_inputs_are_named(real_planes: np.ndarray) -> None:
    evaluate = make_evaluator(maia(1100))
    with pytest.raises(EvaluatorInputError, match=r"missing \['planes'\], unexpected \['board'\]"):
        evaluate({"board": real_planes})
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        make_evaluator(maia(1100), backend="tpu")


def test_tensorrt_without_gpu_or_package_is_a_clear_error() -> None:
    with pytest.raises(BackendUnavailableError, match="needs a CUDA device"):
        make_evaluator(maia(1100), backend="tensorrt", device="cpu")
    if importlib.util.find_spec("tensorrt") is None:  # any machine without the package
        with pytest.raises(BackendUnavailableError, match="TensorRT Python package"):
            make_evaluator(maia(1100), backend="tensorrt", device="cuda")


def test_bf16_on_the_cpu_is_fp32_to_a_few_hundredths_on_real_positions(real_planes):
    """bfloat16 keeps 8 bits of mantissa: on these 40 positions Maia-1500's logits (magnitude
    ~10) moved by up to 0.153, its move probabilities by up to 0.0197, and the best move changed
    in 1 of 40 (a near tie); outputs come back as float32."""
    expected = make_evaluator(maia(1500))({"planes": real_planes})
    got = make_evaluator(maia(1500), precision="bf16")({"planes": real_planes})
    assert got["policy"].dtype == np.float32 and got["wdl"].dtype == np.float32
    assert 0 < np.abs(got["policy"] - expected["policy"]).max() < 0.2
    p_got, p_exp = (torch.softmax(torch.from_numpy(o["policy"]), 1) for o in (got, expected))
    assert (p_got - p_exp).abs().max() < 0.03
    assert np.mean(got["policy"].argmax(1) == expected["policy"].argmax(1)) >= 0.95
    w_got, w_exp = (torch.softmax(torch.from_numpy(o["wdl"]), 1) for o in (got, expected))
    assert (w_got - w_exp).abs().max() < 0.015


def test_a_precision_the_device_lacks_falls_back_to_fp32(monkeypatch):
    """FP16 needs a GPU; BF16 a GPU or a CPU with AVX-512 BF16 or AMX, without which it is
    emulated (slower than FP32): what features extracted elsewhere are recomputed at here."""
    assert runnable_precision("fp32", "cpu") == "fp32"
    assert runnable_precision("fp16", "cpu") == "fp32"
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": True})
    assert runs_natively("bf16", "cpu") and runnable_precision("bf16", "cpu") == "bf16"
    avx512_bf16 = {"amx_bf16": False, "avx512_bf16": True}  # this project's AMD EPYC
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: avx512_bf16)
    assert runs_natively("bf16", "cpu") and runnable_precision("bf16", "cpu") == "bf16"
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"amx_bf16": False, "avx2": True})
    assert not runs_natively("bf16", "cpu") and runnable_precision("bf16", "cpu") == "fp32"


def test_bf16_runs_on_torch_only():
    with pytest.raises(BackendUnavailableError, match="use torch for bf16"):
        make_evaluator(maia(1100), backend="onnx", precision="bf16")
    with pytest.raises(BackendUnavailableError, match="use torch for bf16"):
        make_evaluator(maia(1100), backend="tensorrt", device="cuda", precision="bf16")
    with pytest.raises(ValueError, match="unknown precision 'int8'"):
        make_evaluator(maia(1100), precision="int8")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tensorrt_fp16_matches_torch(real_planes: np.ndarray, cache_dir: Path) -> None:
    pytest.importorskip("tensorrt")
    from pipeline.nets.tensorrt_engine import TensorRTEvaluator

    net = maia(1500)
    expected = make_evaluator(net, backend="torch")({"planes": real_planes})
    trt_eval = make_evaluator(
        net, backend="tensorrt", device="cuda", precision="fp16", cache_dir=cache_dir, max_batch=64
    )
    assert isinstance(trt_eval, TensorRTEvaluator)
    got = trt_eval({"planes": real_planes})
    # FP16 policy logits (magnitude ~10) agree to a few hundredths; probabilities closer.
    assert np.abs(got["policy"] - expected["policy"]).max() < 0.1
    p_got = torch.softmax(torch.from_numpy(got["wdl"]), 1)
    p_exp = torch.softmax(torch.from_numpy(expected["wdl"]), 1)
    assert (p_got - p_exp).abs().max() < 0.01

    # A second evaluator reuses the cached engine (same file, not rebuilt).
    mtime = trt_eval.engine_path.stat().st_mtime_ns
    again = make_evaluator(
        net, backend="tensorrt", device="cuda", precision="fp16", cache_dir=cache_dir, max_batch=64
    )
    assert again.engine_path == trt_eval.engine_path
    assert trt_eval.engine_path.stat().st_mtime_ns == mtime

    fp32 = make_evaluator(
        net, backend="tensorrt", device="cuda", precision="fp32", cache_dir=cache_dir, max_batch=64
    )
    assert fp32.engine_path != trt_eval.engine_path
    assert np.abs(fp32({"planes": real_planes})["policy"] - expected["policy"]).max() < 1e-2


def test_compiled_evaluator_matches_eager_at_every_batch_size(real_planes):
    """torch.compile (Inductor, one dynamic-shape graph) gives Maia's eager FP32 logits on real
    positions to float rounding, for full and short batches alike (40 rows in batches of 16:
    16, 16, 8); on an H100 in FP16 it runs Maia 1.47x eager (bench/gpu/bench_gpu_engines.py)."""
    net = maia(1500)
    expected = TorchEvaluator(net, max_batch=16)({"planes": real_planes})
    got = make_evaluator(net, max_batch=16, compile=True)({"planes": real_planes})
    for name in ("policy", "wdl"):
        assert np.abs(got[name] - expected[name]).max() < 1e-4
    with pytest.raises(ValueError, match="compile applies to the torch backend"):
        make_evaluator(net, backend="onnx", compile=True)


def test_padded_batches_give_the_unpadded_rows(real_planes):
    """CUDA-graph replay runs every batch at a fixed size (graph_batch), its last real row
    repeated (pad_rows): Maia's logits for the real rows are those of the unpadded batch, since
    the rows of an inference batch never mix. 40 positions at sizes 64 and 256."""
    net = maia(1500).eval()
    planes = torch.from_numpy(real_planes)
    with torch.inference_mode():
        expected = net(planes)
        for size in (graph_batch(40, 64), graph_batch(40, 4096)):
            padded = pad_rows(planes, size)
            assert padded.shape[0] == size and padded[40:].equal(
                planes[-1:].expand(size - 40, -1, -1, -1)
            )
            for got, want in zip(net(padded), expected, strict=True):
                assert (got[:40] - want).abs().max() < 1e-4
    assert [graph_batch(n, 4096) for n in (4096, 2049, 2048, 257, 256, 1)] == [
        4096,
        4096,
        2048,
        512,
        256,
        256,
    ]
    assert graph_batch(10, 16) == 16  # a bank batch below 256 is the one size


def test_cuda_graphs_need_compile_and_a_gpu():
    """CUDA graphs replay compiled kernels on a GPU; elsewhere the evaluator says so rather than
    silently running another engine."""
    net = maia(1100)
    with pytest.raises(BackendUnavailableError, match="need compile and a CUDA device"):
        make_evaluator(net, cuda_graphs=True, compile=True, device="cpu")
    with pytest.raises(BackendUnavailableError, match="need compile and a CUDA device"):
        make_evaluator(net, cuda_graphs=True, device="cuda")
    with pytest.raises(ValueError, match="compile applies to the torch backend"):
        make_evaluator(net, backend="onnx", cuda_graphs=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_evaluator_matches_compiled_at_every_batch_size(real_planes):
    """On a GPU, replayed graphs give the compiled net's FP16 logits for full, short and
    one-row batches (40 rows in batches of 16, then 7 and 1 rows), each output its own copy."""
    net = maia(1500)
    compiled = make_evaluator(net, device="cuda", precision="fp16", max_batch=16, compile=True)
    graphs = make_evaluator(
        net, device="cuda", precision="fp16", max_batch=16, compile=True, cuda_graphs=True
    )
    for rows in (40, 7, 1):
        want = compiled({"planes": real_planes[:rows]})
        got = graphs({"planes": real_planes[:rows]})
        assert np.abs(got["policy"] - want["policy"]).max() < 5e-2
        assert (got["policy"].argmax(1) == want["policy"].argmax(1)).mean() >= 0.95
    first = graphs.run_on_device({"planes": torch.from_numpy(real_planes[:16])})["policy"].clone()
    held = graphs.run_on_device({"planes": torch.from_numpy(real_planes[:16])})["policy"]
    graphs.run_on_device({"planes": torch.from_numpy(real_planes[16:32])})
    assert held.equal(first)  # not overwritten by the next replay
