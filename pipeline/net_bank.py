"""All nets of one extraction run, loaded once, run over large batches of positions.

One :class:`NetBank` lives in each evaluator actor (``actors/evaluator_actor.py``) and holds
every net the config names (imitation, strength and value nets of one game kind), so a GPU is
never shared between stages. A net named twice (KataGo as imitation net and value net) is loaded
and run once. Inputs arrive bit-packed (:mod:`pipeline.packed_planes`) and are unpacked one
batch at a time, so the float planes of a whole chunk never exist at once.

On a GPU each batch crosses PCIe once, as bits, and is unpacked there, whatever the number of
nets: on an H100 the nine Maia nets run 159,562 positions/s, while one pageable copy of float
planes moves 259,017 positions/s, so a float copy per net capped the bank below 29,000
positions/s (12,114 measured; ``bench/bench_gpu_nets.py``).
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
from pipeline.packed_planes import PackedPlanes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gather:
    """Which entries of a batch's (B, K) output a job keeps: ``out[rows, cols]``, shape (L,).

    Chess keeps each position's legal-move logits (~30 of 1858): on a GPU they are picked
    there, so the policies never cross PCIe or fill host memory whole.
    """

    rows: np.ndarray | torch.Tensor  # (L,) int64 row within the batch
    cols: np.ndarray | torch.Tensor  # (L,) int64 output column


# Builds the named inputs of rows [start, stop) of a chunk's positions: planes as the packed
# rows (PackedPlanes.rows), which the bank unpacks where its nets run; other inputs as arrays;
# and the Gather entries that jobs name.
InputSource = Callable[[int, int], dict[str, np.ndarray | PackedPlanes | Gather]]


def unpack_on_device(
    packed: PackedPlanes, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """``packed.unpack()`` computed on ``device``: only the bits (1/32 of the floats) are copied.

    Bits are expanded most significant first, as ``np.unpackbits`` packs them.
    """
    n, c, h, w = packed.shape
    out = torch.zeros((n, c, h, w), device=device, dtype=dtype)  # (n, C, H, W)
    cb = len(packed.binary_channels)
    if cb and n:
        bits = torch.from_numpy(packed.bits).to(device)  # (n, ceil(Cb·H·W / 8)) uint8
        shifts = torch.arange(7, -1, -1, device=device, dtype=torch.uint8)  # (8,)
        expanded = (bits.unsqueeze(-1) >> shifts) & 1  # (n, bytes, 8)
        binary = expanded.reshape(n, -1)[:, : cb * h * w].reshape(n, cb, h, w)
        out[:, torch.from_numpy(packed.binary_channels).to(device, torch.long)] = binary.to(dtype)
    if len(packed.float_channels) and n:
        channels = torch.from_numpy(packed.float_channels).to(device, torch.long)
        out[:, channels] = torch.from_numpy(packed.floats).to(device, dtype)
    return out


@dataclass(frozen=True)
class NetJob:
    """One net over a chunk's positions: which model, which outputs, which constant inputs."""

    key: str  # the result key (a net entry's name)
    model: str  # a model loaded in the bank
    outputs: tuple[str, ...]  # output names to keep, e.g. ("policy",)
    # net input name → source key when they differ (a HumanSL profile's "meta" rows)
    inputs_from: Mapping[str, str] = field(default_factory=dict)
    # output name → source key of a Gather: that output comes back as (L,) picked entries
    gather: Mapping[str, str] = field(default_factory=dict)


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
        threads: int | None = None,  # CPU: torch threads; None or 0: torch's default
    ) -> None:
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if threads and self.device == "cpu":
            # Fixed thread count: the results must not depend on the machine's core count.
            torch.set_num_threads(threads)
            os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        self.batch_size = batch_size
        # GPU backends take device tensors: each batch is copied (as bits) once for every net
        self.input_device = (
            torch.device(self.device)
            if self.device.startswith("cuda") and backend in ("torch", "tensorrt")
            else None
        )
        self.input_dtype = torch.float16 if precision == "fp16" else torch.float32
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
                num_threads=(threads or None) if self.device == "cpu" else None,
            )
        log.info(
            "net bank on %s: %s (%s, batch %d)", self.device, list(self.nets), backend, batch_size
        )

    def run(
        self, jobs: list[NetJob], source: InputSource, n: int
    ) -> dict[str, dict[str, np.ndarray]]:
        """Run every job over rows [0, n) of ``source``, sharing each unpacked batch between them.

        Returns ``{job.key: {output name: (n, …) array}}``; an output the job gathers is the
        concatenation of every batch's picked entries instead.
        """
        parts: dict[str, dict[str, list[np.ndarray]]] = {
            job.key: {o: [] for o in job.outputs} for job in jobs
        }
        for start in range(0, n, self.batch_size):
            stop = min(start + self.batch_size, n)
            inputs = self._place(source(start, stop))
            for job in jobs:
                evaluator = self.evaluators[job.model]
                feed = {
                    name: inputs[job.inputs_from.get(name, name)] for name in evaluator.input_names
                }
                t0 = time.perf_counter()
                result = self._evaluate(evaluator, feed, job, inputs)
                dt = time.perf_counter() - t0
                self.timer.net_s += dt
                self.timer.per_net_s[job.key] = self.timer.per_net_s.get(job.key, 0.0) + dt
                self.timer.calls += 1
                self.timer.positions += stop - start
                for o in job.outputs:
                    parts[job.key][o].append(np.asarray(result[o]))
        return {key: {o: np.concatenate(v) for o, v in outs.items()} for key, outs in parts.items()}

    def _evaluate(self, evaluator, feed: dict, job: NetJob, inputs: dict) -> dict:
        """The job's outputs for one batch as numpy, gathered where the net ran."""
        if self.input_device is None:
            full = evaluator(feed)
            picked = {o: inputs[job.gather[o]] for o in job.outputs if o in job.gather}
            return {
                o: full[o][picked[o].rows, picked[o].cols] if o in picked else full[o]
                for o in job.outputs
            }
        on_device = evaluator.run_on_device(feed)
        result = {}
        for o in job.outputs:
            out = on_device[o]
            if o in job.gather:
                picked = inputs[job.gather[o]]
                out = out[picked.rows, picked.cols]
            result[o] = out.float().cpu().numpy()
        return result

    def _place(self, inputs: Mapping[str, np.ndarray | PackedPlanes | Gather]) -> dict:
        """Unpack packed planes and move every input to where the nets run, once per batch."""
        device = self.input_device
        if device is None:
            return {k: v.unpack() if isinstance(v, PackedPlanes) else v for k, v in inputs.items()}
        placed = {}
        for key, value in inputs.items():
            if isinstance(value, PackedPlanes):
                placed[key] = unpack_on_device(value, device, self.input_dtype)
            elif isinstance(value, Gather):
                placed[key] = Gather(
                    torch.from_numpy(np.asarray(value.rows, np.int64)).to(device),
                    torch.from_numpy(np.asarray(value.cols, np.int64)).to(device),
                )
            else:
                array = np.ascontiguousarray(value, np.float32)
                placed[key] = torch.from_numpy(array).to(device, self.input_dtype)
        return placed
