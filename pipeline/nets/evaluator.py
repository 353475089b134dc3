"""One evaluation interface over PyTorch, ONNX Runtime and TensorRT, for chess and Go nets.

An :class:`Evaluator` maps named float32 numpy inputs to named float32 numpy outputs, in the
net's own names (contract C4: ``planes`` → ``policy``, ``wdl`` for Lc0 nets; ``spatial``,
``global`` → ``policy``, ``value``, ``misc``, ``ownership`` for KataGo). Feature steps hold an
evaluator and never care which backend runs the net. Large batches are split into chunks of
``max_batch`` rows so memory stays bounded and a TensorRT profile is never exceeded. The errors,
the input check and the chunking are ``pipeline.nets.backend_io``'s, shared with TensorRT's.

Usage::

    from pipeline.nets.evaluator import make_evaluator
    from pipeline.nets.loading import load_net
    evaluate = make_evaluator(load_net("maia-1500"), backend="onnx")
    out = evaluate({"planes": planes})        # planes: (N, 112, 8, 8) float32
    out["policy"].shape                        # (N, 1858)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from pipeline.nets.backend_io import BackendUnavailableError, check_inputs, run_in_chunks
from pipeline.nets.backends import BACKENDS, PRECISIONS

logger = logging.getLogger(__name__)


DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def runs_natively(precision: str, device: str) -> bool:
    """Whether ``device`` has arithmetic for ``precision``, so running at it is not slower
    than FP32. FP16 needs a GPU. BF16 needs a GPU with bfloat16 units or a CPU that multiplies
    bfloat16 in hardware: AVX-512 BF16 (``avx512_bf16``: AMD Zen 4 on, Intel Cooper Lake) or
    AMX (``amx_bf16``: Intel Xeon of the 4th generation on). On this project's AMD EPYC
    (``avx512_bf16``, no AMX) the Go preset's extraction ran 2.72x FP32's rate at BF16
    (``python bench/speed/bench_cpu_precision.py --games 3 --threads 2``, docs/guide/extract.md).
    Elsewhere oneDNN emulates it: KataGo g170 ran at 0.21x FP32's rate capped to AVX2
    (``ONEDNN_MAX_CPU_ISA=AVX2 python bench/speed/bench_cpu_precision.py --games 0``).
    """
    if precision == "fp32":
        return True
    if device.startswith("cuda"):
        return torch.cuda.is_available() and (precision == "fp16" or torch.cuda.is_bf16_supported())
    capabilities = torch.cpu.get_capabilities()
    return precision == "bf16" and any(capabilities.get(k) for k in ("avx512_bf16", "amx_bf16"))


def default_device() -> str:
    """Where the nets run when no device is named: the GPU if there is one."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def runnable_precision(precision: str, device: str | None = None) -> str:
    """``precision`` where ``device`` (default: :func:`default_device`) runs it natively, else
    FP32: how features extracted on a GPU (FP16) or a bfloat16 CPU (BF16) are computed again on a
    machine without that arithmetic, e.g. for ``kibitz estimate`` on a laptop."""
    return precision if runs_natively(precision, device or default_device()) else "fp32"


@runtime_checkable
class Evaluator(Protocol):
    """Runs one net on named float32 arrays with a shared leading batch axis."""

    input_names: tuple[str, ...]
    output_names: tuple[str, ...]

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def _channels_last(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous(memory_format=torch.channels_last) if tensor.dim() == 4 else tensor


# The smallest batch a CUDA-graph evaluator pads to: below it a replay costs about the same.
GRAPH_MIN_BATCH = 256


def graph_batch(rows: int, max_batch: int) -> int:
    """The fixed batch ``rows`` (≤ ``max_batch``) run at under CUDA-graph replay: the smallest
    of ``max_batch``, ``max_batch // 2``, … (not below :data:`GRAPH_MIN_BATCH`) that holds them.

    A captured graph replays one shape, so every batch is padded to one of a few sizes: a part's
    short last batch wastes under half of one batch, and a net records at most
    log2(max_batch / 256) + 1 graphs.

    >>> [graph_batch(n, 4096) for n in (4096, 4000, 2048, 1500, 300, 1)]
    [4096, 4096, 2048, 2048, 512, 256]
    """
    size = max_batch
    while size // 2 >= max(rows, GRAPH_MIN_BATCH):
        size //= 2
    return size


def pad_rows(tensor: torch.Tensor, size: int) -> torch.Tensor:
    """``tensor`` with its last row repeated up to ``size`` rows: a real position, so the
    padding rows compute finite values (all-zero KataGo inputs have an empty board mask)."""
    missing = size - tensor.shape[0]
    if missing == 0:
        return tensor
    return torch.cat([tensor, tensor[-1:].expand(missing, *tensor.shape[1:])])


class TorchEvaluator:
    """Runs the torch module itself: eval mode, inference mode, fixed thread count.

    Convolution weights and 4-D inputs are kept channels-last (NHWC): oneDNN's NHWC kernels run
    these small 8×8 / 19×19 boards 1.4-1.6× faster than NCHW on CPU (measured on a Maia net,
    batch 256, one thread), with outputs identical across thread counts and batch splits.
    ``num_threads`` sets torch's intra-op threads for the process (torch has one pool);
    Ray actors pass the CPUs they were given. Results are deterministic for a given
    batch split: the same input rows give the same outputs run after run.

    On a GPU, ``fp32`` means FP32: PyTorch lets cuDNN and cuBLAS round FP32 to TF32 by default,
    which moved Maia logits by up to 2.6e-2 from lc0's on an H100 (bench/gpu/bench_gpu_nets.py),
    so this evaluator switches TF32 off for the process. ``fp16`` runs weights and activations
    in FP16 (GPU only), ``bf16`` in bfloat16 (GPU, or a CPU with AVX-512 BF16 or AMX:
    :func:`runs_natively`); outputs come back as float32 either way. Inputs may be numpy arrays
    or tensors already on the device.

    ``cuda_graphs`` (with ``compile``, on a GPU) compiles with Inductor's ``reduce-overhead``
    mode: each batch shape's kernels are captured once as a CUDA graph and replayed with one
    launch, which on an H100 ran Maia 1.97x eager FP16 against 1.47x for ``compile`` alone
    (bench/gpu/bench_gpu_engines.py). Batches are padded to :func:`graph_batch` sizes, and outputs
    are copied out of the graph's memory, which the next replay overwrites.
    """

    def __init__(
        self,
        net: nn.Module,
        *,
        device: str = "cpu",
        precision: str = "fp32",
        max_batch: int = 1024,
        num_threads: int | None = None,
        compile: bool = False,
        cuda_graphs: bool = False,
    ) -> None:
        if cuda_graphs and not (compile and device.startswith("cuda")):
            raise BackendUnavailableError(
                f"CUDA graphs replay compiled nets on a GPU: they need compile and a CUDA "
                f"device (got compile={compile}, device {device!r})"
            )
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BackendUnavailableError(f"device {device!r} requested but CUDA is not available")
        if precision == "fp16" and not device.startswith("cuda"):
            raise BackendUnavailableError("fp16 torch evaluation needs a CUDA device")
        if not runs_natively(precision, device):
            logger.warning("%s on %s is emulated here: slower than fp32", precision, device)
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        if device.startswith("cuda") and precision == "fp32":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.device = torch.device(device)
        self.dtype = DTYPES[precision]
        self.net = net.eval().to(
            device=self.device, dtype=self.dtype, memory_format=torch.channels_last
        )
        # dynamic: one compiled graph for every batch size (the last batch of a part is short);
        # under reduce-overhead a CUDA graph is recorded per padded size (graph_batch)
        mode = "reduce-overhead" if cuda_graphs else None
        self.forward = torch.compile(self.net, dynamic=True, mode=mode) if compile else self.net
        self.cuda_graphs = cuda_graphs
        self.input_names = tuple(net.input_names)
        self.output_names = tuple(net.output_names)
        self.max_batch = max_batch

    def run_on_device(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One batch (at most ``max_batch`` rows) in, outputs left on the device in the net's
        dtype, so a caller can reduce them there before anything crosses PCIe."""
        tensors = [
            torch.as_tensor(inputs[name]).to(self.device, self.dtype) for name in self.input_names
        ]
        rows = tensors[0].shape[0]
        if self.cuda_graphs:
            tensors = [pad_rows(t, graph_batch(rows, self.max_batch)) for t in tensors]
            # a new step: the previous replay's outputs were copied out and may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with torch.inference_mode():
            results = self.forward(*map(_channels_last, tensors))
            if isinstance(results, torch.Tensor):  # a one-output net returns its tensor bare
                results = (results,)
            if self.cuda_graphs:
                results = tuple(r[:rows].clone() for r in results)
        return dict(zip(self.output_names, results, strict=True))

    def _run(self, chunk: list) -> list[np.ndarray]:
        outputs = self.run_on_device(dict(zip(self.input_names, chunk, strict=True)))
        return [r.float().cpu().numpy() for r in outputs.values()]

    def __call__(self, inputs: Mapping[str, np.ndarray | torch.Tensor]) -> dict[str, np.ndarray]:
        arrays, batch = check_inputs(inputs, self.input_names)
        return run_in_chunks(arrays, batch, self.max_batch, self.output_names, self._run)


class OnnxEvaluator:
    """Runs the net's cached ONNX export with ONNX Runtime (CPU or CUDA provider).

    Session options favour reproducibility: sequential execution, one inter-op thread,
    a fixed intra-op thread count and ONNX Runtime's deterministic-compute switch.
    """

    def __init__(
        self,
        net: nn.Module,
        *,
        device: str = "cpu",
        precision: str = "fp32",
        cache_dir: Path | None = None,
        max_batch: int = 1024,
        num_threads: int | None = None,
    ) -> None:
        import onnxruntime as ort

        from pipeline.nets.onnx_export import cached_onnx

        if precision != "fp32":
            raise BackendUnavailableError(
                f"the onnx backend runs fp32 only (got {precision!r}); use torch for bf16, "
                "torch or tensorrt for fp16"
            )
        if device.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise BackendUnavailableError(
                    "device 'cuda' requested but this onnxruntime has no CUDAExecutionProvider "
                    "(install onnxruntime-gpu)"
                )
            index = int(device.split(":", 1)[1]) if ":" in device else 0
            providers: list = [("CUDAExecutionProvider", {"device_id": index})]
        else:
            providers = ["CPUExecutionProvider"]
        self.onnx_path, self.fingerprint = cached_onnx(net, cache_dir=cache_dir)
        options = ort.SessionOptions()
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = num_threads or torch.get_num_threads()
        options.use_deterministic_compute = True
        self.session = ort.InferenceSession(str(self.onnx_path), options, providers=providers)
        self.input_names = tuple(net.input_names)
        self.output_names = tuple(net.output_names)
        self.max_batch = max_batch

    def _run(self, chunk: list[np.ndarray]) -> list[np.ndarray]:
        feeds = dict(zip(self.input_names, chunk, strict=True))
        return self.session.run(list(self.output_names), feeds)

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays, batch = check_inputs(inputs, self.input_names)
        return run_in_chunks(arrays, batch, self.max_batch, self.output_names, self._run)


def make_evaluator(
    net: nn.Module,
    *,
    backend: str = "torch",
    device: str = "cpu",
    precision: str = "fp32",
    cache_dir: Path | None = None,
    max_batch: int = 1024,
    num_threads: int | None = None,
    compile: bool = False,
    cuda_graphs: bool = False,
) -> Evaluator:
    """Build the evaluator for ``backend`` ("torch", "onnx" or "tensorrt").

    ``compile`` (torch only) runs the net through ``torch.compile``: Inductor fuses the bias,
    activation, mask and SE arithmetic around cuDNN's convolutions (1.47x Maia, 2.49x KataGo
    b6c96 on an H100, docs/guide/gpu.md), at a compile of seconds when the evaluator first runs.
    ``cache_dir`` holds ONNX exports and TensorRT engines (default
    ``$KIBITZ_HOME/cache``); ``max_batch`` bounds each backend call and is the top of the
    TensorRT optimisation profile.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}, expected one of {BACKENDS!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}, expected one of {PRECISIONS!r}")
    if max_batch < 1:
        raise ValueError(f"max_batch must be positive, got {max_batch!r}")
    if (compile or cuda_graphs) and backend != "torch":
        raise ValueError(f"compile applies to the torch backend, not {backend!r}")
    if backend == "torch":
        return TorchEvaluator(
            net,
            device=device,
            precision=precision,
            max_batch=max_batch,
            num_threads=num_threads,
            compile=compile,
            cuda_graphs=cuda_graphs,
        )
    if backend == "onnx":
        return OnnxEvaluator(
            net,
            device=device,
            precision=precision,
            cache_dir=cache_dir,
            max_batch=max_batch,
            num_threads=num_threads,
        )
    from pipeline.nets.tensorrt_engine import EngineProfile, TensorRTEvaluator

    if not device.startswith("cuda"):
        raise BackendUnavailableError(f"the tensorrt backend needs a CUDA device, got {device!r}")
    if precision == "bf16":
        raise BackendUnavailableError("the tensorrt backend runs fp32 or fp16; use torch for bf16")
    return TensorRTEvaluator(
        net,
        device=device,
        precision=precision,
        cache_dir=cache_dir,
        profile=EngineProfile.for_max_batch(max_batch),
    )
