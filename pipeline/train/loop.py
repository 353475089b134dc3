"""The parts every Kibitz training command shares: settings, seeding, LR schedule, the training
loop with its logging, per-epoch validation and checkpoints, the time budget and the export.

Each trainer (``pipeline/train/sscore.py``, ``pipeline/train/go_policy.py``) supplies only what is
its own: how to build the net, a *step function* (draw a batch from the sampling generator,
return the loss) and a validation function; :func:`run_loop` does the rest identically for both.

Determinism: all sampling draws from one numpy ``Generator`` whose state is saved in every
checkpoint together with the net, the optimiser and the step, and the schedule depends on the
step only (never on the clock), so ``--resume`` continues bit-for-bit where an uninterrupted run
with the same seed would be (on the same machine and thread count). The time budget only decides
WHERE a run stops, which is why a stopped run can always be resumed.

Checkpoints are written atomically (``*.tmp`` then ``os.replace``): a run killed while writing
keeps its previous checkpoint.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from pipeline.core import tracking
from pipeline.core.data_split import SplitConfig
from pipeline.nets.model_export import ExportedModel, export_model
from pipeline.train.device import device_label, module_device, resolve_device
from pipeline.train.games import ingest_summary
from pipeline.train.sscore_batches import GO_DEFAULT_KOMI

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "last.pt"


@dataclass(kw_only=True)
class TrainSettings:
    """Settings every trainer has; each trainer's config adds its own fields (keyword-only)."""

    positions_per_instance: int = 16  # the pool keeps this many random positions per instance
    max_train_games: int | None = None  # None: every training game of the split
    max_validation_games: int = 600
    max_evaluation_games: int | None = None  # None: the whole evaluation split
    lr: float = 2e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    max_steps: int = 4000  # length of the cosine schedule and hard stop
    final_lr_fraction: float = 0.02
    epoch_steps: int | None = None  # None: one pass over the training data per epoch
    checkpoint_every: int = 200
    seed: int = 0
    komi: float = GO_DEFAULT_KOMI  # Go: komi of Fox's KM[0] games
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)  # train, validation, evaluation
    split_salt: str = SplitConfig().salt
    log_every: int = 20
    # Registry name or ``model.kibitz.pt`` path of a model of the same format and net shape
    # whose weights a new run starts from (continued training); the schedule starts afresh.
    # Several, comma-separated: the run starts from the mean of their weights (a weight average
    # of one line of runs, :func:`initial_weights`).
    init_from: str | None = None
    # Moves of each instance in the final evaluation; None: all its moves (an instance is a
    # player's moves in one game, and fewer moves only add noise).
    evaluation_positions_per_instance: int | None = None
    # A validation metric (a key of the per-epoch rows, e.g. ``val_min_gap_z``) to maximise:
    # the run then evaluates and exports the weights of the validation where it was highest
    # (early stopping by validation games) instead of those of the last step.
    select_best: str | None = None
    # Where the net trains: auto (a CUDA GPU when there is one, else the CPU), cpu, cuda, cuda:N
    # (``pipeline/train/device.py``). Not a resume key: a run may resume on another device.
    device: str = "auto"

    def split_config(self) -> SplitConfig:
        train, validation, evaluation = self.split_fractions
        return SplitConfig(train, validation, evaluation, self.split_salt)

    def resume_keys(self) -> dict[str, Any]:
        """Settings a resumed run must share with its checkpoint (the time budget may differ)."""
        return {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in asdict(self).items()
            if k not in ("log_every", "device")
        }


@dataclass
class StepOutput:
    """What a trainer's step function returns for one batch."""

    loss: torch.Tensor  # scalar to minimise
    metrics: dict[str, float]  # logged as train_<name> every log_every steps
    positions: int  # positions in the batch (for positions/s)


class CheckpointError(FileNotFoundError):
    """``--resume`` without a usable checkpoint, or one of a different configuration."""


def seed_everything(seed: int) -> np.random.Generator:
    """Seed torch, numpy and random; the returned generator drives all batch sampling."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    return np.random.default_rng(seed)


def lr_at(
    step: int, *, base_lr: float, total_steps: int, warmup_steps: int, final_fraction: float
) -> float:
    """Linear warm-up, then cosine decay from ``base_lr`` to ``base_lr * final_fraction``."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return base_lr * (
        final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))
    )


@dataclass
class TrainState:
    """What a checkpoint restores."""

    step: int
    rng: np.random.Generator
    history: list[dict[str, float]]  # one row per validation (epoch)
    train_seconds: float  # training time summed over all resumed runs
    commands: list[str] = field(default_factory=list)  # command line of each invocation
    # The model of ``init_from`` as the run started: name, sha256, steps, training seconds,
    # positions seen and commands (the model card lists them; a later registration under the
    # same name cannot change what is recorded here).
    init: dict[str, Any] | None = None
    # With ``select_best``: the weights (CPU copies) of the best validation so far (which one
    # it is follows from ``history``: :func:`selected_validation`). Saved in the checkpoint,
    # so the selection survives a resume.
    best_weights: dict[str, torch.Tensor] | None = None


def save_checkpoint(
    folder: Path,
    net: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    config: dict[str, Any],
) -> Path:
    """Write ``folder/last.pt`` atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CHECKPOINT_NAME
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "net": net.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": state.step,
            "rng": state.rng.bit_generator.state,
            "history": state.history,
            "train_seconds": state.train_seconds,
            "commands": state.commands,
            "init": state.init,
            "best_net": state.best_weights,
            "config": config,
        },
        tmp,
    )
    os.replace(tmp, path)
    return path


def selected_validation(history: list[dict[str, float]], metric: str) -> dict[str, Any] | None:
    """{"metric", "value", "step"} of the validation row with the highest ``metric`` (the
    first of equal maxima: fewer steps for the same figure); None without validations."""
    if not history:
        return None
    values = [row[metric] for row in history]
    i = int(np.argmax(values))
    return {"metric": metric, "value": float(values[i]), "step": history[i]["step"]}


def keep_if_best(net: nn.Module, state: TrainState, metric: str) -> bool:
    """After a validation (the last row of ``state.history``): if it is the selected one
    (:func:`selected_validation`), keep a copy of the net's weights in ``state``."""
    row = state.history[-1]
    if metric not in row:
        raise KeyError(f"select_best: no validation metric {metric!r}; there are {sorted(row)}")
    if selected_validation(state.history, metric)["step"] != row["step"]:
        return False
    state.best_weights = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    return True


def restore_best(net: nn.Module, state: TrainState) -> None:
    """Load the kept weights of the best validation (if any) into ``net``: what a run with
    ``select_best`` evaluates and exports."""
    if state.best_weights is None:
        return
    net.load_state_dict(state.best_weights)
    logger.info("restored the weights of the best validation")


def load_checkpoint(
    folder: Path, net: nn.Module, optimizer: torch.optim.Optimizer, config: dict[str, Any]
) -> TrainState:
    """Restore net, optimiser and sampling state; the run's config must match the saved one."""
    path = folder / CHECKPOINT_NAME
    if not path.is_file():
        raise CheckpointError(f"--resume: no checkpoint {str(path)!r}")
    saved = torch.load(path, map_location="cpu", weights_only=False)
    differ = {
        k: (saved["config"].get(k), v) for k, v in config.items() if saved["config"].get(k) != v
    }
    if differ:
        raise CheckpointError(
            f"--resume: {str(path)!r} was written with other settings (saved, now): {differ!r}"
        )
    net.load_state_dict(saved["net"])
    optimizer.load_state_dict(saved["optimizer"])
    rng = np.random.default_rng()
    rng.bit_generator.state = saved["rng"]
    return TrainState(
        saved["step"],
        rng,
        list(saved["history"]),
        float(saved["train_seconds"]),
        list(saved.get("commands", [])),  # absent in checkpoints of older Kibitz versions
        saved.get("init"),
        saved.get("best_net"),
    )


class TimeBudget:
    """Wall-clock budget of one invocation; ``None`` minutes means no limit."""

    def __init__(self, minutes: float | None) -> None:
        self.deadline = None if minutes is None else time.monotonic() + 60.0 * minutes

    @property
    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """The schedule's ``lr`` for every group, times the group's ``lr_scale`` where it has one
    (e.g. a fine-tuned pretrained trunk that learns slower than a fresh head)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


def positions_trained(train: dict[str, Any]) -> int:
    """Training positions behind a model's weights: its run's and those of the model it
    started from (``init_from``), from the ``train`` record of its header."""
    own = train.get("positions_trained")  # absent in headers of older Kibitz versions
    if own is None:
        own = round(train["positions_per_second"] * train["train_seconds"])
    init = train.get("init_from_model")
    return own + (int(init["positions"]) if init else 0)


def _weight_shapes(net: nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(t.shape) for name, t in net.state_dict().items()}


def _model_weights(
    name_or_path: str, fmt: str, net_config: dict[str, Any], built: nn.Module
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(state_dict, record) of one model a new run starts from, checked against ``built``."""
    from pipeline.nets.loading import load_net
    from pipeline.nets.registry import model_sha256

    net = load_net(name_or_path)
    header = getattr(net, "header", {})
    if header.get("format") != fmt:
        raise ValueError(
            f"--init-from {name_or_path!r} is a {header.get('format')!r} model, expected {fmt!r}"
        )
    if _weight_shapes(net) != _weight_shapes(built):
        raise ValueError(
            f"--init-from {name_or_path!r} has net {header.get('net')!r}; this run builds "
            f"{net_config!r} (set --blocks/--channels to match)"
        )
    train = header.get("train") or {}
    record = {
        "model": str(name_or_path),
        "sha256": model_sha256(name_or_path),
        "steps": int(train.get("steps", 0)),
        "train_seconds": float(train.get("train_seconds", 0.0)),
        "positions": positions_trained(train) if train else 0,
        "commands": list(train.get("commands", [])),
        "init_from_model": train.get("init_from_model"),  # its own start, if it had one
    }
    return net.state_dict(), record


def initial_weights(
    names: str, fmt: str, net_config: dict[str, Any], built: nn.Module
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(state_dict, record) of the model a new run starts from (``--init-from``).

    The model must be of format ``fmt`` with exactly the weights of ``built``, the run's net:
    anything else would load only part of them, and a run that silently starts half-trained is
    worse than an error. Settings of how a net runs rather than of its weights (the Go policy's
    board symmetries) may differ.

    ``names`` may list several models, comma-separated: the run then starts from the mean of
    their weights. Averaging the ends of successive schedules of one line of runs (a "model
    soup", Wortsman et al. 2022; Izmailov et al.'s SWA) lands nearer the middle of the basin
    they wander in than any one of them, which generalises better (docs/research/log-nets.md measures it
    on the Go policy). Floating-point tensors are averaged, batch-norm statistics included;
    counters are the last model's. The record is that of the model with the most training
    positions behind it (the line's end: the others' positions are already behind it), with
    the others listed under ``averaged_with``.
    """
    parts = [n.strip() for n in names.split(",") if n.strip()]
    if not parts:
        raise ValueError(f"--init-from {names!r} names no model")
    loaded = [_model_weights(n, fmt, net_config, built) for n in parts]
    if len(loaded) == 1:
        return loaded[0]
    states = [state for state, _ in loaded]
    weights = {
        key: torch.stack([s[key] for s in states]).mean(dim=0) if last.is_floating_point() else last
        for key, last in states[-1].items()
    }
    end = max(range(len(loaded)), key=lambda i: (loaded[i][1]["positions"], i))
    record = {
        **loaded[end][1],
        "averaged_with": [
            {k: r[k] for k in ("model", "sha256", "positions")}
            for i, (_, r) in enumerate(loaded)
            if i != end
        ],
    }
    return weights, record


def start_run(
    build_net: Callable[[], nn.Module],
    settings: TrainSettings,
    checkpoint_dir: Path,
    *,
    resume: bool,
    command: str | None = None,
    init_shape: tuple[str, dict[str, Any]] | None = None,
    param_groups: Callable[[nn.Module], list[dict[str, Any]]] | None = None,
) -> tuple[nn.Module, torch.optim.Optimizer, TrainState]:
    """Seed, build the net (after seeding: its initial weights depend on the seed) on
    ``settings.device``, AdamW, and the state — restored from ``checkpoint_dir`` when
    ``resume``; ``command`` (this invocation's command line) is appended to the state's
    commands, which the model card lists.

    A new run with ``settings.init_from`` starts from that model's weights instead of random
    ones; ``init_shape`` = (format, net config dict): the model must be of that format with the
    built net's weights exactly (the dict names the run's net in the error).
    ``param_groups(net)``: AdamW's parameter groups (each may carry an ``lr_scale``, see
    :func:`set_lr`); default one group of all the net's parameters.
    """
    rng = seed_everything(settings.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    net = build_net().to(resolve_device(settings.device))
    init = None
    if settings.init_from and not resume:
        if init_shape is None:
            raise ValueError("init_from needs the run's model format and net config")
        weights, init = initial_weights(settings.init_from, *init_shape, net)
        net.load_state_dict(weights)
        others = [o["model"] for o in init.get("averaged_with", [])]
        logger.info(
            "starting from %s (sha256 %s)%s", init["model"], init["sha256"],
            f", averaged with {', '.join(others)}" if others else "",
        )  # fmt: skip
    optimizer = torch.optim.AdamW(
        param_groups(net) if param_groups else net.parameters(),
        lr=settings.lr,
        weight_decay=settings.weight_decay,
    )
    state = TrainState(0, rng, [], 0.0, init=init)
    if resume:
        state = load_checkpoint(checkpoint_dir, net, optimizer, settings.resume_keys())
        logger.info("resumed at step %d", state.step)
    if command:
        state.commands.append(command)
    return net, optimizer, state


def run_loop(
    net: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: TrainState,
    settings: TrainSettings,
    *,
    step: Callable[[np.random.Generator], StepOutput],
    validate: Callable[[], dict[str, float]],
    epoch_steps: int,
    checkpoint_dir: Path,
    budget: TimeBudget,
    stop_after: int | None = None,
    progress: bool = True,
    desc: str = "train",
) -> float:
    """Train until ``settings.max_steps``, ``stop_after`` more steps or the budget; returns the
    positions/s of this invocation.

    Every step: LR from the schedule, ``step(state.rng)``, backward, AdamW. Every ``log_every``
    steps the step's metrics and positions/s go to MLflow and the progress bar; at each epoch end
    (every ``epoch_steps``) ``validate()`` adds a history row; a checkpoint is written at epoch
    ends, every ``checkpoint_every`` steps and when the loop stops (after a last validation if
    the stop is not an epoch end), so any stop can be resumed exactly.
    """
    keys = settings.resume_keys()
    net.train()
    bar = tqdm(total=settings.max_steps, initial=state.step, disable=not progress, desc=desc)
    t_start, seconds_before = time.perf_counter(), state.train_seconds
    seen, window_t, window_pos = 0, time.perf_counter(), 0
    stop_step = settings.max_steps
    if stop_after is not None:
        stop_step = min(stop_step, state.step + stop_after)

    def validation_row(epoch: float) -> None:
        row = {"step": state.step, "epoch": epoch, **validate()}
        state.history.append(row)
        tracking.log_metrics(row, step=state.step)
        logger.info("validation: %s", json.dumps(row))
        if settings.select_best:
            keep_if_best(net, state, settings.select_best)

    while state.step < stop_step and not budget.spent:
        set_lr(optimizer, lr_at(state.step, base_lr=settings.lr, total_steps=settings.max_steps,
                                warmup_steps=settings.warmup_steps,
                                final_fraction=settings.final_lr_fraction))  # fmt: skip
        out = step(state.rng)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()
        state.step += 1
        seen += out.positions
        window_pos += out.positions
        if state.step % settings.log_every == 0:
            rate = window_pos / max(time.perf_counter() - window_t, 1e-9)
            window_t, window_pos = time.perf_counter(), 0
            loss = float(out.loss.detach())
            metrics = {"train_loss": loss, **{f"train_{k}": v for k, v in out.metrics.items()}}
            tracking.log_metrics({**metrics, "positions_per_s": rate}, step=state.step)
            bar.set_postfix(loss=f"{loss:.3f}", pos_s=f"{rate:.0f}")
        bar.update(1)
        at_epoch_end = state.step % epoch_steps == 0
        if at_epoch_end or state.step % settings.checkpoint_every == 0:
            state.train_seconds = seconds_before + time.perf_counter() - t_start
            if at_epoch_end:
                validation_row(state.step // epoch_steps)
            save_checkpoint(checkpoint_dir, net, optimizer, state, keys)
    bar.close()
    run_seconds = time.perf_counter() - t_start
    state.train_seconds = seconds_before + run_seconds
    if not state.history or state.history[-1]["step"] != state.step:
        validation_row(state.step / epoch_steps)
    save_checkpoint(checkpoint_dir, net, optimizer, state, keys)
    return seen / max(run_seconds, 1e-9)


def export_tracked(net: nn.Module, out_dir: Path, header: dict[str, Any]) -> ExportedModel:
    """Export weights + ONNX into ``out_dir`` and attach both to the active MLflow run. The net
    is moved to the CPU first, so the exported weights load on machines without a GPU."""
    exported = export_model(net.cpu(), out_dir, header=header, card=None)
    tracking.log_file(exported.weights, artifact_path="model")
    tracking.log_file(exported.onnx, artifact_path="model")
    return exported


def run_params(
    settings: TrainSettings, net: nn.Module, games_dir: Path, **extra: Any
) -> dict[str, Any]:
    """A run's MLflow parameters: its settings, the device it trains on (``cuda:0 (NVIDIA
    H100 80GB HBM3)``), the games folder and what the trainer adds."""
    return {
        **settings.resume_keys(),
        "device": device_label(module_device(net)),
        "games_dir": str(games_dir),
        **extra,
    }


def run_record(
    params: dict[str, Any],
    state: TrainState,
    positions_per_step: int,
    games_dir: Path,
) -> dict[str, Any]:
    """The ``train`` part of an exported model's header: everything its model card reports
    (settings and device, steps, time, speed over all invocations, threads, the commands,
    where the games came from and the model the run started from)."""
    rate = state.step * positions_per_step / max(state.train_seconds, 1e-9)
    metric = params.get("select_best")
    return {
        **params,
        "init_from_model": state.init,
        # the validation whose weights were exported (select_best)
        "selected": selected_validation(state.history, metric) if metric else None,
        "steps": state.step,
        "positions_trained": state.step * positions_per_step,
        "train_seconds": round(state.train_seconds, 1),
        "positions_per_second": round(rate, 1),
        "torch_threads": torch.get_num_threads(),
        "commands": list(state.commands),
        "games": ingest_summary(games_dir),
    }
