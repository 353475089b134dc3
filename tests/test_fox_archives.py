"""Fox archives exactly as shipped: one SGF file is one game, whatever its variations.

Raw Fox archives hold one game per file. Files written through GNU Go carry variation trees
(``(;…)`` nested after the main line, inside the root's parentheses) and, in the ``Pro2``
volume of the dump, some roots lack their opening ``(``. The reader keeps the main line,
counts the variations it drops and puts a missing ``(`` back, so that games read equals the
number of SGF members; an SGF *collection* (``(;…)(;…)``, several game trees in a file) still
reads as several games.

Checked on the real ``Pro.7z`` (figures measured with ``7z l`` and sgfmill), on a Pro2-sized
archive rebuilt from its real members with the ``(`` of 19 roots removed, and on hand-made SGF.
Run ``python -m pytest tests/test_fox_archives.py``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from sgfmill import sgf as sgfmill_sgf

from pipeline.core import settings
from pipeline.ingest.archive_7z import iter_members
from pipeline.ingest.chunks import ChunkResult, merge_notes
from pipeline.ingest.sgf import read_paths

RAW_PRO = settings.data_dir() / "go" / "fox-raw" / "Pro.7z"
ROOT = b"GM[1]FF[4]SZ[19]DT[2017-12-10]PB[a]PW[b]BR[P9\xe6\xae\xb5]WR[P1\xe6\xae\xb5]KM[650]RE[B+R]"
# A main line pd pp dc cp qn with three variations: qo (after cp), dd-dp (after pp) and
# dd-dq (after dd).
BODY = b";B[pd];W[pp](;B[dc];W[cp](;B[qn])(;B[qo]))(;B[dd](;W[dp])(;W[dq])))"
MAIN_LINE = ["B:pd", "W:pp", "B:dc", "W:cp", "B:qn"]


def _seven_zip_members(archive: Path) -> list[str]:
    """Names of the .sgf members as ``7z l -slt`` lists them (independent of py7zr)."""
    listing = subprocess.run(
        ["7z", "l", "-slt", str(archive)], check=True, capture_output=True, text=True
    ).stdout
    return [m for m in re.findall(r"^Path = (.+)$", listing, re.MULTILINE) if m.endswith(".sgf")]


def _sgfmill_variations(content: bytes) -> int:
    """Lines of play besides the main line: leaves of the game tree minus one."""
    stack, leaves = [sgfmill_sgf.Sgf_game.from_bytes(content).get_root()], 0
    while stack:
        children = list(stack.pop())
        leaves += not children
        stack += children
    return leaves - 1


@pytest.fixture(scope="module")
def pro() -> ChunkResult:
    return read_paths([RAW_PRO])


@pytest.fixture(scope="module")
def pro_members() -> dict[str, bytes]:
    return {m.name: c for m, c in iter_members(RAW_PRO) if isinstance(c, bytes)}


# ---------------------------------------------------------------- the real Pro.7z


def test_pro_games_read_equals_its_sgf_members(pro: ChunkResult) -> None:
    members = _seven_zip_members(RAW_PRO)
    assert len(members) == 9_669
    assert pro.games_read == len(members)
    assert (pro.games.num_rows, pro.quarantine.num_rows) == (9_665, 4)
    assert pro.quarantine["error_type"].to_pylist() == ["SgfGameError"] * 4  # truncated files
    assert set(pro.games["source_member"].to_pylist()) | set(
        pro.quarantine["source_member"].to_pylist()
    ) == set(members)


def test_pro_variations_are_dropped_and_counted(
    pro: ChunkResult, pro_members: dict[str, bytes]
) -> None:
    assert pro.notes == {
        "variations_dropped": 6_193,
        "games_with_variations": 132,
        "recovered_roots": 0,
        "recovered_files": [],
    }
    with_variations = {
        name: _sgfmill_variations(content)
        for name, content in pro_members.items()
        if content.count(b"(") > 1
    }
    assert len(with_variations) == 132
    assert sum(with_variations.values()) == 6_193


# ---------------------------------------------------------------- a Pro2-like volume


@pytest.fixture(scope="module")
def pro2(
    tmp_path_factory: pytest.TempPathFactory, pro_members: dict[str, bytes]
) -> tuple[Path, dict[str, bytes], set[str]]:
    """680 real Pro members (the size of the Pro2 volume), 40 of them with variations; the
    roots of 19 (10 with variations) lack their "(", as in Pro2. Packed by the 7z program."""
    names = sorted(pro_members)
    branched = [n for n in names if pro_members[n].count(b"(") > 1][:40]
    plain = [n for n in names if pro_members[n].count(b"(") == 1][:640]
    stripped = set(branched[:10] + plain[:9])
    folder = tmp_path_factory.mktemp("pro2")
    originals = {}
    for name in branched + plain:
        content = pro_members[name]
        assert content.startswith(b"(;")
        target = folder / "Pro2" / name.replace("Pro/", "", 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content[1:] if name in stripped else content)
        originals["Pro2/" + name.replace("Pro/", "", 1)] = content
    archive = folder / "Pro2.7z"
    subprocess.run(["7z", "a", str(archive), "Pro2"], cwd=folder, check=True, capture_output=True)
    return archive, originals, {"Pro2/" + n.replace("Pro/", "", 1) for n in stripped}


def test_pro2_like_volume_reads_one_game_per_file(
    pro: ChunkResult, pro2: tuple[Path, dict[str, bytes], set[str]]
) -> None:
    archive, originals, stripped = pro2
    assert len(_seven_zip_members(archive)) == 680
    result = read_paths([archive], games_per_chunk=300)
    assert result.games_read == 680
    assert (result.games.num_rows, result.quarantine.num_rows) == (680, 0)
    assert result.notes["recovered_roots"] == 19
    assert sorted(result.notes["recovered_files"]) == sorted(stripped)
    expected_variations = sum(
        _sgfmill_variations(content) for content in originals.values() if content.count(b"(") > 1
    )
    assert result.notes["variations_dropped"] == expected_variations
    assert result.notes["games_with_variations"] == 40
    # A recovered game is the game of the intact member of Pro.7z, field for field.
    rows = {row.pop("source_member"): row for row in result.games.to_pylist()}
    intact = {row.pop("source_member"): row for row in pro.games.to_pylist()}
    ignore = ("game_id", "source_file")
    for name in sorted(stripped):
        got, want = rows[name], intact[name.replace("Pro2/", "Pro/", 1)]
        assert {k: v for k, v in got.items() if k not in ignore} == {
            k: v for k, v in want.items() if k not in ignore
        }
        assert len(got["moves"]) > 0
    # The unpacked files read the same way.
    unpacked = read_paths([archive.parent / "Pro2"])
    assert (unpacked.games_read, unpacked.notes["recovered_roots"]) == (680, 19)


# ---------------------------------------------------------------- hand-made SGF


@pytest.mark.parametrize(
    ("content", "games", "moves", "variations", "recovered"),
    [
        pytest.param(b"(;" + ROOT + BODY, 1, [MAIN_LINE], 3, 0, id="nested-variations"),
        pytest.param(b";" + ROOT + BODY, 1, [MAIN_LINE], 3, 1, id="root-missing-paren"),
        pytest.param(
            b"\xef\xbb\xbf \r\n;" + ROOT + BODY + b"\n",
            1,
            [MAIN_LINE],
            3,
            1,
            id="bom-space-no-paren",
        ),
        pytest.param(
            b"(;" + ROOT + b";B[pd];W[pp])\n(;" + ROOT + b";B[dd])\n(;" + ROOT + b")\n",
            3,
            [["B:pd", "W:pp"], ["B:dd"], []],
            0,
            0,
            id="collection",
        ),
        pytest.param(
            b"(;" + ROOT + BODY + b"(;" + ROOT + b";B[aa](;W[bb])(;W[cc]))",
            2,
            [MAIN_LINE, ["B:aa", "W:bb"]],
            4,
            0,
            id="collection-of-games-with-variations",
        ),
    ],
)
def test_hand_made_trees(
    tmp_path: Path,
    content: bytes,
    games: int,
    moves: list[list[str]],
    variations: int,
    recovered: int,
) -> None:
    path = tmp_path / "game.sgf"
    path.write_bytes(content)
    result = read_paths([path])
    assert result.games_read == result.games.num_rows == games
    assert result.games["moves"].to_pylist() == moves
    assert result.notes["variations_dropped"] == variations
    assert result.notes["recovered_roots"] == recovered
    assert result.notes["recovered_files"] == [str(path)] * recovered
    assert result.games["white_rank"].to_pylist() == ["pro"] * games


def test_a_root_missing_both_parentheses_is_one_truncated_game(tmp_path: Path) -> None:
    path = tmp_path / "cut.sgf"
    path.write_bytes(b";" + ROOT + b";B[pd];W[pp]")
    result = read_paths([path])
    assert (result.games_read, result.games.num_rows) == (1, 0)
    assert "truncated game tree" in result.quarantine["reason"][0].as_py()
    assert result.notes["recovered_roots"] == 1


def test_notes_of_chunks_add_up() -> None:
    one = {"variations_dropped": 2, "recovered_roots": 1, "recovered_files": ["a.sgf"]}
    two = {"variations_dropped": 3, "games_with_variations": 1, "recovered_files": ["b.sgf"]}
    assert merge_notes([one, two]) == {
        "variations_dropped": 5,
        "games_with_variations": 1,
        "recovered_roots": 1,
        "recovered_files": ["a.sgf", "b.sgf"],
    }


def test_the_ingest_summary_names_what_was_read_past_or_repaired(tmp_path: Path) -> None:
    """Through ``kibitz ingest``'s driver (local Ray): the notes reach ``_summary.json`` and
    the printed summary, and read = kept + rejected + quarantined still holds."""
    from pipeline.ingest.selection import load_preset
    from pipeline.ingest.work import IngestConfig, format_summary
    from pipeline.jobs.ingest import run_ingest

    src = tmp_path / "in"
    src.mkdir()
    (src / "variations.sgf").write_bytes(b"(;" + ROOT + BODY)
    (src / "no-paren.sgf").write_bytes(b";" + ROOT + b";B[pd];W[pp])")
    summary = run_ingest(
        IngestConfig(
            game="go",
            sources=[str(src)],
            out_dir=tmp_path / "games",
            rules=load_preset("all"),
            num_cpus=1,
            show_progress=False,
        )
    )
    assert (summary["games_read"], summary["kept"], summary["quarantined"]) == (2, 2, 0)
    assert summary["reader_notes"] == {
        "variations_dropped": 3,
        "games_with_variations": 1,
        "recovered_roots": 1,
        "recovered_files": [str(src / "no-paren.sgf")],
    }
    assert "recovered_roots: 1" in format_summary(summary)
