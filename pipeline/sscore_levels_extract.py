"""A levels s-score in extraction, computed from the imitation nets' outputs.

A ``kibitz-sscore-levels`` model (``pipeline/sscore_levels.py``) reads, per position, the played
move's log p and the policy entropy under each of its imitation levels, and a small MLP turns
those numbers into the s-score. A chess extraction that names it as a strength net almost always
runs the same nets as its imitation levels (the preset's nine Maia-1 nets): run as a strength
net, the model would put every position through all nine a second time. So when every level's
weights (by sha256) are among the config's imitation nets, extraction instead asks those nets'
policy statistics for the two numbers (``PolicyStats.whole``: the softmax over the whole
policy, as the head was trained) and runs only the head on them: 5,441 parameters against the
nine Maia-1 nets' 7.8 million. Any other levels model (levels not all extracted, other weights)
runs as an ordinary strength net, which loads and checks its levels itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline import model_registry
from pipeline.model_export import read_model_file
from pipeline.sscore_levels import LEVELS_FORMAT, LevelsHead, levels_head

OUTPUT = "policy"  # the imitation jobs' policy output, whose statistics the head reads


@dataclass(frozen=True)
class LevelsOnImitation:
    """A levels model's head and, per level in the head's order, the imitation net (config
    name) whose weights are that level's."""

    head: LevelsHead
    imitation: tuple[str, ...]

    @torch.inference_mode()
    def score(self, outputs: Mapping[str, Mapping[str, np.ndarray]]) -> np.ndarray:
        """(N,) float32 s-scores from the imitation jobs' ``policy.whole_*`` statistics, each
        (N, 1), laid out as ``sscore_levels.level_features``: log p per level, then entropy."""
        stats = [outputs[name] for name in self.imitation]
        columns = [s[f"{OUTPUT}.whole_logprior"][:, 0] for s in stats]
        columns += [s[f"{OUTPUT}.whole_entropy"][:, 0] for s in stats]
        features = torch.from_numpy(np.stack(columns, axis=1).astype(np.float32))  # (N, 2L)
        return self.head(features)[:, 0].numpy()


def read_levels_model(model: str) -> tuple[LevelsHead, dict[str, str]] | None:
    """The head of a levels model (registry name, verified, or ``.kibitz.pt`` path) and the
    sha256 of the level weights it was trained on; None for a net of any other format."""
    if Path(model).is_file():  # model_registry.load_net's rule: an existing file is a path
        path = Path(model)
        if not path.name.endswith(".kibitz.pt"):
            return None
    else:
        if model_registry.find_entry(model).format != LEVELS_FORMAT:
            return None
        path = model_registry.resolve(model).file
    header, state = read_model_file(path)
    if header.get("format") != LEVELS_FORMAT:
        return None
    return levels_head(header, state), dict(header["net"]["level_sha256"])


def levels_on_imitation(model: str, imitation: Mapping[str, str]) -> LevelsOnImitation | None:
    """``model`` as a head on the imitation nets when it is a levels model whose every level's
    weights are one of ``imitation`` (config name → sha256 of its weights); None otherwise."""
    found = read_levels_model(model)
    if found is None:
        return None
    head, trained = found
    by_sha = {sha: name for name, sha in reversed(list(imitation.items()))}  # first name wins
    names = [by_sha.get(trained.get(level, "")) for level in head.config.levels]
    if None in names:
        return None
    return LevelsOnImitation(head, tuple(names))
