"""PGN as other sources write it: OTB databases, ChessBase, chess.com — against python-chess.

The fixtures are hand-written in the style of python-chess's own test corpus (the files that
Kibitz used to quarantine or split): partial dates (``1997.??.??``), ``[BlackElo "?"]``, a
ChessBase export with a blank line inside its tags, comments, NAGs, variations, ``%clk``,
results ``*``, ``;`` and ``%`` comment lines, set-up positions, a null move ``--`` and a
Crazyhouse game. Kibitz and ``chess.pgn.read_game`` must agree on the number of games and on
the moves of every standard game; null moves, variants and set-up positions are quarantined
with their reason.

Run ``python -m pytest tests/test_pgn_sources.py``.
"""

from __future__ import annotations

import io
from pathlib import Path

import chess
import chess.pgn
import pyarrow as pa
import pytest

from pipeline.core.games_schema import GAMES_SCHEMA, UNKNOWN_MONTH
from pipeline.ingest.pgn import read_chunk, stream_chunks
from pipeline.ingest.pgn_reader import GameSplitter, game_starts

# An over-the-board match database: partial dates, unknown ratings, PlyCount, EventDate "?".
DEEP_BLUE_STYLE = """\
[Event "Man-Machine Rematch"]
[Site "New York, NY USA"]
[Date "1997.??.??"]
[EventDate "?"]
[Round "1"]
[Result "1-0"]
[White "Garry Kasparov"]
[Black "Deep Blue (Computer)"]
[ECO "A06"]
[WhiteElo "2795"]
[BlackElo "?"]
[PlyCount "24"]

1. Nf3 d5 2. g3 Bg4 3. b3 Nd7 4. Bb2 e6 5. Bg2 Ngf6 6. O-O c6 7. d3 Bd6 8. Nbd2
O-O 9. h3 Bh5 10. e3 h6 11. Qe1 Qa5 12. a3 Bc7 1-0

[Event "Man-Machine Rematch"]
[Site "New York, NY USA"]
[Date "1997.05.??"]
[EventDate "?"]
[Round "2"]
[Result "0-1"]
[White "Deep Blue (Computer)"]
[Black "Garry Kasparov"]
[ECO "C93"]
[WhiteElo "?"]
[BlackElo "2795"]
[PlyCount "24"]

1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 6. Re1 b5 7. Bb3 d6 8. c3
O-O 9. h3 h6 10. d4 Re8 11. Nbd2 Bf8 12. Nf1 Bd7 0-1

[Event "Man-Machine Rematch"]
[Site "?"]
[Date "????.??.??"]
[Round "3"]
[Result "1/2-1/2"]
[White "Garry Kasparov"]
[Black "Deep Blue (Computer)"]
[WhiteElo ""]
[BlackElo "-"]

1. e4 c5 2. Nf3 d6 3. d4 cxd4 4. Nxd4 Nf6 5. Nc3 a6 1/2-1/2

"""

# An annotated game: a comment before the first move, NAGs as $n and as suffixes, nested
# variations, a comment that spans a blank line.
ANNOTATED_1979 = """\
[Event "Corr"]
[Site "?"]
[Date "1979.??.??"]
[Round "?"]
[White "Molinari"]
[Black "Bordais"]
[Result "1-0"]
[Annotator "Kibitz tests"]

{ Short, and full of notes. } 1. e4 f6 $2 { A weak reply. } ( 1... e5 $1 2. Nf3 Nc6
{ is the usual way. } ) 2. d4!? g5 $4 ( 2... e6 3. Bd3 ( 3. Nf3 d5 ) 3... d5 ) 3. Qh5# {
Mate.

A blank line inside a comment does not end the game. } 1-0

"""

# A ChessBase export: one blank line between two tags (python-chess reads one game).
CHESSBASE_BLANK_TAG_LINE = """\
[Event "Engine match"]

[Date "2017.12.04"]
[Round "1"]
[White "Engine A"]
[Black "Engine B"]
[Result "0-1"]
[Board "1"]
[WhiteCountry "NOR"]
[BlackCountry "ENG"]

1. e4  e5  2. Nf3  Nc6  3. Bb5  Nf6  4. d3  Bc5
 5. Bxc6  dxc6  6. O-O  Nd7  7. Nbd2  O-O  8.
Qe1  f6  0-1

"""

# A chess.com export: sudden-death TimeControl, "1..." move numbers, %clk without spaces.
CHESS_COM = """\
[Event "Live Chess"]
[Site "Chess.com"]
[Date "2024.01.15"]
[Round "-"]
[White "alice"]
[Black "bob"]
[Result "0-1"]
[ECO "E32"]
[WhiteElo "1432"]
[BlackElo "1467"]
[TimeControl "600"]
[Termination "bob won by resignation"]
[UTCDate "2024.01.15"]
[UTCTime "18:02:11"]
[Link "https://www.chess.com/game/live/99999999999"]

1. d4 {[%clk 0:09:58.9]} 1... Nf6 {[%clk 0:09:57.1]} 2. c4 {[%clk 0:09:55.3]} 2... e6
{[%clk 0:09:54]} 3. Nc3 {[%clk 0:09:50.2]} 3... Bb4 {[%clk 0:09:49.8]} 4. Qc2
{[%clk 0:09:40.6]} 4... O-O {[%clk 0:09:41]} 5. a3 {[%clk 0:09:37.7]} 5... Bxc3+
{[%clk 0:09:30.9]} 6. Qxc3 {[%clk 0:09:35.5]} 6... b6 {[%clk 0:09:12.1]} 0-1

"""

# What other tools leave in files: "%" and ";" comment lines, an unfinished game "*", set-up
# positions, a null move, a variant.
ODDITIES = """\
% written by some database program
[Event "Club night"]
[Site "?"]
[Date "2023.11.??"]
[White "Carol"]
[Black "Dave"]
[Result "*"]

1. c4 e5 2. Nc3 Nf6 ; the English
3. g3 d5 4. cxd5 Nxd5 5. Bg2 *

; an unfinished game above, an endgame study below
[Event "Study"]
[Date "2020.01.01"]
[White "?"]
[Black "?"]
[Result "*"]
[SetUp "1"]
[FEN "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"]

1. e4 Kd7 *

[Event "Set up, but at the start"]
[Date "2020.01.02"]
[White "Erin"]
[Black "Frank"]
[Result "1-0"]
[SetUp "1"]
[FEN "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"]

1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0

[Event "Analysis"]
[Date "2020.01.03"]
[White "Gina"]
[Black "Hank"]
[Result "*"]

1. e4 -- 2. d4 e5 *

[Event "Rated Crazyhouse game"]
[Site "https://lichess.org/zh000001"]
[Date "2021.06.01"]
[White "Ivan"]
[Black "Judy"]
[Result "*"]
[Variant "Crazyhouse"]

1. e4 e5 2. Nf3 Nc6 3. Bc4 Nf6 4. Ng5 d5 5. exd5 Na5 6. Bb5+ c6 7. dxc6 bxc6 8. Be2 h6
9. Nf3 e4 10. Ne5 Qd4 11. Ng4 Bxg4 12. Bxg4 Qxb2 13. P@d3 *

"""

CORPUS = {
    "deep-blue-style.pgn": DEEP_BLUE_STYLE,
    "annotated-1979.pgn": ANNOTATED_1979,
    "chessbase-blank-tag-line.pgn": CHESSBASE_BLANK_TAG_LINE,
    "chess-com.pgn": CHESS_COM,
    "oddities.pgn": ODDITIES,
}
# Quarantined games of the corpus: (file, game number) → (error type, words of the reason).
QUARANTINED = {
    ("oddities.pgn", 1): ("UnsupportedVariantError", "set-up position '4k3/8/8/8/8/8/4P3/4K3"),
    ("oddities.pgn", 3): ("IllegalMoveError", "python-chess: null move at ply 2"),
    ("oddities.pgn", 4): ("UnsupportedVariantError", "variant 'Crazyhouse' is not standard"),
}


def _read(path: Path, games_per_chunk: int = 100) -> tuple[pa.Table, pa.Table]:
    """Stream and read one file as the driver does, without Ray: (games, quarantine)."""
    pieces = list(stream_chunks(path, games_per_chunk=games_per_chunk))
    results = [read_chunk(p.chunk, p.data, stream_error=p.stream_error) for p in pieces]
    return (
        pa.concat_tables([r.games for r in results]),
        pa.concat_tables([r.quarantine for r in results]),
    )


def _python_chess_games(text: str) -> list[chess.pgn.Game]:
    handle = io.StringIO(text)
    games = []
    while (game := chess.pgn.read_game(handle)) is not None:
        games.append(game)
    return games


def _is_standard(game: chess.pgn.Game) -> bool:
    """A game the games table holds: standard chess from the start, no null move."""
    variant = game.headers.get("Variant", "Standard").lower()
    return (
        variant in ("standard", "chess", "from position")
        and game.headers.get("FEN", chess.STARTING_FEN) == chess.STARTING_FEN
        and all(game.mainline_moves())
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pgn-sources")
    paths = {}
    for name, text in CORPUS.items():
        paths[name] = folder / name
        paths[name].write_text(text, encoding="utf-8")
    return paths


@pytest.mark.parametrize("name", sorted(CORPUS))
@pytest.mark.parametrize("games_per_chunk", [1, 2, 100])
def test_game_count_and_moves_agree_with_python_chess(
    corpus: dict[str, Path], name: str, games_per_chunk: int
) -> None:
    expected = _python_chess_games(CORPUS[name])
    games, quarantine = _read(corpus[name], games_per_chunk)
    assert games.num_rows + quarantine.num_rows == len(expected)
    kept = {row["source_index"]: row for row in games.to_pylist()}
    held = {row["source_index"]: row for row in quarantine.to_pylist()}
    assert set(kept) | set(held) == set(range(len(expected)))
    for index, game in enumerate(expected):
        if _is_standard(game):
            assert index in kept, (name, index, held.get(index))
            assert kept[index]["moves"] == [m.uci() for m in game.mainline_moves()]
            assert kept[index]["white"] == game.headers["White"]
            assert kept[index]["event"] == game.headers.get("Event")
        else:
            error_type, words = QUARANTINED[(name, index)]
            assert held[index]["error_type"] == error_type
            assert words in held[index]["reason"]
    assert {(name, i) for i in held} == {k for k in QUARANTINED if k[0] == name}
    assert games.schema == GAMES_SCHEMA


def test_partial_and_unknown_dates_are_kept_with_their_month(corpus: dict[str, Path]) -> None:
    games, quarantine = _read(corpus["deep-blue-style.pgn"])
    assert quarantine.num_rows == 0
    rows = games.to_pylist()
    assert [r["month"] for r in rows] == [UNKNOWN_MONTH, "1997-05", UNKNOWN_MONTH]
    assert [r["date"] for r in rows] == [None, None, None]
    chess_com, _ = _read(corpus["chess-com.pgn"])
    assert chess_com["date"].to_pylist()[0].isoformat() == "2024-01-15"
    assert chess_com["month"].to_pylist() == ["2024-01"]
    oddities, _ = _read(corpus["oddities.pgn"])
    assert oddities["month"].to_pylist() == ["2023-11", "2020-01"]


def test_unknown_ratings_are_null_and_raw_values_kept(corpus: dict[str, Path]) -> None:
    games, _ = _read(corpus["deep-blue-style.pgn"])
    rows = games.to_pylist()
    assert [(r["white_rating"], r["black_rating"]) for r in rows] == [
        (2795, None),
        (None, 2795),
        (None, None),
    ]
    assert [(r["white_rating_raw"], r["black_rating_raw"]) for r in rows] == [
        ("2795", "?"),
        ("?", "2795"),
        ("", "-"),
    ]
    assert [r["rank_group"] for r in rows] == [None, None, None]


def test_a_blank_line_inside_the_tags_does_not_end_the_game(corpus: dict[str, Path]) -> None:
    games, quarantine = _read(corpus["chessbase-blank-tag-line.pgn"])
    assert (games.num_rows, quarantine.num_rows) == (1, 0)
    game = games.to_pylist()[0]
    assert (game["event"], game["month"], game["result"]) == ("Engine match", "2017-12", "0-1")
    assert game["num_plies"] == 16


def test_chess_com_clocks_time_control_and_result(corpus: dict[str, Path]) -> None:
    games, _ = _read(corpus["chess-com.pgn"])
    game = games.to_pylist()[0]
    expected = [node.clock() for node in _python_chess_games(CHESS_COM)[0].mainline()]
    assert game["clocks_s"] == pytest.approx(expected)
    assert (game["tc_base_s"], game["tc_increment_s"], game["tc_class"]) == (600, 0, "rapid")
    assert (game["winner"], game["source"]) == ("black", "pgn")


def test_unfinished_and_annotated_games(corpus: dict[str, Path]) -> None:
    oddities, _ = _read(corpus["oddities.pgn"])
    unfinished = oddities.to_pylist()[0]
    assert (unfinished["result"], unfinished["winner"], unfinished["ended_by"]) == (
        "*",
        None,
        "other",
    )
    assert unfinished["num_plies"] == 9
    annotated, _ = _read(corpus["annotated-1979.pgn"])
    assert annotated["moves"].to_pylist() == [["e2e4", "f7f6", "d2d4", "g7g5", "d1h5"]]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('[Event "a"]\n\n[White "b"]\n\n1. e4 *\n', id="one-blank-line-in-tags"),
        pytest.param('[Event "a"]\n\n\n[White "b"]\n\n1. e4 *\n', id="two-blank-lines-in-tags"),
        pytest.param('[Event "a"]\n\n1. e4 e5\n\n2. Nf3 *\n', id="blank-line-in-movetext"),
        pytest.param('[Event "a"]\n\n1. e4 {\n\n[x]\n} e5 *\n', id="blank-line-in-comment"),
        pytest.param('[Event "a"]\n\n1. e4 ; {\n\n[Event "b"]\n\n*\n', id="brace-in-line-comment"),
        pytest.param('[Event "a"]\n[Result "*"]\n\n[Event "b"]\n\n*\n', id="tags-only-game"),
        pytest.param('% x\n[Event "a"]\n\n*\n\n; y\n%z\n[Event "b"]\n\n*\n', id="comment-lines"),
        pytest.param('[Event "a"]\r\n\r\n1. e4 *\r\n \t\r\n[Event "b"]\r\n\r\n*\r\n', id="crlf"),
    ],
)
def test_games_split_where_python_chess_splits_them(text: str) -> None:
    data = text.encode()
    starts = game_starts(data).tolist()
    assert len(starts) + 1 == len(_python_chess_games(text))
    # Fed a few bytes at a time (as the driver streams a file), the splitter finds the same.
    splitter, fed, found = GameSplitter(), 0, []
    for end in range(3, len(data) + 3, 3):
        piece = data[fed:end]
        new, consumed = splitter.feed(piece, final=end >= len(data))
        found += (new + fed).tolist()
        fed += consumed
    assert found == starts
