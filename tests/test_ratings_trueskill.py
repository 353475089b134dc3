"""TrueSkill for two players: the ``trueskill`` docs' values and agreement with the package on
the real Fox by-player games."""

from __future__ import annotations

import numpy as np
import pytest
import trueskill
from ratings_real_games import build_games_table

from pipeline.ratings.data import load_games
from pipeline.ratings.trueskill import (
    TrueSkillConfig,
    TrueSkillConfigError,
    replay_arrays,
    replay_trueskill,
)


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        # trueskill docs: rate_1vs1(Rating(), Rating()) → (29.396, 7.171), (20.604, 7.171)
        (1.0, [(29.396, 7.171), (20.604, 7.171)]),
        (0.0, [(20.604, 7.171), (29.396, 7.171)]),
        # drawn=True → (25.000, 6.458) both
        (0.5, [(25.000, 6.458), (25.000, 6.458)]),
    ],
)
def test_docs_two_player_values(score: float, expected: list[tuple[float, float]]) -> None:
    r = replay_arrays(
        np.array([0], np.int32), np.array([1], np.int32), np.array([score]), 2, TrueSkillConfig()
    )
    got = [
        (round(float(m), 3), round(float(s), 3))
        for m, s in zip(r.final, r.final_sigma, strict=True)
    ]
    assert got == expected


def test_draw_margin_matches_package() -> None:
    config = TrueSkillConfig(draw_probability=0.1)
    assert config.draw_margin == pytest.approx(
        trueskill.calc_draw_margin(0.1, 2, env=trueskill.TrueSkill(backend="scipy")), rel=1e-12
    )


def test_draws_need_draw_probability() -> None:
    with pytest.raises(TrueSkillConfigError, match="draws"):
        replay_arrays(
            np.array([0], np.int32),
            np.array([1], np.int32),
            np.array([0.5]),
            2,
            TrueSkillConfig(draw_probability=0.0),
        )


def test_agrees_with_trueskill_package_on_real_games(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The package (scipy backend) needs ~3 ms a game: the first 2,000 games keep this test short
    # and still hold three of the set's six real draws.
    games = load_games(build_games_table("fox_by_player", tmp_path_factory.getbasetemp())).head(
        2000
    )
    assert np.sum(games.score == 0.5) == 3
    config = TrueSkillConfig()
    mine = replay_trueskill(games, config)
    env = trueskill.TrueSkill(
        mu=config.mu, sigma=config.sigma, beta=config.beta, tau=config.tau,
        draw_probability=config.draw_probability, backend="scipy",
    )  # fmt: skip
    ratings = [env.create_rating() for _ in range(games.n_players)]
    before_w = np.empty(games.n_games)
    for g, (w, b, s) in enumerate(
        zip(games.white.tolist(), games.black.tolist(), games.score.tolist(), strict=True)
    ):
        before_w[g] = ratings[w].mu
        if s == 0.0:
            ratings[b], ratings[w] = trueskill.rate_1vs1(ratings[b], ratings[w], env=env)
        else:
            ratings[w], ratings[b] = trueskill.rate_1vs1(
                ratings[w], ratings[b], drawn=s == 0.5, env=env
            )
    np.testing.assert_allclose(mine.final, [r.mu for r in ratings], rtol=1e-6)
    np.testing.assert_allclose(mine.final_sigma, [r.sigma for r in ratings], rtol=1e-6)
    np.testing.assert_allclose(mine.white_before, before_w, rtol=1e-6)
