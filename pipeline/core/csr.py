"""Rows of a CSR list (``offsets`` of length N+1 into a flat ``values`` array), gathered without
a loop over rows: pools keep their positions' legal moves this way, and the legal-move masks of
a batch are built from them (``pipeline/train/sscore_batches.py``, ``pipeline/nets/legal_softmax.py``).
"""

from __future__ import annotations

import numpy as np


def gather_rows(
    offsets: np.ndarray, values: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(the values of ``rows`` concatenated in that order, each row's count)."""
    starts = offsets[rows]
    counts = offsets[rows + 1] - starts
    flat = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return values[flat + np.arange(int(counts.sum()))], counts
