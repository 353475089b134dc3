"""TrueSkill (Herbrich, Minka & Graepel 2007) for two-player games, replayed in time order.

Before each game both players' σ² grow by τ² (the dynamics factor); then, with
c² = 2β² + σ_w² + σ_l², t = (μ_w − μ_l)/c and ε = draw_margin/c::

    μ_w ← μ_w + σ_w²/c · v(t, ε)        σ_w² ← σ_w² · (1 − σ_w²/c² · w(t, ε))
    μ_l ← μ_l − σ_l²/c · v(t, ε)        σ_l² ← σ_l² · (1 − σ_l²/c² · w(t, ε))

with the win functions v = φ(t−ε)/Φ(t−ε), w = v(v + t − ε), or the draw functions for a
draw, and draw_margin = Φ⁻¹((p_draw + 1)/2)·√2·β. For two players the factor graph of the
``trueskill`` package has one truncation factor, so its message passing ends in exactly these
closed forms.

Why an own implementation: the ``trueskill`` package (0.4.5) builds a factor graph of Python
objects for every game, about 200 µs per game (five hours for a Lichess month, and one such
replay per grid point when tuning β and τ). This numba loop is the same arithmetic at a few
million games/s; tests check it against the package (``backend="scipy"``, i.e. exact Φ, like
``math.erfc`` here) on real Lichess games to 1e-6 relative, and against the package docs' values.

Run: ``kibitz ratings fit --games DIR --system trueskill --out DIR``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.stats import norm

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import RatedGames

_SQRT2 = math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


class TrueSkillConfigError(KibitzError, ValueError):
    """A TrueSkill configuration with non-positive σ/β, negative τ or p_draw outside [0, 1)."""


@dataclass(frozen=True)
class TrueSkillConfig:
    mu: float = 25.0  # prior mean (the package's default scale)
    sigma: float = 25.0 / 3.0  # prior σ = μ/3
    beta: float = 25.0 / 6.0  # performance noise: β apart gives ~76 % win chance
    tau: float = 25.0 / 300.0  # dynamics: σ grows by τ before every game
    draw_probability: float = 0.10  # sets the draw margin; the package's default

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and self.beta > 0 and self.tau >= 0):
            raise TrueSkillConfigError(f"need sigma > 0, beta > 0, tau >= 0: {self!r}")
        if not 0.0 <= self.draw_probability < 1.0:
            raise TrueSkillConfigError(
                f"draw_probability must be in [0, 1), got {self.draw_probability!r}"
            )

    @property
    def draw_margin(self) -> float:
        """ε for two one-player teams (the package's ``calc_draw_margin(p, 2)``)."""
        return float(norm.ppf((self.draw_probability + 1.0) / 2.0) * _SQRT2 * self.beta)

    def params(self) -> dict[str, float]:
        return {
            "mu": self.mu,
            "sigma": self.sigma,
            "beta": self.beta,
            "tau": self.tau,
            "draw_probability": self.draw_probability,
        }


@dataclass(frozen=True)
class TrueSkillResult:
    white_before: np.ndarray  # (G,) float64 μ before the game (before the τ step)
    black_before: np.ndarray
    white_sigma_before: np.ndarray  # (G,) float64 σ before the game (before the τ step)
    black_sigma_before: np.ndarray
    final: np.ndarray  # (P,) float64 μ after the last game
    final_sigma: np.ndarray  # (P,) float64


@numba.njit(cache=True, nogil=True)
def _pdf(x: float) -> float:
    return _INV_SQRT2PI * math.exp(-0.5 * x * x)


@numba.njit(cache=True, nogil=True)
def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / _SQRT2)


@numba.njit(cache=True, nogil=True)
def _v_w_win(t: float, eps: float) -> tuple[float, float]:
    x = t - eps
    denom = _cdf(x)
    v = _pdf(x) / denom if denom > 0.0 else -x  # the package's fallback for a huge upset
    return v, v * (v + x)


@numba.njit(cache=True, nogil=True)
def _v_w_draw(t: float, eps: float) -> tuple[float, float]:
    abs_t = abs(t)
    a = eps - abs_t
    b = -eps - abs_t
    denom = _cdf(a) - _cdf(b)
    v = (_pdf(b) - _pdf(a)) / denom if denom > 0.0 else a
    w = v * v + (a * _pdf(a) - b * _pdf(b)) / denom
    return (-v if t < 0.0 else v), w


@numba.njit(cache=True, nogil=True)
def _replay(
    white: np.ndarray,
    black: np.ndarray,
    score: np.ndarray,
    state: np.ndarray,
    beta: float,
    tau: float,
    draw_margin: float,
    out: np.ndarray,
) -> None:
    """All games; ``state`` (P, 2) = (μ, σ²) in place; ``out`` (G, 4) = μw, μb, σw, σb before."""
    two_beta2 = 2.0 * beta * beta
    tau2 = tau * tau
    for g in range(white.shape[0]):
        w = white[g]
        b = black[g]
        out[g, 0] = state[w, 0]
        out[g, 1] = state[b, 0]
        out[g, 2] = math.sqrt(state[w, 1])
        out[g, 3] = math.sqrt(state[b, 1])
        s = score[g]
        # Winner first; a draw keeps White first (the draw functions are symmetric).
        if s < 0.5:
            hi = b
            lo = w
        else:
            hi = w
            lo = b
        mu_hi = state[hi, 0]
        mu_lo = state[lo, 0]
        var_hi = state[hi, 1] + tau2
        var_lo = state[lo, 1] + tau2
        c2 = two_beta2 + var_hi + var_lo
        c = math.sqrt(c2)
        t = (mu_hi - mu_lo) / c
        if s == 0.5:
            v, wf = _v_w_draw(t, draw_margin / c)
        else:
            v, wf = _v_w_win(t, draw_margin / c)
        state[hi, 0] = mu_hi + var_hi / c * v
        state[lo, 0] = mu_lo - var_lo / c * v
        state[hi, 1] = var_hi * (1.0 - var_hi / c2 * wf)
        state[lo, 1] = var_lo * (1.0 - var_lo / c2 * wf)


def replay_arrays(
    white: np.ndarray, black: np.ndarray, score: np.ndarray, n_players: int, config: TrueSkillConfig
) -> TrueSkillResult:
    """TrueSkill over integer-coded games in time order."""
    if config.draw_probability == 0.0 and np.any(score == 0.5):
        raise TrueSkillConfigError(
            "the games contain draws but draw_probability is 0 (a draw would have probability 0)"
        )
    state = np.empty((n_players, 2), dtype=np.float64)  # (P, 2) μ, σ²
    state[:, 0] = config.mu
    state[:, 1] = config.sigma**2
    out = np.empty((white.shape[0], 4), dtype=np.float64)  # (G, 4) μw, μb, σw, σb
    _replay(
        np.ascontiguousarray(white, dtype=np.int32),
        np.ascontiguousarray(black, dtype=np.int32),
        np.ascontiguousarray(score, dtype=np.float64),
        state,
        float(config.beta),
        float(config.tau),
        config.draw_margin,
        out,
    )
    return TrueSkillResult(
        white_before=out[:, 0].copy(),
        black_before=out[:, 1].copy(),
        white_sigma_before=out[:, 2].copy(),
        black_sigma_before=out[:, 3].copy(),
        final=state[:, 0].copy(),
        final_sigma=np.sqrt(state[:, 1]),
    )


def replay_trueskill(games: RatedGames, config: TrueSkillConfig) -> TrueSkillResult:
    """TrueSkill ratings before every game of ``games`` and after the last one."""
    return replay_arrays(games.white, games.black, games.score, games.n_players, config)
