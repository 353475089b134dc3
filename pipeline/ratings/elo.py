"""Elo with a stepwise K factor, replayed over the games table in time order.

Update for one game between players A and B (A's score s ∈ {1, 0.5, 0})::

    E_A = 1 / (1 + 10 ** ((R_B − R_A) / D))
    R_A ← R_A + K_A · (s − E_A)          (and symmetrically for B with 1 − s, 1 − E_A)

K depends on how many games the player has played, counting the current one (n = 1 for a
player's first game): ``K = Ka if n ≤ nc1, Kb if n ≤ nc2, else Kc`` with Ka ≥ Kb ≥ Kc > 0. So
(Ka, Kb, Kc) = (40, 20, 10) with (nc1, nc2) = (30, 60) gives K = 40 for a player's first 30
games, like FIDE's "new player" rule. Each player uses their own K, so an update is zero-sum only
when both K are equal.

The replay is one compiled loop (numba) over integer player codes; everything else (coding,
ordering, histories) is vectorised in ``pipeline.ratings.data``. Measured speed: see
``bench/speed/bench_ratings.py`` and docs/guide/ratings.md.

Run: ``kibitz ratings fit --games DIR --system elo --out DIR``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import RatedGames


class EloConfigError(KibitzError, ValueError):
    """An Elo configuration breaks Ka ≥ Kb ≥ Kc > 0, nc1 ≤ nc2 or D > 0."""


@dataclass(frozen=True)
class EloConfig:
    k: tuple[float, float, float] = (32.0, 32.0, 32.0)  # (Ka, Kb, Kc)
    thresholds: tuple[int, int] = (30, 30)  # (nc1, nc2): game counts where K steps down
    scale: float = 400.0  # D: a difference of D points means 10:1 odds
    initial: float = 1500.0  # R0 of a player's first game

    def __post_init__(self) -> None:
        ka, kb, kc = self.k
        if not (ka >= kb >= kc > 0):
            raise EloConfigError(f"need Ka >= Kb >= Kc > 0, got k={self.k!r}")
        if not (0 <= self.thresholds[0] <= self.thresholds[1]):
            raise EloConfigError(f"need 0 <= nc1 <= nc2, got thresholds={self.thresholds!r}")
        if not self.scale > 0:
            raise EloConfigError(f"need scale D > 0, got {self.scale!r}")

    def params(self) -> dict[str, float | int]:
        """Flat parameters for MLflow and result tables."""
        return {
            "ka": self.k[0],
            "kb": self.k[1],
            "kc": self.k[2],
            "nc1": self.thresholds[0],
            "nc2": self.thresholds[1],
            "scale": self.scale,
            "initial": self.initial,
        }


@dataclass(frozen=True)
class EloResult:
    white_before: np.ndarray  # (G,) float64 White's rating before each game
    black_before: np.ndarray  # (G,) float64
    final: np.ndarray  # (P,) float64 rating after a player's last game


@numba.njit(cache=True, nogil=True)
def _replay(
    white: np.ndarray,
    black: np.ndarray,
    score: np.ndarray,
    state: np.ndarray,
    ka: float,
    kb: float,
    kc: float,
    nc1: int,
    nc2: int,
    scale: float,
    white_before: np.ndarray,
    black_before: np.ndarray,
) -> None:
    """The whole replay; ``state`` (P, 2) = (rating, games played) is updated in place.

    Rating and count share a row so that a player costs one cache miss, not two: with a
    million players the loop is bound by memory latency, not arithmetic.
    """
    ln10_over_d = math.log(10.0) / scale
    for g in range(white.shape[0]):
        w = white[g]
        b = black[g]
        rw = state[w, 0]
        rb = state[b, 0]
        white_before[g] = rw
        black_before[g] = rb
        expected = 1.0 / (1.0 + math.exp((rb - rw) * ln10_over_d))
        nw = state[w, 1] + 1.0
        nb = state[b, 1] + 1.0
        state[w, 1] = nw
        state[b, 1] = nb
        kw = ka if nw <= nc1 else (kb if nw <= nc2 else kc)
        kbl = ka if nb <= nc1 else (kb if nb <= nc2 else kc)
        surprise = score[g] - expected
        state[w, 0] = rw + kw * surprise
        state[b, 0] = rb - kbl * surprise


def replay_arrays(
    white: np.ndarray, black: np.ndarray, score: np.ndarray, n_players: int, config: EloConfig
) -> EloResult:
    """Elo over integer-coded games already in time order (the hot path; used by the tuner)."""
    state = np.zeros((n_players, 2), dtype=np.float64)  # (P, 2) rating, games played
    state[:, 0] = config.initial
    white_before = np.empty(white.shape[0], dtype=np.float64)
    black_before = np.empty(white.shape[0], dtype=np.float64)
    _replay(
        np.ascontiguousarray(white, dtype=np.int32),
        np.ascontiguousarray(black, dtype=np.int32),
        np.ascontiguousarray(score, dtype=np.float64),
        state,
        float(config.k[0]),
        float(config.k[1]),
        float(config.k[2]),
        int(config.thresholds[0]),
        int(config.thresholds[1]),
        float(config.scale),
        white_before,
        black_before,
    )
    return EloResult(white_before, black_before, state[:, 0].copy())


def replay_elo(games: RatedGames, config: EloConfig) -> EloResult:
    """Elo ratings before every game of ``games`` and after the last one."""
    return replay_arrays(games.white, games.black, games.score, games.n_players, config)
