"""All nets of one extraction run, loaded once, run over large batches of positions.

One :class:`NetBank` lives in each evaluator actor (``actors/evaluator_actor.py``) and holds
every net the config names (imitation, strength and value nets of one game kind), so a GPU is
never shared between stages. A net named twice (KataGo as imitation net and value net) is loaded
and run once. Inputs arrive bit-packed (:mod:`pipeline.core.packed_planes`) and are unpacked one
batch at a time, so the float planes of a whole chunk never exist at once.

On a GPU each batch crosses PCIe once, as bits, and is unpacked there, whatever the number of
nets: on an H100 the nine Maia nets run 159,471 positions/s, while one pageable copy of float
planes moves 239,026 positions/s, so a float copy per net capped the bank below 27,000
positions/s (11,922 measured; ``bench/gpu/bench_gpu_nets.py``). The way back is as narrow: a
job's policies are reduced where the net ran (``NetJob.stats``, :mod:`pipeline.nets.policy_stats`)
to the few numbers per position that features need, and a strength net's one-hot played move
travels as its index (:class:`OneHot`).
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

from pipeline.core.packed_planes import PackedPlanes
from pipeline.nets.evaluator import DTYPES, default_device, make_evaluator
from pipeline.nets.loading import load_net
from pipeline.nets.policy_stats import PolicyStats, policy_stats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gather:
    """Entries of a (B, K) array: ``[rows, cols]``, shape (L,), in CSR order (rows sorted).

    Chess passes each position's legal moves this way (~30 of 1858 policy entries), so the
    policy statistics (:mod:`pipeline.nets.policy_stats`) see a position's legal list without a
    (B, 1858) mask crossing PCIe.
    """

    rows: np.ndarray | torch.Tensor  # (L,) int64 row within the batch
    cols: np.ndarray | torch.Tensor  # (L,) int64 column


@dataclass(frozen=True)
class OneHot:
    """A (B, size) one-hot input given by its (B,) indices: the played move of a strength net.

    Only the indices travel; the bank expands them where the nets run (on a GPU, 8 bytes a
    position instead of 1.4 kB (Go) or 7.4 kB (chess) of floats).
    """

    index: np.ndarray  # (B,) int64
    size: int


# Builds the named inputs of rows [start, stop) of a chunk's positions: planes as the packed
# rows (PackedPlanes.rows), which the bank unpacks where its nets run; one-hot rows as their
# indices; other inputs as arrays (float arrays feed nets, bool and integer arrays feed the
# policy statistics); and the Gather entries that statistics name.
Input = np.ndarray | PackedPlanes | Gather | OneHot
InputSource = Callable[[int, int], dict[str, Input]]


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
    # policy output name → its statistics: that output comes back as "<name>.<stat>" arrays
    # (pipeline.nets.policy_stats) instead of whole
    stats: Mapping[str, PolicyStats] = field(default_factory=dict)


@dataclass
class NetTimer:
    """Seconds spent inside net calls vs in the step around them (the issue's 80 % target)."""

    net_s: float = 0.0
    positions: int = 0
    calls: int = 0
    per_net_s: dict[str, float] = field(default_factory=dict)


class NetBank:
    """Loaded nets by model name, each behind one :class:`pipeline.nets.evaluator.Evaluator`."""

    def __init__(
        self,
        models: list[str],
        *,
        backend: str,
        precision: str,
        batch_size: int,
        compile: bool = False,  # torch backend: torch.compile each net (ExtractConfig.compile)
        cuda_graphs: bool = False,  # and replay them as CUDA graphs (ExtractConfig.cuda_graphs)
        device: str | None = None,
        cache_dir: Path | None = None,
        threads: int | None = None,  # CPU: torch threads; None or 0: torch's default
    ) -> None:
        self.device = device or default_device()
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
        self.input_dtype = DTYPES[precision]
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
                compile=compile,
                cuda_graphs=cuda_graphs,
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

        Returns ``{job.key: {name: (n, …) array}}``: each plain output under its name, each
        policy with statistics as ``"<output>.<stat>"`` arrays (``pipeline.nets.policy_stats``).
        """
        parts: dict[str, dict[str, list[np.ndarray]]] = {job.key: {} for job in jobs}
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
                for name, array in result.items():
                    parts[job.key].setdefault(name, []).append(array)
        return {key: {o: np.concatenate(v) for o, v in outs.items()} for key, outs in parts.items()}

    def _evaluate(self, evaluator, feed: dict, job: NetJob, inputs: dict) -> dict:
        """The job's outputs for one batch as numpy, policies reduced where the net ran."""
        if self.input_device is None:
            outputs = {o: torch.from_numpy(v) for o, v in evaluator(feed).items()}
        else:
            outputs = evaluator.run_on_device(feed)
        result = {}
        for o in job.outputs:
            if o in job.stats:
                stats = policy_stats(outputs[o], job.stats[o], inputs)
                result.update({f"{o}.{name}": stats[name].cpu().numpy() for name in stats})
            else:
                result[o] = outputs[o].float().cpu().numpy()
        return result

    def _place(self, inputs: Mapping[str, Input]) -> dict:
        """Every input where the nets run, once per batch: planes unpacked, one-hot rows
        expanded, float arrays in the nets' dtype, bool and integer arrays and Gathers as
        tensors for the policy statistics."""
        device = self.input_device
        placed = {}
        for key, value in inputs.items():
            if isinstance(value, Gather):
                placed[key] = Gather(
                    _tensor(np.asarray(value.rows, np.int64), device),
                    _tensor(np.asarray(value.cols, np.int64), device),
                )
            elif isinstance(value, OneHot):
                index = _tensor(np.asarray(value.index, np.int64), device)
                hot = torch.nn.functional.one_hot(index, value.size)  # (B, size) int64
                # CPU evaluators take numpy float32
                placed[key] = hot.float().numpy() if device is None else hot.to(self.input_dtype)
            elif isinstance(value, PackedPlanes):
                placed[key] = (
                    value.unpack()
                    if device is None
                    else unpack_on_device(value, device, self.input_dtype)
                )
            elif np.asarray(value).dtype.kind == "f":  # a net input
                placed[key] = (
                    value
                    if device is None
                    else _tensor(np.asarray(value, np.float32), device).to(self.input_dtype)
                )
            else:  # bool / integer: read by the policy statistics
                placed[key] = _tensor(np.asarray(value), device)
        return placed


def _tensor(array: np.ndarray, device: torch.device | None) -> torch.Tensor:
    """``array`` as a tensor on ``device`` (None: the CPU, sharing memory)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor if device is None else tensor.to(device)
