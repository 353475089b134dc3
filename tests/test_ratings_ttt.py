"""TrueSkill Through Time: agreement with the ``trueskillthroughtime`` package on real Fox games,
order independence inside a time step, and information flowing backward in time."""

from __future__ import annotations

import math

import numpy as np
import pytest
import trueskillthroughtime as ttt_package
from ratings_real_games import build_games_table

from pipeline.ratings.data import load_games
from pipeline.ratings.ttt import TTTConfig, TTTConfigError, draw_margin, smooth_arrays, smooth_ttt


def _package_history(
    games, config: TTTConfig, p_draw: float
) -> dict[int, dict[int, tuple[float, float]]]:
    composition = [
        [[str(w)], [str(b)]]
        for w, b in zip(games.white.tolist(), games.black.tolist(), strict=True)
    ]
    results = [[1, 0] if s == 1 else ([0, 1] if s == 0 else [0, 0]) for s in games.score.tolist()]
    history = ttt_package.History(
        composition, results, times=games.day.tolist(), p_draw=p_draw,
        mu=config.mu, sigma=config.sigma, beta=config.beta, gamma=config.gamma,
    )  # fmt: skip
    history.convergence(epsilon=config.epsilon, iterations=config.iterations, verbose=False)
    return {
        int(name): {t: (g.mu, g.sigma) for t, g in curve}
        for name, curve in history.learning_curves().items()
    }


def test_agrees_with_package_on_real_games(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The package approximates erfc (1e-7); give it the exact one this module uses.
    monkeypatch.setattr(ttt_package, "erfc", math.erfc)
    games = load_games(build_games_table("fox_by_player", tmp_path_factory.getbasetemp())).head(400)
    assert np.sum(games.score == 0.5) == 1  # one real draw among these games
    # Same schedule, same number of sweeps: the two must agree whether or not converged.
    config = TTTConfig(gamma=0.05, p_draw=0.01, epsilon=1e-12, iterations=4)
    mine = smooth_ttt(games, config)
    ref = _package_history(games, config, p_draw=0.01)
    assert mine.iterations == 4
    got_mu, want_mu, got_sigma, want_sigma = [], [], [], []
    for player, step, mu, sigma in zip(
        mine.node_player, mine.node_step, mine.node_mu, mine.node_sigma, strict=True
    ):
        ref_mu, ref_sigma = ref[int(player)][int(step)]
        got_mu.append(mu)
        want_mu.append(ref_mu)
        got_sigma.append(sigma)
        want_sigma.append(ref_sigma)
    assert len(got_mu) == sum(len(c) for c in ref.values())
    np.testing.assert_allclose(got_mu, want_mu, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got_sigma, want_sigma, rtol=1e-6)


def _small_history(order: list[int]):
    # Two time steps; step 0 has five games among players 0–3, step 1 two games.
    white = np.array([0, 1, 2, 0, 3, 0, 2])
    black = np.array([1, 2, 3, 2, 1, 3, 1])
    score = np.array([1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0])
    day = np.array([0, 0, 0, 0, 0, 1, 1])
    perm = np.r_[order, 5, 6]
    config = TTTConfig(gamma=0.1, p_draw=0.2, epsilon=1e-12, iterations=2000)
    return smooth_arrays(
        white[perm].astype(np.int32), black[perm].astype(np.int32), score[perm],
        day[perm].astype(np.int32), 4, config,
    )  # fmt: skip


def test_order_inside_a_time_step_does_not_matter() -> None:
    a = _small_history([0, 1, 2, 3, 4])
    b = _small_history([4, 2, 0, 3, 1])
    assert a.step <= 1e-12 and b.step <= 1e-12  # both converged
    np.testing.assert_array_equal(a.node_player, b.node_player)
    np.testing.assert_allclose(a.node_mu, b.node_mu, atol=1e-9)
    np.testing.assert_allclose(a.node_sigma, b.node_sigma, atol=1e-9)
    assert np.ptp(a.node_mu) > 0.5  # the games did move the skills


def test_later_win_against_strong_player_raises_earlier_skill() -> None:
    # Day 0: A (0) beats B (1). Days 0–1: C (2) beats D, E, F (3, 4, 5), so C is strong.
    # Day 5: A beats C — or, in the second history, that game is absent.
    base_w = [0, 2, 2, 2, 2, 2]
    base_b = [1, 3, 4, 5, 3, 4]
    base_day = [0, 0, 0, 0, 1, 1]
    config = TTTConfig(gamma=0.05, p_draw=0.0, epsilon=1e-10, iterations=500)

    def skill_of_a_on_day0(extra: bool) -> float:
        w = np.array(base_w + ([0] if extra else []), np.int32)
        b = np.array(base_b + ([2] if extra else []), np.int32)
        s = np.ones(w.size)
        d = np.array(base_day + ([5] if extra else []), np.int32)
        r = smooth_arrays(w, b, s, d, 6, config)
        assert r.step <= 1e-10
        (node,) = np.flatnonzero((r.node_player == 0) & (r.node_step == 0))
        return float(r.node_mu[node])

    without, with_later_win = skill_of_a_on_day0(False), skill_of_a_on_day0(True)
    assert with_later_win > without + 0.5


def test_draw_margin_and_config_errors() -> None:
    # ε = |Φ⁻¹((1 − 0.25)/2)|·√2·β: Φ⁻¹(0.375) = −0.318639…
    assert draw_margin(0.25, 1.0) == pytest.approx(0.3186393639643752 * math.sqrt(2), rel=1e-12)
    assert draw_margin(0.0, 1.0) == 0.0
    with pytest.raises(TTTConfigError, match="p_draw"):
        TTTConfig(p_draw=1.0)
    with pytest.raises(TTTConfigError, match="draws"):
        smooth_arrays(
            np.array([0], np.int32), np.array([1], np.int32), np.array([0.5]),
            np.array([0], np.int32), 2, TTTConfig(p_draw=0.0),
        )  # fmt: skip
