"""What every evaluator backend shares: its two errors, the input check and chunked runs.

``pipeline.nets.evaluator`` (PyTorch, ONNX Runtime, and ``make_evaluator``, which picks the
backend) and ``pipeline.nets.tensorrt_engine`` (TensorRT) both validate named inputs the same way,
split big batches into ``max_batch`` chunks the same way, and raise the same errors. These live
here, below both, so the TensorRT module does not import the evaluator that builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from pipeline.core.errors import KibitzError


class EvaluatorInputError(ValueError):
    """The inputs given to an evaluator do not match the net's named inputs."""


class BackendUnavailableError(KibitzError, RuntimeError):
    """The requested backend or device is not available on this machine."""


def check_inputs(
    inputs: Mapping[str, np.ndarray | torch.Tensor], input_names: tuple[str, ...]
) -> tuple[list, int]:
    """The inputs in net order and their common batch size.

    Numpy inputs become contiguous float32 arrays; torch tensors (a net bank that already put
    the batch on the evaluator's GPU) pass through untouched.
    """
    missing = [name for name in input_names if name not in inputs]
    extra = [name for name in inputs if name not in input_names]
    if missing or extra:
        raise EvaluatorInputError(
            f"net takes inputs {input_names!r}; missing {missing!r}, unexpected {extra!r}"
        )
    arrays = [
        inputs[name]
        if isinstance(inputs[name], torch.Tensor)
        else np.ascontiguousarray(inputs[name], dtype=np.float32)
        for name in input_names
    ]
    sizes = {a.shape[0] if a.ndim else -1 for a in arrays}
    if len(sizes) != 1 or -1 in sizes:
        shapes = {name: a.shape for name, a in zip(input_names, arrays, strict=True)}
        raise EvaluatorInputError(f"inputs need one shared batch axis, got shapes {shapes!r}")
    return arrays, sizes.pop()


def run_in_chunks(
    arrays: list[np.ndarray],
    batch: int,
    max_batch: int,
    output_names: tuple[str, ...],
    run_chunk: Callable[[list[np.ndarray]], Sequence[np.ndarray]],
) -> dict[str, np.ndarray]:
    """Run ``run_chunk`` over slices of at most ``max_batch`` rows and stitch the outputs."""
    outputs: list[np.ndarray] | None = None
    for start in range(0, batch, max_batch):
        stop = min(start + max_batch, batch)
        results = run_chunk([a[start:stop] for a in arrays])
        if outputs is None:
            outputs = [np.empty((batch, *r.shape[1:]), dtype=np.float32) for r in results]
        for out, result in zip(outputs, results, strict=True):
            out[start:stop] = result
    if outputs is None:  # empty batch: run one row to learn the output shapes
        results = run_chunk([np.zeros((1, *a.shape[1:]), np.float32) for a in arrays])
        outputs = [np.empty((0, *r.shape[1:]), dtype=np.float32) for r in results]
    return dict(zip(output_names, outputs, strict=True))
