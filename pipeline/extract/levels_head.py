"""A levels s-score in extraction, computed from the imitation nets' outputs.

A ``kibitz-sscore-levels`` model (``pipeline/nets/sscore_levels.py``) reads, per position, the played
move's log p and the policy entropy under each of its imitation levels, and a small MLP turns
those numbers into the s-score. An extraction that names it as a strength net almost always
runs the same nets as its imitation levels (chess: the preset's nine Maia-1 nets, among its ten
levels; Go: Kibitz's rank-conditioned policy at the preset's eleven ranks): run as a strength net, the model would
put every position through them a second time. So when every level is among the config's
imitation nets (same weights by sha256 and, for a rank-conditioned net, the same rank),
extraction instead asks those nets' policy statistics for the two numbers, under the softmax
the head was trained with (``PolicyStats.whole``: the whole policy, chess;
``PolicyStats.entropy`` with the legal moves' ``logprior``: Go), and runs only the head on them:
5,441 parameters against the nine Maia-1 nets' 7.8 million. Any other levels model (levels not
all extracted, other weights) runs as an ordinary strength net, which loads and checks its
levels itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.extract.config import ExtractConfig
from pipeline.nets import registry as model_registry
from pipeline.nets.formats import LEVELS_FORMAT
from pipeline.nets.kibitz_model_file import read_model_file
from pipeline.nets.sscore_levels import LevelsHead, level_identity, levels_head

# The per-position statistics (pipeline.nets.policy_stats) a head reads under its softmax.
STATS = {"whole": ("whole_logprior", "whole_entropy"), "legal": ("logprior", "entropy")}


@dataclass(frozen=True)
class LevelsOnImitation:
    """A levels model's head and, per level in the head's order, the imitation net (config
    name) whose weights (and rank) are that level's."""

    head: LevelsHead
    imitation: tuple[str, ...]

    @property
    def stats(self) -> dict[str, bool]:
        """The ``PolicyStats`` flags the imitation jobs need for this head."""
        return {"whole": True} if self.head.config.softmax == "whole" else {"entropy": True}

    @torch.inference_mode()
    def score(self, stat: Callable[[str, str], np.ndarray]) -> np.ndarray:
        """(N,) float32 s-scores from ``stat(imitation name, statistic)`` (N,) arrays of the
        imitation jobs' policy statistics, laid out as ``sscore_levels.level_features``: log p
        per level, then entropy."""
        logprior, entropy = STATS[self.head.config.softmax]
        columns = [stat(name, logprior) for name in self.imitation]
        columns += [stat(name, entropy) for name in self.imitation]
        features = torch.from_numpy(np.stack(columns, axis=1).astype(np.float32))  # (N, 2L)
        return self.head(features)[:, 0].numpy()


def read_levels_model(model: str) -> tuple[LevelsHead, dict[str, str]] | None:
    """The head of a levels model (registry name, verified, or ``.kibitz.pt`` path) and the
    sha256 of the level weights it was trained on; None for a net of any other format."""
    if Path(model).is_file():  # loading.load_net's rule: an existing file is a path
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


def imitation_identity(model: str, profile: str | None) -> str:
    """An imitation net's ``level_identity``: its weights' sha256, with its rank profile."""
    level = model if profile is None else f"{model}@{profile}"
    return level_identity(level, model_registry.model_sha256(model))


def levels_on_imitation(model: str, imitation: Mapping[str, str]) -> LevelsOnImitation | None:
    """``model`` as a head on the imitation nets when it is a levels model whose every level is
    one of ``imitation`` (config name → ``imitation_identity``); None otherwise."""
    found = read_levels_model(model)
    if found is None:
        return None
    head, trained = found
    by_identity = {ident: name for name, ident in reversed(list(imitation.items()))}  # first wins
    names = [
        by_identity.get(level_identity(level, trained.get(level, "")))
        for level in head.config.levels
    ]
    if None in names:
        return None
    return LevelsOnImitation(head, tuple(names))


def heads_on_imitation(config: ExtractConfig) -> dict[str, LevelsOnImitation]:
    """Strength net name → its head on the config's imitation nets, for each strength net that
    is a levels model whose levels are all extracted (the rest run as strength nets)."""
    imitation = {
        net.name: imitation_identity(net.model, net.profile) for net in config.imitation_nets
    }
    found = {net.name: levels_on_imitation(net.model, imitation) for net in config.strength_nets}
    return {name: on for name, on in found.items() if on is not None}
