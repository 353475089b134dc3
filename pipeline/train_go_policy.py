"""Train the rank-conditioned Go imitation policy: ``kibitz train policy go``.

Each position is labelled with the rank of the player to move (the games table's
``black_rank`` / ``white_rank``: Fox's 5k…9d in the selected sets); the loss is the cross-entropy
over the legal moves of the logits at that rank (``pipeline/go_rank_policy.py`` computes all
ranks at once; training reads the mover's). Trained ranks are the ones present in the training
games; the model header lists them, and ranks without games (10k…6k) are extrapolated.

Evaluation (evaluation split): move-matching accuracy and mean log-likelihood per rank group
with the net conditioned on the mover's own rank, and the matrix "net conditioned on rank group
a (its representative rank), games of group b" whose diagonal should be best per column.

    kibitz train policy go --games kibitz-out/games --out runs/go-policy --max-minutes 10
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from pipeline import tracking
from pipeline.data_split import SplitConfig
from pipeline.go_rank_policy import (
    GO_POLICY_RANKS,
    GoRankPolicyConfig,
    GoRankPolicyNet,
    rank_indices,
)
from pipeline.model_export import GO_POLICY_FORMAT, ExportedModel, export_model
from pipeline.sscore_batches import GO_DEFAULT_KOMI, GO_RANK_GROUPS, PositionPool, build_pool
from pipeline.train_loop import (
    TimeBudget,
    TrainState,
    legal_mask,
    load_checkpoint,
    lr_at,
    masked_log_softmax,
    save_checkpoint,
    seed_everything,
    set_lr,
)
from pipeline.training_games import load_split_games, read_games

logger = logging.getLogger(__name__)

EXPERIMENT = "kibitz-train-go-policy"
# The rank a rank group is represented by when the net is conditioned on a group.
GROUP_REPRESENTATIVE = {"3-5k": "4k", "1-2k": "2k", **{g: g for g in GO_RANK_GROUPS[2:]}}


@dataclass
class GoPolicyTrainConfig:
    """Everything that decides a run; saved in checkpoints, MLflow and the model card."""

    blocks: int = 6
    channels: int = 64
    head_channels: int = 32
    batch_size: int = 64
    positions_per_instance: int = 16  # random positions kept per player instance
    max_train_games: int | None = None  # None: all training games (Go encodes ~5k positions/s)
    max_validation_games: int = 300
    max_evaluation_games: int = 600
    lr: float = 2e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 50
    max_steps: int = 6000
    final_lr_fraction: float = 0.05
    epoch_steps: int | None = None  # None: one pass over the pool per epoch
    validation_positions: int = 2048
    checkpoint_every: int = 100
    seed: int = 0
    komi: float = GO_DEFAULT_KOMI
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    split_salt: str = SplitConfig().salt
    log_every: int = 20

    def net_config(self) -> GoRankPolicyConfig:
        return GoRankPolicyConfig(self.blocks, self.channels, self.head_channels)

    def split_config(self) -> SplitConfig:
        train, validation, evaluation = self.split_fractions
        return SplitConfig(train, validation, evaluation, self.split_salt)

    def resume_keys(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items() if k != "log_every"
        }


@dataclass
class PolicyEvaluation:
    """Per-group quality at the mover's own rank, and the group × group matrix."""

    groups: tuple[str, ...]
    accuracy: np.ndarray  # (R,) % top-1 = played, own rank
    loglik: np.ndarray  # (R,) mean log-likelihood of the played move, own rank
    positions: np.ndarray  # (R,)
    matrix_accuracy: (
        np.ndarray
    )  # (A, B) % conditioned on group a's representative, games of group b
    matrix_loglik: np.ndarray  # (A, B)

    @property
    def diagonal_best_loglik(self) -> int:
        """Columns (game groups) whose best conditioning group is their own."""
        return int((self.matrix_loglik.argmax(axis=0) == np.arange(len(self.groups))).sum())

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": list(self.groups),
            "accuracy": [round(float(v), 2) for v in self.accuracy],
            "loglik": [round(float(v), 4) for v in self.loglik],
            "positions": [int(v) for v in self.positions],
            "matrix_accuracy": np.round(self.matrix_accuracy, 2).tolist(),
            "matrix_loglik": np.round(self.matrix_loglik, 4).tolist(),
            "diagonal_best_loglik": self.diagonal_best_loglik,
        }

    def to_markdown(self) -> str:
        lines = [
            "| rank group | positions | accuracy % (own rank) | mean log-likelihood |",
            "|---|---|---|---|",
        ]
        for g, n, a, ll in zip(
            self.groups, self.positions, self.accuracy, self.loglik, strict=True
        ):
            lines.append(f"| {g} | {n} | {a:.1f} | {ll:.3f} |")
        lines += [
            "",
            "Mean log-likelihood, net conditioned on row group (representative rank), games of column group:",
            "",
        ]
        lines.append("| cond \\ games | " + " | ".join(self.groups) + " |")
        lines.append("|---" * (len(self.groups) + 1) + "|")
        best = self.matrix_loglik.argmax(axis=0)
        for a, g in enumerate(self.groups):
            cells = [
                f"**{v:.3f}**" if best[b] == a else f"{v:.3f}"
                for b, v in enumerate(self.matrix_loglik[a])
            ]
            lines.append(f"| {g} ({GROUP_REPRESENTATIVE[g]}) | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(
            f"Bold: the best conditioning of each column; it is the column's own group in {self.diagonal_best_loglik} of {len(self.groups)} columns."
        )
        return "\n".join(lines)


@dataclass
class PolicyTrainResult:
    steps: int
    train_seconds: float
    positions_per_second: float
    history: list[dict[str, float]]
    trained_ranks: list[str]
    evaluation: PolicyEvaluation | None = None
    exported: ExportedModel | None = None
    pools: dict[str, int] = field(default_factory=dict)


def position_ranks(pool: PositionPool) -> np.ndarray:
    """(N,) rank-axis index of each position's mover (-1 outside GO_POLICY_RANKS)."""
    return rank_indices(pool.instance_rank)[pool.position_instance]


def _inputs(pool: PositionPool, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(pool.planes[rows]).float(), torch.from_numpy(pool.global_[rows])


def _loss(
    net: GoRankPolicyNet, pool: PositionPool, rows: np.ndarray, ranks: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy at the movers' ranks and the top-1 hits: (scalar, (B,) bool)."""
    h = net.features(*_inputs(pool, rows))  # (B, H, 361)
    all_logits = net.rank_logits(h, slice(None))  # (B, R, 362)
    logits = all_logits[torch.arange(len(rows)), torch.from_numpy(ranks)]  # (B, 362)
    logp = masked_log_softmax(
        logits, legal_mask(pool.legal_offsets, pool.legal_index, rows, logits.shape[1])
    )
    target = torch.from_numpy(pool.played[rows])
    return -logp[torch.arange(len(rows)), target].mean(), logp.argmax(dim=1) == target


@torch.inference_mode()
def validate(
    net: GoRankPolicyNet, pool: PositionPool, config: GoPolicyTrainConfig
) -> dict[str, float]:
    rng = np.random.default_rng(config.seed + 1)
    ranks = position_ranks(pool)
    usable = np.flatnonzero(ranks >= 0)
    rows = np.sort(
        rng.choice(usable, size=min(config.validation_positions, len(usable)), replace=False)
    )
    net.eval()
    losses, hits = [], []
    for start in range(0, len(rows), 256):
        chunk = rows[start : start + 256]
        loss, hit = _loss(net, pool, chunk, ranks[chunk])
        losses.append(float(loss) * len(chunk))
        hits.append(hit.numpy())
    net.train()
    return {
        "val_loss": sum(losses) / len(rows),
        "val_accuracy": 100.0 * float(np.concatenate(hits).mean()),
    }


@torch.inference_mode()
def evaluate_policy(
    net: GoRankPolicyNet, pool: PositionPool, *, batch: int = 256
) -> PolicyEvaluation:
    """Quality per rank group (own rank) and the conditioning matrix, over all pool positions."""
    net.eval()
    groups = GO_RANK_GROUPS
    reps = np.array([GO_POLICY_RANKS.index(GROUP_REPRESENTATIVE[g]) for g in groups])  # (A,)
    ranks = position_ranks(pool)
    group = pool.instance_group[pool.position_instance].astype(np.int64)
    rows = np.flatnonzero((ranks >= 0) & (group >= 0))
    own_hit = np.zeros(len(rows), bool)
    own_ll = np.zeros(len(rows))
    rep_hit = np.zeros((len(reps), len(rows)), bool)
    rep_ll = np.zeros((len(reps), len(rows)))
    for start in range(0, len(rows), batch):
        sl = slice(start, start + batch)
        chunk = rows[sl]
        logits = net(*_inputs(pool, chunk))  # (b, R, 362)
        mask = legal_mask(pool.legal_offsets, pool.legal_index, chunk, logits.shape[2])[
            :, None
        ]  # (b, 1, 362)
        logp = torch.log_softmax(logits.masked_fill(~mask, -1e9), dim=2)  # (b, R, 362)
        target = torch.from_numpy(pool.played[chunk])
        played_lp = logp[torch.arange(len(chunk)), :, target]  # (b, R)
        top = logp.argmax(dim=2) == target[:, None]  # (b, R)
        idx = torch.from_numpy(ranks[chunk])
        own_ll[sl] = played_lp[torch.arange(len(chunk)), idx].numpy()
        own_hit[sl] = top[torch.arange(len(chunk)), idx].numpy()
        rep_ll[:, sl] = played_lp[:, torch.from_numpy(reps)].T.numpy()
        rep_hit[:, sl] = top[:, torch.from_numpy(reps)].T.numpy()
    g = group[rows]
    counts = np.bincount(g, minlength=len(groups))
    denom = np.maximum(counts, 1)

    def per_group(values: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=values.astype(np.float64), minlength=len(groups)) / denom

    return PolicyEvaluation(
        groups=groups,
        accuracy=100.0 * per_group(own_hit),
        loglik=per_group(own_ll),
        positions=counts,
        matrix_accuracy=100.0 * np.stack([per_group(rep_hit[a]) for a in range(len(reps))]),
        matrix_loglik=np.stack([per_group(rep_ll[a]) for a in range(len(reps))]),
    )


def _pool(
    games_dir: Path,
    split: str,
    max_games: int | None,
    config: GoPolicyTrainConfig,
    seed: int,
    table,
) -> PositionPool:
    games = load_split_games(
        games_dir, "go", split, max_games=max_games, split_config=config.split_config(), table=table
    )
    t0 = time.perf_counter()
    pool = build_pool(
        games,
        "go",
        positions_per_instance=config.positions_per_instance,
        seed=seed,
        komi=config.komi,
    )
    logger.info(
        "%s pool: %d games, %d positions (%.0f s)",
        split,
        games.num_rows,
        len(pool),
        time.perf_counter() - t0,
    )
    return pool


def train(
    config: GoPolicyTrainConfig,
    games_dir: Path,
    out_dir: Path,
    *,
    max_minutes: float | None = None,
    resume: bool = False,
    progress: bool = True,
    tracking_uri: str | None = None,
    evaluate: bool = True,
    export: bool = True,
    stop_after: int | None = None,
) -> PolicyTrainResult:
    """Train (or resume) into ``out_dir``: checkpoints/, model files, MLflow run.

    ``stop_after``: end this invocation after that many steps (a deterministic stand-in for the
    time budget, for staged runs and tests); the schedule still spans ``config.max_steps``.
    """
    out_dir = Path(out_dir)
    budget = TimeBudget(max_minutes)
    rng = seed_everything(config.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    net = GoRankPolicyNet(config.net_config())
    optimizer = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    state = TrainState(0, rng, [], 0.0)
    ckpt_dir = out_dir / "checkpoints"
    if resume:
        state = load_checkpoint(ckpt_dir, net, optimizer, config.resume_keys())
    table = read_games(games_dir, "go")
    train_pool = _pool(games_dir, "train", config.max_train_games, config, config.seed, table)
    val_pool = _pool(
        games_dir, "validation", config.max_validation_games, config, config.seed + 1, table
    )
    ranks = position_ranks(train_pool)
    usable = np.flatnonzero(ranks >= 0)
    trained = sorted(
        {GO_POLICY_RANKS[r] for r in np.unique(ranks[usable])}, key=GO_POLICY_RANKS.index
    )
    epoch_steps = config.epoch_steps or max(1, len(usable) // config.batch_size)
    params = {**config.resume_keys(), "games_dir": str(games_dir), "epoch_steps": epoch_steps,
              "train_positions": len(usable), "trained_ranks": ",".join(trained)}  # fmt: skip
    with tracking.tracked_run(
        EXPERIMENT, run_name="go-policy", tracking_uri=tracking_uri, params=params
    ):
        net.train()
        bar = tqdm(
            total=config.max_steps, initial=state.step, disable=not progress, desc="go policy"
        )
        t_start, seconds_before = time.perf_counter(), state.train_seconds
        seen, window_t, window_pos = 0, time.perf_counter(), 0
        stop_step = (
            config.max_steps
            if stop_after is None
            else min(config.max_steps, state.step + stop_after)
        )
        while state.step < stop_step and not budget.spent:
            set_lr(optimizer, lr_at(state.step, base_lr=config.lr, total_steps=config.max_steps,
                                    warmup_steps=config.warmup_steps, final_fraction=config.final_lr_fraction))  # fmt: skip
            rows = np.sort(usable[state.rng.integers(0, len(usable), size=config.batch_size)])
            loss, _ = _loss(net, train_pool, rows, ranks[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state.step += 1
            seen += len(rows)
            window_pos += len(rows)
            if state.step % config.log_every == 0:
                rate = window_pos / max(time.perf_counter() - window_t, 1e-9)
                window_t, window_pos = time.perf_counter(), 0
                tracking.log_metrics(
                    {"train_loss": float(loss), "positions_per_s": rate}, step=state.step
                )
                bar.set_postfix(loss=f"{float(loss):.3f}", pos_s=f"{rate:.0f}")
            bar.update(1)
            at_epoch_end = state.step % epoch_steps == 0
            if at_epoch_end or state.step % config.checkpoint_every == 0:
                state.train_seconds = seconds_before + time.perf_counter() - t_start
                if at_epoch_end:
                    row = {
                        "step": state.step,
                        "epoch": state.step // epoch_steps,
                        **validate(net, val_pool, config),
                    }
                    state.history.append(row)
                    tracking.log_metrics(row, step=state.step)
                save_checkpoint(ckpt_dir, net, optimizer, state, config.resume_keys())
        bar.close()
        run_seconds = time.perf_counter() - t_start
        state.train_seconds = seconds_before + run_seconds
        if not state.history or state.history[-1]["step"] != state.step:
            row = {
                "step": state.step,
                "epoch": state.step / epoch_steps,
                **validate(net, val_pool, config),
            }
            state.history.append(row)
            tracking.log_metrics(row, step=state.step)
        save_checkpoint(ckpt_dir, net, optimizer, state, config.resume_keys())
        result = PolicyTrainResult(
            steps=state.step,
            train_seconds=state.train_seconds,
            positions_per_second=seen / max(run_seconds, 1e-9),
            history=state.history,
            trained_ranks=trained,
            pools={"train": len(train_pool), "validation": len(val_pool)},
        )
        if evaluate:
            eval_pool = _pool(
                games_dir, "evaluation", config.max_evaluation_games, config, config.seed + 3, table
            )
            result.evaluation = evaluate_policy(net, eval_pool)
            tracking.log_metrics(
                {
                    f"eval_accuracy_{g}": float(v)
                    for g, v in zip(GO_RANK_GROUPS, result.evaluation.accuracy, strict=True)
                }
            )
            tracking.log_metrics({"eval_diagonal_best": result.evaluation.diagonal_best_loglik})
        if export:
            header = {
                "format": GO_POLICY_FORMAT,
                "game": "go",
                "net": config.net_config().to_dict(),
                "ranks": list(GO_POLICY_RANKS),
                "trained_ranks": trained,
                "train": {
                    **params,
                    "steps": state.step,
                    "train_seconds": round(state.train_seconds, 1),
                },
                "quality": result.evaluation.to_dict() if result.evaluation else None,
                "history": state.history,
            }
            result.exported = export_model(net, out_dir, header=header, card=None)
            tracking.log_file(result.exported.weights, artifact_path="model")
            tracking.log_file(result.exported.onnx, artifact_path="model")
    return result
