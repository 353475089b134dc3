"""lc0's reference for the nine Maia nets (``../shared/reference``): its own input planes and raw
logits for 40 real Lichess positions, shared by the net, evaluator and GPU tests and benchmarks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from pipeline.core import settings


@dataclass(frozen=True)
class Lc0Reference:
    planes: np.ndarray  # (40, 112, 8, 8) float32, lc0's own input planes
    keys: list[str]  # "site#ply" of each row
    nets: list[str]  # net names, the rows of ``logits``
    logits: np.ndarray  # (9, 40, 1858) lc0's raw policy logits


def decode_planes(planes: list) -> np.ndarray:
    """lc0's [mask (decimal string), value] per plane → (112, 8, 8), bit = rank * 8 + file."""
    masks = np.array([int(mask) for mask, _ in planes], dtype=np.uint64)
    values = np.array([value for _, value in planes], dtype=np.float32)
    bits = (masks[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    return (bits.astype(np.float32) * values[:, None]).reshape(112, 8, 8)


def lc0_reference() -> Lc0Reference:
    """The reference planes in the order of the logits file's positions."""
    ref = settings.reference_dir()
    planes_json = json.loads((ref / "maia-lc0-input-planes.json").read_text())
    logits = np.load(ref / "maia-lc0-logits1858.npz")
    keys = [f"{s}#{p}" for s, p in zip(logits["game_site"], logits["ply"], strict=True)]
    return Lc0Reference(
        planes=np.stack([decode_planes(planes_json[k]) for k in keys]),
        keys=keys,
        nets=[str(n) for n in logits["nets"]],
        logits=logits["logits"],
    )
