"""Vectorised meta-model sampling equals slow per-sample references; seeds reproduce draws."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pipeline.meta.samples import (
    SamplingError,
    average_rows,
    draw_from_pools,
    floyd_subsets,
    player_samples,
    rank_group_samples,
)


def floyd_reference(size: int, n: int, u: np.ndarray) -> list[int]:
    """Floyd's algorithm for one sample, written the textbook way."""
    chosen: list[int] = []
    for t in range(n):
        j = size - n + t
        r = min(int(u[t] * (j + 1)), j)
        chosen.append(j if r in chosen else r)
    return chosen


def test_floyd_subsets_equals_reference_and_is_distinct():
    rng = np.random.default_rng(7)
    sizes = rng.integers(5, 30, size=200)
    u = rng.random((200, 5))
    fast = floyd_subsets(sizes, 5, u)
    for s in range(200):
        assert fast[s].tolist() == floyd_reference(int(sizes[s]), 5, u[s])
        assert len(set(fast[s].tolist())) == 5
        assert fast[s].min() >= 0 and fast[s].max() < sizes[s]


def test_floyd_subsets_are_uniform():
    # Every element of a pool of 6 is in a 3-subset with probability 1/2.
    rng = np.random.default_rng(1)
    draws = 60_000
    chosen = floyd_subsets(np.full(draws, 6), 3, rng.random((draws, 3)))
    freq = np.bincount(chosen.ravel(), minlength=6) / draws
    np.testing.assert_allclose(freq, 0.5, atol=0.01)
    # and every one of the C(6,3) = 20 subsets appears about 1/20 of the time
    keys = np.sort(chosen, axis=1) @ np.array([36, 6, 1])
    counts = np.unique(keys, return_counts=True)[1]
    assert counts.size == 20
    np.testing.assert_allclose(counts / draws, 1 / 20, atol=0.006)


def test_average_rows_matches_loop_with_missing_values():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 4))
    x[rng.random(x.shape) < 0.2] = np.nan
    x[5, :] = np.nan
    members = rng.integers(0, 40, size=(30, 6))
    members[0] = 5  # a sample of only all-NaN rows: NaN, not 0
    fast = average_rows(x, members)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of an all-NaN column
        slow = np.stack([np.nanmean(x[members[s]], axis=0) for s in range(30)])
    np.testing.assert_allclose(fast, slow, rtol=1e-12, equal_nan=True)
    assert np.isnan(fast[0]).all()


def test_rank_group_samples_draw_within_group_and_reproduce():
    rng = np.random.default_rng(0)
    group = np.repeat(np.arange(4), [10, 25, 7, 12])
    rng.shuffle(group)
    x = np.column_stack([group * 100.0 + np.arange(group.size), np.ones(group.size)])
    a = rank_group_samples(x, group, n=5, draws_per_group=50, rng=np.random.default_rng(42))
    b = rank_group_samples(x, group, n=5, draws_per_group=50, rng=np.random.default_rng(42))
    c = rank_group_samples(x, group, n=5, draws_per_group=50, rng=np.random.default_rng(43))
    np.testing.assert_array_equal(a.members, b.members)
    assert not np.array_equal(a.members, c.members)
    assert len(a) == 200
    np.testing.assert_array_equal(np.bincount(a.label), [50, 50, 50, 50])
    # members come from the sample's group, are distinct, and the features are their mean
    assert np.all(group[a.members] == a.label[:, None])
    assert all(len(set(row)) == 5 for row in a.members.tolist())
    np.testing.assert_allclose(a.features, x[a.members].mean(axis=1))


def test_rank_group_samples_reject_small_group():
    group = np.array([0, 0, 0, 1, 1])
    with pytest.raises(SamplingError, match="pool of 2"):
        rank_group_samples(
            np.zeros((5, 1)), group, n=3, draws_per_group=2, rng=np.random.default_rng(0)
        )


def test_player_samples_use_one_players_instances():
    unit = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
    group = np.array([1, 1, 1, 0, 0, 2, 2, 2, 2, 2])
    x = np.arange(10, dtype=float)[:, None]
    s = player_samples(x, unit, group, n=3, repeats=5, rng=np.random.default_rng(5))
    assert sorted(set(s.unit.tolist())) == [0, 2]  # unit 1 has only 2 instances
    assert len(s) == 10
    assert np.all(unit[s.members] == s.unit[:, None])
    np.testing.assert_array_equal(s.label, np.where(s.unit == 0, 1, 2))
    np.testing.assert_allclose(s.features[:, 0], x[s.members, 0].mean(axis=1))
    # unit 0 has exactly 3 instances: every draw of it is all of them
    assert all(sorted(m) == [0, 1, 2] for m in s.members[s.unit == 0].tolist())


def test_player_samples_reject_mixed_groups():
    with pytest.raises(SamplingError, match="mixes rank groups"):
        player_samples(np.zeros((3, 1)), np.zeros(3), np.array([0, 0, 1]), n=3, repeats=1,
                       rng=np.random.default_rng(0))  # fmt: skip


def test_draw_from_named_pools_keeps_order():
    pools = np.array([10, 10, 30, 30, 30, 20, 20])
    got, members = draw_from_pools(pools, 2, 2, np.random.default_rng(0), pools=np.array([20, 30]))
    assert got.tolist() == [20, 20, 30, 30]
    assert np.all(pools[members] == got[:, None])
    with pytest.raises(SamplingError, match="not all present"):
        draw_from_pools(pools, 1, 1, np.random.default_rng(0), pools=np.array([40]))
