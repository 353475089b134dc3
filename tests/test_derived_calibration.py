"""The feature-space derivation of one player's widths (bench/accuracy/derived_calibration.py
``--through-features``): the covariance of the offset a player's games share, recovered on a
hand-made set with a known offset, a rating slope within the band and a group's own level that
must not count; and the widening a linear model shows under that offset, by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "accuracy"))  # the bench scripts import each other

from derived_calibration import offset_error_ratio, shared_feature_covariance  # noqa: E402

from pipeline.meta.samples import Samples  # noqa: E402


def test_shared_feature_covariance_recovers_a_known_offset():
    # 3,000 players, 3 games each; two features: offset sd (0.6, 0.3) correlated 0.5, game
    # noise sd 1; feature 0 also rises 0.01 a rating point within the band, group 1 sits +5
    rng = np.random.default_rng(0)
    true = np.array([[0.36, 0.09], [0.09, 0.09]])
    player = np.repeat(np.arange(3_000), 3)
    group = player % 2
    rating = rng.uniform(-100, 100, 3_000)[player] + 1_000 * group
    offset = rng.multivariate_normal([0, 0], true, 3_000)[player]
    x = offset + rng.normal(0, 1, (player.size, 2)) + 5.0 * group[:, None]
    x[:, 0] += 0.01 * (rating - 1_000 * group)
    x[::50, 1] = np.nan  # a missing value counts as on the group's line
    cov, players = shared_feature_covariance(x, player, group, rating)
    assert players == 3_000
    np.testing.assert_allclose(cov, true, atol=0.04)
    assert np.all(np.linalg.eigvalsh(cov) >= -1e-12)


def test_offset_error_ratio_of_a_linear_model_by_hand():
    # prediction = feature 0; errors N(0, 1) without offset; an offset of variance 3 at n = 4
    # adds (1 − 1/4)·3 = 2.25: the |error| quantiles widen by √3.25 at every level
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (200_000, 2))
    samples = Samples(x, np.zeros(len(x), np.int64), np.zeros((len(x), 1), np.int64),
                      np.zeros(len(x), np.int64), strength=np.zeros(len(x)))  # fmt: skip
    cov = np.diag([3.0, 7.0])  # the model reads feature 0 only: feature 1's offset is ignored
    ratio = offset_error_ratio(lambda z: z[:, 0], samples, cov, 4, [0.8, 0.95], rng)
    assert ratio[0.8] == pytest.approx(np.sqrt(3.25), rel=0.01)
    assert ratio[0.95] == pytest.approx(np.sqrt(3.25), rel=0.01)
