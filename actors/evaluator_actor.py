"""The net actor of ``kibitz extract``: one actor holds ALL nets of a game kind.

Pinned to one GPU (``num_gpus=1``) when the cluster has GPUs, so a GPU is never shared between
stages; on a CPU-only cluster it is a CPU actor with a fixed thread budget
(``evaluator_cpus``). It wraps the net step of the game kind's extraction
(``pipeline.kinds``: ``ChessNetStep`` / ``GoNetStep``); Ray restarts it when its process dies (``max_restarts=-1``) and the
driver retries the batch it was working on (``max_task_retries=0``: the driver decides, so a
batch that keeps failing is quarantined instead of retried forever).
"""

from __future__ import annotations

import os
import signal
from typing import Any

import ray

from pipeline.extract.child_positions import ChildPositions, ChildValues
from pipeline.extract.config import config_from_dict
from pipeline.kinds import game_kind

# Reliability tests: a file path; the first evaluate() that finds the file deletes it and
# SIGKILLs its own process mid-batch, so a test kills the net actor at an exact point, once.
KILL_ONCE_ENV = "KIBITZ_TEST_KILL_NET_ACTOR"


def _die_once_if_asked() -> None:
    path = os.environ.get(KILL_ONCE_ENV)
    if not path:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


# Out of order: a chunk's second call (its positions after moves) waits for a CPU task, and
# the next chunk's first call must not wait behind it (the nets would idle while Python encodes).
@ray.remote(max_restarts=-1, max_task_retries=0, allow_out_of_order_execution=True)
class EvaluatorActor:
    """Loads every net once, then evaluates chunk after chunk."""

    def __init__(self, config: dict[str, Any]) -> None:
        device = "cuda" if ray.get_gpu_ids() else "cpu"
        cfg = config_from_dict(config)
        self.step = game_kind(cfg.game).extraction.net_step(cfg, device=device)

    def evaluate(self, work: Any) -> Any:
        """A chunk's encoded positions → the per-net result (ChessNetResult / GoNetResult)."""
        _die_once_if_asked()
        return self.step(work)

    def evaluate_children(self, kids: ChildPositions) -> ChildValues:
        """A chunk's positions after moves (encoded by a CPU task) → the value net's values."""
        return self.step.evaluate_children(kids)

    def pid(self) -> int:
        return os.getpid()


def start_evaluators(config: dict[str, Any], count: int, *, cpus: float, gpus: bool) -> list:
    """``count`` evaluator actors, ``cpus`` CPUs each, and one GPU each when ``gpus``."""
    options = {"num_gpus": 1, "num_cpus": cpus} if gpus else {"num_cpus": cpus}
    return [EvaluatorActor.options(**options).remote(config) for _ in range(count)]
