"""The Go reader on the real Fox files in ../shared: counts, decoded fields, quirks, bad input.

Expected numbers were measured on the files and, for the raw samples, read by hand from the
SGF text that ``7z x`` prints (the test re-reads that text to show where each value comes from).
"""

from __future__ import annotations

import collections
import shutil
import subprocess
from pathlib import Path

import numpy as np
import py7zr
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sgfmill import sgf as sgfmill_sgf

from pipeline.core import settings
from pipeline.core.games_schema import GAMES_SCHEMA, QUARANTINE_SCHEMA
from pipeline.ingest.archive_7z import CorruptArchiveError, iter_members, list_members
from pipeline.ingest.chunks import ChunkResult, blake2b_hex
from pipeline.ingest.fox_results import parse_clock, parse_komi, parse_result
from pipeline.ingest.selection import apply_selection, load_preset
from pipeline.ingest.sgf import SgfInputError, plan_chunks, read_chunk, read_paths
from pipeline.ingest.sgf_parse import NotSgfError, parse_sgf

GO = settings.data_dir() / "go"
SELECTED = GO / "fox-selected"
RAW_9D = GO / "fox-raw" / "9d2.7z.001"
RAW_PRO = GO / "fox-raw" / "Pro.7z"
GROUPS = ("3-5k", "1-2k", "1d", "2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d")
BY_PLAYER = {
    "1-2k": 926,
    "1d": 906,
    "2d": 1020,
    "3-5k": 1003,
    "3d": 925,
    "4d": 1127,
    "5d": 991,
    "6d": 925,
    "7d": 704,
    "8d": 960,
    "9d": 845,
}
# A real Fox game line from the selected testing split, reused to build bad inputs.
FOX_LINE = (
    b"(;GM[1]FF[4]SZ[19]GN[]DT[2019-02-19]PB[E5BFA7E9?92E5ADA3E8BDAE]PW[E784B6E784B6E58AA0E6B2B9]"
    b"BR[9d]WR[9d]KM[0]HA[0]RU[Japanese]AP[GNUGo:3.8]RE[W+R]TM[60]TC[5]TT[20]AP[foxwq]RL[0]"
    b";B[qp];W[cq];B[pd];W[dc];B[de];W[ce];B[cf];W[cd])"
)


def _read(paths: list[Path], games_per_chunk: int = 50_000) -> ChunkResult:
    return read_paths(paths, games_per_chunk=games_per_chunk)


def _by_member(result: ChunkResult, member: str) -> dict:
    rows = result.games.filter(pc.equal(result.games["source_member"], member)).to_pylist()
    assert len(rows) == 1, member
    return rows[0]


def _member_text(archive: Path, member: str) -> str:
    """The member's SGF text as 7-Zip itself extracts it (independent of py7zr)."""
    out = subprocess.run(
        ["7z", "x", "-so", str(archive), member], check=True, capture_output=True
    ).stdout
    return out.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def raw_9d() -> ChunkResult:
    return _read([RAW_9D], games_per_chunk=6_000)


@pytest.fixture(scope="module")
def raw_pro() -> ChunkResult:
    return _read([RAW_PRO])


@pytest.fixture(scope="module")
def selected() -> dict[str, ChunkResult]:
    return {split: _read([SELECTED / split]) for split in ("candidating", "testing", "by-player")}


# ---------------------------------------------------------------- curated Kuboki et al. sets


@pytest.mark.parametrize(
    ("split", "per_group"),
    [
        ("candidating", dict.fromkeys(GROUPS, 100)),
        ("testing", dict.fromkeys(GROUPS, 900)),
        ("by-player", BY_PLAYER),
    ],
)
def test_selected_counts_per_split_and_group(
    selected: dict[str, ChunkResult], split: str, per_group: dict[str, int]
) -> None:
    result = selected[split]
    assert result.quarantine.num_rows == 0
    assert result.games.num_rows == sum(per_group.values())
    files = [Path(f).stem for f in result.games["source_file"].to_pylist()]
    groups = result.games["rank_group"].to_pylist()
    assert groups == files  # both players' ranks give the group the file is named after
    assert collections.Counter(groups) == per_group


def test_selected_fields(selected: dict[str, ChunkResult]) -> None:
    games = selected["testing"].games
    assert games.schema == GAMES_SCHEMA
    first = games.filter(pc.equal(games["source_file"], str(SELECTED / "testing" / "9d.sgf")))
    row = first.slice(0, 1).to_pylist()[0]
    # Hand-read from the first line of testing/9d.sgf.
    assert row["black"] == "E5BFA7E9?92E5ADA3E8BDAE"  # hex-encoded names are kept as given
    assert row["black_rank"] == row["white_rank"] == "9d"
    assert (row["komi"], row["result"], row["winner"], row["ended_by"]) == (
        0.0,
        "W+R",
        "white",
        "resign",
    )
    assert (row["tc_base_s"], row["tc_periods"], row["tc_increment_s"], row["tc_class"]) == (
        60,
        5,
        20,
        "blitz",
    )
    assert row["moves"][:4] == ["B:qp", "W:cq", "B:pd", "W:dc"]
    assert (row["source_index"], row["source_offset"], row["month"]) == (0, 1, "2019-02")
    assert row["game_id"] == blake2b_hex("testing/9d.sgf#0") == "1e80ab1107c30079"
    # Komi of the curated set: Fox's ×100 everywhere.
    komi = collections.Counter(games["komi"].to_pylist())
    assert komi == {0.0: 8118, 6.5: 1665, 3.75: 107, 7.5: 10}
    assert (
        pc.sum(games["num_plies"]).as_py() == pc.sum(pc.list_value_length(games["moves"])).as_py()
    )


def test_game_ids_unique_and_stable(selected: dict[str, ChunkResult]) -> None:
    ids = pa.concat_arrays([r.games["game_id"].combine_chunks() for r in selected.values()])
    assert len(pc.unique(ids)) == 1100 + 9900 + 10332
    small = _read([SELECTED / "testing" / "1d.sgf"], games_per_chunk=128)
    assert (
        small.games["game_id"].to_pylist()
        == selected["testing"]
        .games.filter(
            pc.equal(selected["testing"].games["source_file"], str(SELECTED / "testing" / "1d.sgf"))
        )["game_id"]
        .to_pylist()
    )


def test_large_collection_is_split_at_game_starts() -> None:
    path = SELECTED / "by-player" / "4d.sgf"  # 1.6 MB: split into ranges
    chunks = plan_chunks([path], games_per_chunk=500)
    assert [c.locator[0] for c in chunks] == ["sgf", "sgf", "sgf"]
    assert [c.locator[4] for c in chunks] == [0, 500, 1000]
    parts = [read_chunk(c).games for c in chunks]
    whole = _read([path]).games
    joined = pa.concat_tables(parts)
    assert joined.num_rows == 1127
    for column in ("game_id", "source_index", "source_offset", "moves"):
        assert joined[column].to_pylist() == whole[column].to_pylist()
    assert joined["source_offset"].to_pylist()[500] == 501  # 1-based line of game 500


# ---------------------------------------------------------------- raw Fox archives


def test_raw_counts_and_quarantine(raw_9d: ChunkResult, raw_pro: ChunkResult) -> None:
    assert (raw_9d.games.num_rows, raw_9d.quarantine.num_rows) == (18_073, 8)
    assert raw_9d.quarantine["error_type"].to_pylist() == ["NulFilledSgfError"] * 8
    assert (raw_pro.games.num_rows, raw_pro.quarantine.num_rows) == (9_665, 4)
    assert raw_pro.quarantine["error_type"].to_pylist() == ["SgfGameError"] * 4
    for reason in raw_pro.quarantine["reason"].to_pylist():
        assert reason.startswith(f"{str(RAW_PRO)!r} member 'Pro/9p/")
        assert "game 0 (line 1): truncated game tree" in reason
    nul = raw_9d.quarantine.to_pylist()[0]
    assert nul["source_member"].startswith("9k/") and "NUL bytes" in nul["reason"]
    assert str(RAW_9D) in nul["reason"]
    assert raw_9d.quarantine.schema == QUARANTINE_SCHEMA


def test_raw_nul_members_counted_independently() -> None:
    """Count NUL-filled members by decompressing with py7zr's own reader."""
    for archive, expected in ((RAW_9D, 8), (RAW_PRO, 0)):
        nul = 0
        for _, content in iter_members(archive):
            assert isinstance(content, bytes)
            nul += bool(content) and content.count(0) == len(content)
        assert nul == expected


def test_raw_komi_distribution(raw_9d: ChunkResult, raw_pro: ChunkResult) -> None:
    komi = collections.Counter(raw_9d.games["komi"].to_pylist())
    assert komi == {0.0: 14236, 6.5: 2856, 3.75: 422, 7.5: 347, 3.25: 191, 2.75: 19, 2.25: 2}
    pro = collections.Counter(raw_pro.games["komi"].to_pylist())
    assert pro == {0.0: 7940, 7.5: 704, 6.5: 564, 5.5: 257, 4.5: 200}
    total = raw_9d.games.num_rows + raw_pro.games.num_rows
    assert round(100 * (komi[0.0] + pro[0.0]) / total) == 80  # README: "79 % of games KM[0]"
    assert round(100 * komi[0.0] / raw_9d.games.num_rows) == 79


def test_raw_ranks_trust_properties_not_folders(raw_9d: ChunkResult, raw_pro: ChunkResult) -> None:
    assert set(raw_9d.games["source_member"].to_pylist()[:5]) <= {
        m.name for m in list_members(RAW_9D)
    }
    assert all(m.startswith("9k/") for m in raw_9d.games["source_member"].to_pylist())
    assert collections.Counter(raw_9d.games["white_rank"].to_pylist()) == {"9d": 18_073}
    black = collections.Counter(raw_9d.games["black_rank"].to_pylist())
    assert (black["9d"], black["pro"], black["18k"], black["1k"]) == (16220, 157, 68, 53)
    assert collections.Counter(raw_pro.games["white_rank"].to_pylist()) == {"pro": 9_665}
    raw_labels = set(raw_9d.games["black_rating_raw"].to_pylist())
    assert {"9段", "18级", "P2段", "1级"} <= raw_labels


def test_raw_results_handicap_and_passes(raw_9d: ChunkResult) -> None:
    games = raw_9d.games
    results = collections.Counter(games["result"].to_pylist())
    assert (results["B+0.02"], results["W+0.02"], results["draw"]) == (593, 661, 257)
    tiny = games.filter(pc.equal(games["result"], "B+0.02"))
    assert set(tiny["ended_by"].to_pylist()) == {"score"}
    assert np.allclose(tiny["score_margin"].to_numpy(), 0.02)
    ended = collections.Counter(games["ended_by"].to_pylist())
    assert ended == {"resign": 14168, "score": 3648, "draw": 257}
    moves = pc.list_flatten(games["moves"])
    assert pc.sum(pc.ends_with(moves, "pass")).as_py() == 0  # Fox records no passes
    setup = games.filter(pc.is_valid(games["setup_black"]))
    assert setup.num_rows == 1045
    first_colour = [m[0][0] for m in setup["moves"].to_pylist()]
    assert collections.Counter(first_colour) == {"W": 1043, "B": 2}
    assert (
        pc.all(
            pc.equal(pc.list_value_length(setup["setup_black"]), setup["handicap"].cast(pa.int32()))
        ).as_py()
        is True
    )


# Members read by hand from `7z x -so ARCHIVE MEMBER`: (archive, member, raw snippets, fields).
HAND_READ = [
    (
        RAW_9D,
        "9k/1571194973010001560.sgf",
        ["BR[9段]", "WR[9段]", "KM[0]", "RE[B+R]", "TM[60]TC[3]TT[15]", ";B[qd];W[dd];B[pq];W[dp]"],
        {
            "black_rank": "9d",
            "white": "薑餅人",
            "komi": 0.0,
            "ended_by": "resign",
            "winner": "black",
            "tc_class": "blitz",
            "date": "2019-10-16",
            "first_moves": ["B:qd", "W:dd", "B:pq", "W:dp"],
            "num_plies": 213,
        },
    ),
    (
        RAW_9D,
        "9k/1570694979010001179.sgf",  # variations: main line is the first child each time
        ["BR[P9段]", "KM[375]", "RU[Chinese]", ";B[pd]  (;W[dp]  (;B[pp]  (;W[dc]"],
        {
            "black_rank": "pro",
            "white_rank": "9d",
            "komi": 3.75,
            "rules": "chinese",
            "tc_class": "classical",
            "first_moves": ["B:pd", "W:dp", "B:pp", "W:dc"],
            "num_plies": 175,
        },
    ),
    (
        RAW_9D,
        "9k/1530532546010001701.sgf",  # handicap stones in the second node, White first
        ["HA[6]", ";AB[pd][dp][dd][pp][dj][pj];W[nc];B[pf]", "RE[W+24.0]", "BR[2段]"],
        {
            "handicap": 6,
            "setup_black": ["pd", "dp", "dd", "pp", "dj", "pj"],
            "first_moves": ["W:nc", "B:pf"],
            "ended_by": "score",
            "score_margin": 24.0,
            "black_rank": "2d",
        },
    ),
    (
        RAW_9D,
        "9k/1536220119010001859.sgf",
        ["RE[B+0.02]", "PB[pundit]"],
        {"result": "B+0.02", "ended_by": "score", "black": "pundit", "num_plies": 69},
    ),
    (
        RAW_9D,
        "9k/1450181830019999093.sgf",
        ["BR[18级]", "HA[1]", "RE[W+56.0]"],
        {"black_rank": "18k", "black_rank_num": -17.0, "handicap": 0, "score_margin": 56.0},
    ),
    (
        RAW_PRO,
        "Pro/1p/1512976317010001036.sgf",
        ["BR[P9段]", "WR[P1段]", "KM[750]", "PB[박정환]"],
        {"black_rank": "pro", "white_rank": "pro", "komi": 7.5, "black": "박정환"},
    ),
    (
        RAW_PRO,
        "Pro/1p/1497516639019999865.sgf",
        ["RE[draw]", "BR[8段]", "WR[P1段]", "TM[1800]TC[3]TT[20]"],
        {"winner": "draw", "ended_by": "draw", "black_rank": "8d", "tc_base_s": 1800},
    ),
]


@pytest.mark.parametrize(("archive", "member", "snippets", "fields"), HAND_READ)
def test_hand_read_raw_members(
    raw_9d: ChunkResult,
    raw_pro: ChunkResult,
    archive: Path,
    member: str,
    snippets: list[str],
    fields: dict,
) -> None:
    text = _member_text(archive, member)
    for snippet in snippets:
        assert snippet in text
    row = _by_member(raw_9d if archive == RAW_9D else raw_pro, member)
    for key, expected in fields.items():
        if key == "first_moves":
            assert row["moves"][: len(expected)] == expected
        elif key == "date":
            assert str(row["date"]) == expected
        elif isinstance(expected, float):
            assert row[key] == pytest.approx(expected)
        else:
            assert row[key] == expected


def test_main_line_matches_sgfmill_on_games_with_variations(raw_9d: ChunkResult) -> None:
    """sgfmill's main sequence and ours agree on every Fox game that has variations."""
    checked = 0
    for member, content in iter_members(RAW_9D):
        if isinstance(content, bytes) and b")(" in content.replace(b" ", b""):
            game = sgfmill_sgf.Sgf_game.from_bytes(content)
            size = game.get_size()
            expected = []
            for node in game.get_main_sequence():
                colour, point = node.get_move()
                if colour is not None:
                    where = (
                        "pass"
                        if point is None
                        else chr(97 + point[1]) + chr(97 + size - 1 - point[0])
                    )
                    expected.append(f"{colour.upper()}:{where}")
            assert _by_member(raw_9d, member.name)["moves"] == expected
            checked += 1
    assert checked == 2


def test_folder_of_archives_and_files(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    shutil.copy(RAW_PRO, tmp_path / "nested" / "Pro.7z")
    shutil.copy(SELECTED / "candidating" / "5d.sgf", tmp_path / "5d.sgf")
    (tmp_path / "README.txt").write_text("not a game file")
    chunks = plan_chunks([tmp_path], games_per_chunk=4_000)
    assert [c.locator for c in chunks] == [
        ("7z", "nested/Pro.7z", 0, 4000),
        ("7z", "nested/Pro.7z", 4000, 8000),
        ("7z", "nested/Pro.7z", 8000, 9669),
        ("sgf-files", "5d.sgf"),
    ]
    result = _read([tmp_path], games_per_chunk=4_000)
    assert result.games_read == 9_669 + 100
    assert (result.games.num_rows, result.quarantine.num_rows) == (9_665 + 100, 4)


# ---------------------------------------------------------------- results / komi / clock


def test_results_komi_clock_parsing() -> None:
    assert parse_result("B+R").ended_by == "resign"
    assert parse_result("W+Resign").winner == "white"
    assert (parse_result("B+T").ended_by, parse_result("W+Time").winner) == ("time", "white")
    assert parse_result("B+F").ended_by == "other"
    assert parse_result("0") == parse_result("Draw") == parse_result("draw")
    assert parse_result("Void").winner is None and parse_result("?").ended_by == "other"
    assert parse_result("W+0.0").score_margin == 0.0
    assert parse_komi("0", fox=True) == 0.0 and parse_komi("650", fox=False) == 6.5
    assert parse_komi("7", fox=False) == 7.0 and parse_komi("7.5", fox=True) == 7.5
    assert parse_clock("60", "3", "30", None).tc_class == "blitz"
    assert parse_clock("300", "3", "30", None).tc_class == "rapid"
    assert parse_clock("3600", None, None, "5x30 byo-yomi").periods == 5


# ---------------------------------------------------------------- bad input


def test_bad_sgf_files_are_quarantined_with_reasons(tmp_path: Path) -> None:
    good_2 = FOX_LINE.replace(b";B[qp]", b";B[qq]")
    broken_name = FOX_LINE.replace(b"PW[E784B6", b"PW[\xe5\xbf?\xff")  # broken UTF-8 in a name
    broken_structure = FOX_LINE.replace(b";B[pd]", b";\xe5\xbf;B[pd]")  # broken bytes between nodes
    bad_move = FOX_LINE.replace(b";B[pd]", b";B[p]")
    (tmp_path / "collection.sgf").write_bytes(
        b"\n".join([FOX_LINE, broken_structure, broken_name, bad_move, good_2]) + b"\n"
    )
    (tmp_path / "nul.sgf").write_bytes(b"\0" * 1500)
    (tmp_path / "empty.sgf").write_bytes(b"  \n")
    (tmp_path / "notes.sgf").write_bytes(b"these are notes, not a game record\n")
    (tmp_path / "cut.sgf").write_bytes(FOX_LINE[:-20])
    (tmp_path / "small.sgf").write_bytes(FOX_LINE.replace(b"SZ[19]", b"SZ[9]"))  # qp is off 9x9
    result = _read([tmp_path])
    assert result.games_read == 5 + 5
    assert result.games.num_rows == 3
    kept = result.games.to_pylist()
    assert [g["source_index"] for g in kept] == [0, 2, 4]
    assert kept[1]["white"] == "\ufffd?\ufffdE784B6E58AA0E6B2B9"
    quarantine = {
        (Path(q["source_file"]).name, q["source_index"]): q for q in result.quarantine.to_pylist()
    }
    expected = {
        ("collection.sgf", 1): ("SgfGameError", "game 1 (line 2): byte that is not SGF structure"),
        ("collection.sgf", 3): ("SgfGameError", "game 3 (line 4): move value is neither empty"),
        ("nul.sgf", 0): ("NulFilledSgfError", "input is 1500 NUL bytes"),
        ("empty.sgf", 0): ("EmptySgfError", "empty input"),
        ("notes.sgf", 0): ("NotSgfError", "no SGF game tree '(;' found; input starts with b'these"),
        ("cut.sgf", 0): ("SgfGameError", "game 0 (line 1): truncated game tree"),
        ("small.sgf", 0): ("SgfGameError", "game 0 (line 1): move 1 is off the 9x9 board"),
    }
    assert set(quarantine) == set(expected)
    for key, (error_type, text) in expected.items():
        row = quarantine[key]
        assert row["error_type"] == error_type
        assert text in row["reason"]
        assert row["reason"].startswith(repr(str(tmp_path / key[0])))


def test_non_sgf_file_given_directly(tmp_path: Path) -> None:
    path = tmp_path / "games.pgn"
    path.write_text('[Event "Rated Blitz game"]\n\n1. e4 e5 *\n')
    result = _read([path])
    assert (result.games.num_rows, result.quarantine.num_rows) == (0, 1)
    assert result.quarantine["error_type"].to_pylist() == ["NotSgfError"]
    with pytest.raises(NotSgfError, match="Event"):
        parse_sgf(path.read_bytes())
    with pytest.raises(SgfInputError, match=r"missing\.sgf"):
        plan_chunks([tmp_path / "missing.sgf"], games_per_chunk=10)


def test_corrupt_member_of_non_solid_archive(tmp_path: Path) -> None:
    members = [
        f"9k/{name}"
        for name in (
            "1571194973010001560.sgf",
            "1536220119010001859.sgf",
            "1530532546010001701.sgf",
        )
    ]
    src = tmp_path / "src"
    subprocess.run(["7z", "x", f"-o{src}", str(RAW_9D), *members], check=True, capture_output=True)
    archive = tmp_path / "three.7z"
    subprocess.run(
        ["7z", "a", "-ms=off", str(archive), *members], cwd=src, check=True, capture_output=True
    )
    with py7zr.SevenZipFile(archive) as z:
        packinfo = z.header.main_streams.packinfo
        start = 32 + int(packinfo.packpositions[1])  # second member's packed stream
        length = int(packinfo.packsizes[1])
    data = bytearray(archive.read_bytes())
    for k in range(start + length // 3, start + length // 3 + 16):
        data[k] ^= 0x5A
    archive.write_bytes(bytes(data))
    result = _read([archive])
    assert result.games_read == 3
    assert sorted(result.games["source_member"].to_pylist()) == sorted([members[0], members[2]])
    (row,) = result.quarantine.to_pylist()
    assert row["source_member"] == members[1] and row["error_type"] == "CorruptMemberError"
    assert row["reason"].startswith(f"{str(archive)!r} member {members[1]!r}")


def test_corrupt_solid_archive_stream(tmp_path: Path) -> None:
    """Bytes flipped inside a solid block: members before the damage read, the rest quarantined."""
    archive = tmp_path / "Pro.7z"
    data = bytearray(RAW_PRO.read_bytes())
    middle = len(data) // 2
    for k in range(middle, middle + 64):
        data[k] ^= 0xFF
    archive.write_bytes(bytes(data))
    result = _read([archive])
    assert result.games_read == 9_669
    errors = collections.Counter(result.quarantine["error_type"].to_pylist())
    damaged = errors["CorruptMemberError"]
    assert 0 < damaged < 9_669 and result.games.num_rows > 4_000
    assert result.games.num_rows + damaged + errors["SgfGameError"] == 9_669
    first_bad = min(
        q["source_member"]
        for q in result.quarantine.to_pylist()
        if q["error_type"] == "CorruptMemberError"
    )
    assert "Pro/" in first_bad


def test_truncated_archive_is_a_clear_error(tmp_path: Path) -> None:
    archive = tmp_path / "9d2.7z.001"
    archive.write_bytes(RAW_9D.read_bytes()[:1_000_000])
    with pytest.raises(CorruptArchiveError, match=r"cannot read 7z archive '.*9d2\.7z\.001'"):
        plan_chunks([archive], games_per_chunk=1000)


# ---------------------------------------------------------------- selection preset (contract C3)


@pytest.mark.parametrize("split", ["candidating", "testing", "by-player"])
def test_kuboki_preset_keeps_every_curated_game(
    selected: dict[str, ChunkResult], split: str
) -> None:
    """The curated sets are Kuboki et al.'s selection, so the preset must keep all of them."""
    games = selected[split].games
    kept, rejected = apply_selection(games, load_preset("go-kuboki2025"))
    assert sum(rejected.values()) == 0
    assert kept.num_rows == games.num_rows
    expected = dict.fromkeys(GROUPS, 100 if split == "candidating" else 900)
    assert collections.Counter(kept["rank_group"].to_pylist()) == (
        BY_PLAYER if split == "by-player" else expected
    )
    assert set(kept["selection"].to_pylist()) == {"go-kuboki2025@1"}


def test_kuboki_preset_on_raw_archives(raw_9d: ChunkResult, raw_pro: ChunkResult) -> None:
    rules = load_preset("go-kuboki2025")
    kept, rejected = apply_selection(raw_9d.games, rules)
    assert kept.num_rows == 13_406
    assert collections.Counter(kept["rank_group"].to_pylist()) == {"9d": 13_406}
    assert rejected == {
        "same_rank_group": 1853,
        "min_plies": 444,
        "ended_by_in": 0,
        "min_score_margin": 1800,  # B+0.02, W+0.0 … counted below 0.5 points
        "alternating_colours": 130,
        "no_handicap": 440,
    }
    assert kept.num_rows + sum(rejected.values()) + raw_9d.quarantine.num_rows == 18_081
    kept_pro, rejected_pro = apply_selection(raw_pro.games, rules)
    assert kept_pro.num_rows == 0 and rejected_pro["same_rank_group"] == 9_665  # pros: group "pro"
