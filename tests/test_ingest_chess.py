"""``kibitz ingest chess`` on the real Lichess February 2024 blitz files (Kuboki et al. 2025).

- exact counts per split and band under the chess-kuboki2025 preset, cross-checked on one band
  with an independent python-chess count;
- every field of every game of one band file against python-chess (UCI moves, clocks, evals
  with mates, tags), and a hand-checked game;
- each kind of bad input on its own (truncated .zst, illegal move, missing tags, broken UTF-8,
  non-PGN files, a game only python-chess reads), then all of them through the Ray driver
  with ``read = kept + rejected + quarantined``;
- DuckDB reads the table with hive partitioning, and ``sql/staging/stg_games.sql`` runs on it.

Uses one embedded local Ray (2 CPUs) for the module. Run:
``python -m pytest tests/test_ingest_chess.py -q``.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import logging
import re
from pathlib import Path
from typing import Any

import chess.pgn
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import ray
import zstandard

from pipeline.core import settings
from pipeline.core.games_schema import GAMES_SCHEMA
from pipeline.ingest.pgn import plan_chunks, read_chunk, stream_chunks
from pipeline.ingest.selection import load_preset
from pipeline.ingest.work import IngestConfig
from pipeline.jobs.ingest import run_ingest

DATA = settings.data_dir() / "chess/lichess-2024-02-blitz"
BANDS = [f"{lo}-{lo + 200}" for lo in range(1000, 2600, 200)]
BAND_FILE = DATA / "testing/1200-1400.pgn.zst"  # the band with 1,198 games


def _decompress(path: Path) -> str:
    return zstandard.ZstdDecompressor().stream_reader(path.open("rb")).read().decode("utf-8")


def _split_games(text: str) -> list[str]:
    return [
        g if g.endswith("\n") else g + "\n" for g in re.split(r"\n\n(?=\[Event )", text.strip())
    ]


def _read_file(path: Path, games_per_chunk: int = 50) -> tuple[pa.Table, pa.Table, list[Any]]:
    """Stream and read a file without Ray: (games, quarantine, pieces)."""
    pieces = list(stream_chunks(path, games_per_chunk=games_per_chunk))
    results = [read_chunk(p.chunk, p.data, stream_error=p.stream_error) for p in pieces]
    games = pa.concat_tables([r.games for r in results])
    quarantine = pa.concat_tables([r.quarantine for r in results])
    return games, quarantine, pieces


def _dicts(sql: str) -> list[dict[str, Any]]:
    relation = duckdb.sql(sql)
    return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def _python_chess_eval(node: chess.pgn.ChildNode) -> int | None:
    score = node.eval()
    if score is None:
        return None
    white = score.white()
    mate = white.mate()
    return white.score() if mate is None else (100_000 - abs(mate)) * (1 if mate > 0 else -1)


@pytest.fixture(scope="module")
def ray_cluster() -> None:
    if not ray.is_initialized():
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING
        )


@pytest.fixture(scope="module")
def ingested(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both splits ingested with the chess preset: split → (out dir, summary)."""
    out = {}
    for split in ("candidating", "testing"):
        config = IngestConfig(
            game="chess",
            sources=[str(DATA / split)],
            out_dir=tmp_path_factory.mktemp(split),
            rules=load_preset("chess-kuboki2025"),
            show_progress=False,
        )
        out[split] = (config.out_dir, run_ingest(config))
    return out


@pytest.fixture(scope="module")
def python_chess_band() -> list[chess.pgn.Game]:
    """The band file read independently by python-chess (the reference)."""
    handle = io.StringIO(_decompress(BAND_FILE))
    games = []
    while (game := chess.pgn.read_game(handle)) is not None:
        assert not game.errors
        games.append(game)
    return games


def _counts_by_band(out_dir: Path) -> dict[str, int]:
    rows = duckdb.sql(
        f"select rank_group, count(*) from read_parquet('{out_dir}/**/*.parquet', "
        "hive_partitioning = true) group by all"
    ).fetchall()
    return dict(rows)


def test_chess_preset_counts_per_split_and_band(ingested: dict[str, Any]) -> None:
    cand_dir, cand = ingested["candidating"]
    test_dir, test = ingested["testing"]
    assert _counts_by_band(cand_dir) == dict.fromkeys(BANDS, 120)
    assert _counts_by_band(test_dir) == dict.fromkeys(BANDS, 1200) | {"1200-1400": 1198}
    assert (cand["games_read"], cand["kept"], cand["quarantined"]) == (960, 960, 0)
    assert (test["games_read"], test["kept"], test["quarantined"]) == (9598, 9598, 0)
    assert test["rejected"] == {"same_rank_group": 0, "event_matches": 0, "min_plies": 0}
    assert test["invariant"]["holds"] and test["chunks"]["total"] == 8
    assert test["per_file"][str(BAND_FILE)] == {
        "games_read": 1198,
        "kept": 1198,
        "rejected": 0,
        "quarantined": 0,
    }


def test_band_count_agrees_with_an_independent_python_chess_count(
    ingested: dict[str, Any], python_chess_band: list[chess.pgn.Game]
) -> None:
    def kept(game: chess.pgn.Game) -> bool:
        w, b = int(game.headers["WhiteElo"]), int(game.headers["BlackElo"])
        same_band = 1000 <= w < 2600 and w // 200 == b // 200 and 1000 <= b < 2600
        rated_blitz = re.match(r"(Rated Blitz |Blitz swiss )", game.headers["Event"])
        return bool(same_band and rated_blitz and len(list(game.mainline_moves())) > 20)

    expected = sum(kept(game) for game in python_chess_band)
    assert expected == 1198
    assert _counts_by_band(ingested["testing"][0])["1200-1400"] == expected


def test_every_field_of_a_band_file_matches_python_chess(
    ingested: dict[str, Any], python_chess_band: list[chess.pgn.Game]
) -> None:
    out_dir = ingested["testing"][0]
    rows = _dicts(
        f"select * from read_parquet('{out_dir}/**/*.parquet', hive_partitioning = true) "
        f"where source_file = '{BAND_FILE}' order by source_index"
    )
    assert [r["source_index"] for r in rows] == list(range(1198))
    mates = 0
    for row, game in zip(rows, python_chess_band, strict=True):
        nodes = list(game.mainline())
        assert row["moves"] == [node.move.uci() for node in nodes]
        assert row["clocks_s"] == [node.clock() for node in nodes]
        evals = [_python_chess_eval(node) for node in nodes]
        assert row["evals_cp"] == (evals if any(e is not None for e in evals) else None)
        mates += sum(abs(e) > 90_000 for e in evals if e is not None)
        h = game.headers
        assert (row["site"], row["event"], row["white"], row["black"]) == (
            h["Site"],
            h["Event"],
            h["White"],
            h["Black"],
        )
        assert (row["white_rating"], row["black_rating"]) == (
            int(h["WhiteElo"]),
            int(h["BlackElo"]),
        )
        assert (row["result"], row["termination"], row["time_control"]) == (
            h["Result"],
            h["Termination"],
            h["TimeControl"],
        )
        assert row["date"].strftime("%Y.%m.%d") == h["UTCDate"]
        assert row["num_plies"] == len(nodes)
        assert row["game_id"] == hashlib.blake2b(h["Site"].encode(), digest_size=8).hexdigest()
    assert mates > 100  # the file has many mate evaluations; all of them matched


def test_a_known_game_field_by_field(ingested: dict[str, Any]) -> None:
    out_dir = ingested["testing"][0]
    (game,) = _dicts(
        f"select * from read_parquet('{out_dir}/**/*.parquet', hive_partitioning = true) "
        "where site = 'https://lichess.org/NsV1c0F5'"
    )
    assert (
        game["game_id"]
        == hashlib.blake2b(b"https://lichess.org/NsV1c0F5", digest_size=8).hexdigest()
    )
    assert (game["game"], game["source"], game["month"]) == ("chess", "lichess", "2024-02")
    assert (game["source_index"], game["source_offset"]) == (0, 0)
    assert (game["white"], game["black"]) == ("Odetojoyouslife", "JanPotok")
    assert (game["white_rating"], game["black_rating"], game["rank_group"]) == (
        1218,
        1210,
        "1200-1400",
    )
    assert (game["tc_base_s"], game["tc_increment_s"], game["tc_class"]) == (300, 0, "blitz")
    assert (game["result"], game["winner"], game["ended_by"]) == ("1-0", "white", "time")
    assert game["num_plies"] == 69 and game["board_size"] == 8
    assert game["moves"][:4] == ["b2b3", "d7d5", "c1b2", "b8c6"]
    assert game["moves"][27:29] == ["e8c8", "e1c1"]  # 14... O-O-O 15. O-O-O
    assert game["clocks_s"][:4] == [300.0, 300.0, 296.0, 295.0] and game["clocks_s"][-1] == 103.0
    assert game["evals_cp"] is None  # no %eval in this game
    assert game["selection"] == "chess-kuboki2025@1"
    assert (game["komi"], game["rules"], game["white_rank"]) == (None, None, None)


def test_duckdb_reads_partitions_and_the_staging_view(ingested: dict[str, Any]) -> None:
    out_dir = ingested["candidating"][0]
    con = duckdb.connect()
    con.sql(
        f"create view games as select * from read_parquet('{out_dir}/**/*.parquet', "
        "hive_partitioning = true)"
    )
    partitions = con.sql("select distinct game, source, month from games").fetchall()
    assert partitions == [("chess", "lichess", "2024-02")]
    staged = con.sql((settings.SQL_DIR / "staging/stg_games.sql").read_text())
    renamed = {"date": "played_on", "white": "white_name", "black": "black_name"}
    expected = [renamed.get(name, name) for name in GAMES_SCHEMA.names]
    assert staged.columns == [*expected, "is_draw", "month_start"]
    stats = con.sql(
        "select count(*), count(distinct game_id), count(game_id), min(month_start) "
        f"from ({(settings.SQL_DIR / 'staging/stg_games.sql').read_text()})"
    ).fetchall()
    assert stats[0][:3] == (960, 960, 960) and str(stats[0][3]) == "2024-02-01"


def test_plan_chunks_is_stable_and_read_chunk_rereads_its_slice() -> None:
    chunks = plan_chunks([DATA / "candidating"], games_per_chunk=50)
    assert len(chunks) == 24  # 8 files × (50 + 50 + 20 games)
    assert [c.chunk_id for c in chunks] == [
        c.chunk_id for c in plan_chunks([DATA / "candidating"], games_per_chunk=50)
    ]
    assert len({c.chunk_id for c in chunks}) == 24
    third = chunks[2]
    assert (third.chunk_index, third.locator[3:]) == (2, (100, 20, "ok"))
    alone = read_chunk(third)  # re-streams the file up to its byte range
    piece = list(stream_chunks(third.source_file, games_per_chunk=50))[2]
    assert alone.games.equals(read_chunk(piece.chunk, piece.data).games)
    assert alone.games.column("source_index").to_pylist() == list(range(100, 120))


# -- bad input, each on its own -----------------------------------------------------------


@pytest.fixture(scope="module")
def good_games() -> list[str]:
    return _split_games(_decompress(DATA / "candidating/1000-1200.pgn.zst"))


def test_truncated_zst_keeps_the_games_before_the_cut(
    tmp_path: Path, good_games: list[str]
) -> None:
    text = "\n".join(good_games).encode()
    whole = zstandard.ZstdCompressor(level=3).compress(text)
    cut = tmp_path / "cut.pgn.zst"
    cut.write_bytes(whole[: len(whole) // 2])
    games, quarantine, pieces = _read_file(cut)

    decoded_prefix = (
        zstandard.ZstdDecompressor().decompressobj().decompress(whole[: len(whole) // 2])
    )
    started = decoded_prefix.count(b"[Event ")
    assert 0 < games.num_rows == started - 1
    full, _, _ = _read_file(DATA / "candidating/1000-1200.pgn.zst")
    assert games.column("game_id").to_pylist() == full.column("game_id").to_pylist()[: started - 1]
    assert quarantine.column("error_type").to_pylist() == ["TruncatedStreamError"]
    reason = quarantine.column("reason")[0].as_py()
    assert str(cut) in reason and f"game {started - 1}" in reason and "truncated" in reason
    assert pieces[-1].stream_error is not None and str(cut) in pieces[-1].stream_error


def test_illegal_move_is_quarantined_and_the_rest_read(
    tmp_path: Path, good_games: list[str]
) -> None:
    games = list(good_games)
    header, movetext = games[5].split("\n\n", 1)
    games[5] = header + "\n\n" + re.sub(r"^1\. \S+", "1. Ke2", movetext)  # king through a pawn
    path = tmp_path / "illegal.pgn"
    path.write_text("\n".join(games))
    kept, quarantine, _ = _read_file(path)
    assert kept.num_rows == 119 and 5 not in kept.column("source_index").to_pylist()
    assert quarantine.column("error_type").to_pylist() == ["IllegalMoveError"]
    reason = quarantine.column("reason")[0].as_py()
    assert str(path) in reason and "game 5 " in reason and "Ke2" in reason
    assert quarantine.column("raw")[0].as_py().startswith("[Event ")


def test_missing_tags_are_quarantined_with_their_names(
    tmp_path: Path, good_games: list[str]
) -> None:
    games = list(good_games)
    games[7] = re.sub(r'\[White "[^"]*"\]\n', "", games[7])
    games[8] = re.sub(r'\[(UTC)?Date "[^"]*"\]\n', "", games[8])  # no date: kept, month unknown
    games[9] = re.sub(r'\[(Black|Result) "[^"]*"\]\n', "", games[9])
    path = tmp_path / "tags.pgn"
    path.write_text("\n".join(games))
    kept, quarantine, _ = _read_file(path)
    assert kept.num_rows == 118
    reasons = quarantine.column("reason").to_pylist()
    assert quarantine.column("error_type").to_pylist() == ["MissingHeaderError"] * 2
    assert "game 7 " in reasons[0] and "missing tag(s) White" in reasons[0]
    assert "game 9 " in reasons[1] and "missing tag(s) Black, Result" in reasons[1]
    undated = kept.filter(pc.equal(kept["source_index"], 8)).to_pylist()[0]
    assert (undated["month"], undated["date"]) == ("unknown", None)


def test_a_game_set_up_from_a_position_is_quarantined_naming_the_fen(
    tmp_path: Path, good_games: list[str]
) -> None:
    games = list(good_games)
    fen = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"
    games[3] = games[3].replace("[Event ", f'[SetUp "1"]\n[FEN "{fen}"]\n[Event ', 1)
    games[4] = games[4].replace("[Event ", f'[FEN "{chess.STARTING_FEN}"]\n[Event ', 1)
    path = tmp_path / "fen.pgn"
    path.write_text("\n".join(games))
    kept, quarantine, _ = _read_file(path)
    assert kept.num_rows == 119 and 4 in kept.column("source_index").to_pylist()
    assert quarantine.column("error_type").to_pylist() == ["UnsupportedVariantError"]
    reason = quarantine.column("reason")[0].as_py()
    assert "game 3 " in reason and fen in reason


def test_broken_utf8_in_a_tag_is_quarantined(tmp_path: Path, good_games: list[str]) -> None:
    data = [g.encode() for g in good_games]
    data[9] = re.sub(rb'\[Black "[^"]*"\]', b'[Black "Ca\xffe\xfe"]', data[9])
    path = tmp_path / "utf8.pgn"
    path.write_bytes(b"\n".join(data))
    kept, quarantine, _ = _read_file(path)
    assert kept.num_rows == 119
    assert quarantine.column("error_type").to_pylist() == ["InvalidUtf8Error"]
    reason = quarantine.column("reason")[0].as_py()
    assert str(path) in reason and "game 9 " in reason and "invalid UTF-8" in reason
    assert "Ca\ufffde" in quarantine.column("raw")[0].as_py()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.pgn", b"Dear diary, today I played chess.\n"),
        ("image.pgn.zst", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
    ],
)
def test_a_non_pgn_file_is_one_clear_quarantined_entry(
    tmp_path: Path, name: str, content: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    kept, quarantine, pieces = _read_file(path)
    assert kept.num_rows == 0 and quarantine.num_rows == 1
    assert quarantine.column("error_type").to_pylist() == ["NotPgnError"]
    assert quarantine.column("reason")[0].as_py().startswith(f"{str(path)!r} is not a PGN file")
    assert len(pieces) == 1


def test_a_game_only_python_chess_reads_is_normalised_and_kept(tmp_path: Path) -> None:
    text = (
        '[Event "Casual game"]\n[Site "https://example.org/g1"]\n[Date "2024.03.05"]\n'
        '[White "a"]\n[Black "b"]\n[Result "1-0"]\n\n'
        "1. e2-e4 { [%clk 0:03:00] } e7-e5 { [%clk 0:03:00] } 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n"
    )
    path = tmp_path / "long-algebraic.pgn"
    path.write_text(text)
    kept, quarantine, _ = _read_file(path)
    assert quarantine.num_rows == 0
    game = kept.to_pylist()[0]
    assert game["moves"] == ["e2e4", "e7e5", "d1h5", "b8c6", "f1c4", "g8f6", "h5f7"]
    assert game["clocks_s"] == [180.0, 180.0, None, None, None, None, None]
    assert (game["source"], game["month"], game["ended_by"]) == ("pgn", "2024-03", "other")


def test_mates_in_a_game_whose_comments_do_not_line_up_with_plies(tmp_path: Path) -> None:
    text = (
        '[Event "x"]\n[Site "https://lichess.org/abc"]\n[UTCDate "2024.02.03"]\n'
        '[White "a"]\n[Black "b"]\n[Result "1-0"]\n\n'
        "{ a game comment before the first move } 1. e4 { [%eval 0.3] } e5 { [%eval 0.25] } "
        "2. Qh5 { [%eval #-9] } Nc6 { [%eval #4] } 3. Bc4 Nf6 { [%eval #1] } 4. Qxf7# 1-0\n"
    )
    path = tmp_path / "mates.pgn"
    path.write_text(text)
    kept, _, _ = _read_file(path)
    assert kept.column("evals_cp").to_pylist()[0] == [30, 25, -99991, 99996, None, 99999, None]


def test_time_control_outcome_and_band_mappings(tmp_path: Path) -> None:
    cases = [
        # TimeControl, Result, Termination, WhiteElo, BlackElo
        ("15+0", "1-0", "Normal", "999", "1000"),
        ("60+1", "0-1", "Time forfeit", "1000", "1199"),
        ("180+2", "1/2-1/2", "Time forfeit", "2599", "2400"),
        ("600+5", "1-0", "Abandoned", "2600", "2600"),
        ("1800+20", "*", "Unterminated", "?", "1500"),
        ("-", "0-1", "Rules infraction", "1500", "1599"),
    ]
    games = [
        f'[Event "e"]\n[Site "https://lichess.org/g{i}"]\n[UTCDate "2024.02.0{i + 1}"]\n'
        f'[White "w"]\n[Black "b"]\n[Result "{result}"]\n[WhiteElo "{we}"]\n[BlackElo "{be}"]\n'
        f'[TimeControl "{tc}"]\n[Termination "{term}"]\n\n1. e4 e5 {result}\n'
        for i, (tc, result, term, we, be) in enumerate(cases)
    ]
    path = tmp_path / "mappings.pgn"
    path.write_text("\n".join(games))
    kept, quarantine, _ = _read_file(path)
    assert quarantine.num_rows == 0
    got = kept.select(
        [
            "tc_base_s",
            "tc_increment_s",
            "tc_class",
            "winner",
            "ended_by",
            "white_rank_group",
            "rank_group",
        ]
    ).to_pylist()
    assert [tuple(g.values()) for g in got] == [
        (15, 0, "ultrabullet", "white", "resign", None, None),
        (60, 1, "bullet", "black", "time", "1000-1200", "1000-1200"),
        (180, 2, "blitz", "draw", "draw", "2400-2600", "2400-2600"),
        (600, 5, "rapid", "white", "other", None, None),
        (1800, 20, "classical", None, "other", None, None),
        (None, None, "correspondence", "black", "other", "1400-1600", "1400-1600"),
    ]
    assert kept.column("white_rating").to_pylist()[4] is None


def test_bz2_plain_and_zst_give_the_same_games(tmp_path: Path) -> None:
    text = _decompress(DATA / "candidating/2400-2600.pgn.zst").encode()
    (tmp_path / "g.pgn").write_bytes(text)
    (tmp_path / "g.pgn.bz2").write_bytes(bz2.compress(text))
    tables = [
        _read_file(p, 1000)[0]
        for p in (
            DATA / "candidating/2400-2600.pgn.zst",
            tmp_path / "g.pgn",
            tmp_path / "g.pgn.bz2",
        )
    ]
    ids = [t.column("game_id").to_pylist() for t in tables]
    moves = [t.column("moves").to_pylist() for t in tables]
    assert len(ids[0]) == 120 and ids[0] == ids[1] == ids[2] and moves[0] == moves[1] == moves[2]


def test_bad_inputs_through_the_driver_keep_read_equal_kept_rejected_quarantined(
    ray_cluster: None, tmp_path: Path, good_games: list[str]
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    games = [g.encode() for g in good_games]
    header, movetext = games[5].split(b"\n\n", 1)
    games[5] = header + b"\n\n" + re.sub(rb"^1\. \S+", b"1. Ke2", movetext)
    games[7] = re.sub(rb'\[White "[^"]*"\]\n', b"", games[7])
    games[9] = re.sub(rb'\[Black "[^"]*"\]', b'[Black "\xff"]', games[9])
    (folder / "a-bad.pgn").write_bytes(b"\n".join(games))
    (folder / "b-notes.pgn").write_bytes(b"not a chess game\n")
    whole = zstandard.ZstdCompressor().compress(b"\n".join(g.encode() for g in good_games))
    (folder / "c-cut.pgn.zst").write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "out"
    summary = run_ingest(
        IngestConfig(
            game="chess",
            sources=[str(folder)],
            out_dir=out,
            rules=load_preset("chess-kuboki2025"),
            games_per_chunk=40,
            show_progress=False,
        )
    )
    assert summary["invariant"]["holds"]
    assert summary["quarantine_reasons"] == {
        "IllegalMoveError": 1,
        "InvalidUtf8Error": 1,
        "MissingHeaderError": 1,
        "NotPgnError": 1,
        "TruncatedStreamError": 1,
    }
    read = summary["games_read"]
    assert read == summary["kept"] + summary["rejected_total"] + summary["quarantined"]
    assert summary["per_file"][str(folder / "b-notes.pgn")]["quarantined"] == 1
    assert [e.split(":")[0] for e in summary["file_errors"]] == [
        repr(str(folder / "b-notes.pgn")) + " is not a PGN file",
        repr(str(folder / "c-cut.pgn.zst")),
    ]
    quarantined = duckdb.sql(
        f"select source_file, source_index, error_type from read_parquet('{out}/_quarantine/**/*.pq', "
        "hive_partitioning = true) order by source_file, source_index"
    ).fetchall()
    assert [q[:2] for q in quarantined[:3]] == [(str(folder / "a-bad.pgn"), i) for i in (5, 7, 9)]
    kept = duckdb.sql(f"select count(*) from read_parquet('{out}/**/*.parquet')").fetchall()
    assert kept == [(summary["kept"],)]
