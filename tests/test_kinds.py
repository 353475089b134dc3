"""The game kinds (``pipeline.kinds``): one object per game that the stages dispatch to.

Each kind's reader reads real games of the shared data, an unknown game is refused with the
known ones named, each kind's extraction answers the kind-specific questions the way the
presets need, and importing the kinds loads neither kind's heavy modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.core import settings
from pipeline.core.games_schema import GAMES_SCHEMA, UnknownGameError
from pipeline.extract.chess import ChessWork
from pipeline.extract.config import config_from_dict, preset
from pipeline.ingest.work import WorkItem
from pipeline.kinds import CHESS, GO, KINDS, game_kind

CHESS_GAMES = (
    settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "testing" / "1000-1200.pgn.zst"
)
GO_GAMES = settings.data_dir() / "go" / "fox-selected" / "testing" / "1-2k.sgf"
PER_CHUNK = 3


def test_game_kind_finds_each_kind_by_name() -> None:
    assert game_kind("chess") is CHESS and game_kind("go") is GO
    assert sorted(KINDS) == ["chess", "go"]
    assert [(k.name, k.games_format) for k in KINDS.values()] == [("chess", "pgn"), ("go", "sgf")]


def test_unknown_game_names_the_known_ones() -> None:
    with pytest.raises(UnknownGameError, match=r"unknown game 'shogi'; known games: chess, go"):
        game_kind("shogi")
    assert issubclass(UnknownGameError, ValueError)


@pytest.mark.parametrize(("name", "path"), [("chess", CHESS_GAMES), ("go", GO_GAMES)])
def test_reader_reads_real_games(name: str, path: Path) -> None:
    reader = game_kind(name).reader
    item = next(iter(reader.work_items([str(path)], games_per_chunk=PER_CHUNK)))
    assert item.chunk.game == name and item.chunk.source_file == str(path)
    assert (item.data is not None) == (name == "chess")  # chess pieces carry their bytes
    result = reader.read_chunk(item)
    assert result.games_read == PER_CHUNK and result.games.num_rows >= 1
    assert result.games.schema.equals(GAMES_SCHEMA)
    assert set(result.games["game"].to_pylist()) == {name}
    assert all(len(moves) > 10 for moves in result.games["moves"].to_pylist())
    # Without its bytes an item is read again from its file, to the same games.
    again = reader.read_chunk(WorkItem(item.chunk))
    assert again.games["game_id"].equals(result.games["game_id"])


def test_extraction_answers_for_the_presets() -> None:
    chess = preset("chess")  # Stockfish values, expected loss over Maia's likely moves
    assert CHESS.extraction.needs_children(chess) is False
    engine = CHESS.extraction.engine(chess)
    assert engine is not None and (engine.nodes, engine.hash_mb) == (
        chess.value.nodes,
        chess.value.hash_mb,
    )
    value_net = config_from_dict(
        chess.to_dict() | {"value": {"evaluator": "net", "model": "maia-1900"}}
    )
    assert CHESS.extraction.needs_children(value_net) is True
    assert CHESS.extraction.engine(value_net) is None
    assert CHESS.extraction.value_step(value_net) is None

    go = preset("go")  # KataGo's value; expected loss off
    assert GO.extraction.needs_children(go) is False
    assert GO.extraction.engine(go) is None and GO.extraction.value_step(go) is None
    with_loss = config_from_dict(
        go.to_dict() | {"expected_loss": go.to_dict()["expected_loss"] | {"net": "katago-g170"}}
    )
    assert GO.extraction.needs_children(with_loss) is True


def test_chess_extraction_encodes_real_games() -> None:
    reader = CHESS.reader
    item = next(iter(reader.work_items([str(CHESS_GAMES)], games_per_chunk=PER_CHUNK)))
    games = reader.read_chunk(item).games
    work = CHESS.extraction.encode(preset("chess"), games)
    assert isinstance(work, ChessWork)
    plies = sum(len(m) for m in games["moves"].to_pylist())
    assert len(work.positions) == plies and not work.failed


def test_importing_the_kinds_loads_no_kind_implementation() -> None:
    """A chess run pays nothing for Go's board code, and ``kibitz ingest`` nothing for torch."""
    code = (
        "import sys, pipeline.kinds; "
        "heavy = [m for m in ('torch', 'numba', 'pipeline.extract.go', 'pipeline.extract.chess',"
        " 'pipeline.ingest.pgn', 'pipeline.ingest.sgf', 'pipeline.go_game.encode') "
        "if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


# Run in a worker-like process that shares the driver's numba cache: encodes real games of both
# kinds (read from the games tables the test wrote) as extraction's tasks do, then reports each
# compiled kernel's cache hits and misses.
_WORKER = """
import json, sys
from types import SimpleNamespace
import numpy as np
from numba.core.registry import CPUDispatcher
from pipeline.extract.chess import encode_chess_children
from pipeline.extract.config import config_from_dict, preset
from pipeline.go_game import encode as go_encode, rules as go_rules
from pipeline.chess_game import encode as chess_encode
from pipeline.kinds import CHESS, GO

import pyarrow.parquet as pq
chess_games, go_games = (pq.read_table(path) for path in sys.argv[1:3])
work = CHESS.extraction.encode(preset("chess"), chess_games)
kids = encode_chess_children(work, SimpleNamespace(likely=None))  # each game's final position
go = preset("go").to_dict()
go = config_from_dict(go | {"expected_loss": go["expected_loss"] | {"net": "katago-g170"}})
states = GO.extraction.encode(go, go_games).states
parents = np.arange(5)
moves = np.array([np.flatnonzero(states.legal[p])[0] for p in parents], np.int16)
go_encode.encode_children(go_encode.read_only(states), parents, moves)  # as Ray hands them over
stats = {}
for module in (chess_encode, go_encode, go_rules):
    for name, fn in vars(module).items():
        if isinstance(fn, CPUDispatcher) and fn.signatures:
            stats[name] = [sum(fn.stats.cache_hits.values()), sum(fn.stats.cache_misses.values())]
print(json.dumps({"stats": stats, "kids": len(kids.rows) + kids.n_final}))
"""


def test_compiled_encoders_are_loaded_by_the_workers(tmp_path: Path) -> None:
    """The driver's ``compile_encoders`` writes every kernel that extraction's tasks run into
    numba's cache, so a fresh node's workers load them and compile nothing (docs/guide/gpu.md: 121
    CPU-s of encoding on a fresh 16-core node against 4.5 warm)."""
    tables = []  # read here: ingest is not the workers' job, and compiles its own kernels
    for kind, path in ((CHESS, CHESS_GAMES), (GO, GO_GAMES)):
        item = next(iter(kind.reader.work_items([str(path)], games_per_chunk=PER_CHUNK)))
        tables.append(tmp_path / f"{kind.name}.parquet")
        pq.write_table(kind.reader.read_chunk(item).games, tables[-1])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    driver = "from pipeline.kinds import CHESS, GO\nfor kind in (CHESS, GO):\n    kind.extraction.compile_encoders()"
    subprocess.run([sys.executable, "-c", driver], env=env, check=True, timeout=600)
    out = subprocess.run(
        [sys.executable, "-c", _WORKER, *map(str, tables)],
        env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    report = json.loads(out.stdout)
    stats = report["stats"]
    assert report["kids"] == 3  # the three games' final positions
    # The worker's entry kernels came from the cache; no kernel was compiled in the worker.
    for kernel in ("_encode_kernel", "_after_kernel", "_child_kernel", "_parse_uci"):
        assert stats[kernel][0] >= 1, (kernel, stats)
    assert {name: misses for name, (_, misses) in stats.items() if misses} == {}


# Run in a worker-like process that shares the driver's numba cache: plans and reads the first
# chunk of real games of both kinds as ingestion's driver and tasks do, then reports each
# compiled kernel's cache hits and misses.
_INGEST_WORKER = """
import json, sys
from numba.core.registry import CPUDispatcher
from pipeline.ingest import pgn_reader, sgf_parse
from pipeline.kinds import CHESS, GO

read = {}
for kind, path in ((CHESS, sys.argv[1]), (GO, sys.argv[2])):
    item = next(iter(kind.reader.work_items([path], games_per_chunk=int(sys.argv[3]))))
    read[kind.name] = kind.reader.read_chunk(item).games.num_rows
stats = {}
for module in (pgn_reader, sgf_parse):
    for name, fn in vars(module).items():
        if isinstance(fn, CPUDispatcher) and fn.signatures:
            stats[name] = [sum(fn.stats.cache_hits.values()), sum(fn.stats.cache_misses.values())]
print(json.dumps({"stats": stats, "read": read}))
"""


def test_compiled_readers_are_loaded_by_the_workers(tmp_path: Path) -> None:
    """The driver's ``reader.compile_kernels`` writes every kernel that ingestion's planning and
    tasks run into numba's cache, so a fresh node's workers load them and compile nothing (a
    chess worker compiled for about 45 CPU-s before its first chunk, docs/guide/ingest.md)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    driver = "from pipeline.kinds import CHESS, GO\nfor kind in (CHESS, GO):\n    kind.reader.compile_kernels()"
    subprocess.run([sys.executable, "-c", driver], env=env, check=True, timeout=600)
    out = subprocess.run(
        [sys.executable, "-c", _INGEST_WORKER, str(CHESS_GAMES), str(GO_GAMES), str(PER_CHUNK)],
        env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    report = json.loads(out.stdout)
    stats = report["stats"]
    assert report["read"] == {"chess": PER_CHUNK, "go": PER_CHUNK}
    # The entry kernels came from the cache; no kernel was compiled in the worker.
    for kernel in ("_split_games", "_read_games", "_scan"):
        assert stats[kernel][0] >= 1, (kernel, stats)
    assert {name: misses for name, (_, misses) in stats.items() if misses} == {}
