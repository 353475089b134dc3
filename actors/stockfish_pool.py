"""A pool of Stockfish actors, one engine (one CPU) each, for the chess value stage.

Stockfish searches are single-threaded by design (determinism), so throughput scales by
running one engine per core: the driver cuts each chunk's games into contiguous ranges and
hands them to the least busy engines. A dead engine process is restarted inside its actor
(``pipeline.nets.stockfish``); a dead actor is restarted by Ray and the driver retries.
"""

from __future__ import annotations

import os
from typing import Any

import ray

from pipeline.extract.chess import ChessValueStep
from pipeline.nets.stockfish import StockfishSettings


@ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)
class StockfishActor:
    """One Stockfish engine evaluating ranges of games."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.step = ChessValueStep(StockfishSettings(**settings))

    def evaluate(self, work: Any, nets: Any, lo: int, hi: int) -> Any:
        return self.step(work, nets, lo, hi)

    def pids(self) -> tuple[int, int]:
        """(actor pid, engine pid), for the reliability tests."""
        return os.getpid(), self.step.pid


class StockfishPool:
    """Hands game ranges to the engine with the fewest ranges in flight."""

    def __init__(
        self, settings: StockfishSettings, size: int, *, cpus_per_engine: float = 1.0
    ) -> None:
        opts = {"nodes": settings.nodes, "hash_mb": settings.hash_mb, "binary": settings.binary}
        actor = StockfishActor.options(num_cpus=cpus_per_engine)
        self.actors = [actor.remote(opts) for _ in range(size)]
        self._in_flight: dict[int, set] = {i: set() for i in range(size)}

    def __len__(self) -> int:
        return len(self.actors)

    def _least_busy(self) -> int:
        for refs in self._in_flight.values():
            if refs:
                done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
                refs.difference_update(done)
        return min(self._in_flight, key=lambda i: len(self._in_flight[i]))

    def submit(self, work_ref: Any, nets_ref: Any, ranges: list[tuple[int, int]]) -> list:
        """One evaluation per (lo, hi) games range; returns their ObjectRefs in range order."""
        refs = []
        for lo, hi in ranges:
            i = self._least_busy()
            ref = self.actors[i].evaluate.remote(work_ref, nets_ref, lo, hi)
            self._in_flight[i].add(ref)
            refs.append(ref)
        return refs
