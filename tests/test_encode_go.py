"""KataGo v7 input features: KataGo's own tensors on real Fox positions, and hand-built cases.

Run: ``pytest tests/test_encode_go.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.core import settings
from pipeline.go_game import spec as go_spec
from pipeline.go_game.encode import encode_games
from pipeline.go_game.rules import GoGameSpec

REFERENCES = [
    ("katago-g170.jsonl", "katago-g170-inputs.npz"),
    ("katago-g170-chinese.jsonl", "katago-g170-chinese-inputs.npz"),
]


def point(sgf: str) -> tuple[int, int]:
    """(row, column) of an SGF point in a (19, 19) plane."""
    x, y = go_spec.sgf_to_xy(sgf)
    return y, x


def index(sgf: str) -> int:
    return go_spec.policy_index(*go_spec.sgf_to_xy(sgf))


@pytest.fixture(scope="module", params=REFERENCES, ids=["japanese", "chinese"])
def reference(request):
    records_name, tensors_name = request.param
    ref_dir = settings.reference_dir()
    records = [json.loads(line) for line in (ref_dir / records_name).read_text().splitlines()]
    tensors = np.load(ref_dir / tensors_name)
    # Each record's position is the one before an appended pass by the side to move.
    games = [
        GoGameSpec(moves=[f"{c}:{m}" for c, m in r["moves"]] + [f"{r['to_move']}:pass"])
        for r in records
    ]
    rules = {r["rules"] for r in records}
    assert len(rules) == 1
    positions = encode_games(games, rules=rules.pop(), komi=6.5)
    last_rows = np.cumsum([len(g.moves) for g in games]) - 1
    return records, tensors, positions, last_rows


def test_reference_inputs_equal_katagos_tensors(reference):
    records, tensors, positions, last_rows = reference
    assert positions.illegal_moves == []
    row_of_id = {int(i): k for k, i in enumerate(tensors["ids"])}
    assert sorted(row_of_id) == [r["id"] for r in records]
    for record, row in zip(records, last_rows, strict=True):
        k = row_of_id[record["id"]]
        np.testing.assert_array_equal(
            positions.spatial[row],
            tensors["binaryInputNCHW"][k],
            err_msg=f"record {record['id']} {record['tag']}",
        )
        np.testing.assert_array_equal(
            positions.global_[row],
            tensors["globalInputNC"][k],
            err_msg=f"record {record['id']} {record['tag']}",
        )
        assert positions.black_to_move[row] == (record["to_move"] == "B")
        assert positions.ply[row] == record["ply"]


def test_reference_ladder_and_area_channels_are_exercised(reference):
    _, tensors, _, _ = reference
    planes = tensors["binaryInputNCHW"]
    assert (planes[:, 14:18].sum(axis=(2, 3)) > 0).sum(axis=0).tolist() == [21, 20, 21, 14]


def test_reference_legal_moves_ko_and_captures(reference):
    records, _, positions, last_rows = reference
    for record, row in zip(records, last_rows, strict=True):
        legal = np.array([p is not None for p in record["policy"]])
        np.testing.assert_array_equal(positions.legal[row], legal, err_msg=str(record["id"]))
        ko = positions.ko_point[row]
        ko_sgf = None if ko < 0 else go_spec.xy_to_sgf(*go_spec.index_to_xy(int(ko)))
        assert ko_sgf == record["ko_ban_point_sgf"]
        assert positions.captured_by_last_move[row] == record["last_move_captured"]


def test_played_index_and_position_order():
    pos = encode_games([GoGameSpec(moves=["B:pd", "W:dp", "B:pass"]), GoGameSpec(moves=["B:qq"])])
    assert pos.played_index.tolist() == [index("pd"), index("dp"), 361, index("qq")]
    assert pos.game_index.tolist() == [0, 0, 0, 1]
    assert pos.ply.tolist() == [0, 1, 2, 0]
    assert pos.black_to_move.tolist() == [True, False, True, True]
    assert pos.spatial.shape == (4, 22, 19, 19) and pos.global_.shape == (4, 19)
    # White to move sees Black's stone as the opponent's, with its last-move marker.
    assert pos.spatial[1, 2][point("pd")] == 1 and pos.spatial[1, 9][point("pd")] == 1
    assert pos.spatial[2, 1][point("pd")] == 1 and pos.spatial[2, 10][point("pd")] == 1


def test_pass_history_and_pass_ends_phase():
    pos = encode_games([GoGameSpec(moves=["B:pd", "W:pass", "B:dd"])], rules="japanese")
    after_pass = pos.global_[2]
    assert after_pass[go_spec.GL_PASS_1] == 1 and after_pass[go_spec.GL_PASS_ENDS_PHASE] == 1
    assert pos.spatial[2, 9].sum() == 0 and pos.spatial[2, 10][point("pd")] == 1
    assert pos.global_[1, go_spec.GL_PASS_ENDS_PHASE] == 0


def test_komi_chilling_handicap_and_parity():
    game = GoGameSpec(moves=["W:dp", "B:pd", "W:qq"], setup_black=["dd", "pp"], komi=0.5)
    g5 = go_spec.GL_SELF_KOMI
    japanese = encode_games([game], rules="japanese").global_
    # Two black stones chill White +2; each later move shifts it by one.
    assert japanese[:, g5].tolist() == pytest.approx([2.5 / 20, -1.5 / 20, 2.5 / 20])
    chinese = encode_games([game], rules="chinese").global_
    assert chinese[:, g5].tolist() == pytest.approx([2.5 / 20, -2.5 / 20, 2.5 / 20])  # +N
    tromp = encode_games([game], rules="tromp-taylor").global_
    assert tromp[:, g5].tolist() == pytest.approx([0.5 / 20, -0.5 / 20, 0.5 / 20])
    assert tromp[0, [6, 7, 8, 9, 10]].tolist() == [1, 0.5, 1, 0, 0]
    assert japanese[0, [6, 7, 8, 9, 10]].tolist() == [0, 0, 0, 1, 1]
    parity = encode_games([GoGameSpec(moves=["B:pd", "W:dd"])], rules="chinese", komi=7.5)
    assert parity.global_[:, go_spec.GL_KOMI_PARITY].tolist() == [-0.5, 0.5]


def test_ko_point_and_superko_channel():
    ko = GoGameSpec(
        moves=["B:pp", "W:bb", "B:cb", "W:pd"],
        setup_black=["ba", "ab", "bc"],
        setup_white=["ca", "db", "cc"],
    )
    pos = encode_games([ko])
    assert pos.ko_point.tolist() == [-1, -1, -1, index("bb")]
    assert pos.spatial[3, 6][point("bb")] == 1 and pos.spatial[3, 6].sum() == 1
    assert not pos.legal[3, index("bb")] and pos.captured_by_last_move[3] == 1
    superko = GoGameSpec(moves=["B:aa", "W:pass", "B:pd"], setup_white=["ab", "bb", "ca"])
    pos = encode_games([superko], rules="tromp-taylor")
    assert pos.spatial[2, 6][point("ba")] == 1 and not pos.legal[2, index("ba")]
    assert encode_games([superko], rules="chinese").spatial[2, 6].sum() == 0


def test_ladder_channels():
    # A lone White stone in the corner: Black ataris on either side and chases it along the edge.
    corner = encode_games([GoGameSpec(moves=["W:aa", "B:pd", "W:dp"])])
    assert corner.spatial[1, 14][point("aa")] == 1
    working = corner.spatial[1, 17]  # Black to move: both liberties start a working ladder
    assert working[point("ab")] == 1 and working[point("ba")] == 1 and working.sum() == 2
    assert corner.spatial[2, 17].sum() == 0  # White to move: no opponent chain to ladder
    assert corner.spatial[2, 15][point("aa")] == 1  # the board one move ago
    # A black stone in atari in open space escapes to three liberties: not laddered.
    open_atari = encode_games([GoGameSpec(moves=["W:ij", "B:jj", "W:ji", "B:pd", "W:kj", "B:dp"])])
    assert open_atari.spatial[5, 3][point("jj")] == 1
    assert open_atari.spatial[5, 14].sum() == 0


def test_area_channels_under_area_scoring():
    pos = encode_games([GoGameSpec(moves=["B:pd", "W:dd"])], rules="chinese")
    # One black stone on an empty board: every point is Black's (unsafe big territory).
    assert pos.spatial[1, 19].sum() == 361 and pos.spatial[1, 18].sum() == 0
    assert encode_games([GoGameSpec(moves=["B:pd", "W:dd"])]).spatial[:, 18:20].sum() == 0


def test_caller_buffers_are_filled_in_place():
    spatial = np.full((5, 22, 19, 19), 7.0, np.float32)
    glob = np.full((5, 19), 7.0, np.float32)
    pos = encode_games([GoGameSpec(moves=["B:pd", "W:dd"])], out=(spatial, glob))
    assert np.shares_memory(pos.spatial, spatial) and pos.spatial.shape[0] == 2
    assert spatial[0, 0].sum() == 361 and spatial[0, 3:].sum() == 0
    assert spatial[2:].min() == 7.0  # rows past the positions untouched


def test_illegal_move_stops_the_game_and_is_reported():
    pos = encode_games([GoGameSpec(moves=["B:pd", "W:pd", "B:dd"]), GoGameSpec(moves=["B:qq"])])
    assert pos.illegal_moves == [(0, 1, "point is occupied")]
    assert pos.game_index.tolist() == [0, 1]
