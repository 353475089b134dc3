"""Read a ``model.kibitz.pt`` file: Kibitz's own trained net, a header and a state dict.

The file is a torch-saved dict ``{"header": {...}, "state_dict": {...}}`` (written by
``pipeline.nets.model_export``) and loads with ``torch.load(weights_only=True)``, so no pickled
code runs. Reading it is kept apart from the exporter, which imports the ONNX exporter, so that
the net loaders (``pipeline.nets.loading``) and the extractors read model files without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pipeline.core.errors import KibitzError


class ModelFileError(KibitzError, ValueError):
    """A Kibitz model file that is unreadable or of another format than asked."""


def read_model_file(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(header, state_dict) of a ``model.kibitz.pt`` file."""
    try:
        saved = torch.load(Path(path), map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError) as exc:
        raise ModelFileError(f"{str(path)!r} is not a readable Kibitz model file: {exc}") from exc
    if not isinstance(saved, dict) or "header" not in saved or "state_dict" not in saved:
        raise ModelFileError(f"{str(path)!r} lacks the header/state_dict of a Kibitz model file")
    return saved["header"], saved["state_dict"]
