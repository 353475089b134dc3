"""Softmax over a position's legal moves only: the mask from a pool's CSR legal lists.

Kibitz's Go policy trains on the legal moves' softmax, and a levels s-score reads its policies
the same way (``pipeline/nets/sscore_levels.py``); both build (B, policy) masks from the CSR legal
lists of a ``PositionPool`` without a loop over rows.
"""

from __future__ import annotations

import numpy as np
import torch

from pipeline.core.csr import gather_rows


def legal_mask(
    legal_offsets: np.ndarray, legal_index: np.ndarray, rows: np.ndarray, size: int
) -> torch.Tensor:
    """(B, size) bool: the legal moves of ``rows`` from a CSR legal list, without a row loop."""
    moves, counts = gather_rows(legal_offsets, legal_index, rows)
    mask = torch.zeros(len(rows), size, dtype=torch.bool)
    mask[
        torch.from_numpy(np.repeat(np.arange(len(rows)), counts)),
        torch.from_numpy(moves.astype(np.int64)),
    ] = True
    return mask


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logits`` with illegal moves at a large negative value: a softmax of them is over the
    legal moves only (illegal ones get exactly 0 and add nothing to an entropy)."""
    return logits.masked_fill(~mask, -1e9)


def masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the legal moves only (illegal moves get a large negative logit)."""
    return torch.log_softmax(masked_logits(logits, mask), dim=-1)
