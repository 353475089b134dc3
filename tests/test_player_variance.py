"""The error one player's games share (pipeline/meta/player_variance.py): ρ recovered on a
hand-made set with a known player offset, the design effect by hand, the derived widths, and
which calibration a saved strength model applies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.meta.intervals import LEVEL_GRID, SavedStrength
from pipeline.meta.player_variance import (
    derivation_check,
    derived_half_widths,
    design_effect,
    shared_share,
)


def offsets(players: int, games: int, sd_player: float, sd_game: float, seed: int):
    """Residuals = a player's own offset N(0, sd_player) + a game's N(0, sd_game), plus a
    rank group's own pull (+2 for group 1), which is not a player's and must not count."""
    rng = np.random.default_rng(seed)
    player = np.repeat(np.arange(players), games)
    group = player % 2
    residual = (
        rng.normal(0, sd_player, players)[player]
        + rng.normal(0, sd_game, player.size)
        + 2.0 * group
    )
    return residual, player, group


def test_shared_share_recovers_a_known_player_offset():
    # sd 0.5 shared, 1.0 a game: rho = 0.25 / 1.25 = 0.2
    residual, player, group = offsets(4_000, 2, 0.5, 1.0, seed=0)
    rho, players = shared_share(residual, player, group)
    assert players == 4_000
    assert rho == pytest.approx(0.2, abs=0.03)
    # unbalanced: some players with 5 games, singletons left out, NaN ignored
    r5, p5, g5 = offsets(1_000, 5, 0.5, 1.0, seed=1)
    single, _, _ = offsets(500, 1, 0.5, 1.0, seed=2)
    residual = np.concatenate([r5, single, [np.nan, np.nan]])
    player = np.concatenate([p5, 10_000 + np.arange(500), [20_000, 20_000]])
    group = np.concatenate([g5, np.zeros(502, int)])
    rho, players = shared_share(residual, player, group)
    assert players == 1_000 and rho == pytest.approx(0.2, abs=0.03)
    # no shared part: rho near 0, clipped at 0; one player: no estimate
    residual, player, group = offsets(4_000, 2, 0.0, 1.0, seed=3)
    assert 0.0 <= shared_share(residual, player, group)[0] < 0.03
    assert math.isnan(shared_share(np.array([1.0, 2.0]), np.array([0, 0]), np.zeros(2))[0])


def test_design_effect_and_derived_widths_by_hand():
    assert design_effect(0.2, 1) == 1.0
    assert design_effect(0.2, 20) == pytest.approx(math.sqrt(1 + 19 * 0.2))  # 2.213
    widths = derived_half_widths({0.8: 1.0, 0.95: 2.0}, 0.25, 5)
    assert widths == {0.8: pytest.approx(math.sqrt(2.0)), 0.95: pytest.approx(2 * math.sqrt(2.0))}


def _record(players_at: tuple[int, ...], derived_at: tuple[int, ...]) -> dict:
    grid = [0.1 * (k + 1) for k in range(len(LEVEL_GRID))]
    record = {
        "scale": "rating", "columns": [], "models": {"5": "", "20": ""},
        "level_grid": list(LEVEL_GRID), "half_width": {"5": grid, "20": grid},
        "results": [],
    }  # fmt: skip
    if players_at:
        record["player_calibration"] = {"half_width": {str(n): [2 * w for w in grid]
                                                       for n in players_at}}  # fmt: skip
    if derived_at:
        record["derived_player_calibration"] = {
            "rho": 0.2, "players": 900,
            "half_width": {str(n): [3 * w for w in grid] for n in derived_at},
            "check": {"model": "kibitz-meta-go", "coverage": {"20": [0.81, 0.96]}},
        }  # fmt: skip
    return record


def test_a_saved_model_applies_measured_then_derived_then_rank_group_widths(tmp_path):
    both = SavedStrength(tmp_path, _record(players_at=(20,), derived_at=(5, 20)))
    assert both.calibration(20) == "player" and both.calibration(5) == "derived"
    assert both.half_widths(5)[79] == pytest.approx(3 * 8.0)  # level 0.80: grid value 8.0
    assert both.half_widths(20)[79] == pytest.approx(2 * 8.0)
    assert both.derivation_check(20) == ("kibitz-meta-go", [0.81, 0.96])
    assert both.derivation_check(5) is None  # not checked at 5
    plain = SavedStrength(tmp_path, _record(players_at=(), derived_at=()))
    assert plain.calibration(5) == "rank_group" and plain.half_widths(5)[79] == pytest.approx(8.0)


def test_derivation_check_reads_the_derived_rows_of_a_model():
    manifest = {
        "name": "kibitz-meta-go",
        "strength": {"results": [
            {"n": 5, "sampling": "player", "calibration": "derived", "coverage_80": 0.84,
             "coverage_95": 0.96},
            {"n": 5, "sampling": "player", "calibration": "player", "coverage_80": 0.8,
             "coverage_95": 0.95},
        ]},
    }  # fmt: skip
    assert derivation_check(manifest) == {
        "model": "kibitz-meta-go",
        "coverage": {"5": [0.84, 0.96]},
    }
    assert derivation_check({"name": "x", "strength": {"results": []}}) is None
