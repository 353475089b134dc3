"""Go rules engine: hand-built positions and every selected Fox game replayed.

Run: ``pytest tests/test_go_rules.py``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline.core import settings
from pipeline.go_game import spec as go_spec
from pipeline.go_game.rules import REASONS, SUICIDE, GoGameSpec, replay_games, ruleset

FOX_SPLITS = ("candidating", "testing", "by-player")
FOX_GAMES = {"candidating": 1100, "testing": 9900, "by-player": 10332}
SGF_MOVE = re.compile(r";([BW])\[([a-s]{0,2})\]")
SGF_RULES = re.compile(r"RU\[([^]]*)\]")


def board_at(result, game: int, point: str) -> int:
    """Colour (0 empty, 1 black, 2 white) of an SGF point on a game's final board."""
    x, y = go_spec.sgf_to_xy(point)
    return int(result.boards[game, y, x])


def test_single_stone_capture():
    result = replay_games([GoGameSpec(moves=["B:ba", "W:aa", "B:ab"])])
    assert result.illegal_moves == []
    assert board_at(result, 0, "aa") == 0
    assert result.captures[0].tolist() == [1, 0]


def test_multi_stone_capture():
    moves = ["B:ca", "W:aa", "B:bb", "W:ba", "B:ab"]
    result = replay_games([GoGameSpec(moves=moves)])
    assert result.illegal_moves == []
    assert board_at(result, 0, "aa") == 0 and board_at(result, 0, "ba") == 0
    assert [board_at(result, 0, p) for p in ("ca", "bb", "ab")] == [1, 1, 1]
    assert result.captures[0].tolist() == [2, 0]


def test_occupied_point_is_illegal():
    result = replay_games([GoGameSpec(moves=["B:pd", "W:pd"])])
    assert result.illegal_moves == [(0, 1, REASONS[2])]
    assert result.num_valid_moves.tolist() == [1]


def test_single_stone_suicide_is_illegal_under_every_rule_set():
    game = GoGameSpec(moves=["B:aa"], setup_white=["ba", "ab"])
    for rules in ("japanese", "chinese", "tromp-taylor"):
        result = replay_games([game], rules=rules)
        assert result.illegal_moves == [(0, 0, REASONS[SUICIDE])], rules


def test_multi_stone_suicide_only_legal_under_tromp_taylor():
    # White walls off the two corner points aa, ba; Black fills both.
    game = GoGameSpec(moves=["B:aa", "W:dd", "B:ba"], setup_white=["ab", "bb", "ca"])
    for rules in ("japanese", "chinese"):
        assert replay_games([game], rules=rules).illegal_moves == [(0, 2, REASONS[SUICIDE])]
    result = replay_games([game], rules="tromp-taylor")
    assert result.illegal_moves == []
    assert board_at(result, 0, "aa") == 0 and board_at(result, 0, "ba") == 0
    assert board_at(result, 0, "dd") == 2


def test_positional_superko():
    # The suicide would recreate the starting position (White stones only): banned under
    # positional superko, while simple ko does not see it (and the rules forbid suicide).
    game = GoGameSpec(moves=["B:aa", "W:pass", "B:ba"], setup_white=["ab", "bb", "ca"])
    assert replay_games([game], rules="tromp-taylor").illegal_moves == [(0, 2, REASONS[4])]
    assert replay_games([game], rules="chinese").illegal_moves == [(0, 2, REASONS[SUICIDE])]


KO_SETUP = {"setup_black": ["ba", "ab", "bc"], "setup_white": ["ca", "db", "cc"]}


def test_simple_ko_ban_and_release():
    banned = GoGameSpec(moves=["B:pp", "W:bb", "B:cb", "W:bb"], **KO_SETUP)
    assert replay_games([banned]).illegal_moves == [(0, 3, REASONS[3])]
    released = GoGameSpec(
        moves=["B:pp", "W:bb", "B:cb", "W:pd", "B:dp", "W:bb", "B:cb"], **KO_SETUP
    )
    result = replay_games([released])
    # White retakes after a ko threat; then Black may not retake at once.
    assert result.illegal_moves == [(0, 6, REASONS[3])]
    assert result.captures[0].tolist() == [1, 1]
    assert board_at(result, 0, "bb") == 2 and board_at(result, 0, "cb") == 0


def test_passes_end_the_game():
    result = replay_games([GoGameSpec(moves=["B:pd", "W:pass", "B:pass", "W:dd"])])
    assert result.illegal_moves == [(0, 3, REASONS[6])]
    assert result.num_valid_moves.tolist() == [3]


def test_handicap_setup_and_bad_setup():
    good = GoGameSpec(moves=["W:dp", "B:pd"], setup_black=["dd", "pp"])
    bad = GoGameSpec(moves=["W:dp"], setup_black=["dd", "dd"])
    result = replay_games([good, bad])
    assert result.illegal_moves == [(1, -1, REASONS[7])]
    assert [board_at(result, 0, p) for p in ("dd", "pp", "dp", "pd")] == [1, 1, 2, 1]


def test_bad_coordinates_are_reported_not_raised():
    result = replay_games(
        [GoGameSpec(moves=["B:pd", "X:dd", "B:zz"]), GoGameSpec(moves=["B:pd", "W:tt"])]
    )
    assert result.illegal_moves == [(0, 1, REASONS[1])]
    assert result.num_valid_moves.tolist() == [1, 2]  # "tt" is the old SGF pass


def test_small_board_capture():
    result = replay_games(
        [GoGameSpec(moves=["B:bb", "W:aa", "B:ab", "W:ee", "B:ba"], board_size=5)]
    )
    assert result.illegal_moves == []
    assert board_at(result, 0, "aa") == 0
    off_board = replay_games([GoGameSpec(moves=["B:ff"], board_size=5)])
    assert off_board.illegal_moves == [(0, 0, REASONS[1])]


def test_rule_sets():
    assert ruleset("Japanese").scoring == ruleset("korean").scoring
    assert ruleset("tromp_taylor").multi_stone_suicide
    with pytest.raises(ValueError, match="unknown Go rules 'ing'"):
        ruleset("ing")


def fox_games(split: str) -> list[GoGameSpec]:
    """Every game of a Fox split, read with INGEST-GO's reader when it exists."""
    root = settings.data_dir() / "go" / "fox-selected" / split
    files = sorted(root.glob("*.sgf"))
    assert files, f"missing Fox data in {root}"
    try:
        from pipeline.ingest import sgf as ingest_sgf
    except ImportError:
        return [game for path in files for game in _regex_games(path)]
    from pipeline.go_game.rules import games_from_table

    chunks = ingest_sgf.plan_chunks(files, games_per_chunk=5000)
    return [g for chunk in chunks for g in games_from_table(ingest_sgf.read_chunk(chunk).games)]


def _regex_games(path: Path) -> list[GoGameSpec]:
    games = []
    for line in path.read_text(encoding="ascii").splitlines():
        if line.strip():
            moves = [f"{c}:{p or 'pass'}" for c, p in SGF_MOVE.findall(line)]
            games.append(GoGameSpec(moves=moves, rules=SGF_RULES.search(line).group(1).lower()))
    return games


@pytest.mark.parametrize("split", FOX_SPLITS)
def test_every_selected_fox_game_replays_legally(split):
    games = fox_games(split)
    assert len(games) == FOX_GAMES[split]
    result = replay_games(games)
    assert Counter(reason for _, _, reason in result.illegal_moves) == Counter()
    assert result.num_valid_moves.sum() == sum(len(g.moves) for g in games)
    assert np.all(result.num_valid_moves > 0)
