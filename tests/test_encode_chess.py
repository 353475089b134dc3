"""The chess encoder against lc0 itself and python-chess.

- lc0 v0.31.2's own input planes, legal moves and policy indices for all 9 nets × 40 positions
  (``reference/maia-lc0*.json*``): planes equal exactly, legal moves and indices equal;
- hand-built games: en passant, promotions of both colours, castling-right loss, repetitions,
  rule-50 resets, illegal and malformed moves;
- the numba move generator against python-chess on every position of a few hundred real games.
"""

from __future__ import annotations

import json

import chess
import numpy as np
import pyarrow as pa
import pytest

from pipeline.chess_game.encode import encode_games, legal_uci, played_uci
from pipeline.chess_game.spec import (
    AUX_BASE,
    PLANE_BLACK_TO_MOVE,
    PLANE_ONES,
    PLANE_OUR_KINGSIDE,
    PLANE_OUR_QUEENSIDE,
    PLANE_RULE50,
    PLANE_THEIR_KINGSIDE,
    PLANE_THEIR_QUEENSIDE,
    PLANE_ZEROS,
    POLICY_INDEX_OF,
    POLICY_MOVES,
    POLICY_SIZE,
    REPETITION_PLANE,
)
from pipeline.core import settings
from pipeline.nets.check_chess import read_games

REFERENCE = settings.reference_dir()
TESTING = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "testing"


def _records() -> list[dict]:
    with (REFERENCE / "maia-lc0.jsonl").open() as handle:
        return [json.loads(line) for line in handle]


def _reference_planes() -> dict[str, list[tuple[int, float]]]:
    raw = json.loads((REFERENCE / "maia-lc0-input-planes.json").read_text())
    return {
        key: [(int(mask), float(value)) for mask, value in planes] for key, planes in raw.items()
    }


def _masks(planes: np.ndarray) -> list[int]:
    """64-bit occupancy mask of each of the 112 planes (bit = rank * 8 + file)."""
    bits = (planes.reshape(112, 64) != 0).astype(np.uint64)  # (112, 64)
    return [int(m) for m in (bits << np.arange(64, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _records()


@pytest.fixture(scope="module")
def reference_positions(records: list[dict]):
    """Each record's game encoded up to and including its position; the row of that position."""
    pos = encode_games([r["moves_uci"] + [r["game_move"]] for r in records])
    rows = np.flatnonzero(np.diff(np.append(pos.game_index, len(records))) != 0)
    return pos, rows


def test_policy_table_matches_lc0_conventions() -> None:
    assert len(POLICY_MOVES) == POLICY_SIZE == 1858
    assert POLICY_INDEX_OF["a1b1"] == 0
    assert POLICY_INDEX_OF["e1h1"] == 103
    assert POLICY_INDEX_OF["e1a1"] == 97
    assert POLICY_INDEX_OF["a7a8"] == 1401
    assert POLICY_MOVES[1792:1795] == ("a7a8q", "a7a8r", "a7a8b")
    assert POLICY_MOVES[-1] == "h7h8b"


def test_planes_equal_lc0_for_every_reference_record(records, reference_positions) -> None:
    pos, rows = reference_positions
    reference = _reference_planes()
    assert len(records) == 360 and not pos.errors
    for record, row in zip(records, rows, strict=True):
        assert pos.ply[row] == record["ply"]
        expected = reference[f"{record['game_site']}#{record['ply']}"]
        mine = pos.planes[row].reshape(112, 64)
        masks = _masks(pos.planes[row])
        for k, (mask, value) in enumerate(expected):
            if mask == 0 or value == 0.0:
                assert not mine[k].any(), (record["game_site"], record["ply"], k)
                continue
            assert masks[k] == mask, (record["game_site"], record["ply"], k)
            assert set(mine[k][mine[k] != 0].tolist()) == {value}, (record["ply"], k)


def test_reference_covers_repetitions_and_black_to_move(records, reference_positions) -> None:
    pos, rows = reference_positions
    repeated = [
        r["ply"]
        for r, row in zip(records, rows, strict=True)
        if pos.planes[row, REPETITION_PLANE].any()
    ]
    assert sorted(set(repeated)) == [91, 104, 116]
    black = [bool(pos.planes[row, PLANE_BLACK_TO_MOVE].all()) for row in rows]
    assert black == [r["side_to_move"] == "b" for r in records]


def test_legal_moves_and_indices_equal_lc0(records, reference_positions) -> None:
    pos, rows = reference_positions
    for record, row in zip(records, rows, strict=True):
        moves = legal_uci(pos, row)
        assert sorted(moves) == sorted(record["legal_moves"]), (record["game_site"], record["ply"])
        start, end = pos.legal_offsets[row], pos.legal_offsets[row + 1]
        indices = dict(zip(moves, pos.legal_policy_index[start:end].tolist(), strict=True))
        assert indices == record["lc0_nn_index"]
        assert played_uci(pos, row) == record["game_move"]


# --- hand-built games --------------------------------------------------------------------------


def _plane_all(pos, row: int, plane: int) -> bool:
    return bool((pos.planes[row, plane] == 1.0).all())


def test_en_passant_capture_and_index() -> None:
    # 1. e4 a6 2. e5 d5 3. exd6 (en passant) cxd6
    pos = encode_games([["e2e4", "a7a6", "e4e5", "d7d5", "e5d6", "c7d6"]])
    assert "e5d6" in legal_uci(pos, 4)
    assert played_uci(pos, 4) == "e5d6"
    assert pos.played_policy_index[4] == POLICY_INDEX_OF["e5d6"]
    # After exd6 (Black to move, board mirrored): the d5 pawn is gone, White's pawn on d6.
    after = pos.planes[5]
    their_pawns = after[6]  # White's pawns seen by Black: d6 -> d3 in Black's view
    our_pawns = after[0]
    assert their_pawns[2, 3] == 1.0  # d3 in the mirrored view = d6
    assert our_pawns[3, 3] == 0.0  # d5 -> d4 in the mirrored view: captured
    assert after[PLANE_RULE50, 0, 0] == 0.0  # a pawn move resets the count


def test_no_en_passant_without_double_push() -> None:
    # 1. e4 d6 2. e5 d5: d5 comes in two single steps, so exd6 is not legal.
    pos = encode_games([["e2e4", "d7d6", "e4e5", "d6d5", "g1f3"]])
    assert "e5d6" not in legal_uci(pos, 4)


def test_promotions_of_both_colours() -> None:
    moves = [
        "h2h4",
        "g7g5",
        "h4g5",
        "h7h5",
        "g5g6",
        "h5h4",
        "g6g7",
        "h4h3",
        "g7h8q",
        "h3g2",
        "h8g8",
        "g2h1q",
        "a2a3",
    ]
    pos = encode_games([moves])
    assert not pos.errors
    white = set(legal_uci(pos, 8))
    assert {"g7h8q", "g7h8r", "g7h8b", "g7h8n", "g7f8q", "g7f8n"} <= white
    black = set(legal_uci(pos, 11))
    assert {"g2h1q", "g2h1r", "g2h1b", "g2h1n", "g2f1q", "g2f1n"} <= black
    start = pos.legal_offsets[8]
    by_move = dict(
        zip(
            legal_uci(pos, 8),
            pos.legal_policy_index[start : pos.legal_offsets[9]].tolist(),
            strict=True,
        )
    )
    assert by_move["g7h8q"] == POLICY_INDEX_OF["g7h8q"]
    assert by_move["g7h8n"] == POLICY_INDEX_OF["g7h8"]  # knight promotion = the plain move
    start = pos.legal_offsets[11]
    by_move = dict(
        zip(
            legal_uci(pos, 11),
            pos.legal_policy_index[start : pos.legal_offsets[12]].tolist(),
            strict=True,
        )
    )
    assert by_move["g2h1q"] == POLICY_INDEX_OF["g7h8q"]  # Black's moves are mirrored
    assert by_move["g2h1r"] == POLICY_INDEX_OF["g7h8r"]
    # After 5. gxh8=Q (Black to move): White has a queen on h8 = h1 in Black's view.
    assert pos.planes[9, 6 + 4, 0, 7] == 1.0
    # After 6... gxh1=Q (White to move): Black's queen on h1, plane "their queen".
    assert pos.planes[12, 6 + 4, 0, 7] == 1.0


def test_castling_rights_planes() -> None:
    # 1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. O-O (castling, kingside index e1h1) Nf6 5. Re1 Rb8
    moves = ["e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "f8c5", "e1g1", "g8f6", "f1e1", "a8b8", "a2a3"]
    pos = encode_games([moves])
    assert played_uci(pos, 6) == "e1g1"
    assert pos.played_policy_index[6] == 103  # e1h1
    for row in range(7):
        assert _plane_all(pos, row, PLANE_OUR_KINGSIDE) and _plane_all(
            pos, row, PLANE_OUR_QUEENSIDE
        )
        assert _plane_all(pos, row, PLANE_THEIR_KINGSIDE) and _plane_all(
            pos, row, PLANE_THEIR_QUEENSIDE
        )
    # Ply 7, Black to move: White castled, so "their" rights are gone, Black keeps both.
    assert _plane_all(pos, 7, PLANE_OUR_KINGSIDE) and _plane_all(pos, 7, PLANE_OUR_QUEENSIDE)
    assert (
        not pos.planes[7, PLANE_THEIR_KINGSIDE].any()
        and not pos.planes[7, PLANE_THEIR_QUEENSIDE].any()
    )
    # Ply 10, White to move after ...Rb8: Black lost queenside only.
    assert (
        not pos.planes[10, PLANE_OUR_KINGSIDE].any()
        and not pos.planes[10, PLANE_OUR_QUEENSIDE].any()
    )
    assert _plane_all(pos, 10, PLANE_THEIR_KINGSIDE)
    assert not pos.planes[10, PLANE_THEIR_QUEENSIDE].any()


def test_rook_captured_on_home_square_removes_the_right() -> None:
    # 1. g3 b6 2. Bg2 Bb7 3. Bxb7? ... 3...Nf6 4. Bxa8: Black loses O-O-O without moving.
    moves = ["g2g3", "b7b6", "f1g2", "c8b7", "e2e3", "g8f6", "g2b7", "e7e6", "b7a8", "d8e7", "a2a3"]
    pos = encode_games([moves])
    assert not pos.errors
    assert _plane_all(pos, 8, PLANE_THEIR_QUEENSIDE)  # before Bxa8
    assert not pos.planes[9, PLANE_OUR_QUEENSIDE].any()  # Black to move after Bxa8
    assert _plane_all(pos, 9, PLANE_OUR_KINGSIDE)


def test_repetition_planes_and_history() -> None:
    knights = ["g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1", "f6g8", "e2e4"]
    pos = encode_games([knights])
    repeated = [int(pos.ply[i]) for i in range(len(pos)) if pos.planes[i, REPETITION_PLANE].any()]
    assert repeated == [4, 5, 6, 7, 8]  # plies 4.. repeat the start position and its successors
    # At ply 8 (third occurrence of the start), history step 4 (ply 4) is flagged too.
    assert _plane_all(pos, 8, 4 * 13 + REPETITION_PLANE)
    assert not pos.planes[8, 7 * 13 + REPETITION_PLANE].any()  # ply 1 never repeated before
    # History planes before ply 0 stay empty (history-fill=fen_only).
    assert not pos.planes[2, 3 * 13 : AUX_BASE].any()
    assert pos.planes[2, 2 * 13 : 3 * 13].any()


def test_lc0_en_passant_flag_decides_repetition() -> None:
    # After 1. e4 no black pawn stands next to e4, so lc0 sets no en-passant flag and the
    # position after 3. Ng1 repeats it; with ...d5-d4 next to e4 the flag is set and it doesn't.
    plain = ["e2e4", "g8f6", "g1f3", "f6g8", "f3g1", "b8c6"]
    pos = encode_games([plain])
    assert pos.planes[5, REPETITION_PLANE].all()
    flagged = ["g1f3", "d7d5", "f3g1", "d5d4", "e2e4", "g8f6", "g1f3", "f6g8", "f3g1", "b8c6"]
    pos = encode_games([flagged])
    assert not pos.planes[9, REPETITION_PLANE].any()


def test_rule50_counts_and_resets() -> None:
    # 1. e4 d5 2. Nf3 Nf6 3. Nc3 Nc6 4. exd5 Nxd5 5. Ng1
    moves = ["e2e4", "d7d5", "g1f3", "g8f6", "b1c3", "b8c6", "e4d5", "f6d5", "c3b1"]
    pos = encode_games([moves])
    counts = pos.planes[:, PLANE_RULE50, 0, 0].tolist()
    assert counts == [0, 0, 0, 1, 2, 3, 4, 0, 0]
    assert (pos.planes[:, PLANE_ONES] == 1).all() and not pos.planes[:, PLANE_ZEROS].any()


def test_illegal_and_malformed_moves_stop_only_their_game() -> None:
    games = [
        ["e2e4", "e7e5"],
        ["e2e4", "e7e5", "e1e3"],  # illegal king move
        ["d2d4", "O-O"],  # not UCI
        ["f2f3", "e7e5", "g2g4", "d8h4", "a2a3"],  # a move after checkmate
        ["e2e4"],
    ]
    pos = encode_games(games)
    assert [(e.game_index, e.ply, e.move, e.reason) for e in pos.errors] == [
        (1, 2, "e1e3", "illegal move"),
        (2, 1, "O-O", "not a UCI move"),
        (3, 4, "a2a3", "illegal move"),
    ]
    assert pos.game_index.tolist() == [0, 0, 1, 1, 2, 3, 3, 3, 3, 4]
    assert str(pos.errors[0]) == "game 1, ply 2: illegal move 'e1e3'"
    alone = encode_games([games[4]])
    np.testing.assert_array_equal(alone.planes[0], pos.planes[-1])


def test_arrow_input_and_preallocated_out() -> None:
    games = [["e2e4", "c7c5", "g1f3"], [], ["d2d4", "d7d5", "c2c4", "e7e6"]]
    expected = encode_games(games)
    column = pa.array([["x"], *games], type=pa.list_(pa.string())).slice(1)
    out = np.full((10, 112, 8, 8), np.nan, dtype=np.float32)
    got = encode_games(column, out=out)
    assert np.shares_memory(got.planes, out) and len(got) == 7
    np.testing.assert_array_equal(got.planes, expected.planes)
    np.testing.assert_array_equal(got.legal_policy_index, expected.legal_policy_index)
    np.testing.assert_array_equal(got.game_index, [0, 0, 0, 2, 2, 2, 2])
    chunked = pa.chunked_array([pa.array(games[:1]), pa.array(games[1:])])
    np.testing.assert_array_equal(encode_games(chunked).planes, expected.planes)
    with pytest.raises(ValueError, match="C-contiguous float32"):
        encode_games(games, out=np.zeros((3, 112, 8, 8), dtype=np.float32))


def test_fen_for_debugging() -> None:
    pos = encode_games([["e2e4", "e7e5"]], with_fen=True)
    assert pos.fen == [
        chess.STARTING_FEN,
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
    ]


# --- python-chess on real games ----------------------------------------------------------------


def _expected_piece_planes(board: chess.Board) -> np.ndarray:
    """Step-0 piece planes of ``board`` from the mover's view, built with python-chess."""
    planes = np.zeros((12, 64), dtype=np.float32)
    for t, piece in enumerate(chess.PIECE_TYPES):
        for colour, offset in ((board.turn, 0), (not board.turn, 6)):
            for sq in board.pieces(piece, colour):
                planes[offset + t, sq if board.turn == chess.WHITE else chess.square_mirror(sq)] = 1
    return planes


def test_movegen_equals_python_chess_on_real_games() -> None:
    games = [
        moves
        for band in ("1000-1200", "1600-1800", "2200-2400", "2400-2600")
        for moves in read_games(TESTING / f"{band}.pgn.zst", max_games=75)["moves"].to_pylist()
    ]
    pos = encode_games(games)
    assert not pos.errors and len(pos) == sum(len(g) for g in games) > 15_000
    row = 0
    for moves in games:
        board = chess.Board()
        for uci in moves:
            assert sorted(legal_uci(pos, row)) == sorted(m.uci() for m in board.legal_moves), (
                board.fen()
            )
            assert played_uci(pos, row) == uci
            np.testing.assert_array_equal(
                pos.planes[row, :12].reshape(12, 64), _expected_piece_planes(board)
            )
            assert pos.planes[row, PLANE_RULE50, 0, 0] == board.halfmove_clock
            us, them = board.turn, not board.turn
            rights = [
                board.has_queenside_castling_rights(us),
                board.has_kingside_castling_rights(us),
                board.has_queenside_castling_rights(them),
                board.has_kingside_castling_rights(them),
            ]
            assert [bool(pos.planes[row, 104 + k].all()) for k in range(4)] == rights
            board.push_uci(uci)
            row += 1


def test_packed_encoder_equals_the_float_planes_on_real_games(records) -> None:
    """Extraction encodes straight into the bit-packed transport (``packed=True``): on real
    games, every position and every legal child of the first 400 positions unpack to exactly
    the float planes (which the lc0 reference above checks), with the same outcomes; the
    reference records cover repetitions, castling and Black to move."""
    from pipeline.chess_game.encode import encode_after

    games = [r["moves_uci"] + [r["game_move"]] for r in records[:40]] + [
        moves
        for band in ("1000-1200", "2400-2600")
        for moves in read_games(TESTING / f"{band}.pgn.zst", max_games=10)["moves"].to_pylist()
    ]
    pos = encode_games(games)
    packed = encode_games(games, packed=True).packed
    np.testing.assert_array_equal(packed.unpack(0, len(pos)), pos.planes)
    n = 400
    rows = np.repeat(np.arange(n), np.diff(pos.legal_offsets[: n + 1]))
    args = (games, pos.game_index[rows], pos.ply[rows], pos.legal_move[: pos.legal_offsets[n]])
    want, got = encode_after(*args), encode_after(*args, packed=True)
    assert len(rows) > 10_000
    np.testing.assert_array_equal(got.outcome, want.outcome)
    np.testing.assert_array_equal(got.packed.unpack(), want.planes)
