"""How a player spent their clock (sql/intermediate/int_instance_time_usage.sql), through the
real aggregation on a DuckDB file, on three hand-computed games: one with an increment, one lost
on time, one without clocks (an over-the-board game)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from synthetic_features import write_features

from pipeline.core.features_schema import features_schema
from pipeline.meta.aggregate import feature_columns, load_mart, run_aggregate
from pipeline.meta.model import (
    FAMILIES,
    FEATURE_SETS,
    InstanceData,
    applied_sets,
    drop_empty_columns,
    family_columns,
    preferred_set,
    reads_clock,
)


def moves(game_id: str, clocks: list[float | None], base: int | None, increment: int | None,
          losses: list[float], expected: list[float]) -> list[dict]:  # fmt: skip
    """White's moves of one game (ply 0, 2, 4, …) with their clocks and losses."""
    return [
        {
            "game_id": game_id, "game": "chess", "source": "lichess", "month": "2024-02",
            "ply": 2 * k, "move_number": k + 1, "colour": "white", "player": "alice",
            "opponent": "bob", "rating": 1500, "rank": None, "rank_num": None,
            "rank_group": "1400-1600", "played_move": "e2e4", "num_legal": 20,
            "v_before": 0.0, "v_after": -loss, "loss": loss, "expected_loss": e,
            "expected_loss_moves": 3, "clock_s": clock, "tc_base_s": base,
            "tc_increment_s": increment, "prior_maia_1100": 0.5,
            "logprior_maia_1100": math.log(0.5), "top1_maia_1100": True,
        }
        for k, (clock, loss, e) in enumerate(zip(clocks, losses, expected, strict=True))
    ]  # fmt: skip


# 180+2: thinks 0 (the first move: no increment, the clock not yet running), 180 + 2 - 178 = 4,
# 178 + 2 - 100 = 80, 100 + 2 - 10 = 92, 10 + 2 - 5 = 7 s; the last move started with 10 s,
# under a tenth of the base (18 s): in time trouble.
INCREMENT = moves("inc", [180, 178, 100, 10, 5], 180, 2, [0.0, 0.2, 0.1, 0.5, 1.0],
                  [0.1, 0.1, 0.3, 0.2, 0.2])  # fmt: skip
# 60+0, lost on time: thinks 1, 30, 25, 4 s, the clock at 0 after the last move, which started
# with 4 s, under a tenth of the base (6 s).
ON_TIME = moves("flag", [59, 29, 4, 0], 60, 0, [0.1, 0.1, 0.3, 2.0], [0.2, 0.2, 0.2, 0.4])
NO_CLOCK = moves("otb", [None, None, None], None, None, [0.1, 0.2, 0.3], [0.1, 0.1, 0.1])


@pytest.fixture(scope="module")
def usage(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("time")
    table = pa.Table.from_pylist(
        INCREMENT + ON_TIME + NO_CLOCK, schema=features_schema(["maia-1100"], [])
    )
    write_features(table, root / "features")
    run_aggregate(root / "features", root / "aggregates")
    rows = load_mart(root / "aggregates", "player_instance_features").to_pylist()
    return {row["game_id"]: row for row in rows}


def test_a_game_with_an_increment(usage):
    row = usage["inc"]
    thinks = np.array([0, 4, 80, 92, 7]) / 180
    assert row["clock_think_base_mean_all"] == pytest.approx(thinks.mean())
    assert row["clock_think_base_median_all"] == pytest.approx(7 / 180)
    assert row["clock_think_base_std_all"] == pytest.approx(thinks.std())
    # the share of what the move started with (plus the increment from the second move on)
    left = np.array([0 / 180, 4 / 182, 80 / 180, 92 / 102, 7 / 12])
    assert row["clock_think_left_mean_all"] == pytest.approx(left.mean())
    assert row["clock_trouble_share_all"] == pytest.approx(1 / 5)
    assert row["clock_instant_share_all"] == pytest.approx(1 / 5)  # the first move
    assert row["clock_opening_share_all"] == pytest.approx(183 / 180)  # all five are ≤ move 10
    assert row["clock_spent_share_all"] == pytest.approx(183 / 180)
    assert row["clock_longest_share_all"] == pytest.approx(92 / 180)
    assert row["clock_end_share_all"] == pytest.approx(5 / 180)
    assert row["clock_trouble_loss_mean_all"] == pytest.approx(1.0)
    assert row["clock_trouble_loss_gap_all"] == pytest.approx(1.0 - 0.8 / 4)
    think = np.array([0, 4, 80, 92, 7])
    loss, expected = np.array([0.0, 0.2, 0.1, 0.5, 1.0]), np.array([0.1, 0.1, 0.3, 0.2, 0.2])
    assert row["clock_think_loss_corr_all"] == pytest.approx(np.corrcoef(think, loss)[0, 1])
    assert row["clock_think_eloss_corr_all"] == pytest.approx(np.corrcoef(think, expected)[0, 1])


def test_a_game_lost_on_time(usage):
    row = usage["flag"]
    assert row["clock_end_share_all"] == 0.0
    assert row["clock_spent_share_all"] == pytest.approx(1.0)  # 1 + 30 + 25 + 4 of 60 s
    assert row["clock_longest_share_all"] == pytest.approx(30 / 60)
    assert row["clock_trouble_share_all"] == pytest.approx(1 / 4)
    assert row["clock_trouble_loss_mean_all"] == pytest.approx(2.0)
    assert row["clock_trouble_loss_gap_all"] == pytest.approx(2.0 - 0.5 / 3)
    left = [1 / 60, 30 / 59, 25 / 29, 4 / 4]  # the last move spent all it had
    assert row["clock_think_left_mean_all"] == pytest.approx(np.mean(left))


def test_a_game_without_clocks_has_no_clock_column(usage):
    row = usage["otb"]
    clock = [c for c in row if c.startswith("clock_")]
    assert len(clock) == 8 * 3 + 8 and all(row[c] is None for c in clock)
    assert row["loss_mean_all"] == pytest.approx(0.2)  # the other features are there


def test_the_clock_columns_are_a_feature_family_of_their_own(usage):
    columns = feature_columns(list(usage["inc"]))
    clock = family_columns(columns, ["clock"])
    assert clock == [c for c in columns if c.startswith("clock_")] and len(clock) == 32
    others = [f for f in FAMILIES if f != "clock"]
    assert not set(clock) & set(family_columns(columns, others))
    assert "clock" in FEATURE_SETS["full_dcloss_clock"] and FEATURE_SETS["clock_only"] == ("clock",)


def test_columns_with_no_value_leave_the_model_and_games_without_clocks_take_the_no_clock_set():
    """Fox SGFs carry no clock: their clock columns are empty, so the clock sets are not trained
    on Go; an estimate from games without clocks applies the first set that reads none."""
    nan = float("nan")
    data = InstanceData(
        features=np.array([[1.0, nan, 0.5], [2.0, nan, nan]]),
        columns=["loss_mean_all", "clock_spent_share_all", "clock_end_share_all"],
        group=np.array([0, 1]), split=np.array([0, 0], np.int8), unit=np.array([0, 1]),
        game_id=np.array(["a", "b"], dtype=object), group_names=["low", "high"],
    )  # fmt: skip
    kept = drop_empty_columns(data)
    assert kept.columns == ["loss_mean_all", "clock_end_share_all"]
    np.testing.assert_array_equal(kept.features[:, 0], [1.0, 2.0])
    trained = ["full", "full_dcloss", "full_dcloss_clock", "clock_only"]
    assert preferred_set(trained) == "full_dcloss_clock"
    assert preferred_set(trained, clock=False) == "full_dcloss"
    assert preferred_set(["full_dcloss"], clock=False) == "full_dcloss"
    # what ships and gets player-trained and strength models: first choice, then the no-clock one
    assert applied_sets(trained) == ["full_dcloss_clock", "full_dcloss"]
    assert applied_sets(["full", "full_dcloss"]) == ["full_dcloss"]
    assert applied_sets(["clock_only"]) == ["clock_only"]
    assert reads_clock("clock_only") and not reads_clock("full_dcloss")


def test_which_set_an_estimate_applies_when_the_clock_model_cannot_read_the_games():
    """Hand-made manifests: a game without a clock and one of an unseen time control send the
    estimate to the set that reads no clock, and the note says why; a model with clock sets
    only keeps its set and says what it does not know; aggregates written before the time
    control give a model that records none; a user's --feature-set stands."""
    from types import SimpleNamespace

    import pyarrow as pa

    from pipeline.estimate.result import applied_feature_set

    games = pa.table(
        {"clock_spent_share_all": [0.5, None], "tc_base_s": [180, 600], "tc_increment_s": [0, 5]}
    )

    def models(sets: list[str], controls: list[str] | None) -> SimpleNamespace:
        manifest = {"models": {name: {} for name in sets}}
        if controls is not None:
            manifest["time_controls"] = controls
        return SimpleNamespace(manifest=manifest, feature_set=lambda: preferred_set(sets))

    both = ["full_dcloss", "full_dcloss_clock"]
    chosen, note = applied_feature_set(models(both, ["180+0"]), games, None)
    assert chosen == "full_dcloss"
    assert note == (
        "1 of 2 game(s) have no clock; time control 600+5 is not among the 1 of the clock"
        " model's training games (180+0 …), so the model that reads no clock (full_dcloss)"
    )
    timed = games.filter(pa.array([True, False]))  # one 180+0 game with its clock
    assert applied_feature_set(models(both, ["180+0"]), timed, None) == ("full_dcloss_clock", None)
    chosen, note = applied_feature_set(models(["full_dcloss_clock"], ["180+0"]), games, None)
    assert chosen == "full_dcloss_clock" and note.endswith("(the model has no set that reads none)")
    _, note = applied_feature_set(models(both, None), timed, None)
    assert "the clock model records no time control of its training games" in note
    chosen, note = applied_feature_set(models(both, ["180+0"]), games, "full_dcloss_clock")
    assert chosen == "full_dcloss_clock" and note.endswith("reads the clock all the same")
    assert applied_feature_set(models(both, []), games, "full_dcloss") == ("full_dcloss", None)
