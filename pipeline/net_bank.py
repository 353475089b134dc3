"""All nets of one extraction run, loaded once, run over large batches of positions.

One :class:`NetBank` lives in each evaluator actor (``actors/evaluator_actor.py``) and holds
every net the config names (imitation, strength and value nets of one game kind), so a GPU is
never shared between stages. A net named twice (KataGo as imitation net and value net) is loaded
and run once. Inputs arrive bit-packed (:mod:`pipeline.packed_planes`) and are unpacked one
batch at a time, so the float planes of a whole chunk never exist at once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pipeline.evaluator import make_evaluator
from pipeline.model_registry import load_net

log = logging.getLogger(__name__)

# Builds the named inputs of rows [start, stop) of a chunk's positions: {"planes": (n,112,8,8)}.
InputSource = Callable[[int, int], dict[str, np.ndarray]]


@dataclass(frozen=True)
class NetJob:
    """One net over a chunk's positions: which model, which outputs, which constant inputs."""

    key: str  # the result key (a net entry's name)
    model: str  # a model loaded in the bank
    outputs: tuple[str, ...]  # output names to keep, e.g. ("policy",)
    # net input name → source key when they differ (a HumanSL profile's "meta" rows)
    inputs_from: Mapping[str, str] = field(default_factory=dict)


@dataclass
class NetTimer:
    """Seconds spent inside net calls vs in the step around them (the issue's 80 % target)."""

    net_s: float = 0.0
    positions: int = 0
    calls: int = 0
    per_net_s: dict[str, float] = field(default_factory=dict)


class NetBank:
    """Loaded nets by model name, each behind one :class:`pipeline.evaluator.Evaluator`."""

    def __init__(
        self,
        models: list[str],
        *,
        backend: str,
        precision: str,
        batch_size: int,
        device: str | None = None,
        cache_dir: Path | None = None,
        threads: int | None = None,
    ) -> None:
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if threads and self.device == "cpu":
            # Fixed thread count: the results must not depend on the machine's core count.
            torch.set_num_threads(threads)
            os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        self.batch_size = batch_size
        self.timer = NetTimer()
        self.nets: dict[str, torch.nn.Module] = {}
        self.evaluators = {}
        for model in dict.fromkeys(models):
            net = load_net(model)
            self.nets[model] = net
            self.evaluators[model] = make_evaluator(
                net,
                backend=backend,
                device=self.device,
                precision=precision,
                cache_dir=cache_dir,
                max_batch=batch_size,
                num_threads=threads if self.device == "cpu" else None,
            )
        log.info(
            "net bank on %s: %s (%s, batch %d)", self.device, list(self.nets), backend, batch_size
        )

    def run(
        self, jobs: list[NetJob], source: InputSource, n: int
    ) -> dict[str, dict[str, np.ndarray]]:
        """Run every job over rows [0, n) of ``source``, sharing each unpacked batch between them.

        Returns ``{job.key: {output name: (n, …) array}}``.
        """
        parts: dict[str, dict[str, list[np.ndarray]]] = {
            job.key: {o: [] for o in job.outputs} for job in jobs
        }
        for start in range(0, n, self.batch_size):
            stop = min(start + self.batch_size, n)
            inputs = source(start, stop)
            for job in jobs:
                evaluator = self.evaluators[job.model]
                feed = {
                    name: inputs[job.inputs_from.get(name, name)] for name in evaluator.input_names
                }
                t0 = time.perf_counter()
                result = evaluator(feed)
                dt = time.perf_counter() - t0
                self.timer.net_s += dt
                self.timer.per_net_s[job.key] = self.timer.per_net_s.get(job.key, 0.0) + dt
                self.timer.calls += 1
                self.timer.positions += stop - start
                for o in job.outputs:
                    parts[job.key][o].append(np.asarray(result[o]))
        return {key: {o: np.concatenate(v) for o, v in outs.items()} for key, outs in parts.items()}
