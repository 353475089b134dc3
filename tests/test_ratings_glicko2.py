"""Glicko-2: Glickman's worked example, idle-period RD growth, and agreement with the ``glicko2``
package (its f(x) bug corrected) on the real Fox by-player games."""

from __future__ import annotations

import itertools
import math

import glicko2
import numpy as np
import pytest
from ratings_real_games import build_games_table

from pipeline.ratings.data import load_games
from pipeline.ratings.glicko2 import (
    Glicko2Config,
    Glicko2ConfigError,
    replay_arrays,
    replay_glicko2,
)


def _paper_example(tau: float = 0.5):
    # Player 0: 1500 / RD 200 / σ 0.06 beats 1400/30, loses to 1550/100 and 1700/300 (one period).
    white = np.array([0, 2, 0], np.int32)
    black = np.array([1, 0, 3], np.int32)
    score = np.array([1.0, 1.0, 0.0])
    start = (
        np.array([1500.0, 1400, 1550, 1700]),
        np.array([200.0, 30, 100, 300]),
        np.full(4, 0.06),
    )
    return replay_arrays(
        white, black, score, np.zeros(3, np.int32), 4, Glicko2Config(tau=tau), start=start
    )


def test_glickman_worked_example() -> None:
    r = _paper_example()
    # The paper prints r' = 1464.06 (from μ' = −0.2069 rounded), RD' = 151.52, σ' = 0.05999.
    assert r.final[0] == pytest.approx(1464.06, abs=0.015)
    assert r.final_rd[0] == pytest.approx(151.52, abs=0.005)
    assert r.final_vol[0] == pytest.approx(0.05999, abs=1e-5)
    # Pre-game values are the period-start ones for all three games.
    assert r.white_before.tolist() == pytest.approx([1500, 1550, 1500])
    assert r.black_rd_before.tolist() == pytest.approx([30, 200, 300])


def test_idle_periods_grow_rd() -> None:
    # A rated player (1500, 200, 0.06) idle for 2 periods: φ² + 2σ² before the third period's game.
    config = Glicko2Config(period_days=1)
    start = (np.array([1500.0, 1500.0, 1500.0]), np.array([200.0, 200.0, 200.0]), np.full(3, 0.06))
    r = replay_arrays(
        np.array([1, 0], np.int32), np.array([2, 1], np.int32), np.array([1.0, 0.5]),
        np.array([0, 3], np.int32), 3, config, start=start,
    )  # fmt: skip
    phi = 200 / 173.7178
    expected_rd = math.sqrt(phi**2 + 3 * 0.06**2) * 173.7178  # idle in periods 0, 1, 2
    assert r.white_rd_before[1] == pytest.approx(expected_rd, rel=1e-12)


def test_invalid_config() -> None:
    with pytest.raises(Glicko2ConfigError, match="tau"):
        Glicko2Config(tau=0.0)
    with pytest.raises(Glicko2ConfigError, match="period_days"):
        Glicko2Config(period_days=0)


class _PaperPlayer(glicko2.Player):
    """The package's player with its volatility function as in the paper (φ², not μ²)."""

    def _f(self, x, delta, v, a):
        phi2 = (self.rd / 173.7178) ** 2
        ex = math.exp(x)
        return ex * (delta**2 - phi2 - v - ex) / (2 * (phi2 + v + ex) ** 2) - (x - a) / self._tau**2


def _package_replay(games, period_days: int, tau: float):
    players: dict[int, _PaperPlayer] = {}
    period = (games.day - games.day[0]) // period_days
    bounds = np.searchsorted(period, np.arange(period[-1] + 2))
    for lo, hi in itertools.pairwise(bounds):
        if lo == hi:
            for p in players.values():
                p.did_not_compete()
            continue
        new = set(games.white[lo:hi].tolist()) | set(games.black[lo:hi].tolist())
        for p in new - players.keys():
            players[p] = _PaperPlayer()
            players[p]._tau = tau
        start = {p: (players[p].rating, players[p].rd) for p in players}
        lists: dict[int, tuple[list, list, list]] = {p: ([], [], []) for p in new}
        for w, b, s in zip(
            games.white[lo:hi].tolist(),
            games.black[lo:hi].tolist(),
            games.score[lo:hi].tolist(),
            strict=True,
        ):
            lists[w][0].append(start[b][0])
            lists[w][1].append(start[b][1])
            lists[w][2].append(s)
            lists[b][0].append(start[w][0])
            lists[b][1].append(start[w][1])
            lists[b][2].append(1 - s)
        for p, player in players.items():
            if p in new:
                player.update_player(*lists[p])
            else:
                player.did_not_compete()
    return players


def test_agrees_with_glicko2_package_on_real_games(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    games = load_games(build_games_table("fox_by_player", tmp_path_factory.getbasetemp()))
    config = Glicko2Config(tau=0.5, period_days=30)
    mine = replay_glicko2(games, config)
    ref = _package_replay(games, config.period_days, config.tau)
    codes = np.array(sorted(ref))
    assert codes.size == games.n_players
    rating = np.array([ref[p].rating for p in codes])
    rd = np.array([ref[p].rd for p in codes])
    vol = np.array([ref[p].vol for p in codes])
    np.testing.assert_allclose(mine.final[codes], rating, rtol=1e-6)
    np.testing.assert_allclose(mine.final_rd[codes], rd, rtol=1e-6)
    np.testing.assert_allclose(mine.final_vol[codes], vol, rtol=1e-6)
    assert np.ptp(mine.final) > 300  # ratings really moved on these games
