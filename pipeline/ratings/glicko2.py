"""Glicko-2 (Glickman, "Example of the Glicko-2 system", 2012) replayed over rating periods.

Games are grouped into rating periods of ``period_days`` days (counted from the first game's
day). Every game of a period is rated from the players' ratings at the START of the period, as
the paper prescribes; a player who sits out ``k`` periods has φ² grown by ``k·σ²`` (step 6
applied once per idle period) when they next play, and once more for the idle periods up to
the last one when the final ratings are reported.

Why an own implementation: the ``glicko2`` package (2.1.0) is pure Python, one object per
player and lists per period, about 20 µs per game — over an hour for a 90-million-game Lichess
month and minutes per grid point in ``kibitz ratings tune``. It also has a bug: its volatility
function ``f(x)`` uses μ² where the paper has φ², which only agrees with the paper when μ = 0
(a 1500 player, as in the paper's example). This module is a numba loop (a few million games/s)
following the paper exactly; tests check it against Glickman's worked example and against the
package with that one line corrected, on real Lichess games (agreement 1e-6 relative).

Scale: r = 173.7178·μ + 1500, RD = 173.7178·φ (the paper's constants).

Run: ``kibitz ratings fit --games DIR --system glicko2 --out DIR``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import RatedGames

GLICKO_SCALE = 173.7178  # the paper's conversion between Glicko and Glicko-2 scales
_CONVERGENCE = 1e-6  # ε of the paper's Illinois iteration for σ'


class Glicko2ConfigError(KibitzError, ValueError):
    """A Glicko-2 configuration with a non-positive τ, RD, σ or period length."""


@dataclass(frozen=True)
class Glicko2Config:
    tau: float = 0.5  # τ: how fast volatility may change; the paper suggests 0.3–1.2
    initial_rating: float = 1500.0
    initial_rd: float = 350.0
    initial_vol: float = 0.06
    period_days: int = 1  # rating period length; Glickman wants ~10–15 games per player per period

    def __post_init__(self) -> None:
        if not (self.tau > 0 and self.initial_rd > 0 and self.initial_vol > 0):
            raise Glicko2ConfigError(f"tau, initial_rd and initial_vol must be > 0: {self!r}")
        if self.period_days < 1:
            raise Glicko2ConfigError(f"period_days must be >= 1, got {self.period_days!r}")

    def params(self) -> dict[str, float | int]:
        return {
            "tau": self.tau,
            "initial_rating": self.initial_rating,
            "initial_rd": self.initial_rd,
            "initial_vol": self.initial_vol,
            "period_days": self.period_days,
        }


@dataclass(frozen=True)
class Glicko2Result:
    white_before: np.ndarray  # (G,) float64 rating at the start of the game's period
    black_before: np.ndarray
    white_rd_before: np.ndarray  # (G,) float64 RD at the start of the game's period
    black_rd_before: np.ndarray
    final: np.ndarray  # (P,) float64 rating after the last period
    final_rd: np.ndarray  # (P,) float64 RD after the last period (idle periods included)
    final_vol: np.ndarray  # (P,) float64 σ


@numba.njit(cache=True, nogil=True)
def _new_volatility(phi: float, sigma: float, delta: float, v: float, tau: float) -> float:
    """Step 5 of the paper: the Illinois (regula falsi) solve of f(x) = 0 for x = ln σ'²."""
    a = math.log(sigma * sigma)
    phi2 = phi * phi
    d2 = delta * delta

    def f(x: float) -> float:
        ex = math.exp(x)
        return ex * (d2 - phi2 - v - ex) / (2.0 * (phi2 + v + ex) ** 2) - (x - a) / (tau * tau)

    big_a = a
    if d2 > phi2 + v:
        big_b = math.log(d2 - phi2 - v)
    else:
        k = 1.0
        while f(a - k * tau) < 0.0:
            k += 1.0
        big_b = a - k * tau
    f_a = f(big_a)
    f_b = f(big_b)
    while abs(big_b - big_a) > _CONVERGENCE:
        big_c = big_a + (big_a - big_b) * f_a / (f_b - f_a)
        f_c = f(big_c)
        if f_c * f_b <= 0.0:
            big_a = big_b
            f_a = f_b
        else:
            f_a = f_a / 2.0
        big_b = big_c
        f_b = f_c
    return math.exp(big_a / 2.0)


@numba.njit(cache=True, nogil=True)
def _g(phi: float) -> float:
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / (math.pi * math.pi))


@numba.njit(cache=True, nogil=True)
def _replay(
    white: np.ndarray,
    black: np.ndarray,
    score: np.ndarray,
    period_start: np.ndarray,
    state: np.ndarray,
    last_period: np.ndarray,
    tau: float,
    out: np.ndarray,
) -> None:
    """All periods; ``state`` (P, 5) = (μ, φ, σ, Σ g²E(1−E), Σ g(s−E)) updated in place.

    ``period_start`` (T+1,) are offsets of each period's games; ``last_period[p]`` is the last
    period the player played (−1: rated before the first period; −2: never seen yet). ``out``
    (G, 4) receives μ_white, μ_black, φ_white, φ_black at the start of each game's period.
    """
    n_periods = period_start.shape[0] - 1
    for t in range(n_periods):
        lo = period_start[t]
        hi = period_start[t + 1]
        # Bring every player of this period to its start: idle periods grow φ (step 6).
        for g in range(lo, hi):
            for p in (white[g], black[g]):
                last = last_period[p]
                if last == t:
                    continue
                if last >= -1 and t - last > 1:
                    idle = t - last - 1
                    state[p, 1] = math.sqrt(state[p, 1] ** 2 + idle * state[p, 2] ** 2)
                last_period[p] = t
                state[p, 3] = 0.0
                state[p, 4] = 0.0
        # Steps 3–4 sums, every game against the opponent's start-of-period rating.
        for g in range(lo, hi):
            w = white[g]
            b = black[g]
            mu_w = state[w, 0]
            mu_b = state[b, 0]
            phi_w = state[w, 1]
            phi_b = state[b, 1]
            out[g, 0] = mu_w
            out[g, 1] = mu_b
            out[g, 2] = phi_w
            out[g, 3] = phi_b
            g_b = _g(phi_b)
            e_w = 1.0 / (1.0 + math.exp(-g_b * (mu_w - mu_b)))
            state[w, 3] += g_b * g_b * e_w * (1.0 - e_w)
            state[w, 4] += g_b * (score[g] - e_w)
            g_w = _g(phi_w)
            e_b = 1.0 / (1.0 + math.exp(-g_w * (mu_b - mu_w)))
            state[b, 3] += g_w * g_w * e_b * (1.0 - e_b)
            state[b, 4] += g_w * ((1.0 - score[g]) - e_b)
        # Steps 5–8 once per player of the period (v_sum > 0 marks "not yet updated").
        for g in range(lo, hi):
            for p in (white[g], black[g]):
                v_sum = state[p, 3]
                if v_sum == 0.0:
                    continue
                v = 1.0 / v_sum
                sigma_new = _new_volatility(state[p, 1], state[p, 2], v * state[p, 4], v, tau)
                phi_star2 = state[p, 1] ** 2 + sigma_new * sigma_new
                phi_new = 1.0 / math.sqrt(1.0 / phi_star2 + v_sum)
                state[p, 0] += phi_new * phi_new * state[p, 4]
                state[p, 1] = phi_new
                state[p, 2] = sigma_new
                state[p, 3] = 0.0


def replay_arrays(
    white: np.ndarray,
    black: np.ndarray,
    score: np.ndarray,
    day: np.ndarray,
    n_players: int,
    config: Glicko2Config,
    *,
    start: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Glicko2Result:
    """Glicko-2 over integer-coded games in time order.

    ``start``: optional (rating, RD, σ) arrays of every player before the first period (those
    players count as rated; without it everyone starts at the config's initial values).
    """
    n_games = white.shape[0]
    state = np.zeros((n_players, 5), dtype=np.float64)  # (P, 5) μ, φ, σ, v-sum, Δ-sum
    last_period = np.full(n_players, -2, dtype=np.int64)
    if start is None:
        state[:, 0] = (config.initial_rating - 1500.0) / GLICKO_SCALE
        state[:, 1] = config.initial_rd / GLICKO_SCALE
        state[:, 2] = config.initial_vol
    else:
        state[:, 0] = (np.asarray(start[0], dtype=np.float64) - 1500.0) / GLICKO_SCALE
        state[:, 1] = np.asarray(start[1], dtype=np.float64) / GLICKO_SCALE
        state[:, 2] = np.asarray(start[2], dtype=np.float64)
        last_period[:] = -1
    period = (day - (day[0] if n_games else 0)) // config.period_days  # (G,) non-decreasing
    period_start = np.searchsorted(period, np.arange(period[-1] + 2 if n_games else 1))
    out = np.empty((n_games, 4), dtype=np.float64)  # (G, 4) μw, μb, φw, φb
    _replay(
        np.ascontiguousarray(white, dtype=np.int32),
        np.ascontiguousarray(black, dtype=np.int32),
        np.ascontiguousarray(score, dtype=np.float64),
        period_start.astype(np.int64),
        state,
        last_period,
        float(config.tau),
        out,
    )
    n_periods = period_start.shape[0] - 1
    seen = last_period >= -1
    idle = np.where(seen, n_periods - 1 - last_period, 0)  # idle periods up to the last one
    final_phi = np.sqrt(state[:, 1] ** 2 + np.maximum(idle, 0) * state[:, 2] ** 2)
    return Glicko2Result(
        white_before=out[:, 0] * GLICKO_SCALE + 1500.0,
        black_before=out[:, 1] * GLICKO_SCALE + 1500.0,
        white_rd_before=out[:, 2] * GLICKO_SCALE,
        black_rd_before=out[:, 3] * GLICKO_SCALE,
        final=state[:, 0] * GLICKO_SCALE + 1500.0,
        final_rd=final_phi * GLICKO_SCALE,
        final_vol=state[:, 2].copy(),
    )


def replay_glicko2(games: RatedGames, config: Glicko2Config) -> Glicko2Result:
    """Glicko-2 ratings before every game of ``games`` and after the last period."""
    return replay_arrays(games.white, games.black, games.score, games.day, games.n_players, config)
