"""The PyTorch engines without TensorRT, against eager FP16: one Maia net and KataGo b6c96.

    python bench/gpu/bench_gpu_engines.py                 # on a CUDA GPU, about 2 minutes
    python bench/gpu/bench_gpu_engines.py --device cpu --batch 64 --repeats 1   # checks it runs

Issue #30 asks for the fastest engine PyTorch offers without TensorRT, each reported against
eager FP16 (``TorchEvaluator``'s path: FP16 weights, channels-last inputs). Each row runs the same
net on the same real positions (lc0's and KataGo's reference inputs, tiled to ``--batch``,
already on the device) and prints positions/s (median of ``--repeats``), the ratio to eager
FP16, the time it took to build (compile, capture), and how far its first output (the policy
logits) is from FP32 eager with TF32 off, with the share of positions whose top move agrees.

Batch norm is already folded into the convolutions when Kibitz loads Maia (``Lc0Net`` has no
batch-norm layers); ``torch.compile`` (Inductor) fuses the remaining bias, activation, mask and
SE arithmetic into Triton kernels around cuDNN's convolutions, and ``reduce-overhead`` replays
the result as CUDA graphs. TensorRT's builder cannot be installed on the machines measured
(docs/guide/gpu.md), so it has no row.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import bench_gpu_nets
import numpy as np
import torch
from bench_gpu_nets import (
    KATAGO_MODEL,
    Runner,
    allow_tf32,
    device_batch,
    katago_inputs,
    median_rate,
)
from lc0_reference import lc0_reference  # tests/, put on the path by bench_gpu_nets
from torch import nn

from pipeline.core import settings
from pipeline.nets.katago_net import load_katago_net
from pipeline.nets.loading import load_net

MAIA_NET = "maia-1500"


@dataclass(frozen=True)
class Engine:
    """One way of running a net: number format, memory layout, and how it is executed."""

    label: str
    dtype: torch.dtype
    channels_last: bool = True
    run: str = "eager"  # eager | graph | compile mode ("default", "reduce-overhead", ...)


BASELINE = Engine("eager fp16, channels-last (Kibitz's TorchEvaluator)", torch.float16)
ENGINES = (
    BASELINE,
    Engine("eager fp16, NCHW", torch.float16, channels_last=False),
    Engine("eager bf16, channels-last", torch.bfloat16),
    Engine("CUDA graph fp16 (one replay per batch)", torch.float16, run="graph"),
    Engine("torch.compile fp16 (Inductor, default)", torch.float16, run="default"),
    Engine(
        "torch.compile fp16 + CUDA graphs (reduce-overhead)", torch.float16, run="reduce-overhead"
    ),
    Engine(
        "torch.compile bf16 + CUDA graphs (reduce-overhead)", torch.bfloat16, run="reduce-overhead"
    ),
)
AUTOTUNE = Engine("torch.compile fp16, max-autotune", torch.float16, run="max-autotune")


def layout(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return x.contiguous(memory_format=fmt) if x.dim() == 4 else x


def build(
    engine: Engine, make_net: Callable[[], nn.Module], rows: list[np.ndarray], batch: int
) -> tuple[Callable[[], object], Callable[[], torch.Tensor], float]:
    """(timed call, first output of one call, seconds to build incl. the first calls)."""
    device = bench_gpu_nets.DEVICE
    fmt = torch.channels_last if engine.channels_last else torch.contiguous_format
    net = make_net().eval().to(device=device, dtype=engine.dtype, memory_format=fmt)
    inputs = [layout(x, engine.channels_last) for x in device_batch(rows, batch, engine.dtype)]
    started = time.perf_counter()
    if engine.run == "graph":
        runner = Runner([net], inputs, graph=True)
        runner()
        built = time.perf_counter() - started
        return runner, lambda: (runner(), runner.outputs[0][0].clone())[1], built
    forward = net if engine.run == "eager" else torch.compile(net, mode=engine.run)

    def call() -> torch.Tensor:
        with torch.inference_mode():
            if engine.run == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            return forward(*inputs)[0]

    for _ in range(3):  # compiles, autotunes, records its graphs
        call()
    bench_gpu_nets.sync()
    return call, lambda: call().clone(), time.perf_counter() - started


def measure(
    title: str,
    make_net: Callable[[], nn.Module],
    rows: list[np.ndarray],
    engines: tuple[Engine, ...],
    batch: int,
    repeats: int,
) -> dict[str, float]:
    """Print one table; return positions/s by engine label."""
    device = bench_gpu_nets.DEVICE
    allow_tf32(False)
    reference = make_net().eval().to(device)
    with torch.inference_mode():
        expected = reference(*[x.float() for x in device_batch(rows, batch, torch.float32)])[0]
    expected = expected.float().cpu()
    calls = max(1, (1 << 16) // batch) if device.type == "cuda" else 1
    print(f"\n{title}, batch {batch}, {calls} batches a timing, median of {repeats}")
    print(f"{'engine':<54} {'pos/s':>11} {'vs eager fp16':>14} {'build s':>8} "
          f"{'max|d| fp32':>12} {'top-1 =':>8}")  # fmt: skip
    rates: dict[str, float] = {}
    for engine in engines:
        try:
            call, first, built = build(engine, make_net, rows, batch)
        except Exception as exc:  # an engine that fails to build gets a row saying why
            print(f"{engine.label:<54} failed to build: {str(exc).splitlines()[0][:120]}")
            continue
        rate = median_rate(lambda c=call, k=calls: [c() for _ in range(k)], batch * calls,
                           repeats)  # fmt: skip
        got = first().float().cpu()
        diff = (got - expected).abs().max().item()
        top = (got.argmax(1) == expected.argmax(1)).float().mean().item()
        rates[engine.label] = rate
        ratio = rate / rates[BASELINE.label] if BASELINE.label in rates else float("nan")
        print(f"{engine.label:<54} {rate:>11,.0f} {ratio:>13.2f}x {built:>8.1f} "
              f"{diff:>12.1e} {top:>8.1%}")  # fmt: skip
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--autotune", action="store_true", help="add max-autotune (minutes)")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    bench_gpu_nets.DEVICE = torch.device(args.device)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs an NVIDIA GPU (or --device cpu to check it)")
        return 0
    torch.backends.cudnn.benchmark = True
    if args.device == "cuda":
        print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}")
    engines = ENGINES + ((AUTOTUNE,) if args.autotune else ())
    if args.device != "cuda":  # FP16 convolutions and CUDA graphs are GPU-only
        engines = tuple(e for e in engines if e.dtype != torch.float16 and e.run == "eager")
    maia_rows = [lc0_reference().planes]
    measure(f"one Maia net ({MAIA_NET})", lambda: load_net(MAIA_NET), maia_rows, engines,
            args.batch, args.repeats)  # fmt: skip
    katago = settings.models_dir() / KATAGO_MODEL
    measure("KataGo g170 b6c96", lambda: load_katago_net(katago), katago_inputs(), engines,
            args.batch, args.repeats)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
