"""Chen et al.'s Bradley-Terry ranking loss and its pair-order metric, for every s-score trainer.

Both ``kibitz train sscore`` (``pipeline/train/sscore.py``: a whole net) and ``kibitz train
sscore-levels`` (``pipeline/train/sscore_levels.py``: a head on frozen imitation nets) score G
groups × R ranks of positions and train on the same loss of the ranks' mean scores β (G, R),
weakest → strongest; the formula is spelled out in ``pipeline/train/sscore.py``. Kept below both
trainers so neither imports the other.
"""

from __future__ import annotations

import numpy as np
import torch


def bradley_terry_loss(beta: torch.Tensor) -> torch.Tensor:
    """Mean over groups and ranks of −log softmax(β_1..β_i)[i]; β: (G, R) weakest → strongest."""
    return (torch.logcumsumexp(beta, dim=1) - beta).mean()


def ordered_pair_share(beta: np.ndarray) -> float:
    """Share of rank pairs i < j (within each group) with β_i < β_j; β: (G, R)."""
    i, j = np.triu_indices(beta.shape[1], k=1)
    return float((beta[:, i] < beta[:, j]).mean())
