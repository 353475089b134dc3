"""The empirical parameterisation method: scores, splits, grids, and the tuner's choice on a
synthetic population whose true ratings are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.ratings.data import RatedGames
from pipeline.ratings.tune import (
    BIN_LABELS,
    ELO_LOGIT_PER_POINT,
    GridError,
    SplitError,
    bin_scores,
    classification_scores,
    expand_grid,
    fit_logit,
    split_games,
    tune,
)


def _population(
    n_players: int = 400, n_games: int = 48_000, seed: int = 7
) -> tuple[RatedGames, np.ndarray]:
    """Random pairings over 60 days; White wins with the Elo probability of the TRUE ratings."""
    rng = np.random.default_rng(seed)
    true = rng.normal(1500.0, 250.0, n_players)
    white = rng.integers(0, n_players, n_games)
    black = (white + 1 + rng.integers(0, n_players - 1, n_games)) % n_players
    p_white = 1.0 / (1.0 + 10 ** ((true[black] - true[white]) / 400.0))
    u = rng.random(n_games)
    score = np.where(u < p_white - 0.03, 1.0, np.where(u < p_white + 0.03, 0.5, 0.0))
    day = np.sort(rng.integers(19_700, 19_760, n_games)).astype(np.int32)
    games = RatedGames(
        white.astype(np.int32), black.astype(np.int32), score, day,
        np.array([f"g{i}" for i in range(n_games)], dtype=object),
        np.array([f"p{i}" for i in range(n_players)], dtype=object),
    )  # fmt: skip
    return games, true


def test_classification_scores_hand_computed() -> None:
    prob = np.array([0.9, 0.2, 0.6, 0.4])
    won = np.array([True, False, False, True])
    s = classification_scores(prob, won)
    # predicted [1, 0, 1, 0]: TP 1, FP 1, FN 1 → F1 = 2/(2+1+1)
    assert s["f1"] == pytest.approx(0.5)
    assert s["accuracy"] == pytest.approx(0.5)
    assert s["brier"] == pytest.approx((0.01 + 0.04 + 0.36 + 0.36) / 4)
    assert s["log_loss"] == pytest.approx(
        -(math.log(0.9) + math.log(0.8) + math.log(0.4) + math.log(0.4)) / 4
    )


def test_bins_are_right_closed() -> None:
    diff = np.array([0.0, 30.0, 30.5, 60.0, 100.0, 100.1, 200.0, 500.0, 500.1, -45.0])
    table = bin_scores(diff, np.full(diff.size, 0.6), np.ones(diff.size, bool))
    assert table["bin"].to_pylist() == list(BIN_LABELS)
    assert table["games"].to_pylist() == [2, 3, 1, 2, 1, 1]


def test_split_and_percentile_grid() -> None:
    games, _ = _population(n_players=50, n_games=2000)
    split = split_games(games, train_until="2023-12-31")  # day 19722 = 2023-12-31
    assert split.n_train == int(np.sum(games.day <= 19722))
    assert split_games(games, train_frac=0.75).n_train == 1500
    with pytest.raises(SplitError):
        split_games(games, train_frac=1.5)
    counts = np.bincount(np.concatenate([games.white, games.black]))
    configs = expand_grid({"k": [[30, 30, 30]], "thresholds": [["q10+1", "q25+1"], [5, 10]]}, games)
    assert configs[0]["thresholds"] == [
        int(np.percentile(counts, 10)) + 1,
        int(np.percentile(counts, 25)) + 1,
    ]
    assert configs[1]["thresholds"] == [5, 10]
    with pytest.raises(GridError, match="q10x"):
        expand_grid({"thresholds": [["q10x", 5]]}, games)


def test_tuner_on_known_population() -> None:
    games, _ = _population()
    split = split_games(games, train_frac=0.8)
    result = tune("elo", games, split)  # the default 12-configuration grid
    assert len(result.scores) == 12
    best = result.scores[result.best]
    # True ratings do not move, so the configuration that settles to the smallest K wins.
    assert best.params["k"] == [30, 16, 8]
    # Replayed ratings start equal and spread out only as games accumulate, so they are
    # compressed towards R0: a point of estimated rating is worth more than a true Elo point,
    # the more so the smaller K is.
    assert best.fit.slope > ELO_LOGIT_PER_POINT
    slope = {
        (tuple(s.params["k"]), tuple(s.params["thresholds"])): s.fit.slope for s in result.scores
    }
    for thresholds in {t for _, t in slope}:
        assert slope[(100, 50, 25), thresholds] < slope[(30, 16, 8), thresholds]
    assert abs(best.fit.intercept) < 4 * best.fit.intercept_se + 0.05  # no colour advantage
    assert best.fit.slope_p < 1e-100 and best.fit.slope_z > 50
    # Bins cover every decided test game exactly once.
    decided_test = int(np.sum(games.score[split.n_train :] != 0.5))
    assert sum(best.bins["games"].to_pylist()) == best.metrics["n_test"] == decided_test
    # Accuracy rises with the rating gap.
    acc = best.bins["accuracy"].to_pylist()
    assert acc[-1] > acc[0] + 0.3
    assert "chosen: #" in result.report()
    table = result.table()
    assert table.num_rows == 12 and table["chosen"].to_pylist().count(True) == 1


@pytest.mark.parametrize(
    ("system", "grid"), [("glicko2", {"tau": [0.3, 1.2]}), ("ttt", {"gamma": [0.01, 0.1]})]
)
def test_tuner_handles_other_systems(system: str, grid: dict) -> None:
    games, _ = _population(n_players=200, n_games=12_000)
    result = tune(system, games, split_games(games, train_frac=0.8), grid)
    assert len(result.scores) == 2
    for score in result.scores:
        assert score.metrics["accuracy"] > 0.7
        assert sum(score.bins["games"].to_pylist()) == score.metrics["n_test"]


def test_compiled_logit_equals_statsmodels() -> None:
    rng = np.random.default_rng(3)
    diff = rng.normal(0, 200, 5000)
    won = rng.random(5000) < 1 / (1 + np.exp(-(0.1 + 0.006 * diff)))
    fast = fit_logit(diff, won)
    ref = fit_logit(diff, won, with_statsmodels=True)
    for name in (
        "intercept",
        "slope",
        "intercept_se",
        "slope_se",
        "intercept_z",
        "slope_z",
        "intercept_p",
        "slope_p",
    ):
        assert getattr(fast, name) == pytest.approx(getattr(ref, name), rel=1e-6, abs=1e-12), name


def test_cli_system_names_match_the_systems() -> None:
    from pipeline.cli.ratings import SYSTEM_NAMES as CLI_NAMES
    from pipeline.ratings.systems import SYSTEM_NAMES, SYSTEMS

    assert CLI_NAMES == SYSTEM_NAMES == tuple(SYSTEMS)
