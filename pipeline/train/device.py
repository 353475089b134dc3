"""Where a Kibitz training run computes: ``--device auto|cpu|cuda|cuda:N``.

The trainers keep their data (the position pools) in host memory as uint8 planes and move each
batch to the device as uint8, so only a quarter of the float32 bytes cross the bus and the
conversion to float runs where the net is. The nets' weights live on the device during training
and are moved back to the CPU before export, so every exported model and checkpoint loads on a
machine without a GPU.

    python -c "from pipeline.train.device import resolve_device, device_label; \
        print(device_label(resolve_device('auto')))"
"""

from __future__ import annotations

import torch
from torch import nn

from pipeline.core.errors import KibitzError


class DeviceError(KibitzError, ValueError):
    """A training device that does not exist on this machine."""


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
