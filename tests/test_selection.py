"""Selection rules: every rule type on hand-built games, first-rule counting, rules-file
errors, and the Kuboki et al. 2025 Go preset on the real Fox selection (100 games per group).

The chess preset's counts on the real Lichess splits are checked in test_ingest_chess.py.
Run: ``python -m pytest tests/test_selection.py -q``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.core import settings
from pipeline.core.games_schema import GAMES_SCHEMA
from pipeline.ingest import sgf as ingest_sgf
from pipeline.ingest.selection import (
    PRESET_NAMES,
    Rule,
    RulesError,
    SelectionRules,
    apply_selection,
    load_preset,
    load_rules,
    parse_rules,
    rule_passes,
)

GO_GROUPS = ["3-5k", "1-2k", *(f"{d}d" for d in range(1, 10))]


def _games(rows: list[dict[str, Any]]) -> pa.Table:
    """A GAMES_SCHEMA table from partial rows (unspecified columns are null)."""
    defaults = {"game_id": "x", "game": "go", "source": "fox", "month": "2020-01"}
    defaults |= {"source_file": "f.sgf", "source_index": 0, "num_plies": 0, "moves": []}
    full = [defaults | row for row in rows]
    return pa.table(
        {f.name: [r.get(f.name) for r in full] for f in GAMES_SCHEMA}, schema=GAMES_SCHEMA
    )


def _passes(rule: str, rows: list[dict[str, Any]], **params: Any) -> list[bool]:
    return rule_passes(_games(rows), Rule(rule, rule, params)).tolist()


def test_presets_load_with_versioned_labels() -> None:
    labels = [load_preset(name).label for name in PRESET_NAMES]
    assert labels == ["chess-kuboki2025@1", "go-kuboki2025@1", "all@1"]
    chess = load_preset("chess-kuboki2025")
    assert [r.rule for r in chess.rules] == ["same_rank_group", "event_matches", "min_plies"]
    assert chess.rules[2].params == {"n": 20}


def test_same_rank_group_needs_equal_non_null_allowed_groups() -> None:
    rows = [
        {"white_rank_group": "1d", "black_rank_group": "1d"},
        {"white_rank_group": "1d", "black_rank_group": "2d"},
        {"white_rank_group": None, "black_rank_group": None},
        {"white_rank_group": "pro", "black_rank_group": "pro"},
    ]
    assert _passes("same_rank_group", rows) == [True, False, False, True]
    assert _passes("same_rank_group", rows, allowed=GO_GROUPS) == [True, False, False, False]


def test_min_plies_is_strictly_more_than_n() -> None:
    rows = [{"num_plies": 20}, {"num_plies": 21}, {"num_plies": 0}]
    assert _passes("min_plies", rows, n=20) == [False, True, False]


def test_event_matches_lichess_rated_blitz_events() -> None:
    pattern = load_preset("chess-kuboki2025").rules[1].params["pattern"]
    events = [
        "Rated Blitz game",
        "Rated Blitz tournament https://lichess.org/tournament/i508TfNr",
        "Blitz swiss https://lichess.org/swiss/abc",
        "Rated Bullet game",
        "Casual Blitz game",
        None,
    ]
    rows = [{"event": e} for e in events]
    assert _passes("event_matches", rows, pattern=pattern) == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_tc_class_and_ended_by_lists() -> None:
    rows = [{"tc_class": "blitz", "ended_by": "resign"}, {"tc_class": "bullet", "ended_by": "time"}]
    assert _passes("tc_class_in", rows, classes=["blitz"]) == [True, False]
    assert _passes("ended_by_in", rows, values=["resign", "score", "draw"]) == [True, False]


def test_min_score_margin_rejects_fox_b_plus_0_02_and_keeps_non_score_endings() -> None:
    rows = [
        {"ended_by": "score", "score_margin": 0.02},  # Fox's undocumented B+0.02
        {"ended_by": "score", "score_margin": 0.5},
        {"ended_by": "score", "score_margin": None},
        {"ended_by": "draw"},
        {"ended_by": "resign"},
    ]
    assert _passes("min_score_margin", rows, margin=0.5) == [False, True, False, True, True]


def test_no_handicap_checks_the_count_and_the_setup_stones() -> None:
    rows = [
        {"handicap": 0},
        {"handicap": None},
        {"handicap": 2, "setup_black": ["pd", "dp"]},
        {"handicap": 0, "setup_black": ["pd"]},
        {"handicap": None, "setup_black": []},
    ]
    assert _passes("no_handicap", rows) == [True, True, False, False, True]


def test_alternating_colours_flags_two_moves_in_a_row_within_a_game_only() -> None:
    rows = [
        {"moves": ["B:pd", "W:dd", "B:pp", "W:pass"]},
        {"moves": ["W:pd", "B:dd"]},  # White first is fine: only repeats are rejected
        {"moves": ["B:pd", "B:dd", "W:pp"]},
        {"moves": []},
        {"moves": ["B:aa"]},  # the previous game ended with W, this one starts with B: fine
        {"moves": ["B:bb", "W:cc", "W:dd"]},
    ]
    assert _passes("alternating_colours", rows) == [True, True, False, True, True, False]


def test_each_rejected_game_is_counted_by_its_first_failing_rule() -> None:
    rules = load_preset("go-kuboki2025")
    alternating = [f"{'BW'[i % 2]}:aa" for i in range(60)]
    good = {"white_rank_group": "1d", "black_rank_group": "1d", "num_plies": 60}
    good |= {"moves": alternating, "ended_by": "resign", "handicap": 0}
    rows = [
        good,
        good | {"black_rank_group": "2d", "num_plies": 10},  # two failures: counted once
        good | {"num_plies": 50},
        good | {"ended_by": "time"},
        good | {"ended_by": "score", "score_margin": 0.02},
        good | {"ended_by": "score", "score_margin": 12.5},
        good | {"moves": ["B:aa", "B:bb", *alternating[2:]]},
        good | {"handicap": 3},
        good | {"ended_by": "draw"},
    ]
    kept, rejected = apply_selection(_games(rows), rules)
    assert kept.num_rows == 3
    assert kept.column("selection").to_pylist() == ["go-kuboki2025@1"] * 3
    assert rejected == {
        "same_rank_group": 1,
        "min_plies": 1,
        "ended_by_in": 1,
        "min_score_margin": 1,
        "alternating_colours": 1,
        "no_handicap": 1,
    }
    assert kept.num_rows + sum(rejected.values()) == len(rows)


def test_all_preset_keeps_everything() -> None:
    table = _games([{"num_plies": 3}, {"num_plies": 0}])
    kept, rejected = apply_selection(table, load_preset("all"))
    assert kept.num_rows == 2 and rejected == {}


def test_user_rules_file_with_named_rules(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: long-blitz\nversion: 3\ngame: chess\nrules:\n"
        "  - {rule: tc_class_in, classes: [blitz]}\n"
        "  - {rule: min_plies, n: 40, name: long}\n"
        "  - {rule: min_plies, n: 60, name: longer}\n"
    )
    rules = load_rules(path)
    assert isinstance(rules, SelectionRules) and rules.label == "long-blitz@3"
    table = _games([{"tc_class": "blitz", "num_plies": n} for n in (30, 50, 70)])
    kept, rejected = apply_selection(table, rules)
    assert kept.column("num_plies").to_pylist() == [70]
    assert rejected == {"tc_class_in": 0, "long": 1, "longer": 1}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"name": "x", "version": 1, "game": "chess"}, "missing key 'rules'"),
        ({"name": "x", "version": 1, "game": "tennis", "rules": []}, "game 'tennis'"),
        (
            {"name": "x", "version": 1, "game": "go", "rules": [{"rule": "fast"}]},
            "unknown rule type 'fast'",
        ),
        (
            {"name": "x", "version": 1, "game": "go", "rules": [{"rule": "min_plies"}]},
            "missing \\['n'\\]",
        ),
        (
            {
                "name": "x",
                "version": 1,
                "game": "go",
                "rules": [{"rule": "min_plies", "n": 1, "m": 2}],
            },
            "unknown \\['m'\\]",
        ),
        (
            {
                "name": "x",
                "version": 1,
                "game": "chess",
                "rules": [{"rule": "event_matches", "pattern": "(("}],
            },
            "bad regex",
        ),
        (
            {"name": "x", "version": 1, "game": "go", "rules": [{"rule": "no_handicap"}] * 2},
            "repeated: \\['no_handicap'\\]",
        ),
    ],
)
def test_bad_rules_are_refused_with_the_reason(document: dict, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        parse_rules(document, where="test.yaml")


def test_missing_rules_file_and_unknown_preset() -> None:
    with pytest.raises(RulesError, match="does not exist"):
        load_rules("/nonexistent/rules.yaml")
    with pytest.raises(RulesError, match="unknown preset 'kuboki'"):
        load_preset("kuboki")


def test_go_preset_keeps_the_real_fox_candidating_split_100_per_group() -> None:
    folder = settings.data_dir() / "go/fox-selected/candidating"
    chunks = ingest_sgf.plan_chunks([folder], games_per_chunk=20_000)
    tables = [ingest_sgf.read_chunk(chunk).games for chunk in chunks]
    kept, rejected = apply_selection(pa.concat_tables(tables), load_preset("go-kuboki2025"))
    assert sum(rejected.values()) == 0
    groups = kept.group_by("rank_group").aggregate([("game_id", "count")]).to_pylist()
    assert {g["rank_group"]: g["game_id_count"] for g in groups} == dict.fromkeys(GO_GROUPS, 100)
