"""MLflow tracking: the embedded SQLite store, and ``kibitz ratings tune`` against a REAL
``mlflow server`` on loopback, checked through the MLflow client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pyarrow as pa
import pytest
from ratings_real_games import build_games_table

from pipeline.core import tracking


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_embedded_store_parent_and_child(tmp_path: Path) -> None:
    uri = tracking.default_tracking_uri(tmp_path / "out")
    assert uri == f"sqlite:///{(tmp_path / 'out' / 'mlflow.db').resolve()}"
    with tracking.tracked_run(
        "t", run_name="parent", tracking_uri=uri, params={"a": 1, "k": (30, 16, 8)}
    ) as parent:
        tracking.log_metrics({"f1": 0.5, "skipped": float("nan")})
        with tracking.tracked_run(
            "t",
            run_name="child",
            tracking_uri=uri,
            params={"i": 0},
            parent_run_id=parent.info.run_id,
        ):
            tracking.log_table(pa.table({"x": [1, 2]}), "tiny")
    client = mlflow.MlflowClient(uri)
    runs = {
        r.info.run_name: r
        for r in client.search_runs([client.get_experiment_by_name("t").experiment_id])
    }
    assert runs["parent"].data.params == {"a": "1", "k": "(30, 16, 8)"}
    assert runs["parent"].data.metrics == {"f1": 0.5}
    assert runs["child"].data.tags["mlflow.parentRunId"] == parent.info.run_id
    artifacts = {f.path for f in client.list_artifacts(runs["child"].info.run_id, "tables")}
    assert artifacts == {"tables/tiny.csv", "tables/tiny.parquet"}
    assert (tmp_path / "out" / tracking.ARTIFACTS_FOLDER).is_dir()  # artifacts beside the database


@pytest.fixture()
def mlflow_server(tmp_path: Path):
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
            "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
            "--artifacts-destination", str(tmp_path / "server-artifacts"), "--workers", "1",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240  # a loaded 2-core machine needs minutes
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(
                f"mlflow server did not start: {proc.stderr.read().decode()[-2000:]}"
            )
        time.sleep(0.5)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_tune_against_real_mlflow_server(
    mlflow_server: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    games_dir = build_games_table("fox_by_player", tmp_path_factory.getbasetemp())
    out = tmp_path / "tune"
    grid = tmp_path / "grid.yaml"
    grid.write_text("k: [[60, 30, 16], [30, 16, 8]]\nthresholds: [[5, 10], [q25+1, q50+1]]\n")
    done = subprocess.run(
        [
            sys.executable, "-m", "pipeline.cli.main", "ratings", "tune", "--games", str(games_dir),
            "--system", "elo", "--grid", str(grid), "--train-frac", "0.8", "--out", str(out),
            "--tracking-uri", mlflow_server, "--experiment", "it-tune",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "logistic regression on" in done.stdout and "chosen: #" in done.stdout
    client = mlflow.MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("it-tune")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 4  # 2 K triples × 2 threshold pairs
    assert parent.data.params["system"] == "elo" and parent.data.params["configurations"] == "4"
    for key in (
        "chosen_f1",
        "chosen_accuracy",
        "chosen_log_loss",
        "chosen_brier",
        "slope",
        "slope_se",
        "slope_p",
    ):
        assert key in parent.data.metrics
    assert 0.5 < parent.data.metrics["chosen_f1"] <= 1.0
    best_child_f1 = max(c.data.metrics["f1"] for c in children)
    assert parent.data.metrics["chosen_f1"] == pytest.approx(best_child_f1)
    ks = {c.data.params["k"] for c in children}
    assert ks == {"[60, 30, 16]", "[30, 16, 8]"}
    thresholds = {c.data.params["thresholds"] for c in children}
    assert "[5, 10]" in thresholds and len(thresholds) == 2  # q25+1, q50+1 resolved to numbers
    parent_files = {f.path for f in client.list_artifacts(parent.info.run_id, "tables")}
    parent_files |= {f.path for f in client.list_artifacts(parent.info.run_id, "plots")}
    parent_files |= {f.path for f in client.list_artifacts(parent.info.run_id)}
    assert {
        "tables/tune_table.csv",
        "tables/chosen_bins.csv",
        "plots/f1_across_grid.png",
        "report.txt",
    } <= parent_files
    child_files = {f.path for f in client.list_artifacts(children[0].info.run_id, "tables")}
    assert child_files == {"tables/bins.csv", "tables/bins.parquet"}
    png = client.download_artifacts(parent.info.run_id, "plots/f1_across_grid.png", str(tmp_path))
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
