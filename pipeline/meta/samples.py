"""Samples for the meta-models: the mean features of n player instances (Kuboki et al. 2025).

A sample averages the feature rows of ``n`` distinct player instances (one player's moves in one
game, a row of ``player_instance_features``), drawn in one of two ways:

- rank-group sampling (:func:`rank_group_samples`): ``n`` instances of ANY players of one rank
  group; the paper evaluates with 500 draws per group;
- player-specific sampling (:func:`player_samples`): ``n`` of ONE player's own instances,
  repeated (5 times in the paper) for every player with at least ``n`` instances. A "player"
  here is a (player, rank group) pair so that each sample has exactly one true label.

Everything is vectorised over samples: the subsets come from Floyd's algorithm run on all
samples at once (a Python loop over the ``n`` positions of a subset, never over samples or
rows), and the averaging is one sparse-matrix product (samples × instances) @ (instances ×
features) that skips missing values (NaN) per feature.

    rng = np.random.default_rng(0)
    s = rank_group_samples(X, group_index, n=5, draws_per_group=500, rng=rng)
    s.features.shape      # (500 * groups, F)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from pipeline.core.errors import KibitzError


class SamplingError(KibitzError, ValueError):
    """A draw of more instances than a pool holds, or inconsistent inputs."""


@dataclass(frozen=True)
class Samples:
    """Averaged samples with their labels and the instance rows each one used."""

    features: np.ndarray  # (S, F) float64, NaN where none of the sample's instances has a value
    label: np.ndarray  # (S,) int64 rank group index of the sample
    members: np.ndarray  # (S, n) int64 rows of the instance table
    unit: np.ndarray  # (S,) int64 the pool drawn from: rank group or player unit
    # (S,) mean rated strength of the members (NaN: none rated); None until
    # :meth:`with_strength` gives the instances' strengths (the strength intervals' target).
    strength: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.label.shape[0])

    def with_strength(self, strength: np.ndarray | None) -> Samples:
        """These samples with the mean of ``strength`` (N,) over each one's members."""
        if strength is None:
            return self
        mean = average_rows(np.asarray(strength, np.float64)[:, None], self.members)[:, 0]
        return replace(self, strength=mean)


def floyd_subsets(pool_sizes: np.ndarray, n: int, u: np.ndarray) -> np.ndarray:
    """``n`` distinct indices in ``[0, pool_sizes[s])`` per sample, uniform over subsets.

    Floyd's algorithm: for t = 0..n−1 let j = N − n + t, draw r uniform in [0, j]; take r
    unless it was taken already, then take j. ``u`` (S, n) holds the uniforms in [0, 1), so a
    slow reference given the same ``u`` yields the same subsets (tests/test_meta_samples.py).
    """
    sizes = np.asarray(pool_sizes, dtype=np.int64)  # (S,)
    if n < 1:
        raise SamplingError(f"n must be ≥ 1, got {n!r}")
    if sizes.size and sizes.min() < n:
        raise SamplingError(f"cannot draw {n} distinct instances from a pool of {sizes.min()}")
    chosen = np.empty((sizes.shape[0], n), dtype=np.int64)  # (S, n)
    for t in range(n):
        j = sizes - n + t  # (S,)
        r = np.minimum((u[:, t] * (j + 1)).astype(np.int64), j)  # (S,) uniform in [0, j]
        taken = (chosen[:, :t] == r[:, None]).any(axis=1)  # (S,)
        chosen[:, t] = np.where(taken, j, r)
    return chosen


def average_rows(features: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Mean of ``features[members[s]]`` per sample, ignoring NaN per feature; (S, F).

    One sparse product instead of gathering (S, n, F): memory stays O(S·F) for any n.
    """
    samples, n = members.shape
    indptr = np.arange(0, samples * n + 1, n, dtype=np.int64)
    ones = np.ones(samples * n, dtype=np.float64)
    pick = sp.csr_matrix((ones, members.ravel(), indptr), shape=(samples, features.shape[0]))
    finite = np.isfinite(features)  # (N, F)
    sums = pick @ np.where(finite, features, 0.0)  # (S, F)
    counts = pick @ finite.astype(np.float64)  # (S, F)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, np.nan)


def _pools(pool_of_row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows grouped by pool: (pool ids, start offset of each pool, its size, rows in pool order)."""
    order = np.argsort(pool_of_row, kind="stable")  # (N,)
    pools, starts, sizes = np.unique(pool_of_row[order], return_index=True, return_counts=True)
    return pools, starts, sizes, order


def draw_from_pools(
    pool_of_row: np.ndarray,
    draws_per_pool: np.ndarray | int,
    n: int,
    rng: np.random.Generator,
    *,
    pools: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``draws_per_pool`` subsets of ``n`` distinct rows from each pool; (pool per sample, members).

    ``pools`` restricts and orders the pools drawn from (default: every pool, ascending).
    """
    all_pools, starts, sizes, order = _pools(np.asarray(pool_of_row))
    if pools is None:
        pick = np.arange(all_pools.shape[0])
    else:
        pick = np.searchsorted(all_pools, pools)
        if np.any(pick >= all_pools.shape[0]) or np.any(
            all_pools[np.minimum(pick, len(all_pools) - 1)] != pools
        ):
            raise SamplingError(f"pools {pools!r} are not all present in the rows")
    draws = np.broadcast_to(np.asarray(draws_per_pool, dtype=np.int64), pick.shape)
    sample_pool = np.repeat(pick, draws)  # (S,) index into all_pools
    u = rng.random((sample_pool.shape[0], n))  # (S, n)
    local = floyd_subsets(sizes[sample_pool], n, u)  # (S, n)
    members = order[starts[sample_pool][:, None] + local]  # (S, n) rows of the instance table
    return all_pools[sample_pool], members


def rank_group_samples(
    features: np.ndarray,
    group: np.ndarray,
    *,
    n: int,
    draws_per_group: int,
    rng: np.random.Generator,
) -> Samples:
    """Rank-group sampling: ``draws_per_group`` means of ``n`` instances of each group.

    ``group`` (N,) is each instance's rank group index. A group smaller than ``n`` cannot be
    sampled without repeating an instance and raises :class:`SamplingError`.
    """
    group = np.asarray(group, dtype=np.int64)
    sample_group, members = draw_from_pools(group, draws_per_group, n, rng)
    return Samples(average_rows(features, members), sample_group, members, sample_group)


def player_samples(
    features: np.ndarray,
    unit: np.ndarray,
    group: np.ndarray,
    *,
    n: int,
    repeats: int,
    rng: np.random.Generator,
) -> Samples:
    """Player-specific sampling: ``repeats`` means of ``n`` of one unit's own instances.

    ``unit`` (N,) identifies the (player, rank group) of each instance; units with fewer than
    ``n`` instances are left out. Every instance of a unit must carry the same ``group``.
    """
    unit = np.asarray(unit, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    units, counts = np.unique(unit, return_counts=True)
    eligible = units[counts >= n]
    if eligible.size == 0:
        empty = np.empty((0, n), dtype=np.int64)
        return Samples(
            np.empty((0, features.shape[1])), np.empty(0, np.int64), empty, np.empty(0, np.int64)
        )
    sample_unit, members = draw_from_pools(unit, repeats, n, rng, pools=eligible)
    labels = group[members]  # (S, n)
    if np.any(labels != labels[:, :1]):
        raise SamplingError("a player unit mixes rank groups; build units per (player, rank group)")
    return Samples(average_rows(features, members), labels[:, 0], members, sample_unit)
