"""KataGo net evaluation speed: positions/s of the real g170-b6c96 net through Kibitz's Evaluator,
PyTorch vs ONNX Runtime on this CPU over a batch sweep, against a baseline measured in the same
run: one position per call on PyTorch (how a GTP engine loop or a naive feature script queries
a net). With CUDA (and TensorRT installed) the same sweep also runs on the GPU: PyTorch FP32,
TensorRT FP32 and TensorRT FP16 (trunk FP16, heads FP32 as KataGo does). On a CPU that
multiplies bfloat16 natively (AVX-512 BF16 or AMX) a PyTorch BF16 row is added: how a GPU config
runs here with ``--precision bf16``, and which batch to give it (``kibitz extract --batch-size``,
docs/guide/extract.md). The "compiled" rows run the net through ``torch.compile`` (``kibitz extract
--compile``): Inductor fuses each batch norm's scale, shift and activation into one pass, which
eager PyTorch makes three passes over memory; the compile (tens of seconds) is the warm-up call,
untimed.

Inputs are KataGo's own input tensors for real Fox positions (``../shared/reference``), tiled
to each batch size. Prints the median over ``--repeats`` timed calls (after one warm-up call)
and the ratio to the baseline.

Run::

    python bench/speed/bench_go_net.py [--batches 1,8,32,128,256] [--repeats 5] [--threads N]
    python bench/speed/bench_go_net.py --batches 256,1024,4096 --repeats 3 --threads 2  # a GPU batch on a CPU
    python bench/speed/bench_go_net.py --batches 256 --threads 2 --profile   # + where eager time goes
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from pipeline.core import settings
from pipeline.nets.evaluator import make_evaluator, runs_natively
from pipeline.nets.katago_net import load_katago_net

MODEL = "katago/g170-b6c96-s175395328-d26788732.bin.gz"
INPUTS = "katago-g170-inputs.npz"
BASELINE_POSITIONS = 64  # positions evaluated one call each for the baseline


def reference_batch(batch: int) -> dict[str, np.ndarray]:
    data = np.load(settings.reference_dir() / INPUTS)
    reps = -(-batch // len(data["ids"]))
    spatial = np.tile(data["binaryInputNCHW"], (reps, 1, 1, 1))[:batch]  # (B, 22, 19, 19)
    global_ = np.tile(data["globalInputNC"], (reps, 1))[:batch]  # (B, 19)
    return {"spatial": np.ascontiguousarray(spatial), "global": np.ascontiguousarray(global_)}


def median_rate(
    evaluate: Callable[[dict[str, np.ndarray]], dict], inputs: dict[str, np.ndarray], repeats: int
) -> float:
    """Rows per second of ``evaluate(inputs)``: the median of ``repeats`` timed calls after one
    warm-up call (ONNX Runtime / TensorRT allocate on the first)."""
    evaluate(inputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        evaluate(inputs)
        times.append(time.perf_counter() - start)
    return len(next(iter(inputs.values()))) / statistics.median(times)


def positions_per_second(
    evaluate: Callable[[dict[str, np.ndarray]], dict], batch: int, repeats: int
) -> float:
    return median_rate(evaluate, reference_batch(batch), repeats)


def baseline_one_per_call(evaluate: Callable[[dict[str, np.ndarray]], dict]) -> float:
    inputs = reference_batch(BASELINE_POSITIONS)
    one = [{k: v[i : i + 1] for k, v in inputs.items()} for i in range(BASELINE_POSITIONS)]
    evaluate(one[0])
    start = time.perf_counter()
    for single in one:
        evaluate(single)
    return BASELINE_POSITIONS / (time.perf_counter() - start)


def profile_eager(net: torch.nn.Module, batch: int) -> None:
    """Self CPU time per operator of one eager call (the CPU's native precision, after a
    warm-up): where an uncompiled net spends it, the case for ``--compile`` on a CPU."""
    from torch.profiler import ProfilerActivity, profile

    precision = "bf16" if runs_natively("bf16", "cpu") else "fp32"
    evaluate = make_evaluator(net, backend="torch", precision=precision)
    inputs = reference_batch(batch)
    evaluate(inputs)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        evaluate(inputs)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    print(f"eager {precision}, batch {batch}: self CPU time by operator")
    for event in events[:8]:
        print(f"  {event.key:<28}{100 * event.self_cpu_time_total / total:>6.1f} %")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,128,256", help="comma-separated sizes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (CPU)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print where one eager CPU call's time goes (torch.profiler, the first batch size)",
    )
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    net = load_katago_net(settings.models_dir() / MODEL)
    if args.profile:
        profile_eager(net, batches[0])
    cache = Path(tempfile.mkdtemp(prefix="kibitz-bench-go-"))

    backends: list[tuple[str, dict]] = [
        ("torch cpu fp32", {"backend": "torch"}),
        ("torch cpu fp32 compiled", {"backend": "torch", "compile": True}),
        ("onnxruntime cpu fp32", {"backend": "onnx", "cache_dir": cache}),
    ]
    if runs_natively("bf16", "cpu"):  # a bfloat16 CPU: the number format of a GPU config run here
        backends.append(("torch cpu bf16", {"backend": "torch", "precision": "bf16"}))
        backends.append(
            ("torch cpu bf16 compiled", {"backend": "torch", "precision": "bf16", "compile": True})
        )
    if torch.cuda.is_available():
        backends.append(("torch cuda fp32", {"backend": "torch", "device": "cuda"}))
        try:
            import tensorrt  # noqa: F401
        except ImportError:
            print("tensorrt not installed: GPU rows are PyTorch only")
        else:
            for precision in ("fp32", "fp16"):
                backends.append(
                    (
                        f"tensorrt cuda {precision}",
                        {
                            "backend": "tensorrt",
                            "device": "cuda",
                            "precision": precision,
                            "cache_dir": cache,
                        },
                    )
                )
    else:
        print("no CUDA device: GPU / TensorRT rows skipped")

    print(
        f"net {net.meta.name} (model v{net.meta.version}), torch threads {torch.get_num_threads()}"
    )
    baseline = baseline_one_per_call(make_evaluator(net, backend="torch"))
    print(f"baseline: PyTorch CPU, one position per call: {baseline:,.1f} positions/s\n")
    print(f"{'backend':<24}" + "".join(f"{'batch ' + str(b):>14}" for b in batches))
    for label, options in backends:
        evaluate = make_evaluator(load_katago_net(settings.models_dir() / MODEL), **options)
        rates = [positions_per_second(evaluate, b, args.repeats) for b in batches]
        print(f"{label:<24}" + "".join(f"{r:>14,.0f}" for r in rates))
        print(f"{'  x baseline':<24}" + "".join(f"{r / baseline:>14.2f}" for r in rates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
