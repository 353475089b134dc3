"""Where a Kibitz training run computes: ``--device auto|cpu|cuda|cuda:N``, and at what precision
(``--precision fp32|bf16``).

The trainers keep their data (the position pools) in host memory as uint8 planes and move each
batch to the device as uint8, so only a quarter of the float32 bytes cross the bus and the
conversion to float runs where the net is. The nets' weights live on the device during training
and are moved back to the CPU before export, so every exported model and checkpoint loads on a
machine without a GPU.

    python -c "from pipeline.train.device import resolve_device, device_label; \
        print(device_label(resolve_device('auto')))"
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch
from torch import nn

from pipeline.core.errors import KibitzError

# fp32: everything in float32. bf16: each step's forward under bfloat16 autocast.
PRECISIONS = ("fp32", "bf16")


class DeviceError(KibitzError, ValueError):
    """A training device that does not exist on this machine, or an unknown precision."""


def resolve_device(name: str) -> torch.device:
    """``auto``: the first CUDA GPU when there is one, else the CPU; otherwise the named device,
    which must exist (a run asked for a GPU must not silently train on the CPU)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise DeviceError(f"--device {name!r}: {error}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {name!r}: this machine has no CUDA GPU (torch sees none)")
        if (device.index or 0) >= torch.cuda.device_count():
            raise DeviceError(
                f"--device {name!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s)"
            )
    elif device.type != "cpu":
        raise DeviceError(f"--device {name!r}: only cpu and cuda are supported")
    return device


def device_label(device: torch.device) -> str:
    """What a model card and MLflow record: ``cpu`` or ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if device.type != "cuda":
        return device.type
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def module_device(net: nn.Module) -> torch.device:
    """The device of a net's weights: where its inputs must be placed."""
    return next(net.parameters()).device


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a :class:`DeviceError`."""
    if precision not in PRECISIONS:
        raise DeviceError(f"--precision {precision!r}: one of {', '.join(PRECISIONS)}")
    return precision


def step_autocast(device: torch.device, precision: str) -> AbstractContextManager[None]:
    """The context a training step's forward runs in.

    ``bf16`` runs the convolutions and matrix products in bfloat16 (``torch.autocast``): they are
    where the time goes, and bfloat16 halves their bytes and runs natively on GPUs and on CPUs
    with AVX-512 BF16 or AMX (:func:`pipeline.nets.evaluator.runs_natively`). bfloat16 keeps
    float32's exponent range, so unlike float16 the gradients need no loss scaling; the weights,
    the optimiser and the backward's accumulation stay float32, and the trainers compute their
    losses in float32 (a log-softmax over 362 moves loses digits in bfloat16's 8-bit mantissa).
    ``fp32``: nothing changes.
    """
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
