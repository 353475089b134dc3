"""Exactly-once and determinism of `kibitz extract` on real Ray, real nets, real Stockfish.

Tiny on purpose (4 real games, one Maia net, 100 Stockfish nodes, one game per chunk): what is
checked is that killed drivers, actors and engines, a two-node cluster and a run continued from
a lost run's kept aggregates all end with every game's moves present once and byte-identical
features.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import ray
import yaml

from actors.evaluator_actor import KILL_ONCE_ENV
from pipeline.core import settings
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.features_schema import PARTITION_COLUMNS
from pipeline.extract.chess import encode_chess
from pipeline.extract.config import config_from_dict
from pipeline.extract.steps import read_games_rows
from pipeline.ingest.pgn import plan_chunks as plan_pgn
from pipeline.ingest.pgn import read_chunk
from pipeline.jobs.extract import (
    CONFIG_FILE,
    CRASH_AFTER_ENV,
    ConfigMismatchError,
    PartError,
    RunStats,
    SkipDoneError,
    check_output_config,
    net_hashes,
    parse_part,
    plan_chunks,
    run_extract,
    save_config,
)
from pipeline.meta.aggregate import INSTANCES, load_mart, run_aggregate
from pipeline.meta.aggregate_merge import merge_aggregates

CONFIG = {
    "game": "chess",
    "imitation_nets": ["maia-1100"],
    "value": {"evaluator": "stockfish", "nodes": 100},
    "expected_loss": {"net": "maia-1100", "max_moves": 2},
    "games_per_chunk": 1,
    "max_in_flight": 2,
}


def config():
    return config_from_dict(dict(CONFIG))


@pytest.fixture(scope="module")
def games_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("games")
    store = ChunkStore(root, PARTITION_COLUMNS)
    split = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "candidating"
    for band in ("1000-1200", "2200-2400"):
        chunk = plan_pgn([split / f"{band}.pgn.zst"], games_per_chunk=2)[0]
        store.commit(chunk.chunk_id, {"": read_chunk(chunk).games}, {})
    return root


def read_features(out: Path) -> pa.Table:
    table = ds.dataset(out, format="parquet", partitioning="hive", exclude_invalid_files=True)
    files = [f for f in table.files if "/_" not in f.split(str(out))[1]]
    t = ds.dataset(files, format="parquet", partitioning=ds.partitioning(flavor="hive")).to_table()
    return t.sort_by([("game_id", "ascending"), ("ply", "ascending")])


@pytest.fixture(scope="module")
def baseline(games_root, tmp_path_factory) -> pa.Table:
    out = tmp_path_factory.mktemp("baseline")
    summary = run_extract(config(), games_root, out, num_cpus=2, show_progress=False)
    assert summary["chunks"] == {"planned": 4, "committed": 4}
    assert summary["quarantined_games"] == 0
    return read_features(out)


def assert_same(table: pa.Table, baseline: pa.Table) -> None:
    keys = list(zip(table["game_id"].to_pylist(), table["ply"].to_pylist(), strict=True))
    assert len(keys) == len(set(keys)), "a move is present twice"
    assert table.num_rows == baseline.num_rows
    for name in baseline.column_names:  # byte-equal, column by column
        assert table[name].equals(baseline[name]), name


def test_every_move_once(baseline, games_root):
    expected = 0
    for chunk in plan_chunks(games_root, config()):
        expected += sum(read_games_rows(games_root, chunk.part)["num_plies"].to_pylist())
    assert baseline.num_rows == expected
    assert baseline.schema.field("loss").type == pa.float32()


@pytest.mark.slow
def test_killed_driver_resumes_exactly_once(games_root, baseline, tmp_path):
    out = tmp_path / "features"
    code = (
        "import sys; from pathlib import Path; from pipeline.jobs.extract import run_extract;"
        "from pipeline.extract.config import config_from_dict;"
        f"run_extract(config_from_dict({CONFIG!r}), Path({str(games_root)!r}), Path({str(out)!r}),"
        " num_cpus=2, show_progress=False)"
    )
    env = {**os.environ, CRASH_AFTER_ENV: "2"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert len(ChunkStore(out, PARTITION_COLUMNS).done_ids()) == 2
    # a half-written file of a chunk without a marker, as a kill during commit leaves it
    stray = (
        out / "game=chess" / "source=lichess" / "month=2024-02" / "part-deadbeefdeadbeef.parquet"
    )
    stray.write_bytes(b"PAR1 torn")
    summary = run_extract(config(), games_root, out, num_cpus=2, show_progress=False)
    assert summary["this_run"]["games"] == 2  # only the two missing chunks were redone
    assert not stray.exists()
    assert_same(read_features(out), baseline)


@pytest.mark.slow
def test_net_actor_killed_during_a_run_loses_and_quarantines_nothing(
    games_root, baseline, tmp_path, monkeypatch
):
    """kill -9 of the net actor mid-run: Ray restarts it, the driver waits for the restart and
    resends the lost parts; no game is quarantined for the actor's restart, every move once."""
    out = tmp_path / "features"
    trigger = tmp_path / "kill-net-actor"
    trigger.touch()  # the first batch the net actor takes kills it (KILL_ONCE_ENV)
    monkeypatch.setenv(KILL_ONCE_ENV, str(trigger))
    summary = run_extract(config(), games_root, out, num_cpus=2, show_progress=False)
    assert not trigger.exists()
    assert summary["this_run"]["retries"] >= 1
    assert summary["quarantined_games"] == 0
    assert_same(read_features(out), baseline)


@pytest.mark.slow
def test_killed_actor_and_engine_are_retried(games_root, baseline, tmp_path, monkeypatch):
    from actors.extract_runner import RAY_ERRORS, ExtractRunner

    trigger = tmp_path / "kill-net-actor"
    monkeypatch.setenv(KILL_ONCE_ENV, str(trigger))
    chunks = plan_chunks(games_root, config())
    with ExtractRunner(config(), str(games_root), num_cpus=2) as runner:
        part = chunks[0].part
        expected = runner.get(runner.submit(part)).features
        actor_pid = ray.get(runner.evaluators[0].pid.remote())
        trigger.touch()
        ref = runner.submit(chunks[1].part)  # the net actor dies (kill -9) on this batch
        with pytest.raises(RAY_ERRORS):
            runner.get(ref)
        runner.wait_ready()  # as run_extract does: a resend into the restart would fail at once
        assert ray.get(runner.evaluators[0].pid.remote()) != actor_pid  # restarted by Ray
        again = runner.get(runner.submit(chunks[1].part)).features
        _, engine_pid = ray.get(runner.pool.actors[0].pids.remote())
        os.kill(engine_pid, signal.SIGKILL)  # Stockfish dies: restarted inside the actor
        time.sleep(0.2)
        after_engine = runner.get(runner.submit(chunks[2].part)).features  # new positions
        assert ray.get(runner.pool.actors[0].pids.remote())[1] != engine_pid
    for table in (expected, again, after_engine):
        ids = pa.array(set(table["game_id"].to_pylist()))
        assert_same(table, baseline.filter(pa.compute.is_in(baseline["game_id"], ids)))


def test_chunks_are_planned_balanced_over_rank_groups(games_root):
    """Two bands of 2 games, 1 a chunk: the next chunk comes from the band with the fewest games
    planned (ties: the band's name), so any prefix of a stopped run, or ``max_games``, holds
    games of both bands."""
    groups = []
    for chunk in plan_chunks(games_root, config()):
        part = chunk.part
        table = pq.read_table(games_root / part.games_file, columns=["rank_group"])
        groups += table.slice(part.start, part.stop - part.start)["rank_group"].to_pylist()
    assert groups == ["1000-1200", "2200-2400", "1000-1200", "2200-2400"]
    first_two = plan_chunks(games_root, config(), max_games=2)
    assert [c.chunk_id for c in first_two] == [
        c.chunk_id for c in plan_chunks(games_root, config())[:2]
    ]
    assert len({c.part.games_file for c in first_two}) == 2


def test_parts_split_the_plan_into_disjoint_shares(games_root):
    """``--part K/N``: every chunk is in exactly one of the N parts, each part keeps the plan's
    order, and a malformed K/N is refused."""
    whole = [c.chunk_id for c in plan_chunks(games_root, config())]
    parts = [[c.chunk_id for c in plan_chunks(games_root, config(), part=(k, 3))] for k in range(3)]
    every = [chunk for ids in parts for chunk in ids]
    assert sorted(every) == sorted(whole) and len(set(every)) == len(whole)
    for ids in parts:
        assert ids == [c for c in whole if c in ids]
    assert parse_part("1/3") == (1, 3)
    for bad in ("3/3", "-1/2", "1", "a/b"):
        with pytest.raises(PartError):
            parse_part(bad)


def test_two_parts_extract_the_whole_table_once(games_root, baseline, tmp_path):
    """The features of parts 0/2 and 1/2, each its own run and folder, are the whole run's."""
    tables = []
    for k in range(2):
        out = tmp_path / f"part-{k}"
        run_extract(config(), games_root, out, num_cpus=2, part=(k, 2), show_progress=False)
        tables.append(read_features(out))
    assert min(t.num_rows for t in tables) > 0  # 4 one-game chunks: both parts hold games
    both = pa.concat_tables(tables).sort_by([("game_id", "ascending"), ("ply", "ascending")])
    assert_same(both, baseline)


def test_skip_done_extracts_only_what_kept_aggregates_lack(games_root, baseline, tmp_path):
    """A run whose features were lost with its machine but whose aggregates were kept:
    ``--skip-done`` extracts exactly the other chunks, and the merge of both aggregates holds
    every game once; aggregates of another config or another games table are refused."""
    first = tmp_path / "first"
    run_extract(config(), games_root, first, num_cpus=2, part=(0, 2), show_progress=False)
    kept = tmp_path / "aggregates-first"
    run_aggregate(first, kept)
    done = set(read_features(first)["game_id"].to_pylist())
    shutil.rmtree(first)  # the machine is gone; its aggregates were committed
    rest = tmp_path / "rest"
    summary = run_extract(
        config(), games_root, rest, num_cpus=2, skip_done=[kept], show_progress=False
    )
    assert summary["skipped_done"] == {"aggregates": [str(kept)], "chunks": len(done),
                                       "games": len(done)}  # fmt: skip
    table = read_features(rest)
    assert not done & set(table["game_id"].to_pylist())
    others = baseline.filter(pc.invert(pc.is_in(baseline["game_id"], pa.array(sorted(done)))))
    assert_same(table, others)
    run_aggregate(rest, tmp_path / "aggregates-rest")
    merge_aggregates([kept, tmp_path / "aggregates-rest"], tmp_path / "merged")
    instances = load_mart(tmp_path / "merged", INSTANCES)
    assert sorted(instances["game_id"].to_pylist()) == sorted(
        2 * pc.unique(baseline["game_id"]).to_pylist()
    )  # both colours of every game, once

    other = tmp_path / "other-config"
    shutil.copytree(kept, other)
    summary = json.loads((other / "_aggregate.json").read_text())
    (other / "_aggregate.json").write_text(json.dumps(summary | {"features_config_hash": "0" * 16}))
    with pytest.raises(SkipDoneError, match="extracted with config 0000000000000000"):
        run_extract(config(), games_root, tmp_path / "x", skip_done=[other], show_progress=False)
    stranger = tmp_path / "other-games"
    shutil.copytree(kept, stranger)
    rows = load_mart(kept, INSTANCES)
    ids = pa.array(["not-a-game"] * rows.num_rows)
    pq.write_table(rows.set_column(rows.schema.get_field_index("game_id"), "game_id", ids),
                   stranger / f"{INSTANCES}.parquet")  # fmt: skip
    with pytest.raises(SkipDoneError, match=r"'not-a-game'.*another games table"):
        run_extract(config(), games_root, tmp_path / "y", skip_done=[stranger], show_progress=False)


def test_a_task_failure_names_the_tasks_own_exception():
    from actors.extract_runner import task_failure

    wrapped = ray.exceptions.RayTaskError(
        "assemble_task", "Traceback ...", TypeError("unsupported operand")
    ).as_instanceof_cause()
    assert task_failure(wrapped) == ("TypeError", "TypeError: unsupported operand")
    assert task_failure(ValueError("")) == ("ValueError", "ValueError")


def test_an_unreadable_game_is_quarantined_with_its_reason(games_root):
    games = read_games_rows(games_root, plan_chunks(games_root, config())[0].part)
    moves = games["moves"][0].as_py()
    field = games.schema.field("moves")
    bad_moves = pa.array([[*moves[:5], "e1e8"]], field.type)
    bad = games.set_column(games.schema.get_field_index("moves"), field, bad_moves)
    work = encode_chess(pa.concat_tables([bad, games]))
    assert list(work.failed) == [0] and "illegal move 'e1e8' at ply 5" in work.failed[0]
    assert set(work.positions.game_index.tolist()) == {1}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_node_cluster_gives_the_same_features(games_root, baseline, tmp_path):
    """A head and a worker started with `ray start` on loopback, 1 CPU each.

    The nodes run with ``--block`` in their own process group and are stopped by signalling
    that group, not with ``ray stop --force``, which would also stop every other Ray on the host.
    """
    port = _free_port()
    start = ["ray", "start", "--num-cpus", "1", "--disable-usage-stats", "--block"]
    head = [*start, "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
            "--include-dashboard", "false"]  # fmt: skip
    worker = [*start, "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1"]
    nodes = [subprocess.Popen(head, start_new_session=True, stdout=subprocess.DEVNULL)]
    try:
        time.sleep(5)
        nodes.append(subprocess.Popen(worker, start_new_session=True, stdout=subprocess.DEVNULL))
        ray.init(address=f"127.0.0.1:{port}", configure_logging=False, log_to_driver=False)
        deadline = time.time() + 120
        while sum(n["Alive"] for n in ray.nodes()) < 2 and time.time() < deadline:
            time.sleep(1)
        assert sum(n["Alive"] for n in ray.nodes()) == 2
        out = tmp_path / "features"
        summary = run_extract(config(), games_root, out, show_progress=False)
        assert summary["chunks"]["committed"] == 4
    finally:
        ray.shutdown()
        for node in reversed(nodes):
            os.killpg(node.pid, signal.SIGTERM)
            node.wait(timeout=60)
        # `ray start --head` records itself for later `ray.init()` calls; a killed head leaves
        # the record behind and every later embedded run would try to join the dead cluster
        record = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if record.is_file() and record.read_text().strip().endswith(f":{port}"):
            record.unlink()
    assert_same(read_features(out), baseline)


def test_a_resume_with_other_net_weights_is_refused(tmp_path, caplog):
    """The config names nets, not weights: a retrained net keeps its name, and a resume once
    mixed s-scores of two nets in one table. The folder records each net's sha256 (checked
    against ../shared/models/SHA256SUMS) and a resume with other weights is refused."""
    sums = dict(
        reversed(line.split())
        for line in (settings.models_dir() / "SHA256SUMS").read_text().splitlines()
    )
    cfg = config_from_dict({**CONFIG, "value": {"evaluator": "net", "model": "maia-1900"}})
    assert net_hashes(cfg) == {
        "maia-1100": sums["maia/maia-1100.pb.gz"],
        "maia-1900": sums["maia/maia-1900.pb.gz"],
    }
    by_path = config_from_dict(
        {**CONFIG, "imitation_nets": [{"name": "m", "model": str(settings.models_dir() / "maia/maia-1500.pb.gz")}],
         "expected_loss": {"net": "m", "max_moves": 2}}
    )  # fmt: skip
    assert list(net_hashes(by_path).values()) == [sums["maia/maia-1500.pb.gz"]]

    save_config(tmp_path, cfg, tmp_path, net_hashes(cfg))
    check_output_config(tmp_path, cfg)  # same weights: resumes
    retrained = {**net_hashes(cfg), "maia-1100": "0" * 64}
    with pytest.raises(ConfigMismatchError, match=r"other net weights \(maia-1100: e1cf1cd0"):
        check_output_config(tmp_path, cfg, retrained)

    record = yaml.safe_load((tmp_path / CONFIG_FILE).read_text())
    del record["nets"]  # a folder written before the weights were recorded
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(record))
    check_output_config(tmp_path, cfg, retrained)
    assert "records no net sha256" in caplog.text


def test_steady_rate_leaves_out_the_start_up():
    """Parts of 100, 300 and 200 positions arriving at 10 s, 12 s and 14 s: the first result
    carries the start-up (Ray, actors, nets), so the steady rate is (300 + 200) / (14 - 10)."""
    from pipeline.extract.steps import PartResult

    stats = RunStats()
    empty = pa.table({})
    assert stats.steady_positions_per_s() is None
    for positions, at_s in ((100, 10.0), (300, 12.0), (200, 14.0)):
        stats.add(PartResult(empty, empty, positions), at_s)
        if at_s == 10.0:
            assert stats.steady_positions_per_s() is None  # one result: no interval yet
    assert stats.positions == 600
    assert stats.first_s == 10.0
    assert stats.steady_positions_per_s() == 125.0
