"""Dump-scale ingestion: speed, peak memory (PSS) and kill -9 resume of ``kibitz ingest chess``
on a synthetic Lichess dump of real games.

Run: ``python bench/speed/bench_ingest_dump.py`` (1 M and 3 M games, ~10 min on 2 cores) or
``python bench/speed/bench_ingest_dump.py --quick`` (100 k and 300 k games, ~2 min). Per size it

1. builds one ``.pgn.zst`` stream of N games: the Lichess testing split
   (``$KIBITZ_DATA_DIR/chess/lichess-2024-02-blitz/testing``, 9,598 games) repeated, each copy's
   ``[Site "https://lichess.org/<id>"]`` suffixed with its copy number so that every game gets
   its own ``game_id``; written as a stream, so a 3 M-game dump needs no RAM;
2. runs ``kibitz ingest chess DUMP --preset all --num-cpus C --no-progress --out …`` in a
   subprocess with its own (embedded) Ray, and samples every ``--interval`` s the memory of
   the job's process tree: the driver and every descendant (Ray's processes started by the
   driver; another job's Ray on the machine is not a descendant and is not counted);
3. prints games, wall seconds (the summary's, i.e. without Ray's start-up, and the whole
   command's), games/s and games/s per core, and the peak of the summed PSS
   (``/proc/PID/smaps_rollup``) with its split by role at that moment: the driver, Ray's
   system processes (gcs_server, raylet, dashboard, agents, log monitor, autoscaler monitor),
   the workers (``ray::…`` task processes), each without its shared-memory pages, and the
   object store (``Pss_Shmem``: plasma's ``/dev/shm`` pages, summed over every process that
   maps them); the same for RSS (where shared pages count once per process).

Then the kill -9 check (``--kill-size``, default: the first size): the ingest is started in a
subprocess, its whole process tree is SIGKILLed once at least half of the chunks have their
marker, the same command is re-run, and the table must hold exactly N rows and N distinct
``game_id`` (PASS / FAIL; the exit status is 1 on FAIL).

PSS (proportional set size) charges a shared page to each of the k processes mapping it by
1/k, so the sum over a process tree is the memory the tree really holds; RSS sums count
shared libraries and the object store once per process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from pipeline.core import settings
from pipeline.ingest.compressed_streams import iter_blocks
from pipeline.ingest.pgn import expand_sources

GAMES_PER_CHUNK = 20_000
ROLES = ("driver", "ray_system", "workers", "object_store")
_SITE = re.compile(rb'(\[Site "[^"]*)"\]')
_GAME_START = re.compile(rb"\n\s*\n(?=\[Event )")
_COPY_MARK = b"\x00COPY\x00"  # stands where build_dump writes each copy's number


# -- the dump ------------------------------------------------------------------------------


def load_games(split: Path) -> list[bytes]:
    """Every game of the split as PGN text, its Site value ending in ``_COPY_MARK``, which
    :func:`build_dump` replaces with the number of each copy so that every copy's ids differ."""
    games: list[bytes] = []
    for path in expand_sources([split]):
        text = b"".join(iter_blocks(path)).strip()
        text = _SITE.sub(rb"\1" + _COPY_MARK + rb'"]', text)
        games += [g.strip() + b"\n\n" for g in _GAME_START.split(text) if g.strip()]
    return games


def build_dump(games: list[bytes], n: int, path: Path) -> float:
    """Write ``n`` games (the split repeated, Site ids made unique per copy) as one zstd
    stream; return the seconds it took."""
    started = time.perf_counter()
    block = b"".join(games)
    per_copy = len(games)
    with open(path, "wb") as handle, zstandard.ZstdCompressor(level=1).stream_writer(handle) as out:
        written, copy = 0, 0
        while written < n:
            take = min(per_copy, n - written)
            text = block if take == per_copy else b"".join(games[:take])
            out.write(text.replace(_COPY_MARK, b"-c%d" % copy))
            written += take
            copy += 1
    return time.perf_counter() - started


# -- memory of a process tree --------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children = _children_map()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\x00", b" ").decode(errors="replace")
    except OSError:
        return ""


def _name(pid: int) -> str:
    """A short name: ``ray::…`` titles, else the program or script run."""
    words = _cmdline(pid).split()
    if not words:
        return "?"
    if words[0].startswith("ray::"):
        return words[0]
    if "pipeline.cli.main" in words:
        return "kibitz (driver)"
    program = Path(words[0]).name
    if not program.startswith("python"):
        return program
    return Path(next((w for w in words[1:] if w.endswith(".py")), program)).name


def role_of(pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    cmd = _cmdline(pid)
    if cmd.startswith("ray::") and "Agent" not in cmd.split()[0]:
        return "workers"
    if "default_worker.py" in cmd:
        return "workers"
    return "ray_system"


def _rollup(pid: int) -> dict[str, int] | None:
    """kB figures of ``/proc/PID/smaps_rollup`` (None if the process is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return None
    out = {}
    for line in lines:
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0])
    return out


def plasma_mb(pids: list[int]) -> float:
    """MB of ``/dev/shm`` pages held by the plasma files (the object store) that ``pids``
    have open: the file is unlinked, so its pages are found through an open descriptor.
    Pages no process has mapped right now are not in any PSS but still take memory."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if "plasma" not in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    continue
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values()) / 2**20


@dataclass
class Sample:
    pss: dict[str, float]  # MB by role; object_store = the plasma file's /dev/shm pages
    rss: dict[str, float]
    processes: int
    detail: list[tuple[str, str, float, float]]  # (role, name, PSS without shmem, shmem) MB
    pss_shmem: float = 0.0  # the object store's pages mapped now, as PSS counts them

    @property
    def pss_total(self) -> float:
        return sum(self.pss.values())

    @property
    def plain_pss_total(self) -> float:
        """Σ PSS of the processes (object store pages no process maps now are left out)."""
        return sum(v for k, v in self.pss.items() if k != "object_store") + self.pss_shmem

    @property
    def rss_total(self) -> float:
        return sum(self.rss.values())


def sample(root: int) -> Sample:
    pss = dict.fromkeys(ROLES, 0.0)
    rss = dict.fromkeys(ROLES, 0.0)
    pids = descendants(root)
    detail = []
    shmem_total = 0.0
    for pid in pids:
        figures = _rollup(pid)
        if not figures:
            continue
        role = role_of(pid, root)
        shmem = figures.get("Pss_Shmem", 0)
        pss[role] += (figures["Pss"] - shmem) / 1024
        shmem_total += shmem / 1024
        # RSS of shared memory is not split out by smaps_rollup: counted in the role
        rss[role] += figures["Rss"] / 1024
        detail.append((role, _name(pid), (figures["Pss"] - shmem) / 1024, shmem / 1024))
    pss["object_store"] = max(plasma_mb(pids), shmem_total)
    return Sample(pss, rss, len(pids), detail, shmem_total)


@dataclass
class Sampler:
    """Samples a process tree every ``interval`` s on a thread; keeps the peaks."""

    root: int
    interval: float
    samples: int = 0
    peak: Sample | None = None
    peak_rss: Sample | None = None
    peak_plain_pss: float = 0.0
    role_peak_pss: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROLES, 0.0))
    max_processes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            s = sample(self.root)
            self.samples += 1
            self.max_processes = max(self.max_processes, s.processes)
            if self.peak is None or s.pss_total > self.peak.pss_total:
                self.peak = s
            self.peak_plain_pss = max(self.peak_plain_pss, s.plain_pss_total)
            if self.peak_rss is None or s.rss_total > self.peak_rss.rss_total:
                self.peak_rss = s
            for role in ROLES:
                self.role_peak_pss[role] = max(self.role_peak_pss[role], s.pss[role])
            self._stop.wait(self.interval)


# -- runs ----------------------------------------------------------------------------------


def ingest_command(dump: Path, out: Path, num_cpus: int) -> list[str]:
    return [
        sys.executable, "-m", "pipeline.cli.main", "ingest", "chess", str(dump),
        "--out", str(out), "--preset", "all", "--num-cpus", str(num_cpus), "--no-progress",
    ]  # fmt: skip


def _start(command: list[str], log: Path) -> subprocess.Popen:
    handle = open(log, "ab")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        command,
        cwd=settings.REPO_ROOT,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # own process group: a kill takes its Ray with it
    )


def _kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the driver and every process below it (the tree is listed before the driver
    dies: its orphans are re-parented and could no longer be found)."""
    pids = descendants(process.pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _tree_gone(pids: list[int], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)


def _markers(out: Path) -> int:
    folder = out / "_chunks"
    return sum(1 for _ in folder.glob("*.json")) if folder.is_dir() else 0


def _table_counts(out: Path) -> tuple[int, int]:
    """(rows, distinct game_id) of the games table under ``out``."""
    import duckdb

    rows, distinct = duckdb.sql(
        f"select count(*), count(distinct game_id) from read_parquet('{out}/**/*.parquet', "
        "hive_partitioning = true)"
    ).fetchall()[0]
    return int(rows), int(distinct)


def measure(dump: Path, n: int, work: Path, num_cpus: int, interval: float) -> dict:
    out = work / f"games-{n}"
    shutil.rmtree(out, ignore_errors=True)
    log = work / f"ingest-{n}.log"
    started = time.perf_counter()
    process = _start(ingest_command(dump, out, num_cpus), log)
    sampler = Sampler(process.pid, interval).start()
    code = process.wait()
    sampler.stop()
    command_s = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"ingest of {n:,} games failed ({code}); see {log}")
    summary = json.loads((out / "_summary.json").read_text())
    run = summary["this_run"]
    rows, distinct = _table_counts(out)
    shutil.rmtree(out, ignore_errors=True)
    assert sampler.peak is not None and sampler.peak_rss is not None
    return {
        "games": n,
        "games_read": summary["games_read"],
        "rows": rows,
        "distinct_game_ids": distinct,
        "wall_s": run["wall_s"],
        "command_s": round(command_s, 1),
        "games_per_s": run["games_per_s"],
        "games_per_s_per_core": round(run["games_per_s"] / num_cpus, 1),
        "task_cpu_s": run["task_cpu_s"],
        "driver_cpu_s": run["driver_cpu_s"],
        "games_per_cpu_s": round(n / (run["task_cpu_s"] + run["driver_cpu_s"]), 1),
        "load_average": round(os.getloadavg()[0], 1),
        "peak_pss_mb": round(sampler.peak.pss_total),
        "peak_pss_by_role_mb": {k: round(v) for k, v in sampler.peak.pss.items()},
        "peak_plain_pss_mb": round(sampler.peak_plain_pss),
        "role_max_pss_mb": {k: round(v) for k, v in sampler.role_peak_pss.items()},
        "peak_rss_mb": round(sampler.peak_rss.rss_total),
        "peak_rss_by_role_mb": {k: round(v) for k, v in sampler.peak_rss.rss.items()},
        "peak_pss_processes_mb": sorted(
            ([role, name, round(p), round(sh)] for role, name, p, sh in sampler.peak.detail),
            key=lambda row: -(row[2] + row[3]),
        ),
        "processes_max": sampler.max_processes,
        "samples": sampler.samples,
    }


def kill_resume(dump: Path, n: int, work: Path, num_cpus: int) -> dict:
    """Kill -9 the ingest (driver and its Ray) at ≥ half the chunks, re-run, count the table."""
    out = work / f"games-kill-{n}"
    shutil.rmtree(out, ignore_errors=True)
    log = work / f"ingest-kill-{n}.log"
    chunks = math.ceil(n / GAMES_PER_CHUNK)
    half = math.ceil(chunks / 2)
    process = _start(ingest_command(dump, out, num_cpus), log)
    while _markers(out) < half and process.poll() is None:
        time.sleep(0.05)
    if process.poll() is not None:
        raise SystemExit(f"the ingest ended before the kill ({process.returncode}); see {log}")
    tree = descendants(process.pid)
    _kill_tree(process)
    _tree_gone(tree)
    at_kill = _markers(out)
    code = subprocess.run(
        ingest_command(dump, out, num_cpus),
        cwd=settings.REPO_ROOT,
        stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    ).returncode
    summary = json.loads((out / "_summary.json").read_text())
    rows, distinct = _table_counts(out)
    shutil.rmtree(out, ignore_errors=True)
    chunks_info = summary["chunks"]
    ok = (
        code == 0
        and rows == distinct == n
        and summary["games_read"] == n
        and chunks_info["committed"] == chunks
        and chunks_info["committed_before_this_run"] == at_kill
        and 0 < at_kill < chunks
    )
    return {
        "games": n,
        "chunks": chunks,
        "killed_at_markers": at_kill,
        "killed_processes": len(tree),
        "resumed_exit": code,
        "committed_before_resume": chunks_info["committed_before_this_run"],
        "committed_on_resume": chunks_info["committed_this_run"],
        "rows": rows,
        "distinct_game_ids": distinct,
        "pass": ok,
    }


# -- report --------------------------------------------------------------------------------


def print_result(r: dict) -> None:
    pss, rss = r["peak_pss_by_role_mb"], r["peak_rss_by_role_mb"]
    print(
        f"{r['games']:>10,} games: {r['wall_s']:7.1f} s (command {r['command_s']:.1f} s)  "
        f"{r['games_per_s']:>8,.0f} games/s  {r['games_per_s_per_core']:>7,.0f} games/s per core"
        f"  rows {r['rows']:,} ({r['distinct_game_ids']:,} distinct)"
    )
    print(
        f"    CPU: tasks {r['task_cpu_s']:.1f} s + driver {r['driver_cpu_s']:.1f} s = "
        f"{r['games_per_cpu_s']:,.0f} games per CPU s (independent of other jobs); "
        f"load average {r['load_average']} at the end"
    )
    print(
        f"    peak PSS {r['peak_pss_mb']:>6,} MB = driver {pss['driver']:,} + Ray system "
        f"{pss['ray_system']:,} + workers {pss['workers']:,} + object store {pss['object_store']:,}"
        f" (/dev/shm)   [plain Σ PSS peak {r['peak_plain_pss_mb']:,} MB; max per role: "
        + ", ".join(f"{k} {v:,}" for k, v in r["role_max_pss_mb"].items())
        + "]"
    )
    print(
        f"    peak RSS {r['peak_rss_mb']:>6,} MB = driver {rss['driver']:,} + Ray system "
        f"{rss['ray_system']:,} + workers {rss['workers']:,} (object store pages counted in "
        f"each process mapping them); {r['processes_max']} processes, {r['samples']} samples"
    )
    print(
        "    at the PSS peak (MB, own + object store pages): "
        + ", ".join(f"{name} {own:,}+{shm:,}" for _r, name, own, shm in r["peak_pss_processes_mb"])
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--split", type=Path, default=settings.data_dir() / "chess/lichess-2024-02-blitz/testing"
    )
    parser.add_argument("--sizes", default="1000000,3000000", help="games per dump, comma list")
    parser.add_argument("--quick", action="store_true", help="sizes 100000,300000")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the ingest's Ray")
    parser.add_argument("--interval", type=float, default=0.2, help="memory sampling period, s")
    parser.add_argument(
        "--kill-size", type=int, help="games of the kill -9 check (default: first size)"
    )
    parser.add_argument("--no-kill", action="store_true", help="skip the kill -9 check")
    parser.add_argument(
        "--work", type=Path, help="folder for dumps and tables (default: a temp dir)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    sizes = [100_000, 300_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    kill_size = args.kill_size or sizes[0]

    work = args.work or Path(tempfile.mkdtemp(prefix="kibitz-dump-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    games = load_games(args.split)
    print(
        f"split {args.split}: {len(games):,} games; {args.num_cpus} CPUs; work {work}; "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores on this machine"
    )
    results: dict = {"sizes": [], "kill": None, "num_cpus": args.num_cpus}
    dumps: dict[int, Path] = {}
    try:
        for n in sorted(set(sizes) | ({kill_size} if not args.no_kill else set())):
            dumps[n] = work / f"dump-{n}.pgn.zst"
            seconds = build_dump(games, n, dumps[n])
            print(
                f"built {dumps[n].name}: {n:,} games, {dumps[n].stat().st_size / 1e6:,.0f} MB "
                f"compressed, in {seconds:.1f} s"
            )
        for n in sizes:
            result = measure(dumps[n], n, work, args.num_cpus, args.interval)
            results["sizes"].append(result)
            print_result(result)
        if not args.no_kill:
            kill = kill_resume(dumps[kill_size], kill_size, work, args.num_cpus)
            results["kill"] = kill
            print(
                f"kill -9 at {kill['killed_at_markers']}/{kill['chunks']} chunks "
                f"({kill['killed_processes']} processes), resumed {kill['committed_on_resume']} "
                f"chunks: {kill['rows']:,} rows, {kill['distinct_game_ids']:,} distinct game_id "
                f"(want {kill_size:,}): {'PASS' if kill['pass'] else 'FAIL'}"
            )
    finally:
        for path in dumps.values():
            path.unlink(missing_ok=True)
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if results["kill"] is None or results["kill"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
