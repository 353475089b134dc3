"""Rounding against cut points (pipeline/meta/decision.py), on hand-made outputs."""

from __future__ import annotations

import numpy as np

from pipeline.meta.decision import apply_cut_points, fit_cut_points, rounding_cut_points
from pipeline.meta.model import round_to_group


def test_cut_points_undo_a_pull_to_the_middle():
    """A regression pulled toward the middle: the groups' outputs sit near 0.7, 1.0 and 1.3, so
    rounding calls all nine samples group 1; the cuts halfway between the groups (0.875 and
    1.125) get all nine right."""
    raw = np.array([0.6, 0.7, 0.8, 0.95, 1.0, 1.05, 1.2, 1.3, 1.4])
    label = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert round_to_group(raw, 3).tolist() == [1] * 9
    cuts = fit_cut_points(raw, label, 3)
    np.testing.assert_allclose(cuts, [0.875, 1.125])
    assert apply_cut_points(raw, cuts).tolist() == label.tolist()


def test_equal_outputs_share_a_group_and_an_empty_group_gets_an_empty_interval():
    # three samples at 0.0 (two of group 0): they go to group 0 together, 2 of 3 right
    raw, label = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 2.0]), np.array([0, 0, 1, 1, 1, 2])
    cuts = fit_cut_points(raw, label, 3)
    assert apply_cut_points(raw, cuts).tolist() == [0, 0, 0, 1, 1, 2]
    np.testing.assert_allclose(cuts, rounding_cut_points(3))  # ties go to rounding's cuts
    # no sample of group 1: both cuts at one place, between the two groups that are there
    raw, label = np.array([0.1, 0.2, 1.9, 2.0]), np.array([0, 0, 2, 2])
    cuts = fit_cut_points(raw, label, 3)
    assert cuts[0] == cuts[1] and 0.2 < cuts[0] < 1.9
    assert apply_cut_points(raw, cuts).tolist() == [0, 0, 2, 2]


def test_the_fitted_cuts_are_the_best_monotone_ones():
    """On small random cases the dynamic programme finds what a search of every monotone
    assignment of the sorted distinct outputs finds."""
    from itertools import combinations_with_replacement

    rng = np.random.default_rng(0)
    for _ in range(30):
        raw = np.round(rng.normal(1, 1, 9), 1)
        label = rng.integers(0, 3, 9)
        cuts = fit_cut_points(raw, label, 3)
        got = int((apply_cut_points(raw, cuts) == label).sum())
        values = np.unique(raw)
        edges = np.concatenate([[values[0] - 1], (values[1:] + values[:-1]) / 2, [values[-1] + 1]])
        best = max(
            int((apply_cut_points(raw, np.array(pair)) == label).sum())
            for pair in combinations_with_replacement(edges, 2)
        )
        assert got == best


def test_the_ordinal_decision_keeps_the_ends_a_regression_pulls_in():
    """Three groups on one feature with noise: group g's feature is g + N(0, 0.35), and the
    end groups hold a sixth of the samples each. The ordinal models' P(group > k) fall in k for
    every sample, the median group is right where the feature is clearly inside a group, and
    the ends are named as often as the middle."""
    from pipeline.meta.decision import fit_ordinal, ordinal_above, ordinal_groups

    rng = np.random.default_rng(0)
    label = rng.choice(3, 6_000, p=[1 / 6, 2 / 3, 1 / 6])
    x = (label + rng.normal(0, 0.35, label.size))[:, None]
    params = {"verbose": -1, "num_threads": 1, "deterministic": True, "seed": 0}
    models = fit_ordinal(x, label, 3, params)
    assert len(models) == 2
    probe = np.array([[-0.5], [0.0], [1.0], [2.0], [2.5]])
    above = ordinal_above(models, probe)
    assert np.all(np.diff(above, axis=1) <= 0)
    assert ordinal_groups(above).tolist() == [0, 0, 1, 2, 2]
    assert ordinal_groups(np.array([[0.5, 0.49], [0.49, 0.1], [0.9, 0.6]])).tolist() == [1, 0, 2]
    predicted = ordinal_groups(ordinal_above(models, x))
    right = [np.mean(predicted[label == g] == g) for g in range(3)]
    assert min(right) > 0.8  # every group, the ends included, named right 4 times in 5


def test_one_extended_ordinal_model_never_crosses_and_names_every_group():
    """The same three groups as above, one model with the threshold k as a feature (Li & Lin
    2007): its rows are the samples once per k (k-major), its P(group > k) is non-increasing in
    k for every input by the monotone constraint, and it names the groups as the G − 1
    models do."""
    from pipeline.meta.decision import (
        extended_above,
        extended_rows,
        fit_extended_ordinal,
        ordinal_groups,
    )

    rows = extended_rows(np.array([[7.0, 8.0], [9.0, 10.0]]), 3)
    assert rows.tolist() == [[7, 8, 0], [9, 10, 0], [7, 8, 1], [9, 10, 1]]
    rng = np.random.default_rng(0)
    label = rng.choice(3, 6_000, p=[1 / 6, 2 / 3, 1 / 6])
    x = (label + rng.normal(0, 0.35, label.size))[:, None]
    params = {"verbose": -1, "num_threads": 1, "deterministic": True, "seed": 0}
    model = fit_extended_ordinal(x, label, 3, params)
    grid = np.linspace(-2, 4, 601)[:, None]
    assert np.all(np.diff(extended_above(model, grid, 3), axis=1) <= 0)
    probe = np.array([[-0.5], [0.0], [1.0], [2.0], [2.5]])
    assert ordinal_groups(extended_above(model, probe, 3)).tolist() == [0, 0, 1, 2, 2]
    predicted = ordinal_groups(extended_above(model, x, 3))
    assert min(np.mean(predicted[label == g] == g) for g in range(3)) > 0.8
