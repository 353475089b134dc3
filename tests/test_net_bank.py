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

from pipeline.chess_game.encode import encode_games
from pipeline.chess_game.policy import legal_move_entries, policy_over_legal
from pipeline.core import settings
from pipeline.core.packed_planes import concat_packed, pack_planes
from pipeline.nets.check_chess import read_games
from pipeline.nets.net_bank import Gather, NetBank, NetJob, unpack_on_device
from pipeline.nets.policy_stats import PolicyStats, policy_stats

STATS = ("prior", "logprior", "top1", "likely_index", "likely_prior")

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


def test_packs_of_batches_concatenate_exactly_when_their_float_channels_differ(
    chess_planes: np.ndarray,
) -> None:
    """The first plies of a game have rule-50 counts 0 and 1 only, so a batch of them packs
    channel 109 as bits; concatenated with a later batch both take the union layout."""
    early = np.flatnonzero(chess_planes[:, 109].max(axis=(1, 2)) <= 1)[:3]
    late = np.flatnonzero(chess_planes[:, 109].max(axis=(1, 2)) >= 2)[:4]
    a, b = pack_planes(chess_planes[early]), pack_planes(chess_planes[late])
    assert list(a.float_channels) == [] and list(b.float_channels) == [109]
    both = concat_packed([a, b, b])
    assert list(both.float_channels) == [109] and both.shape[0] == 11
    np.testing.assert_array_equal(both.unpack(), chess_planes[np.concatenate([early, late, late])])
    with pytest.raises(ValueError, match=r"channels \[109\] are not 0 / 1"):
        pack_planes(chess_planes[late], float_channels=np.array([], np.int32))


def test_bits_are_numpys_packbits_most_significant_first(
    chess_planes: np.ndarray, go_planes: np.ndarray
) -> None:
    """The compiled packer writes what ``np.packbits`` wrote before it: by hand, channels
    [1, 0, 1, 1, 0] and [0, 0, 0, 0, 1] are the bits 10110000 01000000 (-0.0 is a 0); a NaN
    makes its channel float; and on real planes the bytes are numpy's."""
    planes = np.array(
        [[[[1, 0, 1, 1, -0.0]], [[0, 0, 0, 0, 1]], [[np.nan, 0, 0, 0, 0]]]], np.float32
    )
    packed = pack_planes(planes)  # (1, 3, 1, 5)
    assert packed.bits.tolist() == [[0b10110000, 0b01000000]]
    assert packed.binary_channels.tolist() == [0, 1] and packed.float_channels.tolist() == [2]
    assert np.isnan(packed.unpack()[0, 2, 0, 0]) and packed.unpack()[0, 0, 0, 4] == 0
    for real in (chess_planes, go_planes):
        ours = pack_planes(real)
        n = len(real)
        flat = real.reshape(n, real.shape[1], -1)[:, ours.binary_channels].reshape(n, -1)
        np.testing.assert_array_equal(ours.bits, np.packbits(flat.astype(np.uint8), axis=1))
    assert pack_planes(go_planes[:0]).bits.shape == (0, 22 * 361 // 8 + 1)


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


def _chess_positions():
    games = read_games(settings.data_dir().joinpath(*GAMES), max_games=4)
    return encode_games(games.column("moves").to_pylist())


def _stats_source(pos, packed):
    played = pos.played_policy_index.astype(np.int64)

    def source(a: int, b: int) -> dict:
        return {
            "planes": packed.rows(a, b),
            "legal": Gather(*legal_move_entries(pos, a, min(b, len(pos)))),
            "played_index": played[a:b],
        }

    return source


def test_policy_stats_equal_the_softmax_over_legal_moves_of_the_whole_policy() -> None:
    """The bank's reduced policy (pipeline.nets.policy_stats) against the numpy path over the copied
    whole policy (chess_policy.policy_over_legal) on real Lichess positions; the value head
    passes through untouched."""
    pos = _chess_positions()
    packed = pack_planes(pos.planes)
    bank = NetBank(["maia-1300"], backend="torch", precision="fp32", batch_size=16, threads=1)
    plain = NetJob("full", "maia-1300", ("policy", "wdl"))
    stats = PolicyStats("legal", "played_index", top_k=4)
    reduced = NetJob("stats", "maia-1300", ("policy", "wdl"), stats={"policy": stats})
    out = bank.run([plain, reduced], _stats_source(pos, packed), len(pos))
    ref = policy_over_legal(out["full"]["policy"], pos)
    got = out["stats"]
    assert sorted(got) == [*sorted(f"policy.{s}" for s in STATS), "wdl"]
    np.testing.assert_allclose(got["policy.prior"][:, 0], ref.played_prob, rtol=1e-6)
    np.testing.assert_allclose(got["policy.logprior"][:, 0], ref.played_logprob, atol=1e-9)
    np.testing.assert_array_equal(got["policy.top1"][:, 0], ref.top1_is_played)
    np.testing.assert_array_equal(got["wdl"], out["full"]["wdl"])
    # likely moves: places in each legal list, by prior (stable), zero prior past the list
    counts = np.diff(pos.legal_offsets)
    for i in (0, 7, len(pos) - 1):
        probs = ref.probs[pos.legal_offsets[i] : pos.legal_offsets[i + 1]]
        order = np.argsort(-probs, kind="stable")[:4]
        k = min(4, counts[i])
        np.testing.assert_array_equal(got["policy.likely_index"][i, 0, :k], order)
        np.testing.assert_allclose(got["policy.likely_prior"][i, 0, :k], probs[order], rtol=1e-6)
        assert (got["policy.likely_prior"][i, 0, k:] == 0).all()


def test_policy_stats_of_channels_with_a_legal_mask_by_hand() -> None:
    """(B, C, P) logits, a bool mask: channels picked in the order asked; ties to the lowest
    index; an illegal move's logit never counts."""
    logits = torch.tensor(
        [[[1.0, 1.0, 0.0, 9.0], [0.0, 2.0, 0.0, 0.0]], [[0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]]]
    )  # (B=2, C=2, P=4)
    legal = torch.tensor([[True, True, True, False], [True, True, False, False]])
    inputs = {"legal": legal, "played": torch.tensor([1, 0])}
    got = policy_stats(logits, PolicyStats("legal", "played", (1, 0), top_k=3), inputs)
    e = np.e
    z0 = 2 * e + 1  # row 0, channel 0: logits 1, 1, 0 (9 is illegal)
    z1 = e**2 + 2  # row 0, channel 1: logits 0, 2, 0
    np.testing.assert_allclose(got["prior"][0], [e**2 / z1, e / z0], rtol=1e-6)
    np.testing.assert_allclose(got["prior"][1], [e**3 / (e**3 + 1), 0.5], rtol=1e-6)
    np.testing.assert_allclose(got["logprior"][1, 1], np.log(0.5), rtol=1e-12)
    # row 0, channel 0: logits 1 and 1 tie → the top move is index 0, not the played 1
    assert got["top1"].tolist() == [[True, False], [True, True]]
    assert got["likely_index"][0, 1].tolist() == [0, 1, 2]  # tie of 0 and 1 → lower index first
    assert got["likely_index"][0, 0].tolist() == [1, 0, 2]
    assert got["likely_prior"][1, 0, 2].item() == 0.0  # only two legal moves in row 1


def test_whole_policy_stats_count_every_entry_by_hand() -> None:
    """``whole``: the played move's log p and the entropy under the softmax over all P entries,
    illegal ones included (what a levels s-score head reads); the legal stats are unchanged."""
    logits = torch.tensor([[1.0, 1.0, 0.0, 9.0], [3.0, 0.0, 0.0, 0.0]])  # (B=2, P=4)
    legal = torch.tensor([[True, True, True, False], [True, True, False, False]])
    inputs = {"legal": legal, "played": torch.tensor([1, 0])}
    got = policy_stats(logits, PolicyStats("legal", "played", whole=True), inputs)
    plain = policy_stats(logits, PolicyStats("legal", "played"), inputs)
    assert set(got) == set(plain) | {"whole_logprior", "whole_entropy"}
    for row, played in enumerate((1, 0)):
        x = logits[row].double().numpy()
        p = np.exp(x) / np.exp(x).sum()
        np.testing.assert_allclose(got["whole_logprior"][row, 0], np.log(p[played]), rtol=1e-6)
        np.testing.assert_allclose(got["whole_entropy"][row, 0], -(p * np.log(p)).sum(), rtol=1e-5)
        np.testing.assert_array_equal(got["logprior"][row], plain["logprior"][row])


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
def test_cuda_policy_stats_equal_the_cpu_ones() -> None:
    """The same FP32 reduction on the GPU as on the CPU, on real positions."""
    pos = _chess_positions()
    packed = pack_planes(pos.planes)
    stats = PolicyStats("legal", "played_index", top_k=5)
    job = NetJob("m", "maia-1600", ("policy",), stats={"policy": stats})
    outs = {}
    for device in ("cpu", "cuda"):
        bank = NetBank(
            ["maia-1600"], backend="torch", precision="fp32", batch_size=32, device=device
        )
        outs[device] = bank.run([job], _stats_source(pos, packed), len(pos))["m"]
    np.testing.assert_allclose(outs["cuda"]["policy.prior"], outs["cpu"]["policy.prior"], atol=1e-5)
    assert (outs["cuda"]["policy.top1"] == outs["cpu"]["policy.top1"]).mean() > 0.99
    same = outs["cuda"]["policy.likely_index"][..., 0] == outs["cpu"]["policy.likely_index"][..., 0]
    assert same.mean() > 0.99
