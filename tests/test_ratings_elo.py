"""Elo with a stepwise K: hand-computed updates, K switching exactly at nc1/nc2, and the
compiled replay equal to a plain-Python replay on real Fox games."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from ratings_real_games import build_games_table

from pipeline.ratings.data import final_table, from_table, history_table, load_games
from pipeline.ratings.elo import EloConfig, EloConfigError, replay_arrays, replay_elo


def _games_table(rows: list[tuple[str, str, str, str]]) -> pa.Table:
    """(white, black, winner, date) rows, in file order."""
    return pa.table(
        {
            "game_id": [f"g{i}" for i in range(len(rows))],
            "white": [r[0] for r in rows],
            "black": [r[1] for r in rows],
            "winner": [r[2] for r in rows],
            "date": pa.array(np.array([r[3] for r in rows], dtype="datetime64[D]"), pa.date32()),
            "source_file": ["a.pgn"] * len(rows),
            "source_member": pa.nulls(len(rows), pa.string()),
            "source_index": list(range(len(rows))),
        }
    )


@pytest.mark.parametrize(
    ("score", "expected"),
    [(1.0, (1516.0, 1484.0)), (0.5, (1500.0, 1500.0)), (0.0, (1484.0, 1516.0))],
)
def test_equal_players_k32(score: float, expected: tuple[float, float]) -> None:
    r = replay_arrays(
        np.array([0], np.int32),
        np.array([1], np.int32),
        np.array([score]),
        2,
        EloConfig(k=(32, 32, 32)),
    )
    assert r.final.tolist() == pytest.approx(list(expected), abs=1e-12)
    assert (r.white_before[0], r.black_before[0]) == (1500.0, 1500.0)


def test_unequal_players_hand_computed() -> None:
    # Game 1: 1500 beats 1500 with K = 20 → 1510 / 1490.
    # Game 2: the 1510 player loses to a new 1500 player:
    #   E = 1/(1 + 10^(−10/400)) = 0.5143871841659987, change = 20·E = 10.287743683319974.
    config = EloConfig(k=(20, 20, 20))
    r = replay_arrays(
        np.array([0, 0], np.int32), np.array([1, 2], np.int32), np.array([1.0, 0.0]), 3, config
    )
    assert r.white_before[1] == pytest.approx(1510.0, abs=1e-12)
    assert r.final.tolist() == pytest.approx(
        [1499.7122563166800, 1490.0, 1510.2877436833200], abs=1e-9
    )


def test_stepwise_k_switches_exactly_at_thresholds() -> None:
    # Player 0 plays 7 games, each against a new 1500 opponent; K must be Ka for games 1–2,
    # Kb for games 3–4, Kc from game 5 on (n counts the current game).
    config = EloConfig(k=(40, 20, 10), thresholds=(2, 4))
    n = 7
    white = np.zeros(n, np.int32)
    black = np.arange(1, n + 1, dtype=np.int32)
    score = np.array([1, 0, 1, 1, 0, 1, 0.5])
    r = replay_arrays(white, black, score, n + 1, config)
    after = np.r_[r.white_before[1:], r.final[0]]
    expected_score = 1.0 / (1.0 + 10 ** ((r.black_before - r.white_before) / 400.0))
    k_used = (after - r.white_before) / (score - expected_score)
    assert k_used == pytest.approx([40, 40, 20, 20, 10, 10, 10], abs=1e-9)
    # Every opponent played once, so it used Ka.
    opp_change = r.final[1:] - 1500.0
    assert opp_change == pytest.approx(-40 * (score - expected_score), abs=1e-9)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": (10, 20, 5)},
        {"k": (30, 30, 0)},
        {"thresholds": (10, 5)},
        {"scale": 0.0},
    ],
)
def test_invalid_config_is_rejected(kwargs: dict) -> None:
    with pytest.raises(EloConfigError, match=r"got|need"):
        EloConfig(**kwargs)


def test_order_and_exclusions_from_table() -> None:
    table = _games_table(
        [
            ("b", "c", "white", "2024-02-02"),
            ("a", "b", "white", "2024-02-01"),
            ("a", "a", "white", "2024-02-01"),
            ("c", "a", None, "2024-02-01"),
        ]
    )
    games = from_table(table)
    assert games.excluded == {"unknown result": 1, "player against themself": 1}
    assert games.game_id.tolist() == ["g1", "g0"]  # by date, not by file order
    r = replay_elo(games, EloConfig(k=(32, 32, 32)))
    final = dict(zip(games.players.tolist(), r.final.tolist(), strict=True))
    # a beats b (1516/1484), then b (1484) beats c (1500): E = 1/(1+10^(16/400)) = 0.476981
    e = 1.0 / (1.0 + 10 ** (16 / 400))
    assert final["a"] == pytest.approx(1516.0)
    assert final["b"] == pytest.approx(1484.0 + 32 * (1 - e))
    assert final["c"] == pytest.approx(1500.0 - 32 * (1 - e))
    hist = history_table(games, {"rating": (r.white_before, r.black_before)})
    assert hist.column("games_before").to_pylist() == [0, 0, 1, 0]
    assert hist.column("rating_before").to_pylist() == pytest.approx([1500, 1500, 1484, 1500])
    top = final_table(games, {"rating": r.final})
    assert top.column("player").to_pylist()[0] == "a"


def _plain_python_elo(white, black, score, n_players, ka, kb, kc, nc1, nc2):
    ratings = [1500.0] * n_players
    played = [0] * n_players
    for w, b, s in zip(white.tolist(), black.tolist(), score.tolist(), strict=True):
        e = 1.0 / (1.0 + 10 ** ((ratings[b] - ratings[w]) / 400.0))
        played[w] += 1
        played[b] += 1
        kw = ka if played[w] <= nc1 else (kb if played[w] <= nc2 else kc)
        kbl = ka if played[b] <= nc1 else (kb if played[b] <= nc2 else kc)
        ratings[w] += kw * (s - e)
        ratings[b] -= kbl * (s - e)
    return np.array(ratings)


def test_replay_matches_plain_python_on_real_fox_games(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    games = load_games(build_games_table("fox_by_player", tmp_path_factory.getbasetemp()))
    assert games.n_games == 10332
    config = EloConfig(k=(60, 30, 16), thresholds=(5, 10))
    r = replay_elo(games, config)
    expected = _plain_python_elo(
        games.white, games.black, games.score, games.n_players, 60, 30, 16, 5, 10
    )
    assert np.max(np.abs(r.final - expected)) < 1e-9
    assert math.isclose(float(np.mean(r.final)), 1500.0, abs_tol=1.0)  # near zero-sum
