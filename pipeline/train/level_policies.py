"""The imitation levels' policies of a pool's positions, computed once and cached on disk.

Training a ``LevelsHead`` (``pipeline/nets/sscore_levels.py``) needs, for many thousands of batches,
the per-level log-likelihood of played moves and of r∞'s random legal moves. The imitation nets
are frozen, so each position goes through them once: this module keeps every level's log p of
every legal move (float16, aligned with the pool's CSR ``legal_index``) and each position's
policy entropy, and then any (row, move) feature is a gather. A cache file per pool
(fingerprinted by the pool's content and the levels) lets a resumed or repeated run skip the
nets, which dominate a run's time on a CPU.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.nets.legal_softmax import legal_mask, masked_logits
from pipeline.nets.sscore_levels import LevelsSScore
from pipeline.train.sscore_batches import PositionPool

logger = logging.getLogger(__name__)

# Positions a batch: a Go rank-conditioned net's per-rank layers hold (B, R, H, 361) floats.
BATCH = {"chess": 1024, "go": 256}


@dataclass
class LevelPolicies:
    """Per level: log p of every legal move of every position, and each position's entropy."""

    logp_legal: np.ndarray  # (L, legal entries) float16, aligned with pool.legal_index
    entropy: np.ndarray  # (L, N) float32
    seconds: float | None = None  # what the nets took; None: read from the cache

    def move_features(self, pool: PositionPool, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """(K, 2L) float32 features (``level_features``' layout) of the move at place ``slots``
        in each row's legal list: its log p under each level, then each level's entropy."""
        logp = self.logp_legal[:, pool.legal_offsets[rows] + slots].astype(np.float32)  # (L, K)
        return np.concatenate([logp, self.entropy[:, rows]]).T

    def played_features(self, pool: PositionPool, rows: np.ndarray | None = None) -> np.ndarray:
        """(K, 2L) features of the played move of ``rows`` (default: every position)."""
        rows = np.arange(len(pool)) if rows is None else rows
        return self.move_features(pool, rows, pool.played_pos[rows].astype(np.int64))


@torch.inference_mode()
def compute_level_policies(model: LevelsSScore, pool: PositionPool) -> LevelPolicies:
    """Run every level over the pool once, in batches of positions on the model's device."""
    device = next(model.parameters()).device
    levels = len(model.picks)
    logp_legal = np.empty((levels, int(pool.legal_offsets[-1])), dtype=np.float16)
    entropy = np.empty((levels, len(pool)), dtype=np.float32)
    t0 = time.perf_counter()
    step = BATCH[pool.game]
    for start in range(0, len(pool), step):
        stop = min(start + step, len(pool))
        # chess (b, 112, 8, 8); Go (b, 22, 19, 19) and (b, 19)
        inputs = [torch.from_numpy(pool.planes[start:stop]).to(device).float()]
        if pool.global_ is not None:
            inputs.append(torch.from_numpy(pool.global_[start:stop]).to(device))
        a, b = int(pool.legal_offsets[start]), int(pool.legal_offsets[stop])
        row = np.repeat(np.arange(stop - start), np.diff(pool.legal_offsets[start : stop + 1]))
        move = pool.legal_index[a:b].astype(np.int64)
        legal = None
        if model.legal:  # the softmax over each position's legal moves (LevelsHeadConfig)
            rows = np.arange(start, stop)
            legal = legal_mask(pool.legal_offsets, pool.legal_index, rows, pool.policy_size)
            legal = legal.to(device)
        for li, logits in enumerate(model.policies(*inputs)):
            logits = logits.float() if legal is None else masked_logits(logits.float(), legal)
            logp = torch.log_softmax(logits, dim=1).cpu()  # (b, 1858 | 362)
            entropy[li, start:stop] = -(logp.exp() * logp).sum(dim=1).numpy()
            logp_legal[li, a:b] = logp.numpy()[row, move]
    seconds = time.perf_counter() - t0
    logger.info("policies of %d levels for %d positions in %.0f s", levels, len(pool), seconds)
    return LevelPolicies(logp_legal, entropy, seconds)


def pool_fingerprint(pool: PositionPool, levels: dict[str, str], softmax: str = "whole") -> str:
    """Hex digest of the pool's positions and moves, the levels' names and sha256 in the
    model's order (the cached arrays' rows follow it) and the softmax
    (``LevelsHeadConfig.softmax``; "whole" adds nothing, as before it was a setting)."""
    h = hashlib.blake2b(digest_size=16)
    if softmax != "whole":
        h.update(f"softmax={softmax};".encode())
    for name in levels:
        h.update(f"{name}={levels[name]};".encode())
    for array in (pool.played, pool.legal_index, pool.legal_offsets, pool.instance_offsets,
                  pool.ply, pool.planes[:, :13]):  # fmt: skip
        h.update(np.ascontiguousarray(array).tobytes())
    h.update("\n".join(pool.instance_game_id.tolist()).encode())
    return h.hexdigest()


def cached_level_policies(
    model: LevelsSScore,
    pool: PositionPool,
    levels: dict[str, str],
    cache_dir: Path | None,
    name: str,
) -> LevelPolicies:
    """``compute_level_policies``, kept in ``cache_dir/NAME-FINGERPRINT.npz`` when a cache
    folder is given (``levels``: name → sha256 of the nets the model holds)."""
    if cache_dir is None:
        return compute_level_policies(model, pool)
    path = (
        Path(cache_dir) / f"{name}-{pool_fingerprint(pool, levels, model.head.config.softmax)}.npz"
    )
    if path.is_file():
        with np.load(path) as data:
            logger.info("policies of pool %r from %s", name, path)
            return LevelPolicies(data["logp_legal"], data["entropy"])
    policies = compute_level_policies(model, pool)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, logp_legal=policies.logp_legal, entropy=policies.entropy)
    tmp.replace(path)
    return policies
