"""The net bank's input path: packed planes unpacked where the nets run, exactly.

Real inputs: planes of real Lichess games (testing split) from Kibitz's encoder, which hold a
non-binary channel (the rule-50 count), and KataGo's own input tensors for real Fox positions.
The GPU tests run where CUDA exists and skip elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lc0_reference import lc0_reference

from pipeline import settings
from pipeline.check_chess import read_games
from pipeline.encode_chess import encode_games
from pipeline.net_bank import Gather, NetBank, NetJob, unpack_on_device
from pipeline.packed_planes import pack_planes

GAMES = ("chess", "lichess-2024-02-blitz", "testing", "1400-1600.pgn.zst")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def chess_planes() -> np.ndarray:
    games = read_games(settings.data_dir().joinpath(*GAMES), max_games=4)
    return encode_games(games.column("moves").to_pylist()).planes  # (N, 112, 8, 8)


@pytest.fixture(scope="module")
def go_planes() -> np.ndarray:
    data = np.load(settings.reference_dir() / "katago-g170-inputs.npz")
    return data["binaryInputNCHW"].astype(np.float32)  # (28, 22, 19, 19)


def test_chess_planes_keep_the_rule50_count_as_floats(chess_planes: np.ndarray) -> None:
    packed = pack_planes(chess_planes)
    assert list(packed.float_channels) == [109]  # lc0's rule-50 plane
    assert chess_planes[:, 109].max() >= 2  # a real count, not a flag


@pytest.mark.parametrize("kind", ["chess", "go"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_unpack_on_device_equals_numpy_unpack(
    kind: str, dtype: torch.dtype, chess_planes: np.ndarray, go_planes: np.ndarray
) -> None:
    planes = chess_planes if kind == "chess" else go_planes
    packed = pack_planes(planes)
    got = unpack_on_device(packed.rows(3, 17), torch.device("cpu"), dtype)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.float().numpy(), planes[3:17])
    np.testing.assert_array_equal(packed.rows(3, 17).unpack(), packed.unpack(3, 17))


def test_rows_past_the_end_are_clipped(go_planes: np.ndarray) -> None:
    packed = pack_planes(go_planes)
    assert len(packed.rows(20, 99)) == 8
    assert unpack_on_device(packed.rows(99, 120), torch.device("cpu"), torch.float32).shape == (
        0,
        22,
        19,
        19,
    )


def test_bank_gives_the_same_outputs_for_packed_and_float_inputs(chess_planes: np.ndarray) -> None:
    bank = NetBank(["maia-1100"], backend="torch", precision="fp32", batch_size=32, threads=1)
    packed = pack_planes(chess_planes)
    jobs = [NetJob(key="m", model="maia-1100", outputs=("policy",))]
    n = len(chess_planes)
    from_packed = bank.run(jobs, lambda a, b: {"planes": packed.rows(a, b)}, n)["m"]["policy"]
    from_floats = bank.run(jobs, lambda a, b: {"planes": chess_planes[a:b]}, n)["m"]["policy"]
    assert from_packed.shape == (n, 1858)
    np.testing.assert_array_equal(from_packed, from_floats)


def test_gathered_output_is_the_full_output_at_the_picked_entries(
    chess_planes: np.ndarray,
) -> None:
    bank = NetBank(["maia-1300"], backend="torch", precision="fp32", batch_size=16, threads=1)
    n = len(chess_planes)
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 5, size=n)  # (n,) entries picked per row
    cols = rng.integers(0, 1858, size=int(counts.sum()))  # (L,)
    offsets = np.concatenate([[0], np.cumsum(counts)])

    def source(a: int, b: int) -> dict:
        rows = np.repeat(np.arange(b - a), counts[a:b])
        return {"planes": chess_planes[a:b], "pick": Gather(rows, cols[offsets[a] : offsets[b]])}

    plain = NetJob("full", "maia-1300", ("policy", "wdl"))
    picked = NetJob("picked", "maia-1300", ("policy", "wdl"), gather={"policy": "pick"})
    out = bank.run([plain, picked], source, n)
    all_rows = np.repeat(np.arange(n), counts)
    assert out["picked"]["policy"].shape == (len(cols),)
    np.testing.assert_array_equal(out["picked"]["policy"], out["full"]["policy"][all_rows, cols])
    np.testing.assert_array_equal(out["picked"]["wdl"], out["full"]["wdl"])


@needs_cuda
def test_cuda_fp32_is_fp32_against_lc0() -> None:
    """TF32 is off: the GPU's FP32 logits match lc0's as closely as the CPU's do (1e-3)."""
    lc0 = lc0_reference()
    packed = pack_planes(lc0.planes)
    bank = NetBank(["maia-1500"], backend="torch", precision="fp32", batch_size=16, device="cuda")
    jobs = [NetJob(key="m", model="maia-1500", outputs=("policy",))]
    policy = bank.run(jobs, lambda a, b: {"planes": packed.rows(a, b)}, len(lc0.keys))["m"][
        "policy"
    ]
    expected = lc0.logits[lc0.nets.index("maia-1500")]
    assert np.abs(policy - expected).max() < 1e-3


@needs_cuda
def test_cuda_fp16_bank_agrees_with_cpu_on_real_games(chess_planes: np.ndarray) -> None:
    packed = pack_planes(chess_planes)
    jobs = [NetJob(key="m", model="maia-1900", outputs=("policy", "wdl"))]
    n = len(chess_planes)
    outs = {}
    for device, precision in (("cpu", "fp32"), ("cuda", "fp16")):
        bank = NetBank(
            ["maia-1900"], backend="torch", precision=precision, batch_size=64, device=device
        )
        outs[device] = bank.run(jobs, lambda a, b: {"planes": packed.rows(a, b)}, n)["m"]
    assert np.abs(outs["cuda"]["policy"] - outs["cpu"]["policy"]).max() < 0.1
    same_top = (outs["cuda"]["policy"].argmax(1) == outs["cpu"]["policy"].argmax(1)).mean()
    assert same_top > 0.97


@needs_cuda
def test_cuda_gather_equals_host_gather(chess_planes: np.ndarray) -> None:
    """Picking entries on the GPU gives exactly the entries of the copied-back output."""
    bank = NetBank(["maia-1600"], backend="torch", precision="fp16", batch_size=32, device="cuda")
    n = len(chess_planes)
    rows, cols = np.arange(n), (np.arange(n) * 37) % 1858

    def source(a: int, b: int) -> dict:
        return {"planes": chess_planes[a:b], "pick": Gather(rows[a:b] - a, cols[a:b])}

    plain = NetJob("full", "maia-1600", ("policy",))
    picked = NetJob("picked", "maia-1600", ("policy",), gather={"policy": "pick"})
    out = bank.run([plain, picked], source, n)
    np.testing.assert_array_equal(out["picked"]["policy"], out["full"]["policy"][rows, cols])
