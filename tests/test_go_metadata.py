"""HumanSL metadata rows against values worked out by hand from KataGo's sgfmetadata.cpp.

Run: ``pytest tests/test_go_metadata.py``.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from pipeline.go_game.metadata import (
    SOURCE_FOX,
    SgfMetadata,
    fox_metadata,
    humansl_metadata,
    metadata_rows,
    parse_rank,
    profile,
)


def date_features(days: int) -> np.ndarray:
    """cos/sin pairs for periods 7 · 80000^(i/31), written out independently of the module."""
    values = []
    for i in range(32):
        period = 7.0 * 80000.0 ** (i / 31)
        values += [math.cos(2 * math.pi * days / period), math.sin(2 * math.pi * days / period)]
    return np.array(values, dtype=np.float32)


def test_rank_1d_profile_row_black_to_move():
    row = humansl_metadata("rank_1d")
    assert row.shape == (192,) and row.dtype == np.float32
    assert row[0:6].tolist() == [1, 1, 0, 0, 0, 0]
    assert row[6:40].tolist() == [1] * 9 + [0] * 25  # 1d: inverse rank 9
    assert row[40:74].tolist() == [1] * 9 + [0] * 25
    assert row[74] == 0.5  # KGS: ratedness unknown
    assert row[75:82].tolist() == [0, 0, 0, 0, 1, 0, 0]  # byo-yomi
    assert row[82] == pytest.approx(0.4 * (math.log(1260) - 6.5))  # 20 min main time
    assert row[83] == pytest.approx(0.3 * (math.log(31) - 3))  # 30 s periods
    assert row[84] == pytest.approx(0.5 * (math.log(7) - 1.5))  # 5 periods
    assert row[85] == pytest.approx(0.25 * (math.log(2) - 1.5))
    assert row[86] == 0.0
    days = (dt.date(2020, 3, 1) - dt.date(1970, 1, 1)).days
    assert days == 18322
    np.testing.assert_allclose(row[87:151], date_features(days), atol=2e-5)
    assert row[87] == pytest.approx(math.cos(2 * math.pi * 3 / 7), abs=1e-6)  # 18322 = 7·2617 + 3
    assert row[151:167].tolist() == [0, 0, 1] + [0] * 13  # source KGS
    assert not row[167:].any()


def test_rank_profiles_and_perspective():
    assert profile("rank_9d").inverse_b_rank == 1
    assert profile("rank_5k").inverse_w_rank == 14
    assert profile("rank_20k").inverse_b_rank == 29
    assert profile("preaz_5k").game_date == dt.date(2016, 9, 1)
    assert profile("preaz_5k").inverse_b_rank == 14
    old = humansl_metadata("preaz_5k")
    assert old[6:40].sum() == 14 and old[74] == 0.5
    days = (dt.date(2016, 9, 1) - dt.date(1970, 1, 1)).days
    np.testing.assert_allclose(old[87:151], date_features(days), atol=2e-5)
    # Asymmetric ranks swap with the side to move.
    meta = SgfMetadata(inverse_b_rank=3, inverse_w_rank=12, b_is_human=True, tc_is_none=True)
    white = meta.row(black_to_move=False)
    assert white[0:2].tolist() == [0, 1]
    assert white[6:40].sum() == 12 and white[40:74].sum() == 3
    both = metadata_rows(meta, np.array([True, False, True]))
    np.testing.assert_array_equal(both[1], white)
    np.testing.assert_array_equal(both[2], meta.row(black_to_move=True))


def test_pro_year_profiles():
    historical = humansl_metadata("proyear_2020")
    assert historical[6:40].sum() == 1 and historical[40:74].sum() == 1
    assert historical[75] == 1 and historical[74] == 0  # unknown time control, rated
    assert historical[151 + 5] == 1  # GoGoD
    modern = humansl_metadata("proyear_2022")
    assert modern[151 + 6] == 1  # Go4Go
    days = (dt.date(2022, 6, 1) - dt.date(1970, 1, 1)).days
    np.testing.assert_allclose(modern[87:151], date_features(days), atol=2e-5)
    with pytest.raises(ValueError, match="unknown HumanSL profile 'rank_10d'"):
        profile("rank_10d")


def test_rank_parsing_as_katago():
    assert parse_rank("9d") == (1, False, False)
    assert parse_rank("1d") == (9, False, False)
    assert parse_rank("1k") == (10, False, False)
    assert parse_rank("18k") == (27, False, False)
    assert parse_rank("18级") == (27, False, False)
    assert parse_rank("9段") == (1, False, False)
    assert parse_rank("pro") == (1, False, False)
    assert parse_rank("P6段") == (1, False, False)
    assert parse_rank("3 kyu") == (12, False, False)
    assert parse_rank("") == (0, False, True)
    assert parse_rank("-") == (0, True, False)
    assert parse_rank("5d", source="gogod") == (1, False, False)
    with pytest.raises(ValueError, match="unable to parse Go rank 'strong'"):
        parse_rank("strong")


def test_fox_game_metadata_row():
    meta = fox_metadata(
        "3k",
        "1d",
        date=dt.date(2018, 12, 31),
        main_time_s=1200,
        byo_yomi_periods=3,
        period_time_s=30,
    )
    row = meta.row(black_to_move=False, board_size=19)  # White (1d) to move
    assert row[6:40].sum() == 9 and row[40:74].sum() == 12
    assert row[74] == 0 and row[79] == 1
    assert row[84] == pytest.approx(0.5 * (math.log(5) - 1.5))
    assert row[151 + SOURCE_FOX] == 1
    blitz = fox_metadata("3k", "1d", date=dt.date(2018, 12, 31), main_time_s=60)
    assert blitz.row()[77] == 1 and blitz.row()[83] == pytest.approx(0.3 * (0 - 3))
