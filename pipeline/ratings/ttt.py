"""TrueSkill Through Time (Dangauthier, Herbrich, Minka & Graepel 2007), two-player games.

Model: each player has one skill per time step in which they play; consecutive skills of a
player are coupled by a Gaussian drift, s_t ~ N(s_{t'}, (t − t')·γ²); a game's performances are
N(skill, β²) and the result is the sign of the performance difference, with a draw when it lies
within ±ε (the draw margin, ε = |Φ⁻¹((1 − p_draw)/2)|·√2·β). Inference is expectation
propagation: a forward pass over time steps (which alone is TrueSkill with a per-step dynamic),
then backward and forward sweeps that pass each skill's messages to the neighbouring steps, each
time step re-rating its games once against the current messages, until no posterior mean or
standard deviation moves by more than ``epsilon`` (or ``iterations`` sweeps). The fixed point
does not depend on the order of games inside a time step; a later result changes earlier
skills (the backward messages) — both are tested.

This is the schedule and message algebra of the ``trueskillthroughtime`` package (1.1.0,
Landfried & Mocskos), restated over flat arrays: skills are "nodes" (one per player and time
step, linked to the player's previous and next node), messages are natural parameters (π = 1/σ²,
τ = μ/σ²) in numpy arrays, and the sweeps are one numba function. Why not the package itself:
it builds Python objects for every game and skill and re-creates dictionaries per sweep — see
docs/guide/ratings.md for its measured time on the 27,000 raw Fox games against this module's, and a
synthetic 3.5-million-game history (the size of the paper's chess history) is out of its reach.
Tests compare both on real games (the package's approximate erfc replaced by ``math.erfc``, the
function this module uses).

Time: one time step = ``step_days`` days (default 1); γ is the drift per time step.

Run: ``kibitz ratings fit --games DIR --system ttt --out DIR``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.stats import norm

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import RatedGames

logger = logging.getLogger(__name__)

_SQRT2 = math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)
_MILLS_SWITCH = -30.0  # below this, φ(x)/Φ(x) from its asymptotic series (Φ underflows later)


class TTTConfigError(KibitzError, ValueError):
    """A TrueSkill Through Time configuration with an impossible value."""


@dataclass(frozen=True)
class TTTConfig:
    mu: float = 0.0  # prior mean of a new player's skill (the package's scale)
    sigma: float = 6.0  # prior σ of a new player's skill
    beta: float = 1.0  # performance noise
    gamma: float = 0.03  # skill drift per time step
    p_draw: float | None = None  # draw probability; None: the share of draws in the games
    step_days: int = 1  # days per time step
    epsilon: float = 1e-6  # convergence: max |Δμ|, |Δσ| of any posterior in one sweep pair
    iterations: int = 30  # at most this many backward+forward sweep pairs

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and self.beta > 0 and self.gamma >= 0):
            raise TTTConfigError(f"need sigma > 0, beta > 0, gamma >= 0: {self!r}")
        if self.p_draw is not None and not 0.0 <= self.p_draw < 1.0:
            raise TTTConfigError(f"p_draw must be in [0, 1), got {self.p_draw!r}")
        if self.step_days < 1 or self.iterations < 0 or self.epsilon <= 0:
            raise TTTConfigError(f"need step_days >= 1, iterations >= 0, epsilon > 0: {self!r}")

    def params(self) -> dict[str, float | int | str]:
        return {
            "mu": self.mu,
            "sigma": self.sigma,
            "beta": self.beta,
            "gamma": self.gamma,
            "p_draw": "observed" if self.p_draw is None else self.p_draw,
            "step_days": self.step_days,
            "epsilon": self.epsilon,
            "iterations": self.iterations,
        }


@dataclass(frozen=True)
class TTTResult:
    white_before: (
        np.ndarray
    )  # (G,) float64 White's skill mean at the game's step, this game left out
    black_before: np.ndarray
    white_sigma_before: np.ndarray  # (G,) float64 its σ
    black_sigma_before: np.ndarray
    node_player: np.ndarray  # (S,) int32 player of each skill node (one per player and step)
    node_step: np.ndarray  # (S,) int64 time step of the node (days since epoch // step_days)
    node_mu: np.ndarray  # (S,) float64 posterior mean
    node_sigma: np.ndarray  # (S,) float64 posterior σ
    final: np.ndarray  # (P,) float64 posterior mean at the player's last step
    final_sigma: np.ndarray  # (P,) float64
    iterations: int  # sweep pairs run
    step: float  # last sweep pair's largest change (≤ epsilon when converged)
    draw_margin: float


@numba.njit(cache=True, nogil=True)
def _pdf(x: float) -> float:
    return _INV_SQRT2PI * math.exp(-0.5 * x * x)


@numba.njit(cache=True, nogil=True)
def _truncate(mu: float, sigma: float, margin: float, tie: bool) -> tuple[float, float]:
    """Mean and variance of N(mu, σ²) truncated to (margin, ∞), or to [−margin, margin] if tie."""
    if not tie:
        x = (mu - margin) / sigma
        if x > _MILLS_SWITCH:
            v = _pdf(x) / (0.5 * math.erfc(-x / _SQRT2))
        else:
            v = -x - 1.0 / x + 2.0 / (x * x * x)
        w = v * (v + x)
    else:
        sign = 1.0
        if mu > 0.0:  # symmetric: work with mu ≤ 0 so that the tail difference below is exact
            sign = -1.0
            mu = -mu
        a = (-margin - mu) / sigma
        b = (margin - mu) / sigma
        mass = 0.5 * (math.erfc(a / _SQRT2) - math.erfc(b / _SQRT2))
        v = (_pdf(a) - _pdf(b)) / mass
        u = (a * _pdf(a) - b * _pdf(b)) / mass
        w = v * v - u
        v = sign * v
        mu = sign * mu
    return mu + sigma * v, sigma * sigma * (1.0 - w)


@numba.njit(cache=True, nogil=True)
def _rate_game(
    g: int,
    node_white: np.ndarray,
    node_black: np.ndarray,
    score: np.ndarray,
    fwd: np.ndarray,
    bwd: np.ndarray,
    lik: np.ndarray,
    msg: np.ndarray,
    beta2: float,
    margin: float,
) -> None:
    """Replace game g's two likelihood messages (natural parameters) given the other messages."""
    sw = node_white[g]
    sb = node_black[g]
    pi_w = fwd[sw, 0] + bwd[sw, 0] + lik[sw, 0] - msg[g, 0]
    tau_w = fwd[sw, 1] + bwd[sw, 1] + lik[sw, 1] - msg[g, 1]
    pi_b = fwd[sb, 0] + bwd[sb, 0] + lik[sb, 0] - msg[g, 2]
    tau_b = fwd[sb, 1] + bwd[sb, 1] + lik[sb, 1] - msg[g, 3]
    mu_w = tau_w / pi_w
    var_w = 1.0 / pi_w
    mu_b = tau_b / pi_b
    var_b = 1.0 / pi_b
    s = score[g]
    white_high = s >= 0.5  # winner first; a draw keeps White first
    if white_high:
        mu_hi, var_hi, mu_lo, var_lo = mu_w, var_w, mu_b, var_b
    else:
        mu_hi, var_hi, mu_lo, var_lo = mu_b, var_b, mu_w, var_w
    d_mu = mu_hi - mu_lo
    d_var = var_hi + var_lo + 2.0 * beta2
    mu_t, var_t = _truncate(d_mu, math.sqrt(d_var), margin, s == 0.5)
    if var_t >= d_var:  # no information (the package returns an infinite-σ message)
        pi_hi = tau_hi = pi_lo = tau_lo = 0.0
    else:
        delta_div = (d_var * mu_t - var_t * d_mu) / (d_var - var_t)
        theta2 = var_t * d_var / (d_var - var_t)
        shift = delta_div - d_mu
        pi_hi = 1.0 / (theta2 + d_var - var_hi)
        tau_hi = (mu_hi + shift) * pi_hi
        pi_lo = 1.0 / (theta2 + d_var - var_lo)
        tau_lo = (mu_lo - shift) * pi_lo
    if white_high:
        new_pi_w, new_tau_w, new_pi_b, new_tau_b = pi_hi, tau_hi, pi_lo, tau_lo
    else:
        new_pi_w, new_tau_w, new_pi_b, new_tau_b = pi_lo, tau_lo, pi_hi, tau_hi
    lik[sw, 0] += new_pi_w - msg[g, 0]
    lik[sw, 1] += new_tau_w - msg[g, 1]
    lik[sb, 0] += new_pi_b - msg[g, 2]
    lik[sb, 1] += new_tau_b - msg[g, 3]
    msg[g, 0] = new_pi_w
    msg[g, 1] = new_tau_w
    msg[g, 2] = new_pi_b
    msg[g, 3] = new_tau_b


@numba.njit(cache=True, nogil=True)
def _forget(pi: float, tau: float, elapsed: float, gamma2: float) -> tuple[float, float]:
    """A message after ``elapsed`` steps of drift: σ² + elapsed·γ² (no change to μ)."""
    if pi == 0.0:
        return 0.0, 0.0
    new_pi = 1.0 / (1.0 / pi + elapsed * gamma2)
    return new_pi, tau / pi * new_pi


@numba.njit(cache=True, nogil=True)
def _posterior_change(
    s: int, fwd: np.ndarray, bwd: np.ndarray, lik: np.ndarray, old: np.ndarray
) -> float:
    pi = fwd[s, 0] + bwd[s, 0] + lik[s, 0]
    mu = (fwd[s, 1] + bwd[s, 1] + lik[s, 1]) / pi
    sigma = math.sqrt(1.0 / pi)
    return max(abs(mu - old[s, 0]), abs(sigma - old[s, 1]))


@numba.njit(cache=True, nogil=True)
def _remember(s: int, fwd: np.ndarray, bwd: np.ndarray, lik: np.ndarray, old: np.ndarray) -> None:
    pi = fwd[s, 0] + bwd[s, 0] + lik[s, 0]
    old[s, 0] = (fwd[s, 1] + bwd[s, 1] + lik[s, 1]) / pi
    old[s, 1] = math.sqrt(1.0 / pi)


@numba.njit(cache=True, nogil=True)
def _smooth(
    node_start: np.ndarray,
    game_start: np.ndarray,
    node_prev: np.ndarray,
    node_next: np.ndarray,
    node_elapsed: np.ndarray,
    node_white: np.ndarray,
    node_black: np.ndarray,
    score: np.ndarray,
    fwd: np.ndarray,
    bwd: np.ndarray,
    lik: np.ndarray,
    msg: np.ndarray,
    old: np.ndarray,
    prior_pi: float,
    prior_tau: float,
    gamma2: float,
    beta2: float,
    margin: float,
    epsilon: float,
    max_iterations: int,
) -> tuple[int, float]:
    """Forward pass, then backward/forward sweeps to convergence; returns (sweeps, last step)."""
    n_steps = game_start.shape[0] - 1
    for j in range(n_steps):
        for s in range(node_start[j], node_start[j + 1]):
            p = node_prev[s]
            if p < 0:
                fwd[s, 0] = prior_pi
                fwd[s, 1] = prior_tau
            else:
                fwd[s, 0], fwd[s, 1] = _forget(
                    fwd[p, 0] + lik[p, 0], fwd[p, 1] + lik[p, 1], node_elapsed[s], gamma2
                )
        for g in range(game_start[j], game_start[j + 1]):
            _rate_game(g, node_white, node_black, score, fwd, bwd, lik, msg, beta2, margin)
    sweeps = 0
    step = math.inf
    while step > epsilon and sweeps < max_iterations:
        step = 0.0
        for j in range(n_steps - 2, -1, -1):
            for s in range(node_start[j], node_start[j + 1]):
                _remember(s, fwd, bwd, lik, old)
                n = node_next[s]
                if n < 0:
                    bwd[s, 0] = 0.0
                    bwd[s, 1] = 0.0
                else:
                    bwd[s, 0], bwd[s, 1] = _forget(
                        lik[n, 0] + bwd[n, 0], lik[n, 1] + bwd[n, 1], node_elapsed[n], gamma2
                    )
            for g in range(game_start[j], game_start[j + 1]):
                _rate_game(g, node_white, node_black, score, fwd, bwd, lik, msg, beta2, margin)
            for s in range(node_start[j], node_start[j + 1]):
                step = max(step, _posterior_change(s, fwd, bwd, lik, old))
        for j in range(1, n_steps):
            for s in range(node_start[j], node_start[j + 1]):
                _remember(s, fwd, bwd, lik, old)
                p = node_prev[s]
                if p < 0:
                    fwd[s, 0] = prior_pi
                    fwd[s, 1] = prior_tau
                else:
                    fwd[s, 0], fwd[s, 1] = _forget(
                        fwd[p, 0] + lik[p, 0], fwd[p, 1] + lik[p, 1], node_elapsed[s], gamma2
                    )
            for g in range(game_start[j], game_start[j + 1]):
                _rate_game(g, node_white, node_black, score, fwd, bwd, lik, msg, beta2, margin)
            for s in range(node_start[j], node_start[j + 1]):
                step = max(step, _posterior_change(s, fwd, bwd, lik, old))
        if n_steps == 1:  # one time step: iterate its games to their own fixed point
            for _ in range(20):
                for s in range(node_start[0], node_start[1]):
                    _remember(s, fwd, bwd, lik, old)
                for g in range(game_start[0], game_start[1]):
                    _rate_game(g, node_white, node_black, score, fwd, bwd, lik, msg, beta2, margin)
                inner = 0.0
                for s in range(node_start[0], node_start[1]):
                    inner = max(inner, _posterior_change(s, fwd, bwd, lik, old))
                step = max(step, inner)
                if inner <= epsilon:
                    break
        sweeps += 1
    return sweeps, step


def draw_margin(p_draw: float, beta: float) -> float:
    """ε = |Φ⁻¹((1 − p)/2)|·√2·β for two one-player teams (0 when p = 0)."""
    if p_draw == 0.0:
        return 0.0
    return float(abs(norm.ppf(0.5 - p_draw / 2.0, 0.0, _SQRT2 * beta)))


def smooth_arrays(
    white: np.ndarray,
    black: np.ndarray,
    score: np.ndarray,
    day: np.ndarray,
    n_players: int,
    config: TTTConfig,
) -> TTTResult:
    """TrueSkill Through Time over integer-coded games in time order."""
    n_games = white.shape[0]
    p_draw = float(np.mean(score == 0.5)) if config.p_draw is None else config.p_draw
    if p_draw == 0.0 and np.any(score == 0.5):
        raise TTTConfigError("the games contain draws but p_draw is 0")
    margin = draw_margin(p_draw, config.beta)
    step_of_game = (day.astype(np.int64)) // config.step_days  # (G,) non-decreasing
    steps, game_start = np.unique(step_of_game, return_index=True)
    game_start = np.r_[game_start, n_games].astype(np.int64)  # (T+1,)
    step_index = np.repeat(np.arange(steps.size), np.diff(game_start))  # (G,)
    # Skill nodes: one per (step, player), numbered in (step, player) order.
    keys = np.concatenate([step_index * n_players + white, step_index * n_players + black])
    node_keys, node_of = np.unique(keys, return_inverse=True)
    node_white = node_of[:n_games].astype(np.int64)
    node_black = node_of[n_games:].astype(np.int64)
    node_step_index = node_keys // n_players
    node_player = (node_keys % n_players).astype(np.int32)
    node_start = np.searchsorted(node_step_index, np.arange(steps.size + 1)).astype(np.int64)
    n_nodes = node_keys.size
    # Each player's chain of nodes in time order.
    by_player = np.lexsort((node_step_index, node_player))
    same = node_player[by_player[1:]] == node_player[by_player[:-1]]
    node_prev = np.full(n_nodes, -1, dtype=np.int64)
    node_next = np.full(n_nodes, -1, dtype=np.int64)
    node_prev[by_player[1:][same]] = by_player[:-1][same]
    node_next[by_player[:-1][same]] = by_player[1:][same]
    node_step = steps[node_step_index]
    node_elapsed = np.where(node_prev >= 0, node_step - node_step[node_prev], 0).astype(np.float64)

    fwd = np.zeros((n_nodes, 2))  # (S, 2) π, τ of the message from the past
    bwd = np.zeros((n_nodes, 2))  # (S, 2) from the future
    lik = np.zeros((n_nodes, 2))  # (S, 2) product of the node's game messages
    msg = np.zeros((n_games, 4))  # (G, 4) π, τ to White's node, π, τ to Black's node
    old = np.zeros((n_nodes, 2))  # (S, 2) posterior μ, σ before a sweep touched the node
    prior_pi = 1.0 / config.sigma**2
    sweeps, step = _smooth(
        node_start,
        game_start,
        node_prev,
        node_next,
        node_elapsed,
        node_white,
        node_black,
        np.ascontiguousarray(score, dtype=np.float64),
        fwd,
        bwd,
        lik,
        msg,
        old,
        prior_pi,
        config.mu * prior_pi,
        config.gamma**2,
        config.beta**2,
        margin,
        config.epsilon,
        config.iterations,
    )
    if step > config.epsilon:
        logger.warning(
            "TTT stopped after %d sweeps with step %.3g > epsilon %.3g",
            sweeps,
            step,
            config.epsilon,
        )
    post = fwd + bwd + lik  # (S, 2)
    node_mu = post[:, 1] / post[:, 0]
    node_sigma = np.sqrt(1.0 / post[:, 0])
    within_w = post[node_white] - msg[:, 0:2]  # (G, 2) White's node without this game
    within_b = post[node_black] - msg[:, 2:4]
    last_node = np.full(n_players, -1, dtype=np.int64)
    last_node[node_player] = np.arange(n_nodes)  # nodes are in time order: the last write wins
    played = last_node >= 0
    final = np.full(n_players, config.mu)
    final_sigma = np.full(n_players, config.sigma)
    final[played] = node_mu[last_node[played]]
    final_sigma[played] = node_sigma[last_node[played]]
    return TTTResult(
        white_before=within_w[:, 1] / within_w[:, 0],
        black_before=within_b[:, 1] / within_b[:, 0],
        white_sigma_before=np.sqrt(1.0 / within_w[:, 0]),
        black_sigma_before=np.sqrt(1.0 / within_b[:, 0]),
        node_player=node_player,
        node_step=node_step,
        node_mu=node_mu,
        node_sigma=node_sigma,
        final=final,
        final_sigma=final_sigma,
        iterations=int(sweeps),
        step=float(step),
        draw_margin=margin,
    )


def smooth_ttt(games: RatedGames, config: TTTConfig) -> TTTResult:
    """TrueSkill Through Time skills of every player at every time step they played."""
    return smooth_arrays(games.white, games.black, games.score, games.day, games.n_players, config)
