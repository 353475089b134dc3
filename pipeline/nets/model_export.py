"""Export Kibitz's own trained nets into the model registry.

A trained net is one file ``model.kibitz.pt``: a torch-saved dict ``{"header": {...},
"state_dict": {...}}`` whose header (plain JSON types) says the registry ``format``
("kibitz-sscore" | "kibitz-go-policy" | "kibitz-sscore-levels": then the file holds only the
score head, and the imitation nets it reads come from the registry by name and sha256;
``pipeline.nets.formats``), the net's shape config and the training facts; it loads with
``torch.load(weights_only=True)`` (``pipeline.nets.kibitz_model_file``), so no pickled code runs. Beside it the exporter writes ``model.onnx`` (the same net, or the score
head of a levels model, for ONNX Runtime / TensorRT), ``model.yaml`` (the header and both files'
sha256) and, given a card text, ``MODEL_CARD.md``.

:func:`register_model` copies those files into ``ROOT/NAME/`` and adds or replaces ``NAME`` in
``ROOT/registry.yaml``. ``ROOT`` is a user's models directory (``KIBITZ_MODELS_DIR``, whose
``registry.yaml`` the registry reads) or the repository's ``models/`` folder, where Kibitz
ships its default nets; ``pipeline.nets.registry`` reads both, and ``pipeline.nets.loading``
loads the files back by format.

    python -m pipeline.nets.model_export models/kibitz-sscore-chess/model.kibitz.pt
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from pipeline.nets.formats import KIBITZ_FORMATS
from pipeline.nets.kibitz_model_file import ModelFileError, read_model_file
from pipeline.nets.onnx_export import export_onnx
from pipeline.nets.registry import file_sha256, write_entry

WEIGHTS_NAME = "model.kibitz.pt"
ONNX_NAME = "model.onnx"
HEADER_NAME = "model.yaml"
CARD_NAME = "MODEL_CARD.md"
HEADER_VERSION = 1


@dataclass(frozen=True)
class ExportedModel:
    """Files written by :func:`export_model`."""

    folder: Path
    weights: Path
    onnx: Path
    header: dict[str, Any]
    sha256: str  # of the weights file, what the registry verifies


def export_model(
    net: nn.Module, folder: Path, *, header: dict[str, Any], card: str | None = None
) -> ExportedModel:
    """Write weights (+ header), ONNX, ``model.yaml`` and the card into ``folder``."""
    fmt = header.get("format")
    if fmt not in KIBITZ_FORMATS:
        raise ModelFileError(f"header format must be one of {KIBITZ_FORMATS!r}, got {fmt!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    header = {"header_version": HEADER_VERSION, **header}
    weights = folder / WEIGHTS_NAME
    tmp = weights.with_suffix(".tmp")
    state = {k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()}
    torch.save({"header": header, "state_dict": state}, tmp)
    tmp.replace(weights)
    onnx_path = export_onnx(net, folder / ONNX_NAME)
    onnx_path.chmod(0o644)  # written via mkstemp (0600); shipped files must be readable by all
    sha = file_sha256(weights)
    summary = {**header, "files": {WEIGHTS_NAME: sha, ONNX_NAME: file_sha256(onnx_path)}}
    (folder / HEADER_NAME).write_text(yaml.safe_dump(summary, sort_keys=False), encoding="utf-8")
    if card is not None:
        (folder / CARD_NAME).write_text(card, encoding="utf-8")
    return ExportedModel(folder, weights, onnx_path, header, sha)


def register_model(
    exported: ExportedModel,
    *,
    name: str,
    models_root: Path,
    game: str,
    description: str,
    license: str = "Apache-2.0",
) -> Path:
    """Copy an export into ``models_root/name/`` and add/replace its registry entry."""
    models_root = Path(models_root)
    target = models_root / name
    target.mkdir(parents=True, exist_ok=True)
    for source in (
        exported.weights,
        exported.onnx,
        exported.folder / HEADER_NAME,
        exported.folder / CARD_NAME,
    ):
        if source.is_file() and source.resolve() != (target / source.name).resolve():
            shutil.copy2(source, target / source.name)
    write_entry(
        models_root,
        {
            "name": name,
            "game": game,
            "format": exported.header["format"],
            "path": f"{name}/{WEIGHTS_NAME}",
            "sha256": exported.sha256,
            "license": license,
            "description": description,
        },
    )
    return target / WEIGHTS_NAME


def main(argv: list[str] | None = None) -> int:
    """Print a model file's header."""
    args = sys.argv[1:] if argv is None else argv
    for path in args:
        header, _ = read_model_file(Path(path))
        print(yaml.safe_dump(header, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
