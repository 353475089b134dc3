"""Ray side of ingestion: the remote task that reads, selects and commits one chunk, and a
runner that feeds chunks to a cluster with bounded memory.

Distribution decisions live here and nowhere else:

- one task per chunk, 1 CPU each; the task commits its own output (``ChunkStore`` files are
  per chunk), so the driver only moves raw chess text and small count dictionaries;
- at most ``CPUs + 1`` tasks in flight (one queued behind the running ones, cut while they
  run): the driver streams a dump far faster than workers parse it, and without a bound it
  would hold the whole decompressed month in the object store; each chunk's text (~50 MB at
  20,000 games) lives once in the object store while its task is queued or running, and the
  driver keeps no copy of a submitted chunk's bytes (only its ``Chunk``);
- a worker hands the memory of a finished chunk back to the OS (Arrow's pool, then glibc's
  ``malloc_trim``): without it each worker keeps its largest chunk's peak (~200 MB) between
  tasks;
- a task failing with an exception is reported, not retried (re-running the command retries
  it); a worker process that dies is retried by Ray (commits are idempotent);
- ``address=None`` starts an embedded local Ray with ``num_cpus``; an address joins a cluster,
  whose nodes must see the input files (Go) and the output folder.

    with RayChunkRunner(num_cpus=2) as runner:
        for item, meta in runner.run(items, "chess", rules, Path("out/games")):
            ...
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import ray

from actors.ray_start import quiet_start_notices
from pipeline.ingest.selection import SelectionRules
from pipeline.ingest.work import WorkItem, process_chunk
from pipeline.kinds import game_kind

logger = logging.getLogger(__name__)

# Tasks in flight beyond the cluster's CPUs (queued, their chunk already in the object store).
IN_FLIGHT_EXTRA = 1


def release_memory() -> None:
    """Return freed memory to the OS: Arrow's pool and glibc's heap (``malloc_trim``)."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc (musl, macOS): no trim
        ctypes.CDLL(None).malloc_trim(0)


@ray.remote(num_cpus=1, max_retries=2, retry_exceptions=False)
def ingest_chunk_task(
    game: str, item: WorkItem, rules: SelectionRules, out_dir: str
) -> dict[str, Any]:
    """Read, select and commit one chunk on a worker with the game kind's reader; return the
    chunk's counts. The task gets the kind's name, not its reader: the name is what the driver
    has, and the kind object is the same in every process."""
    try:
        return process_chunk(game_kind(game).reader, item, rules, Path(out_dir))
    finally:
        release_memory()


class RayChunkRunner:
    """Runs work items as Ray tasks; starts (and later stops) an embedded Ray if none runs."""

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None) -> None:
        self.address = address
        self.requested_cpus = num_cpus
        self.started_ray = False
        self.num_cpus = 0.0

    def __enter__(self) -> RayChunkRunner:
        if not ray.is_initialized():
            quiet_start_notices()
            if self.address is None:
                # address="local": always a fresh embedded cluster, never silently joining
                # one that `ray start` left running on this machine.
                ray.init(
                    address="local",
                    num_cpus=self.requested_cpus or os.cpu_count(),
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                )
            else:
                ray.init(address=self.address, logging_level=logging.WARNING)
            self.started_ray = True
        self.num_cpus = float(ray.cluster_resources().get("CPU", 1.0))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.started_ray:
            ray.shutdown()

    def run(
        self, items: Iterable[WorkItem], game: str, rules: SelectionRules, out_dir: Path
    ) -> Iterator[tuple[WorkItem, dict[str, Any] | BaseException]]:
        """Yield ``(item, meta)`` as chunks finish (``(item, exception)`` for a failed one)."""
        limit = max(1, int(self.num_cpus) + IN_FLIGHT_EXTRA)
        in_flight: dict[ray.ObjectRef, WorkItem] = {}
        rules_ref = ray.put(rules)
        source = iter(items)
        exhausted = False
        while in_flight or not exhausted:
            while not exhausted and len(in_flight) < limit:
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                ref = ingest_chunk_task.remote(game, item, rules_ref, str(out_dir))
                # .remote() copied the bytes into the object store: keep only the Chunk
                in_flight[ref] = dataclasses.replace(item, data=None)
                del item
            if not in_flight:
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                item = in_flight.pop(ref)
                try:
                    yield item, ray.get(ref)
                except ray.exceptions.RayError as error:
                    cause = getattr(error, "cause", None)
                    yield item, cause if isinstance(cause, BaseException) else error
