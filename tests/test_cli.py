"""The command line a newcomer meets: set-up, one-line user errors, exit codes, one MLflow store.

A user error prints one line ``kibitz COMMAND: message`` on stderr and exits 1 without a
traceback; ``kibitz -v`` adds the traceback; a bug keeps its traceback. Every command of a
project tracks into ``$KIBITZ_HOME/mlflow.db`` unless ``--tracking-uri`` or
``MLFLOW_TRACKING_URI`` says otherwise.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import run as cli_run
from pipeline.cli.main import main
from pipeline.core import settings

SETUP = settings.REPO_ROOT / "infra" / "setup.sh"
# Executables the tests run, and the apt package that brings each one.
TEST_COMMANDS = {"7z": "p7zip-full", "stockfish": "stockfish"}


def _kibitz(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command line in a fresh process (``python -m`` = the ``kibitz`` script)."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli.main", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _bash_array(name: str, text: str) -> list[str]:
    found = re.search(rf"^{name}=\(([^)]*)\)", text, flags=re.M)
    assert found, f"{name}=(...) not in {SETUP}"
    return found.group(1).split()


def test_setup_installs_what_the_tests_run():
    text = SETUP.read_text(encoding="utf-8")
    assert set(_bash_array("NEEDED_COMMANDS", text)) >= set(TEST_COMMANDS)
    assert set(_bash_array("APT_PACKAGES", text)) >= set(TEST_COMMANDS.values())
    assert "torch==2.13.0" in text and "-e '.[test]'" in text
    ci = (settings.REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "infra/setup.sh" in ci  # CI installs what the README installs


def test_missing_pgn_is_one_line_without_traceback(tmp_path):
    done = _kibitz("ingest", "chess", "missing.pgn", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == "kibitz ingest: input(s) not found: 'missing.pgn'\n"


def test_verbose_shows_the_traceback(tmp_path):
    done = _kibitz("-v", "ingest", "chess", "missing.pgn", cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert "FileNotFoundError" in done.stderr
    assert done.stderr.splitlines()[-1] == "kibitz ingest: input(s) not found: 'missing.pgn'"


def test_empty_games_folder_is_a_user_error(tmp_path):
    empty = tmp_path / "games"
    empty.mkdir()
    with pytest.raises(SystemExit) as raised:
        main(["extract", "chess", "--games", str(empty), "--out", str(tmp_path / "features")])
    assert raised.value.code == (
        f"kibitz extract: no chess games under {str(empty)!r} "
        "(expected a game=chess/ folder that `kibitz ingest` writes)"
    )


def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    def broken(sources):
        raise RuntimeError("a bug")

    monkeypatch.setattr("pipeline.cli.ingest.resolve_sources", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["ingest", "chess", "x.pgn", "--out", str(tmp_path)])


def test_ingest_of_no_readable_game_fails(tmp_path):
    """A .pgn.zst of random bytes: summary and quarantine as before, then exit 1 and one line."""
    garbage = tmp_path / "g.pgn.zst"
    garbage.write_bytes(bytes(range(256)) * 4)
    out = tmp_path / "out"
    done = _kibitz(
        "ingest", "chess", str(garbage), "--out", str(out), "--num-cpus", "1", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"kibitz ingest: no readable game in {str(garbage)!r} "
        f"(1 quarantined; NotPgnError: 1; see {out / '_quarantine'})"
    )
    summary = json.loads((out / "_summary.json").read_text(encoding="utf-8"))
    assert summary["games_read"] == summary["quarantined"] == 1
    assert "quarantined             1" in done.stdout  # the summary is printed as before
    assert list((out / "_quarantine").rglob("*.pq"))  # the quarantined game, as before


def test_tracking_uri_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("KIBITZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home_store = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    assert settings.tracking_uri() == home_store
    assert settings.tracking_uri(home=tmp_path / "other") == f"sqlite:///{tmp_path}/other/mlflow.db"
    assert settings.tracking_uri("http://mlflow:5000") == "http://mlflow:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    assert settings.tracking_uri() == "http://env:5000"
    assert settings.tracking_uri("http://mlflow:5000") == "http://mlflow:5000"


def test_run_tracks_both_games_in_one_store(tmp_path, monkeypatch):
    """``kibitz run --out HOME``: the chess and the Go ratings runs share HOME/mlflow.db."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    stages: list[list[str]] = []
    monkeypatch.setattr(cli_run, "_stage", lambda argv, **_: stages.append(argv))
    home = tmp_path / "home"
    assert main(["run", "--games-per-group", "1", "--out", str(home)]) == 0
    ratings = [argv for argv in stages if argv[0] == "ratings"]
    assert [argv[argv.index("--game") + 1] for argv in ratings] == ["chess", "go"]
    for argv in ratings:
        assert argv[argv.index("--tracking-uri") + 1] == f"sqlite:///{home / 'mlflow.db'}"


def test_run_default_matches_its_help():
    parser = _run_parser()
    default = parser.get_default("games_per_group")
    assert f"default {default})" in parser.format_help().replace("\n", " ")
    assert f"# {default} games of every band / rank group" in cli_run.__doc__


def _run_parser():
    import argparse

    subparsers = argparse.ArgumentParser().add_subparsers()
    cli_run.register(subparsers)
    return subparsers.choices["run"]


def test_extract_of_only_quarantined_games_fails(tmp_path):
    """One real Lichess game whose sixth move is made illegal: extraction quarantines it and
    the command exits 1 naming the quarantine, instead of 0 over an empty features table."""
    import pyarrow as pa

    from pipeline.core.chunk_store import ChunkStore
    from pipeline.core.games_schema import PARTITION_COLUMNS
    from pipeline.ingest.pgn import plan_chunks, read_chunk

    split = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "candidating"
    chunk = plan_chunks([split / "1000-1200.pgn.zst"], games_per_chunk=1)[0]
    games = read_chunk(chunk).games.slice(0, 1)
    field = games.schema.field("moves")
    bad = pa.array([[*games["moves"][0].as_py()[:5], "e1e8"]], field.type)
    games = games.set_column(games.schema.get_field_index("moves"), field, bad)
    root = tmp_path / "games"
    ChunkStore(root, PARTITION_COLUMNS).commit(chunk.chunk_id, {"": games}, {})
    out = tmp_path / "features"
    done = _kibitz(
        "extract", "chess", "--games", str(root), "--out", str(out), "--num-cpus", "1",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"kibitz extract: every game of {str(root)!r} was quarantined (1; reasons in "
        f"{str(out / '_quarantine')!r})"
    )
