"""The compiled movetext reader against python-chess: random legal games (every special move),
hand-made SAN corner cases, and the ``%clk`` / ``%eval`` regex corner cases."""

from __future__ import annotations

import io
import random

import chess
import chess.pgn
import numpy as np
import pytest

from pipeline.ingest.pgn_reader import (
    MATE_SCORE_CP,
    STATUS_AMBIGUOUS,
    STATUS_ILLEGAL,
    STATUS_OK,
    STATUS_UNSUPPORTED,
    read_pgn,
)

HEADER = '[Event "t"]\n[Site "s"]\n[White "a"]\n[Black "b"]\n[Result "*"]\n\n'


def _read(games: list[str]):
    texts = [g.encode() for g in games]
    offsets = np.concatenate(([0], np.cumsum([len(t) for t in texts]))).astype(np.int64)
    return read_pgn(b"".join(texts), offsets, ("White",))


def _uci(moves, row: int) -> list[str]:
    lo, hi = moves.move_offsets[row], moves.move_offsets[row + 1]
    out = []
    for src, dst, promo in zip(
        moves.from_sq[lo:hi], moves.to_sq[lo:hi], moves.promotion[lo:hi], strict=True
    ):
        out.append(chess.Move(int(src), int(dst), [None, 2, 3, 4, 5][int(promo)]).uci())
    return out


def _random_game(rng: random.Random, plies: int) -> chess.pgn.Game:
    """A random legal game, biased towards pawn pushes and captures so promotions, en passant,
    castling and disambiguation all occur within a few hundred games."""
    board = chess.Board()
    game = chess.pgn.Game()
    node = game
    for ply in range(plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        special = [
            m
            for m in legal
            if m.promotion or board.is_castling(m) or board.is_en_passant(m) or board.is_capture(m)
        ]
        move = rng.choice(special if special and rng.random() < 0.5 else legal)
        board.push(move)
        node = node.add_variation(move)
        node.comment = f"[%clk 0:{ply % 60:02d}:{(7 * ply) % 60:02d}]"
    return game


def test_random_legal_games_match_python_chess() -> None:
    rng = random.Random(7)
    games = [_random_game(rng, rng.randint(20, 160)) for _ in range(300)]
    texts = [str(g) + "\n\n" for g in games]
    moves = _read(texts)
    assert (moves.status == STATUS_OK).all()
    kinds = {"castling": 0, "en_passant": 0, "promotion": 0, "disambiguated": 0}
    for row, game in enumerate(games):
        nodes = list(game.mainline())
        assert _uci(moves, row) == [n.move.uci() for n in nodes]
        lo = moves.move_offsets[row]
        assert moves.clocks[lo : lo + len(nodes)].tolist() == [n.clock() for n in nodes]
        board = game.board()
        for node in nodes:
            san = board.san(node.move)
            kinds["castling"] += board.is_castling(node.move)
            kinds["en_passant"] += board.is_en_passant(node.move)
            kinds["promotion"] += node.move.promotion is not None
            kinds["disambiguated"] += (
                san[0] in "NBRQ" and len(san.rstrip("+#").replace("x", "")) > 3
            )
            board.push(node.move)
    assert min(kinds.values()) > 10, kinds


@pytest.mark.parametrize(
    ("movetext", "expected"),
    [
        # A pinned knight does not count: "Nd2" is unambiguous (python-chess agrees).
        (
            "1. e4 e5 2. Nf3 Nc6 3. Bb5 d6 4. Nc3 Bd7 5. d3 Nge7 6. Bg5 f6 7. Be3 Ng6 8. Nd5 Nce7 *",
            None,
        ),
        (
            "1. e4 d5 2. exd5 Qxd5 3. Nc3 Qa5 4. d4 c6 5. Nf3 Bg4 6. Bf4 e6 7. h3 Bxf3 8. Qxf3 Bb4 9. Be2 Nd7 10. a3 O-O-O *",
            None,
        ),
        ("1. e4 e6 2. e5 d5 3. exd6 cxd6 4. Nf3 Nf6 5. Be2 Be7 6. O-O O-O 1-0", None),
        ("1.d4 d5 2.c4 dxc4 3.e3 b5 4.a4 c6 5.axb5 cxb5 6.Qf3 Nc6 7.Qxc6+ Bd7 8.Qxc4 bxc4 *", None),
        ("1. e4 { a } { [%clk 0:01:00] } e5?! $2 2. Nf3!! Nc6 *", None),
    ],
)
def test_hand_made_games_match_python_chess(movetext: str, expected: None) -> None:
    text = HEADER + movetext + "\n\n"
    game = chess.pgn.read_game(io.StringIO(text))
    assert not game.errors
    moves = _read([text])
    assert moves.status.tolist() == [STATUS_OK]
    assert _uci(moves, 0) == [m.uci() for m in game.mainline_moves()]


def test_promotions_with_and_without_equals_sign() -> None:
    opening = "1. a4 b5 2. axb5 a6 3. bxa6 Nc6 4. a7 Rb8 5. "
    moves = _read([HEADER + opening + "axb8=Q Nb4 6. Qxc8 *\n", HEADER + opening + "axb8N *\n"])
    assert moves.status.tolist() == [STATUS_OK, STATUS_OK]
    assert _uci(moves, 0)[8:] == ["a7b8q", "c6b4", "b8c8"]
    assert _uci(moves, 1)[8:] == ["a7b8n"]


@pytest.mark.parametrize(
    ("movetext", "status", "token"),
    [
        ("1. e4 e5 2. Ke2 Ke7 3. Ke3 Ke6 4. Nf3 Nf6 5. Nd4+ Kd6 *", STATUS_OK, None),
        ("1. e4 e5 2. Bb5 Bb4 3. Bxd7+ Qxd7 *", STATUS_OK, None),
        ("1. d4 e5 2. Nc3 Bb4 3. Nd5 *", STATUS_ILLEGAL, "Nd5"),  # the knight is pinned
        ("1. e4 e5 2. Ke3 *", STATUS_ILLEGAL, "Ke3"),
        ("1. e4 (1. d4) e5 *", STATUS_UNSUPPORTED, "("),
        ("1. e4 e5 2. -- Nc6 *", STATUS_UNSUPPORTED, "--"),
        ("1. e2e4 e5 *", STATUS_UNSUPPORTED, "e2e4"),
        ("1. e4 e5 2. O-O *", STATUS_ILLEGAL, "O-O"),
        ("1. e4 e5 1-0 Nf3", STATUS_UNSUPPORTED, "Nf3"),
        ("1. e4 { never closed", STATUS_UNSUPPORTED, "{"),
    ],
)
def test_statuses_and_the_token_they_name(movetext: str, status: int, token: str | None) -> None:
    text = HEADER + movetext + "\n\n"
    moves = _read([text])
    assert moves.status.tolist() == [status]
    if token is None:
        game = chess.pgn.read_game(io.StringIO(text))
        assert _uci(moves, 0) == [m.uci() for m in game.mainline_moves()]
    else:
        assert repr(token) in moves.error(text.encode(), 0)
        assert moves.move_offsets.tolist() == [0, 0]  # a handed-back game has no moves


def test_an_ambiguous_san_is_handed_back_naming_the_move() -> None:
    """Strip the disambiguation from the first move that needs one: python-chess calls the
    result ambiguous, and so must the compiled reader."""
    rng = random.Random(11)
    for _ in range(200):
        game = _random_game(rng, 120)
        board = game.board()
        sans = []
        for move in game.mainline_moves():
            san = board.san(move)
            if san[0] in "NBRQ" and len(san.rstrip("+#").replace("x", "")) == 4:
                bare = san[0] + san[2:]
                text = HEADER + " ".join([*sans, bare]) + " *\n\n"
                assert "ambiguous" in str(chess.pgn.read_game(io.StringIO(text)).errors[0])
                moves = _read([text])
                assert moves.status.tolist() == [STATUS_AMBIGUOUS]
                assert repr(bare.rstrip("+#")) in moves.error(text.encode(), 0)
                return
            sans.append(san)
            board.push(move)
    raise AssertionError("no disambiguated move in 200 random games")


@pytest.mark.parametrize(
    ("comment", "clock", "cp"),
    [
        ("[%eval 0.29] [%clk 0:03:00]", 180.0, 29),
        ("[%eval -1.5] [%clk 1:00:09.5]", 3609.5, -150),
        ("[%eval #-3] [%clk 0:00:01]", 1.0, -(MATE_SCORE_CP - 3)),
        ("[%eval #4,23]", None, MATE_SCORE_CP - 4),
        ("[%eval 12.]", None, 1200),
        ("[%eval .5]", None, 50),
        ("[%eval 1.234] [%eval 0.10]", None, 10),  # the first is not EVAL_REGEX; the second is
        ("[%clk 0:1:2] [%clk 0:00:07]", 62.0, None),
        ("[%clk  0:00:05] [%eval  0.3]", None, None),  # two spaces: neither regex matches
        ("[%clk 0:00:05", None, None),
    ],
)
def test_clock_and_eval_follow_python_chess(
    comment: str, clock: float | None, cp: int | None
) -> None:
    text = HEADER + "1. e4 { " + comment + " } e5 *\n\n"
    node = chess.pgn.read_game(io.StringIO(text)).next()
    assert node.clock() == clock
    score = node.eval()
    expected_cp = None
    if score is not None:
        white = score.white()
        expected_cp = (
            white.score()
            if not white.is_mate()
            else (MATE_SCORE_CP - abs(white.mate())) * (1 if white.mate() > 0 else -1)
        )
    assert expected_cp == cp
    moves = _read([text])
    got_clock = float(moves.clocks[0])
    assert (None if np.isnan(got_clock) else got_clock) == clock
    assert (int(moves.evals_cp[0]) if moves.has_eval[0] else None) == cp
