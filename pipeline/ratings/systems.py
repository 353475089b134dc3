"""The four rating systems behind one interface, for ``kibitz ratings fit`` and the tuner.

Each system turns a parameter mapping into its config dataclass and a ``RatedGames`` replay
into a ``SystemRun``: a rating for both players before every game (the feature the tuner
regresses outcomes on), per-game history columns and per-player final columns.

Elo and Glicko-2 share the Elo scale (a 400-point gap is 10:1 odds); TrueSkill and TTT ratings
are skill means on their own scale (``on_elo_scale`` False), which the tuner converts through
the fitted logistic slope when it bins games by rating difference.

Run: ``kibitz ratings fit --games DIR --system elo|glicko2|trueskill|ttt --out DIR``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.core.errors import KibitzError
from pipeline.ratings.data import RatedGames
from pipeline.ratings.elo import EloConfig, replay_elo
from pipeline.ratings.glicko2 import Glicko2Config, replay_glicko2
from pipeline.ratings.trueskill import TrueSkillConfig, replay_trueskill
from pipeline.ratings.ttt import TTTConfig, smooth_ttt

SYSTEM_NAMES = ("elo", "glicko2", "trueskill", "ttt")


class UnknownSystemError(KibitzError, KeyError):
    """A rating system name that Kibitz does not implement."""


class SystemParameterError(KibitzError, ValueError):
    """A parameter that the chosen rating system does not have."""


@dataclass(frozen=True)
class SystemRun:
    white_before: np.ndarray  # (G,) float64 White's rating before the game (system's scale)
    black_before: np.ndarray  # (G,) float64
    history: dict[str, tuple[np.ndarray, np.ndarray]]  # column → (White, Black) per game
    final: dict[str, np.ndarray]  # column → (P,) per player; the first column ranks players
    metrics: dict[str, float]  # facts about the run worth logging (TTT sweeps, …)


def _run_elo(games: RatedGames, config: EloConfig) -> SystemRun:
    result = replay_elo(games, config)
    return SystemRun(
        result.white_before,
        result.black_before,
        {"rating": (result.white_before, result.black_before)},
        {"rating": result.final},
        {},
    )


def _run_glicko2(games: RatedGames, config: Glicko2Config) -> SystemRun:
    r = replay_glicko2(games, config)
    return SystemRun(
        r.white_before,
        r.black_before,
        {"rating": (r.white_before, r.black_before), "rd": (r.white_rd_before, r.black_rd_before)},
        {"rating": r.final, "rd": r.final_rd, "volatility": r.final_vol},
        {},
    )


def _run_trueskill(games: RatedGames, config: TrueSkillConfig) -> SystemRun:
    r = replay_trueskill(games, config)
    return SystemRun(
        r.white_before,
        r.black_before,
        {
            "mu": (r.white_before, r.black_before),
            "sigma": (r.white_sigma_before, r.black_sigma_before),
        },
        {"mu": r.final, "sigma": r.final_sigma},
        {},
    )


def _run_ttt(games: RatedGames, config: TTTConfig) -> SystemRun:
    r = smooth_ttt(games, config)
    return SystemRun(
        r.white_before,
        r.black_before,
        {
            "mu": (r.white_before, r.black_before),
            "sigma": (r.white_sigma_before, r.black_sigma_before),
        },
        {"mu": r.final, "sigma": r.final_sigma},
        {"ttt_sweeps": float(r.iterations), "ttt_last_step": r.step, "draw_margin": r.draw_margin},
    )


@dataclass(frozen=True)
class RatingSystem:
    name: str
    config_type: type
    run: Callable[[RatedGames, Any], SystemRun]
    on_elo_scale: bool
    smoothing: bool  # uses later games for earlier ratings (TTT): the tuner must fit on train only


SYSTEMS: dict[str, RatingSystem] = {
    "elo": RatingSystem("elo", EloConfig, _run_elo, True, False),
    "glicko2": RatingSystem("glicko2", Glicko2Config, _run_glicko2, True, False),
    "trueskill": RatingSystem("trueskill", TrueSkillConfig, _run_trueskill, False, False),
    "ttt": RatingSystem("ttt", TTTConfig, _run_ttt, False, True),
}


def get_system(name: str) -> RatingSystem:
    try:
        return SYSTEMS[name]
    except KeyError:
        raise UnknownSystemError(
            f"unknown rating system {name!r}; choose from {SYSTEM_NAMES!r}"
        ) from None


def make_config(system: str, params: Mapping[str, Any]) -> Any:
    """The system's config from defaults overridden by ``params`` (tuples for Elo's k/thresholds)."""
    config_type = get_system(system).config_type
    fields = {f.name for f in dataclasses.fields(config_type)}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise SystemParameterError(
            f"{system} has no parameter(s) {unknown!r}; it has {sorted(fields)!r}"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    return config_type(**values)


def config_params(config: Any) -> dict[str, Any]:
    """Flat parameters of a config, as logged to MLflow."""
    return config.params()
