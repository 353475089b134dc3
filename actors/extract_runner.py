"""Where ``kibitz extract`` runs what: the Ray side of ``pipeline/jobs/extract.py``.

Per part of a games file (a chunk, or one game on the retry path) the runner chains::

    encode_task (CPU) ──> EvaluatorActor.evaluate (all nets) ──> StockfishPool (chess) ──> assemble_task
                            └─> children_task (CPU) ──> EvaluatorActor.evaluate_children ─┘
                                (chess value net, Go expected loss: positions after moves)

as ObjectRefs, so Ray starts each stage when its inputs exist and several chunks are at
different stages at once: the nets of chunk i run while chunk i+1 is encoded and chunk i−1 is
searched by Stockfish. The driver bounds the chunks in flight (``max_in_flight``).
``encode_task`` returns two objects: the work, and Go's board states (expected loss only),
which only ``children_task`` reads; the net actor's node never fetches them.

Plain actors, not Ray Data ``map_batches``. Measured on this 2-core machine (Ray 2.60, trivial
work, 4 batches of 2,000 rows, median of 3): a Ray Data pipeline ``from_items →
map_batches(actor class, concurrency=1)`` took 3.1 s per run (planning, streaming executor,
actor pool start), chained tasks into an already started actor 0.27 s. Beyond that fixed cost,
Ray Data regroups rows into blocks that cross chunk boundaries (an exactly-once commit per
chunk then needs a group-by back) and cannot express the chess DAG where Stockfish needs both
the positions and the nets' likely moves. Chained ObjectRefs give chunk-aligned results,
zero-copy numpy between stages on a node, and per-stage retry control.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any

import ray

from actors.evaluator_actor import start_evaluators
from actors.extract_tasks import assemble_task, children_task, encode_task
from actors.ray_start import start_ray
from pipeline.extract.config import ExtractConfig
from pipeline.extract.steps import Part, game_ranges_for
from pipeline.kinds import game_kind

log = logging.getLogger(__name__)

RAY_ERRORS = (ray.exceptions.RayError,)
# A task sent while its actor restarts fails with this, whatever its input: not the part's fault.
ACTOR_RESTARTING = ray.exceptions.ActorUnavailableError


def task_failure(exc: Exception) -> tuple[str, str]:
    """What went wrong in a part, as (error type, one-line reason): the task's own exception.

    A ``RayTaskError``'s first line is only "ray::assemble_task() (pid=…)"; its ``cause`` holds
    the exception the task raised (``TypeError: …``), which is what a quarantine row must say.
    """
    cause = getattr(exc, "cause", None)
    shown = cause if isinstance(cause, BaseException) else exc
    text = str(shown).strip()
    name = type(shown).__name__
    return name, f"{name}: {text.splitlines()[0]}" if text else name


@dataclass(frozen=True)
class ActorPlan:
    """How many net actors and Stockfish engines a cluster gets, and the CPUs each holds."""

    evaluators: int
    evaluator_cpus: float
    engines: int  # 0: no Stockfish (Go, or a chess value net)
    cpus_per_engine: float

    @property
    def evaluator_threads(self) -> int:
        """Torch intra-op threads of a CPU net actor: the whole CPUs it holds, at least one."""
        return max(1, int(self.evaluator_cpus))


def plan_actors(
    config: ExtractConfig, *, cpus: int, gpus: int, node_cpus: int | None = None
) -> ActorPlan:
    """Size the net actors and the engine pool so that every one of them can be scheduled.

    A net actor holds one CPU beside its GPU. Without a GPU it holds ``evaluator_cpus``, or by
    default (0) the CPUs of one node when the nets are the only work: encoding tasks hold no
    CPU and cost ~5 % of the net time (Go: 64 s against 1,185 s), and on 2 cores the Go preset
    ran 75.6 positions/s with 2 threads against 44.9 with one (docs/guide/extract.md). Beside a
    Stockfish pool it holds one CPU by default and the engines share the rest, a fraction each
    when fewer are left than engines: an actor asking for more than the cluster has left waits
    forever, and the run with it (the GPU net actor's CPU was once left out of the count, and a
    run on an H100 hung). ``node_cpus`` is the largest node's CPUs (default: ``cpus``).
    """
    n_eval = config.num_evaluators or max(gpus, 1)
    stockfish = game_kind(config.game).extraction.engine(config) is not None
    if gpus:
        eval_cpus = 1.0
    elif config.evaluator_cpus:
        eval_cpus = float(config.evaluator_cpus)
    elif stockfish:
        eval_cpus = 1.0
    else:
        eval_cpus = float(max(1, min(cpus // n_eval, node_cpus or cpus)))
    if not gpus and stockfish and cpus < n_eval * eval_cpus + 1:
        eval_cpus = cpus / (n_eval + 1)  # a tiny cluster: leave room for an engine
    if not stockfish:
        return ActorPlan(n_eval, eval_cpus, 0, 0.0)
    free = max(cpus - n_eval * eval_cpus, 0.0)
    engines = config.value.engines or max(1, int(free))
    return ActorPlan(n_eval, eval_cpus, engines, min(1.0, free / engines))


class ExtractRunner:
    """Starts (or joins) Ray, the net actors and the Stockfish pool; submits parts."""

    def __init__(self, config: ExtractConfig, games_root: str, *, address: str | None = None,
                 num_cpus: int | None = None) -> None:  # fmt: skip
        self.config = config
        self.extraction = game_kind(config.game).extraction
        self.config_dict = config.to_dict()
        self.games_root = games_root
        t0 = time.perf_counter()
        # Before any worker starts: a fresh node's workers then load the encoders from numba's
        # cache rather than each compiling them (121 CPU-s of a chess run, docs/guide/gpu.md).
        self.extraction.compile_encoders()
        log.info("encoders compiled or loaded in %.1f s", time.perf_counter() - t0)
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            start_ray(address, num_cpus)
        resources = ray.cluster_resources()
        self.cpus = int(resources.get("CPU", 1))
        gpus = int(resources.get("GPU", 0))
        node_cpus = max(
            (int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]), default=1
        )
        plan = plan_actors(config, cpus=self.cpus, gpus=gpus, node_cpus=node_cpus)
        n_eval = plan.evaluators
        self.evaluators = start_evaluators(
            {**self.config_dict, "evaluator_cpus": plan.evaluator_threads},
            n_eval,
            cpus=plan.evaluator_cpus,
            gpus=gpus > 0,
        )
        self._next_evaluator = itertools.cycle(range(n_eval))
        self.pool = None
        engine = self.extraction.engine(config)
        if plan.engines and engine is not None:  # a chess value net runs in the net actor
            from actors.stockfish_pool import StockfishPool

            self.pool = StockfishPool(engine, plan.engines, cpus_per_engine=plan.cpus_per_engine)
        log.info(
            "ray: %d CPUs, %d GPUs; %d net actor(s) of %g CPUs, %d Stockfish engine(s)",
            self.cpus, gpus, n_eval, plan.evaluator_cpus, len(self.pool) if self.pool else 0,
        )  # fmt: skip

    def submit(self, part: Part) -> ray.ObjectRef:
        """Chain the stages of one part; the returned ref resolves to its PartResult."""
        work, states = encode_task.remote(self.config_dict, self.games_root, part)
        evaluator = self.evaluators[next(self._next_evaluator)]
        nets = evaluator.evaluate.remote(work)
        kids = None
        # The same actor: its nets are warm for this chunk.
        if self.extraction.needs_children(self.config):
            kids = evaluator.evaluate_children.remote(
                children_task.remote(self.config_dict, work, states, nets)
            )
        values = []
        if self.pool is not None:
            ranges = game_ranges_for(part.stop - part.start, 2 * len(self.pool))
            values = self.pool.submit(work, nets, ranges)
        return assemble_task.remote(self.config_dict, part, work, nets, kids, *values)

    def wait_ready(self, timeout_s: float = 600.0) -> None:
        """Block until every net actor and engine answers, e.g. after Ray restarted a killed one.

        Work sent to an actor that is still restarting fails at once (ActorUnavailableError);
        retrying into that window would spend a part's attempts, and then quarantine good games,
        on the actor's restart instead of on the part.
        """
        actors = [(a, a.pid) for a in self.evaluators]
        if self.pool is not None:
            actors += [(a, a.pids) for a in self.pool.actors]
        deadline = time.monotonic() + timeout_s
        for _, ping in actors:
            while True:
                try:
                    ray.get(ping.remote(), timeout=max(1.0, deadline - time.monotonic()))
                    break
                except (ACTOR_RESTARTING, ray.exceptions.RayActorError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)

    @staticmethod
    def wait_one(refs: list) -> ray.ObjectRef:
        ready, _ = ray.wait(refs, num_returns=1)
        return ready[0]

    @staticmethod
    def get(ref: ray.ObjectRef) -> Any:
        return ray.get(ref)

    def close(self) -> None:
        if self._owns_ray:
            ray.shutdown()

    def __enter__(self) -> ExtractRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
