"""Net throughput on one NVIDIA GPU: the nine Maia nets and KataGo b6c96 in FP32 and FP16.

Run where a CUDA device exists (``python bench/gpu/bench_gpu_nets.py``, about 4 minutes on an H100).
Everything is measured in one run, medians over ``--repeats``:

1. Correctness on the GPU first, so the speeds below are of nets that give the right answer:
   each Maia net in FP32 and FP16 against lc0's own logits for its 40 reference positions
   (``../shared/reference``), and KataGo in FP32 and FP16 against Kibitz's CPU FP32 outputs,
   which CI checks against KataGo's reference.
2. The GPU's FP16 matmul peak, as the ceiling the nets are compared with.
3. Net only, inputs already on the GPU: one Maia net, all nine Maia nets and KataGo over a
   batch sweep, eager PyTorch and replayed CUDA graphs (positions/s and achieved TFLOP/s).
4. The Kibitz path as the net actor runs it on real games: :class:`pipeline.nets.net_bank.NetBank`
   with the nine Maia nets in FP16, step by step from how it ran before (float planes copied
   once per net, whole policies copied back, the softmax over legal moves on the CPU) to how it
   runs now (bits copied once and unpacked on the GPU, each policy reduced there to the played
   move's prior, the top-1 flag and the likely moves, ``pipeline.nets.policy_stats``), plus the
   PCIe transfer rates that explain the difference.
5. The baseline of the extraction issue, measured in the same run: one game at a time, one
   position per net call (as existing research tooling runs Maia), FP32 on the same GPU; and
   the ratio of each path to it.

TensorRT needs its builder library (``tensorrt-cu13-libs``), which is published on NVIDIA's
package index only; where it is missing the TensorRT rows are skipped with that reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

# The chess nets' CPU bench (bench/speed) is this one's baseline; tests/ has lc0's reference.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speed"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from bench_chess_nets import GAMES_FILE, MAIA_NETS, median_seconds, naive_played_probs
from lc0_reference import lc0_reference

from pipeline.chess_game.encode import encode_games
from pipeline.chess_game.policy import legal_move_entries, policy_over_legal
from pipeline.core import settings
from pipeline.core.packed_planes import pack_planes
from pipeline.extract.config import load_config
from pipeline.extract.go import GoNetStep, encode_go
from pipeline.ingest.sgf import plan_chunks, read_chunk
from pipeline.nets.check_chess import read_games
from pipeline.nets.katago_net import load_katago_net
from pipeline.nets.katago_outputs import policy_probabilities
from pipeline.nets.loading import load_net
from pipeline.nets.net_bank import Gather, NetBank, NetJob, OneHot
from pipeline.nets.policy_stats import PolicyStats

KATAGO_MODEL = "katago/g170-b6c96-s175395328-d26788732.bin.gz"
KATAGO_INPUTS = "katago-g170-inputs.npz"
EL_NET = "maia-1500"  # pipeline/presets/extract-chess.yaml: the expected-loss net
# (label, dtype, TF32 allowed): PyTorch's default lets cuDNN round FP32 convolutions to TF32
PRECISIONS = (
    ("tf32", torch.float32, True),
    ("fp32", torch.float32, False),
    ("fp16", torch.float16, False),
)


def allow_tf32(allowed: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed


# --------------------------------------------------------------------------- timing


DEVICE = torch.device("cuda")  # main() sets it; "cpu" runs a quick check of this script


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def median_rate(run: Callable[[], object], positions: int, repeats: int) -> float:
    """Positions/s of ``run`` (which handles ``positions``), median of ``repeats`` after warm-up,
    each timed until the GPU has finished."""
    return positions / median_seconds(lambda: (run(), sync()), repeats)


def flops_per_position(net: nn.Module, inputs: Sequence[torch.Tensor]) -> float:
    """FLOPs of one forward for one position, counted by torch's FLOP counter (CPU, FP32)."""
    one = [x[:1].float().cpu() for x in inputs]
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        net.float().cpu()(*one)
    return counter.get_total_flops()


def fp16_matmul_peak(repeats: int) -> float:
    """FP16 matmul TFLOP/s on this GPU (8192^3): the ceiling the nets' rates are compared with."""
    size = 8192 if DEVICE.type == "cuda" else 256
    a = torch.randn(size, size, device=DEVICE, dtype=torch.float16)
    b = torch.randn(size, size, device=DEVICE, dtype=torch.float16)
    rate = median_rate(lambda: [a @ b for _ in range(10)], 10, repeats)
    return rate * 2 * size**3 / 1e12


# --------------------------------------------------------------------------- runners


class Runner:
    """Runs nets on fixed-size device inputs, eagerly or as one replayed CUDA graph.

    A CUDA graph replays every kernel of all the nets with one launch, which removes the
    per-layer Python and launch overhead that dominates small nets at small batches.
    """

    def __init__(
        self,
        nets: Sequence[nn.Module],
        inputs: Sequence[torch.Tensor],
        *,
        graph: bool,
    ) -> None:
        self.nets = nets
        self.inputs = [x.clone() for x in inputs]
        self.graph: torch.cuda.CUDAGraph | None = None
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):  # cuDNN picks its algorithms before capture
                    self._forward()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outputs = self._forward()

    def _forward(self) -> list:
        with torch.no_grad():
            return [net(*self.inputs) for net in self.nets]

    def __call__(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self._forward()


def to_gpu(net: nn.Module, dtype: torch.dtype) -> nn.Module:
    return net.eval().to(device=DEVICE, dtype=dtype, memory_format=torch.channels_last)


def device_batch(arrays: Sequence[np.ndarray], batch: int, dtype: torch.dtype) -> list:
    """Real rows tiled to ``batch`` rows, on the GPU in ``dtype``, 4-D ones channels-last."""
    out = []
    for a in arrays:
        reps = -(-batch // len(a))
        tiled = torch.from_numpy(np.concatenate([a] * reps)[:batch]).to(DEVICE, dtype)
        out.append(tiled.contiguous(memory_format=torch.channels_last) if a.ndim == 4 else tiled)
    return out


def sweep(
    label: str,
    nets: Sequence[nn.Module],
    rows: Sequence[np.ndarray],
    batches: Sequence[int],
    flops: float,
    peak_tflops: float,
    repeats: int,
    *,
    dtype: torch.dtype = torch.float16,
    target_positions: int = 1 << 18,
) -> float:
    """Print eager and CUDA-graph rates over ``batches``; return the best rate."""
    precision = str(dtype).removeprefix("torch.")
    print(f"\n{label} ({len(nets)} net(s), {precision}, inputs on the device)")
    print(f"{'batch':>7} {'eager pos/s':>13} {'graph pos/s':>13} {'TFLOP/s':>8} {'of peak':>8}")
    best = 0.0
    for batch in batches:
        inputs = device_batch(rows, batch, dtype)
        calls = max(1, target_positions // batch) if DEVICE.type == "cuda" else 1
        rates = []
        for graph in (False, True) if DEVICE.type == "cuda" else (False,):
            try:
                runner = Runner(nets, inputs, graph=graph)
            except RuntimeError as exc:  # a net that syncs with the host cannot be captured
                print(f"  CUDA graph capture failed: {str(exc).splitlines()[0]}")
                continue
            rate = median_rate(
                lambda r=runner, k=calls: [r() for _ in range(k)], batch * calls, repeats
            )
            rates.append(rate)
        tflops = max(rates) * flops * len(nets) / 1e12
        best = max(best, *rates)
        graph_rate = f"{rates[1]:>13,.0f}" if len(rates) > 1 else f"{'-':>13}"
        print(
            f"{batch:>7} {rates[0]:>13,.0f} {graph_rate} {tflops:>8.1f} "
            f"{tflops / peak_tflops:>8.1%}"
        )
    return best


# --------------------------------------------------------------------------- correctness


def check_maia(planes: np.ndarray, names: list[str], logits: np.ndarray) -> None:
    print("Maia nets on the device against lc0's logits (40 reference positions each), max|d|:")
    print(f"{'net':>10} " + " ".join(f"{label:>9}" for label, _, _ in PRECISIONS) + "  fp16 top-1")
    for name in MAIA_NETS:
        expected = logits[names.index(name)]
        row = [f"{name:>10}"]
        for _, dtype, tf32 in PRECISIONS:
            allow_tf32(tf32)
            net = to_gpu(load_net(name), dtype)
            (x,) = device_batch([planes], len(planes), dtype)
            with torch.no_grad():
                policy = net(x)[0].float().cpu().numpy()
            row.append(f"{np.abs(policy - expected).max():>9.1e}")
        same_top = (policy.argmax(1) == expected.argmax(1)).mean()
        print(" ".join(row) + f"  {same_top:>10.0%}")
    allow_tf32(False)


def katago_inputs() -> list[np.ndarray]:
    data = np.load(settings.reference_dir() / KATAGO_INPUTS)
    return [data["binaryInputNCHW"].astype(np.float32), data["globalInputNC"].astype(np.float32)]


def check_katago(rows: list[np.ndarray]) -> None:
    cpu = load_katago_net(settings.models_dir() / KATAGO_MODEL).eval()
    with torch.no_grad():
        expected = [o.numpy() for o in cpu(*[torch.from_numpy(r) for r in rows])]
    print("\nKataGo b6c96 on the device against Kibitz's CPU FP32 (28 reference positions):")
    names = cpu.output_names
    print(f"{'precision':>10} " + " ".join(f"{n + ' max|d|':>18}" for n in names))
    for label, dtype, tf32 in PRECISIONS:
        allow_tf32(tf32)
        net = to_gpu(load_katago_net(settings.models_dir() / KATAGO_MODEL), dtype)
        with torch.no_grad():
            got = [o.float().cpu().numpy() for o in net(*device_batch(rows, len(rows[0]), dtype))]
        errors = [np.abs(g - e).max() for g, e in zip(got, expected, strict=True)]
        print(f"{label:>10} " + " ".join(f"{e:>18.2e}" for e in errors))
    allow_tf32(False)


# --------------------------------------------------------------------------- Kibitz path


def kibitz_chess_path(games: int, batch: int, repeats: int) -> float:
    """Nine Maia nets over real games the way the net actor does it; prints each stage."""
    table = read_games(settings.data_dir().joinpath(*GAMES_FILE), max_games=games)
    moves = table.column("moves").to_pylist()
    encode_games(moves[:1])  # compiles the encoder's kernels
    started = time.perf_counter()
    positions = encode_games(moves)
    encode_s = time.perf_counter() - started
    n = len(positions)
    packed = pack_planes(positions.planes)
    precision = "fp16" if DEVICE.type == "cuda" else "fp32"
    bank = NetBank(
        MAIA_NETS, backend="torch", precision=precision, batch_size=batch, device=str(DEVICE)
    )
    jobs = [NetJob(key=name, model=name, outputs=("policy",)) for name in MAIA_NETS]
    reduced = [  # as ChessNetStep asks: the preset's expected-loss net also gives 5 likely moves
        NetJob(name, name, ("policy",), stats={"policy": PolicyStats(
            "legal", "played_index", top_k=5 if name == EL_NET else 0
        )})
        for name in MAIA_NETS
    ]  # fmt: skip
    played = positions.played_policy_index.astype(np.int64)

    def stats_inputs(a: int, b: int) -> dict:
        """Packed planes, each position's legal entries and played move: the net step's."""
        return {
            "planes": packed.rows(a, b),
            "legal": Gather(*legal_move_entries(positions, a, min(b, n))),
            "played_index": played[a:b],
        }

    def per_net_copies() -> None:
        """How the bank ran before: float planes unpacked on the CPU, copied once per net."""
        for a in range(0, n, batch):
            planes = packed.unpack(a, a + batch)
            for evaluate in bank.evaluators.values():
                evaluate({"planes": planes})

    def whole_policies_path() -> dict:
        out = bank.run(jobs, lambda a, b: {"planes": packed.rows(a, b)}, n)
        return {name: policy_over_legal(out[name]["policy"], positions) for name in MAIA_NETS}

    paths = {
        "float planes copied per net (before)": per_net_copies,
        "float planes copied once per batch": lambda: bank.run(
            jobs, lambda a, b: {"planes": packed.unpack(a, b)}, n
        ),
        "bits copied once, unpacked on the GPU": lambda: bank.run(
            jobs, lambda a, b: {"planes": packed.rows(a, b)}, n
        ),
        "+ whole policies back, softmax over legal moves on the CPU": whole_policies_path,
        "+ policy statistics on the GPU instead = extraction's net step": lambda: bank.run(
            reduced, stats_inputs, n
        ),
    }
    rates = {label: median_rate(run, n, repeats) for label, run in paths.items()}
    slow = whole_policies_path()
    fast = bank.run(reduced, stats_inputs, n)
    for name in MAIA_NETS:
        np.testing.assert_allclose(fast[name]["policy.prior"][:, 0], slow[name].played_prob, 1e-6)
        same_top = fast[name]["policy.top1"][:, 0] == slow[name].top1_is_played
        assert same_top.mean() > 0.999, (name, same_top.mean())  # FP16 ties may differ
    unpack_rate = median_rate(
        lambda: [packed.unpack(a, a + batch) for a in range(0, n, batch)], n, repeats
    )
    print(f"\nKibitz path, nine Maia nets {precision}, {len(moves)} real games, {n} positions,")
    print(f"batch {batch} (positions/s):")
    print(f"  encode (one CPU process)                  {n / encode_s:>12,.0f}")
    print(f"  unpack bits on the CPU (one process)      {unpack_rate:>12,.0f}")
    for label, rate in rates.items():
        print(f"  NetBank, {label:<64} {rate:>10,.0f}")
    print("  (the statistics' played-move priors equal the whole-policy path's within 1e-6)")
    return rates["+ policy statistics on the GPU instead = extraction's net step"]


def kibitz_go_path(games: int, repeats: int) -> None:
    """The Go net step on real Fox games with the GPU preset's nets (KataGo g170, the eleven
    ranks of kibitz-go-policy, the s-score net), as extraction runs it: policies reduced on the
    GPU (``GoNetStep``), against the same nets' whole outputs copied back and reduced with
    numpy, as the step did before."""
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "extract-go-gpu.yaml")
    if DEVICE.type != "cuda":  # --device cpu checks the path: FP16 needs CUDA
        config = dataclasses.replace(config, precision="fp32", batch_sizes={"torch": 256})
    split = settings.data_dir() / "go" / "fox-selected" / "candidating"
    chunk = plan_chunks(sorted(split.glob("*.sgf"))[:1], games_per_chunk=games)[0]
    work = encode_go(read_chunk(chunk).games.slice(0, games), config)  # a file is one chunk
    n = len(work.positions.game_index)
    step = GoNetStep(config, device=str(DEVICE))
    pos = work.positions

    def whole(job: NetJob) -> NetJob:
        """The job without statistics; KataGo's passes keep all four heads, as before."""
        names = step.bank.evaluators[job.model].output_names
        outputs = names if "ownership" in names and "policy" in job.outputs else job.outputs
        return dataclasses.replace(job, outputs=tuple(outputs), stats={})

    before = [whole(job) for job in step.jobs.values()]

    def whole_outputs() -> None:
        played = pos.played_index.astype(np.int64)

        def source(a: int, b: int) -> dict:
            return {
                "spatial": work.spatial.rows(a, b),
                "global": work.global_[a:b],
                "played": OneHot(played[a:b], 362),
            }

        out = step.bank.run(before, source, n)
        for net in config.imitation_nets:  # one softmax per imitation level, as before
            key, channel = step.imitation[net.name]
            logits = out[key]["policy"]
            policy_probabilities(logits if logits.shape[1] < 3 else logits[:, channel], pos.legal)

    rates = {
        "whole outputs back, softmax per level in numpy (before)": median_rate(
            whole_outputs, n, repeats
        ),
        "policies reduced where the nets ran = GoNetStep (now)": median_rate(
            lambda: step(work), n, repeats
        ),
    }
    print(f"\nKibitz Go net step, {len(config.imitation_nets)} imitation levels + s-score + lead,")
    print(f"{config.precision}, batch {config.batch_size}, {games} real Fox games, {n} positions:")
    for label, rate in rates.items():
        print(f"  {label:<60} {rate:>10,.0f} positions/s")
    first, last = rates.values()
    print(f"  ratio {last / first:.2f}x")


def transfer_rates(planes: np.ndarray, batch: int, repeats: int) -> None:
    """PCIe cost per position of what the net actor moves: float planes in, policies out."""
    rows = np.ascontiguousarray(np.resize(planes, (batch, *planes.shape[1:])))
    packed = pack_planes(rows)
    pinned = torch.from_numpy(rows).pin_memory() if DEVICE.type == "cuda" else None
    policy = torch.zeros((batch, 1858), device=DEVICE)
    runs = {
        "float32 planes, host to device (pageable)": lambda: torch.from_numpy(rows).to(DEVICE),
        "bit-packed planes, host to device": lambda: torch.from_numpy(packed.bits).to(DEVICE),
        "float32 policy (1858), device to host": lambda: policy.cpu(),
    }
    if pinned is not None:
        runs["float32 planes, host to device (pinned)"] = lambda: pinned.to(DEVICE)
    print(f"\ntransfers, batch {batch} (positions/s):")
    for label, run in runs.items():
        print(f"  {label:<44} {median_rate(run, batch, repeats):>14,.0f}")


def baseline_rate(games: int, limit: int) -> float:
    """One game at a time, one position per call, FP32 on the GPU: positions/s for one net."""
    table = read_games(settings.data_dir().joinpath(*GAMES_FILE), max_games=games)
    moves = table.column("moves").to_pylist()
    net = OnDevice(to_gpu(load_net("maia-1500"), torch.float32))
    naive_played_probs(net, moves, 10)  # warm-up
    started = time.perf_counter()
    probs = naive_played_probs(net, moves, limit)
    return len(probs) / (time.perf_counter() - started)


class OnDevice(nn.Module):
    """A GPU net called with CPU tensors, as a per-position script calls it."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.no_grad():
            return tuple(o.float().cpu() for o in self.net(planes.to(DEVICE)))


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="256,1024,4096,16384")
    parser.add_argument("--go-batches", default="64,256,1024,4096")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--games", type=int, default=200, help="real games for the Kibitz path")
    parser.add_argument("--bank-batch", type=int, default=4096)
    parser.add_argument("--go-games", type=int, default=100, help="real Fox games, Go path")
    parser.add_argument("--baseline-positions", type=int, default=500)
    parser.add_argument(
        "--device", default="cuda", help="cpu checks this script quickly (tiny batches, no graphs)"
    )
    args = parser.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs an NVIDIA GPU (or --device cpu to check it)")
        return 0
    torch.backends.cudnn.benchmark = True
    name = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "CPU"
    print(
        f"{name}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
        f"{len(os.sched_getaffinity(0))} CPU cores"
    )
    if importlib.util.find_spec("tensorrt") is None:
        print("tensorrt not installed: no TensorRT rows (its builder is on NVIDIA's index only)")

    lc0 = lc0_reference()
    planes = lc0.planes
    check_maia(planes, lc0.nets, lc0.logits)
    go_rows = katago_inputs()
    check_katago(go_rows)

    peak = fp16_matmul_peak(args.repeats)
    print(f"\nFP16 matmul peak: {peak:.1f} TFLOP/s")
    batches = [int(b) for b in args.batches.split(",")]
    maia = [to_gpu(load_net(name), torch.float16) for name in MAIA_NETS]
    maia_flops = flops_per_position(load_net(MAIA_NETS[0]), [torch.from_numpy(planes)])
    print(f"Maia: {maia_flops / 1e6:.1f} MFLOP/position")
    one = sweep("one Maia net", maia[:1], [planes], batches, maia_flops, peak, args.repeats)
    nine = sweep(
        "nine Maia nets",
        maia,
        [planes],
        batches,
        maia_flops,
        peak,
        args.repeats,
        target_positions=1 << 16,
    )
    katago_cpu = load_katago_net(settings.models_dir() / KATAGO_MODEL)
    go_flops = flops_per_position(katago_cpu, [torch.from_numpy(r) for r in go_rows])
    print(f"\nKataGo b6c96: {go_flops / 1e6:.1f} MFLOP/position")
    go_batches = [int(b) for b in args.go_batches.split(",")]
    go_best = {}
    for label, dtype, tf32 in PRECISIONS:
        allow_tf32(tf32)
        net = to_gpu(load_katago_net(settings.models_dir() / KATAGO_MODEL), dtype)
        go_best[label] = sweep(
            f"KataGo b6c96, {label}", [net], go_rows, go_batches, go_flops, peak, args.repeats,
            dtype=dtype, target_positions=1 << 14,
        )  # fmt: skip
    allow_tf32(False)

    bank = kibitz_chess_path(args.games, args.bank_batch, args.repeats)
    kibitz_go_path(args.go_games, args.repeats)
    transfer_rates(planes, args.bank_batch, args.repeats)
    base = baseline_rate(args.games, args.baseline_positions)
    print(f"\nbaseline: one position per call, maia-1500 FP32 on the GPU: {base:,.0f} positions/s")
    print(f"  = {base / 9:,.1f} positions/s through nine nets")
    print("ratios to the baseline (positions with all nine Maia priors per second):")
    print(f"  Kibitz net step, FP16              {bank / (base / 9):>10,.0f}x")
    print(f"  nine nets alone, CUDA graph, FP16  {nine / (base / 9):>10,.0f}x")
    print(f"one Maia net alone, CUDA graph, FP16: {one:,.0f} positions/s")
    print(
        "KataGo b6c96 alone, best batch: "
        + ", ".join(f"{label} {rate:,.0f}" for label, rate in go_best.items())
        + " positions/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
