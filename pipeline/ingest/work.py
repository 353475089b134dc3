"""The units of ingestion work: a run's configuration, its work items, one chunk read, selected
and committed (the body of a Ray task), and the run summary. The driver that schedules them is
``pipeline/jobs/ingest.py``; the Ray task that runs :func:`process_chunk` is
``actors/ingest_tasks.py``.

Nothing here knows chess from Go: what differs between them, how a run's inputs become work
items and how one item is read, is a :class:`ChunkReader` that the caller hands in (the game
kind's ``reader``, ``pipeline.kinds``, which sits above this package)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pipeline.core.chunk_store import ChunkStore
from pipeline.core.errors import KibitzError
from pipeline.core.games_schema import PARTITION_COLUMNS
from pipeline.ingest.chunks import Chunk, ChunkResult, merge_notes
from pipeline.ingest.selection import SelectionRules, apply_selection

SUMMARY_FILE = "_summary.json"
QUARANTINE_TABLE = "_quarantine"


class IngestError(KibitzError, RuntimeError):
    """A run that cannot start or whose output would be inconsistent."""


class InvariantError(RuntimeError):
    """Games read ≠ kept + rejected + quarantined: a bug, never an input problem."""


@dataclass
class IngestConfig:
    """Everything one ``kibitz ingest`` run needs; saved in the run summary."""

    game: str  # "chess" | "go"
    sources: list[str]  # files / folders as the user gave them
    out_dir: Path
    rules: SelectionRules
    # ~20k chess games ≈ 50 MB of PGN text ≈ 1 s of one core: big enough to amortise a task,
    # small enough to spread one monthly dump over a cluster and to lose little on a kill.
    games_per_chunk: int = 20_000
    force: bool = False
    address: str | None = None  # Ray cluster to join; None = start an embedded local Ray
    num_cpus: int | None = None  # embedded Ray's CPUs; None = all of this machine's
    show_progress: bool = True


@dataclass(frozen=True)
class WorkItem:
    """One chunk to run: chess pieces carry their raw bytes, Go chunks are read by the task."""

    chunk: Chunk
    data: bytes | None = None
    stream_error: str | None = None


@dataclass
class RunStats:
    """What happened in this invocation (as opposed to totals over all committed chunks)."""

    chunk_ids: list[str] = field(default_factory=list)
    committed_before: int = 0
    committed_now: int = 0
    games_read_now: int = 0
    task_cpu_s: float = 0.0  # CPU seconds the tasks of this run spent (read, select, commit)
    driver_cpu_s: float = 0.0  # CPU seconds of the driver (streaming, cutting, scheduling)
    failed: list[dict[str, Any]] = field(default_factory=list)


class ChunkReader(Protocol):
    """What ingestion asks of one game kind's reader (``pipeline.kinds``: ``kind.reader``).

    The two kinds cut their inputs differently (a Lichess month is one stream the driver must
    read once and cut into pieces of raw text; Fox inputs are planned up front and each task
    reads its own slice), so the planning is the reader's as much as the parsing is. Generic
    code takes the reader as an argument instead of branching on the game's name.
    """

    def compile_kernels(self) -> None:
        """Compile the reader's numba kernels in this process, writing numba's on-disk cache,
        so that the workers the driver then starts load them instead of each compiling them."""
        ...

    def work_items(self, sources: Sequence[str], *, games_per_chunk: int) -> Iterator[WorkItem]:
        """Every chunk of ``sources`` in input order, ``games_per_chunk`` games each."""
        ...

    def read_chunk(self, item: WorkItem) -> ChunkResult:
        """Read one work item into games rows and quarantined games."""
        ...

    def read_text(self, data: bytes, source_file: str) -> ChunkResult:
        """Read games held in memory (a posted game) as if they were the file
        ``source_file``: no file is opened, the name only gives ids and error messages."""
        ...


# -- the work of one task (plain Python; actors.ingest_tasks runs it on Ray) -----------------


def process_chunk(
    reader: ChunkReader, item: WorkItem, rules: SelectionRules, out_dir: Path
) -> dict[str, Any]:
    """Read ``item`` with the game kind's ``reader``, select and commit it; return the
    marker's meta (counts of this chunk) plus the commit's CPU seconds."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = reader.read_chunk(item)
    kept, rejected = apply_selection(result.games, rules)
    reasons = Counter(result.quarantine.column("error_type").to_pylist())
    meta = {
        "chunk": item.chunk.describe(),
        "rules": rules.label,
        "games_read": result.games_read,
        "kept": kept.num_rows,
        "rejected": rejected,
        "quarantined": result.quarantine.num_rows,
        "quarantine_reasons": dict(sorted(reasons.items())),
        "stream_error": item.stream_error,
        "reader_notes": result.notes,
        "seconds": round(time.perf_counter() - started, 3),
        "cpu_s": round(time.process_time() - cpu_started, 3),  # read + select, before commit
    }
    accounted = meta["kept"] + sum(rejected.values()) + meta["quarantined"]
    if accounted != meta["games_read"]:
        raise InvariantError(
            f"chunk {item.chunk.chunk_id} of {item.chunk.source_file!r}: read "
            f"{meta['games_read']} ≠ kept + rejected + quarantined = {accounted}"
        )
    store = ChunkStore(out_dir, PARTITION_COLUMNS)
    committing = time.process_time()
    store.commit(item.chunk.chunk_id, {"": kept, QUARANTINE_TABLE: result.quarantine}, meta)
    return meta | {"commit_cpu_s": time.process_time() - committing}


# -- planning -------------------------------------------------------------------------------


def work_items(config: IngestConfig, reader: ChunkReader) -> Iterator[WorkItem]:
    """Every chunk of the run, in input order, as the game kind's ``reader`` cuts them."""
    return reader.work_items(config.sources, games_per_chunk=config.games_per_chunk)


def check_rules_match(store: ChunkStore, game: str, rules: SelectionRules) -> None:
    """Resuming under other rules would mix two selections of one game kind in one table.

    Chess and Go chunks live side by side (``game=`` partitions), each kind under its own rules.
    """
    labels = {
        m["meta"].get("rules")
        for m in store.markers().values()
        if m["meta"].get("chunk", {}).get("game", game) == game
    }
    other = sorted(str(label) for label in labels - {rules.label})
    if other:
        raise IngestError(
            f"{str(store.root)!r} holds chunks selected with {other}, not {rules.label!r}; "
            "re-run with --force or write to another --out"
        )


# -- summary --------------------------------------------------------------------------------


def build_summary(
    config: IngestConfig, store: ChunkStore, stats: RunStats, wall_s: float, num_cpus: float
) -> dict[str, Any]:
    """Totals over every committed chunk of this run's inputs (also those of earlier, killed
    runs), plus this invocation's throughput."""
    wanted = set(stats.chunk_ids)
    metas = [m["meta"] for cid, m in store.markers().items() if cid in wanted]
    metas.sort(key=lambda meta: (meta["chunk"]["source_file"], meta["chunk"]["chunk_index"]))
    rejected: Counter[str] = Counter({rule.name: 0 for rule in config.rules.rules})
    reasons: Counter[str] = Counter()
    per_file: dict[str, Counter[str]] = {}
    file_errors: list[str] = []
    for meta in metas:
        rejected.update(meta["rejected"])
        reasons.update(meta["quarantine_reasons"])
        counts = per_file.setdefault(meta["chunk"]["source_file"], Counter())
        counts.update(
            games_read=meta["games_read"],
            kept=meta["kept"],
            rejected=sum(meta["rejected"].values()),
            quarantined=meta["quarantined"],
        )
        if meta.get("stream_error"):
            file_errors.append(meta["stream_error"])
    read = sum(m["games_read"] for m in metas)
    kept = sum(m["kept"] for m in metas)
    quarantined = sum(m["quarantined"] for m in metas)
    rejected_total = sum(rejected.values())
    rate = stats.games_read_now / wall_s if wall_s > 0 else 0.0
    return {
        "game": config.game,
        "sources": list(config.sources),
        "out_dir": str(config.out_dir),
        "rules": config.rules.to_dict(),
        "games_per_chunk": config.games_per_chunk,
        "chunks": {
            "total": len(wanted),
            "committed": len(metas),
            "committed_before_this_run": stats.committed_before,
            "committed_this_run": stats.committed_now,
            "failed": stats.failed,
        },
        "games_read": read,
        "kept": kept,
        "rejected": dict(rejected),
        "rejected_total": rejected_total,
        "quarantined": quarantined,
        "quarantine_reasons": dict(sorted(reasons.items())),
        "reader_notes": merge_notes(m.get("reader_notes", {}) for m in metas),
        "invariant": {
            "read": read,
            "kept_plus_rejected_plus_quarantined": kept + rejected_total + quarantined,
            "holds": read == kept + rejected_total + quarantined,
        },
        "per_file": {name: dict(c) for name, c in sorted(per_file.items())},
        "file_errors": file_errors,
        "this_run": {
            "games_read": stats.games_read_now,
            "wall_s": round(wall_s, 3),
            "games_per_s": round(rate, 1),
            "cpus": num_cpus,
            "games_per_s_per_cpu": round(rate / num_cpus, 1) if num_cpus else None,
            "task_cpu_s": round(stats.task_cpu_s, 3),
            "games_per_task_cpu_s": (
                round(stats.games_read_now / stats.task_cpu_s, 1) if stats.task_cpu_s else None
            ),
            "driver_cpu_s": round(stats.driver_cpu_s, 3),
        },
    }


def format_summary(summary: Mapping[str, Any]) -> str:
    """The run summary as a few readable lines (printed by the CLI)."""
    run = summary["this_run"]
    lines = [
        f"ingest {summary['game']} → {summary['out_dir']} (rules {summary['rules']['name']}"
        f"@{summary['rules']['version']})",
        f"  games read   {summary['games_read']:>12,}",
        f"  kept         {summary['kept']:>12,}",
        f"  rejected     {summary['rejected_total']:>12,}  "
        + ", ".join(f"{k}: {v:,}" for k, v in summary["rejected"].items()),
        f"  quarantined  {summary['quarantined']:>12,}  "
        + ", ".join(f"{k}: {v:,}" for k, v in summary["quarantine_reasons"].items()),
        f"  read = kept + rejected + quarantined: {summary['invariant']['holds']}",
        f"  chunks {summary['chunks']['committed']}/{summary['chunks']['total']} committed "
        f"({summary['chunks']['committed_this_run']} this run, "
        f"{len(summary['chunks']['failed'])} failed)",
        f"  this run: {run['games_read']:,} games in {run['wall_s']:.1f} s = "
        f"{run['games_per_s']:,.0f} games/s on {run['cpus']:g} CPUs; reading took "
        f"{run['task_cpu_s']:.1f} CPU s = {run['games_per_task_cpu_s'] or 0:,.0f} games per CPU s",
    ]
    if any(summary["reader_notes"].values()):
        lines.append(
            "  read past or repaired: "
            + ", ".join(
                f"{k}: {v:,}"
                if not isinstance(v, list)
                else f"{k}: {', '.join(v[:5])}" + (" …" if len(v) > 5 else "")
                for k, v in summary["reader_notes"].items()
                if v
            )
        )
    lines += [f"  error: {message}" for message in summary["file_errors"]]
    lines += [f"  failed chunk {f['chunk_id']}: {f['error']}" for f in summary["chunks"]["failed"]]
    return "\n".join(lines)


def write_summary(out_dir: Path, summary: Mapping[str, Any]) -> Path:
    """Write ``_summary.json`` atomically next to the table."""
    path = out_dir / SUMMARY_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1, sort_keys=False, default=str), encoding="utf-8")
    os.replace(tmp, path)
    return path


def resolve_sources(sources: Sequence[str]) -> list[str]:
    """Check that every source exists before Ray starts (clear error naming the path)."""
    missing = [s for s in sources if not Path(s).exists()]
    if missing:
        raise FileNotFoundError(f"input(s) not found: {', '.join(repr(m) for m in missing)}")
    return list(sources)
