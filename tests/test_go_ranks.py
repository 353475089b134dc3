"""Go rank normalisation: Fox's Chinese labels, English forms, the numeric scale and groups."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.go_game.ranks import (
    KUBOKI_GROUPS,
    RankError,
    common_group_array,
    normalize_rank,
    normalize_rank_array,
    rank_group,
    rank_group_array,
    rank_label,
    rank_num,
    rank_num_array,
    try_normalize_rank,
)


@pytest.mark.parametrize(
    ("raw", "rank", "num", "group"),
    [
        ("9段", "9d", 9.0, "9d"),
        ("1段", "1d", 1.0, "1d"),
        ("18级", "18k", -17.0, None),
        ("6级", "6k", -5.0, None),
        ("5级", "5k", -4.0, "3-5k"),
        ("3级", "3k", -2.0, "3-5k"),
        ("2级", "2k", -1.0, "1-2k"),
        ("1级", "1k", 0.0, "1-2k"),
        ("P6段", "pro", 10.0, "pro"),
        ("P1段", "pro", 10.0, "pro"),
        ("3k", "3k", -2.0, "3-5k"),
        ("9d", "9d", 9.0, "9d"),
        ("1D", "1d", 1.0, "1d"),
        ("5K", "5k", -4.0, "3-5k"),
        ("7p", "pro", 10.0, "pro"),
        (" 4d ", "4d", 4.0, "4d"),
    ],
)
def test_rank_table(raw: str, rank: str, num: float, group: str | None) -> None:
    assert normalize_rank(raw) == rank
    assert rank_num(rank) == num
    assert rank_group(rank) == group


@pytest.mark.parametrize("raw", ["", "?", "10段", "0级", "31k", "9x", "段", "pro"])
def test_non_ranks_raise_and_map_to_none(raw: str) -> None:
    with pytest.raises(RankError, match=repr(raw).replace("?", r"\?")):
        normalize_rank(raw)
    assert try_normalize_rank(raw) is None
    assert try_normalize_rank(None) is None


def test_kuboki_groups_cover_3k_to_9d() -> None:
    ranks = ["5k", "4k", "3k", "2k", "1k"] + [f"{n}d" for n in range(1, 10)]
    assert sorted({rank_group(r) for r in ranks}, key=KUBOKI_GROUPS.index) == list(KUBOKI_GROUPS)


def test_arrow_helpers_match_scalar_functions() -> None:
    raw = pa.array(["9段", "18级", None, "P6段", "3k", "?", "1级", "9段"])
    ranks = normalize_rank_array(raw)
    assert ranks.to_pylist() == ["9d", "18k", None, "pro", "3k", None, "1k", "9d"]
    assert rank_num_array(ranks).to_pylist() == [9.0, -17.0, None, 10.0, -2.0, None, 0.0, 9.0]
    groups = rank_group_array(ranks)
    assert groups.to_pylist() == ["9d", None, None, "pro", "3-5k", None, "1-2k", "9d"]
    other = pa.array(["9d", None, "1d", "pro", "3-5k", "3-5k", "1-2k", "8d"])
    assert common_group_array(groups, other).to_pylist() == [
        "9d",
        None,
        None,
        "pro",
        "3-5k",
        None,
        "1-2k",
        None,
    ]


def test_arrow_helpers_accept_chunked_arrays() -> None:
    raw = pa.chunked_array([["9段", "2级"], ["P3段"]])
    assert normalize_rank_array(raw).to_pylist() == ["9d", "2k", "pro"]


def test_rank_label_inverts_rank_num():
    for rank in ("1k", "5k", "18k", "1d", "4d", "9d"):
        assert rank_label(rank_num(rank)) == rank
    assert (rank_label(0.49), rank_label(0.5), rank_label(-2.4)) == ("1k", "1d", "3k")
    # above the top amateur rank an estimate's interval reads "9d+", never a rank Fox lacks
    assert (rank_label(9.49), rank_label(9.5), rank_label(11.5)) == ("9d", "9d+", "9d+")
