"""The estimate after each game and the games needed (pipeline/meta/progressive.py), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.meta.progressive import further_games, games_for_confidence, running_means


def test_running_means_ignore_missing_values():
    features = np.array([[1.0, np.nan], [3.0, 4.0], [np.nan, 8.0]])
    np.testing.assert_allclose(
        running_means(features), [[1.0, np.nan], [2.0, 4.0], [2.0, 6.0]], equal_nan=True
    )


@pytest.mark.parametrize(
    ("ns", "accuracies", "confidence", "expected"),
    [
        ([1, 5, 10, 15, 20], [0.4, 0.7, 0.85, 0.9, 0.95], 0.9, 15.0),  # reached at a trained n
        # 8.33: between n=5 and n=10
        ([1, 5, 10, 15, 20], [0.4, 0.7, 0.85, 0.9, 0.95], 0.8, 5 + 5 * 0.1 / 0.15),
        ([1, 5, 10], [0.95, 0.97, 0.99], 0.9, 1.0),  # the smallest n already reaches it
        ([1, 5, 10], [0.5, 0.6, 0.7], 0.9, None),  # never reached
        ([1, 5, 10], [0.5, None, 0.9], 0.7, 5.5),  # an unmeasured n is skipped
    ],
)
def test_games_for_confidence_interpolates_between_trained_n(ns, accuracies, confidence, expected):
    got = games_for_confidence(ns, accuracies, confidence)
    assert got == (None if expected is None else pytest.approx(expected))


def test_further_games_round_up_and_stop_at_zero():
    assert further_games(8.33, 3) == 6  # game 9 is the first at the target
    assert further_games(5.0, 5) == 0 and further_games(5.0, 12) == 0
    assert further_games(None, 3) is None
