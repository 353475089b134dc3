"""The ingestion driver: input files → chunks → Ray tasks (read, select, commit) → run summary.

Read top to bottom, one run is:

1. open the output as a :class:`~pipeline.core.chunk_store.ChunkStore` (``--force`` resets it);
   refuse to mix selection rules with chunks committed under other rules;
2. compile the reader's numba kernels (the workers load them from numba's cache), start or
   join Ray (``actors.ingest_tasks``), then delete files of chunks a killed run left without a
   marker;
3. list the work with the game kind's reader (``pipeline.kinds``: ``kind.reader``): chess
   files are streamed once by the driver and cut into pieces of ``games_per_chunk`` games
   (``pipeline.ingest.pgn.stream_chunks``: a ``.pgn.zst`` stream cannot be seeked, so tasks
   get the raw text); Go inputs are planned up front (``pipeline.ingest.sgf.plan_chunks``) and
   each task reads its own slice;
4. skip chunks whose marker exists (resume), run the rest as Ray tasks that each read the
   chunk, apply the selection rules and commit the kept games and the quarantined ones;
5. aggregate every marker of this run's chunks into ``_summary.json`` next to the table
   (games read, kept, rejected per rule, quarantined by reason, per file, throughput) and
   check ``read = kept + rejected + quarantined``.

Run it through the CLI: ``kibitz ingest chess ../shared/data/chess/lichess-2024-02-blitz/testing``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from pipeline.core.catalog import refresh_home_of
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.games_schema import PARTITION_COLUMNS
from pipeline.core.progress import Progress
from pipeline.ingest.work import (
    IngestConfig,
    IngestError,
    InvariantError,
    RunStats,
    WorkItem,
    build_summary,
    check_rules_match,
    work_items,
    write_summary,
)
from pipeline.kinds import game_kind

logger = logging.getLogger(__name__)


def run_ingest(config: IngestConfig) -> dict[str, Any]:
    """Run (or resume) one ingestion; return the summary, also written to ``_summary.json``."""
    # Imported here, not at the top: `pipeline` stays importable (and its tests runnable)
    # without starting Ray; this is the one place where the driver crosses into `actors`.
    from actors.ingest_tasks import RayChunkRunner

    reader = game_kind(config.game).reader
    if config.rules.game not in (config.game, "any"):
        raise IngestError(
            f"rules {config.rules.label!r} are for {config.rules.game!r} games, not {config.game!r}"
        )
    store = ChunkStore(config.out_dir, PARTITION_COLUMNS)
    if config.force:
        store.reset()
    check_rules_match(store, config.game, config.rules)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    stats = RunStats()
    compiled = time.perf_counter()
    # Before any worker starts: a fresh node's workers then load the readers' kernels from
    # numba's cache rather than each compiling them (about 45 CPU-s a chess worker, docs/guide/ingest.md).
    reader.compile_kernels()
    logger.info("readers compiled or loaded in %.1f s", time.perf_counter() - compiled)
    with RayChunkRunner(address=config.address, num_cpus=config.num_cpus) as runner:
        started = time.perf_counter()  # throughput excludes Ray's start-up (~5-10 s)
        driver_cpu = time.process_time()
        removed = store.clean_partial()
        if removed:
            logger.info("removed %d files of chunks a previous run left unfinished", removed)
        done = store.done_ids()
        progress = Progress(
            desc=f"ingest {config.game}",
            unit=" games",
            unit_scale=True,
            mininterval=1.0,
            disable=not config.show_progress,
        )

        def pending() -> Iterator[WorkItem]:
            for item in work_items(config, reader):
                chunk_id = item.chunk.chunk_id
                stats.chunk_ids.append(chunk_id)
                if chunk_id in done:
                    stats.committed_before += 1
                    continue
                yield item

        for item, outcome in runner.run(pending(), config.game, config.rules, config.out_dir):
            if isinstance(outcome, BaseException):
                stats.failed.append(
                    {
                        "chunk_id": item.chunk.chunk_id,
                        "source_file": item.chunk.source_file,
                        "chunk_index": item.chunk.chunk_index,
                        "error": f"{type(outcome).__name__}: {outcome}",
                    }
                )
                logger.error("chunk %s failed: %s", item.chunk.chunk_id, outcome)
                continue
            stats.committed_now += 1
            stats.games_read_now += outcome["games_read"]
            stats.task_cpu_s += outcome["cpu_s"] + outcome["commit_cpu_s"]
            progress.update(outcome["games_read"])
        progress.close()
        num_cpus = runner.num_cpus
        wall_s = time.perf_counter() - started
        stats.driver_cpu_s = time.process_time() - driver_cpu
    summary = build_summary(config, store, stats, wall_s, num_cpus)
    write_summary(config.out_dir, summary)
    if not summary["invariant"]["holds"]:
        raise InvariantError(f"read ≠ kept + rejected + quarantined: {summary['invariant']}")
    refresh_home_of(config.out_dir)  # the home's kibitz.duckdb: <kind>_games views
    return summary
