"""Resume after a kill: ``kibitz ingest chess`` (a subprocess) is SIGKILLed with its Ray after a
few chunks are committed, re-run with the same arguments (in this process), and must give
exactly the table of a clean run (same game_ids, no duplicates, no gaps); ``--force`` redoes everything; resuming under
other selection rules is refused.

The candidating split (960 games) is cut into 24 chunks of 40 games so that the kill lands
mid-run. Run: ``python -m pytest tests/test_ingest_resume.py -q``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import ray

from pipeline.core import settings
from pipeline.ingest.pgn import read_chunk, stream_chunks
from pipeline.ingest.selection import load_preset
from pipeline.ingest.work import IngestConfig, IngestError, format_summary
from pipeline.jobs.ingest import run_ingest

SOURCE = settings.data_dir() / "chess/lichess-2024-02-blitz/candidating"
GAMES_PER_CHUNK = 40
CHUNKS = 24  # 8 files × 120 games / 40
KILL_AFTER = 3  # committed chunks
START_TIMEOUT_S = 300  # Ray's start-up on a busy 2-core CI machine


def _cli(out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline.cli.main",
        "ingest",
        "chess",
        str(SOURCE),
        "--out",
        str(out),
        "--games-per-chunk",
        str(GAMES_PER_CHUNK),
        "--num-cpus",
        "2",
        "--no-progress",
    ]


def _markers(out: Path) -> int:
    return len(list((out / "_chunks").glob("*.json"))) if (out / "_chunks").is_dir() else 0


def _settled_markers(out: Path, quiet_s: float = 2.0) -> int:
    """Marker count once it stopped changing: a worker of the killed run may still finish the
    commit it was in the middle of before it notices that its raylet is gone."""
    count, since = _markers(out), time.monotonic()
    while time.monotonic() - since < quiet_s:
        time.sleep(0.1)
        if _markers(out) != count:
            count, since = _markers(out), time.monotonic()
    return count


def _table(out: Path) -> list[tuple]:
    return duckdb.sql(
        f"select * exclude (source_file) from read_parquet('{out}/**/*.parquet', "
        "hive_partitioning = true) order by game_id"
    ).fetchall()


def _expected_ids() -> list[str]:
    """The game ids of the split read directly (no Ray, no store)."""
    ids: list[str] = []
    for path in sorted(SOURCE.glob("*.pgn.zst")):
        for piece in stream_chunks(path, games_per_chunk=1000):
            ids += read_chunk(piece.chunk, piece.data).games.column("game_id").to_pylist()
    return sorted(ids)


@pytest.fixture(scope="module")
def ray_cluster() -> None:
    if not ray.is_initialized():
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING
        )


def test_a_killed_run_resumes_to_the_clean_table_and_force_redoes(
    ray_cluster: None, tmp_path: Path
) -> None:
    out = tmp_path / "games"
    process = subprocess.Popen(
        _cli(out),
        cwd=settings.REPO_ROOT,
        start_new_session=True,  # its own process group: the kill takes its Ray with it
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while _markers(out) < KILL_AFTER and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    committed = _settled_markers(out)
    assert KILL_AFTER <= committed < CHUNKS, "the kill must land between the first and last chunk"

    config = IngestConfig(
        game="chess",
        sources=[str(SOURCE)],
        out_dir=out,
        rules=load_preset("chess-kuboki2025"),
        games_per_chunk=GAMES_PER_CHUNK,
        show_progress=False,
    )
    resumed = run_ingest(config)  # the same arguments, in this process's Ray
    assert resumed["chunks"]["committed_before_this_run"] == committed
    assert resumed["chunks"]["committed_this_run"] == CHUNKS - committed
    assert "read = kept + rejected + quarantined: True" in format_summary(resumed)
    after_resume = _table(out)
    ids = [row[0] for row in after_resume]
    assert len(ids) == len(set(ids)) == 960
    assert ids == _expected_ids()

    config.force = True
    summary = run_ingest(config)
    assert summary["chunks"]["committed_before_this_run"] == 0
    assert summary["chunks"]["committed_this_run"] == CHUNKS
    assert (summary["games_read"], summary["kept"]) == (960, 960)
    assert _table(out) == after_resume  # the clean run's table, row for row

    config.force = False
    config.rules = load_preset("all")
    with pytest.raises(IngestError, match="chess-kuboki2025@1"):
        run_ingest(config)


def test_chess_and_go_chunks_share_a_table_each_under_its_own_rules(tmp_path: Path) -> None:
    """A table holding chess chunks (chess rules) accepts Go chunks under Go rules, and still
    refuses chess chunks under other chess rules — the check is per game kind."""
    from pipeline.core.chunk_store import ChunkStore
    from pipeline.core.games_schema import PARTITION_COLUMNS
    from pipeline.ingest.work import check_rules_match

    store = ChunkStore(tmp_path, PARTITION_COLUMNS)
    chess_rules, go_rules = load_preset("chess-kuboki2025"), load_preset("go-kuboki2025")
    meta = {"chunk": {"game": "chess"}, "rules": chess_rules.label}
    store.commit("c0", {}, meta)
    check_rules_match(store, "go", go_rules)
    check_rules_match(store, "chess", chess_rules)
    with pytest.raises(IngestError, match="chess-kuboki2025@1"):
        check_rules_match(store, "chess", load_preset("all"))
