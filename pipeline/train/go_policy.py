"""Train the rank-conditioned Go imitation policy: ``kibitz train policy go``.

Each position is labelled with the rank of the player to move (the games table's
``black_rank`` / ``white_rank``: Fox's 5k…9d in the selected sets); the loss is the cross-entropy
over the legal moves of the logits at that rank (``pipeline/nets/go_rank_policy.py`` computes all
ranks at once; training evaluates only each position's own rank). Trained ranks are the ones
present in the training games; the model header lists them, and ranks without games (10k…6k)
are extrapolated.

Evaluation (evaluation split): move-matching accuracy and mean log-likelihood per rank group
with the net conditioned on the mover's own rank, and the matrix "net conditioned on rank group
a (its representative rank), games of group b" whose diagonal should be best per column.

The trunk is Kibitz's residual tower trained from scratch (the default), or with ``trunk`` a
registered KataGo net's trunk, copied exactly and then frozen (only the rank head trains) or
fine-tuned with the head at ``trunk_lr_scale`` × the LR; or, from a trained policy
(``init_from``), only its per-rank layers refit on its own features (``rank-layers``). The
header's ``trunk`` records the KataGo net (registry name, sha256, licence) and the mode; the
exported file holds the trunk's weights, so loading it never needs the KataGo file.

With ``teacher_symmetries`` the ``init_from`` policy, averaged over that many board symmetries,
is a frozen teacher: its move distribution is a soft target beside the played move, so the
one-orientation net learns what the symmetry ensemble reads (:func:`symmetry_teacher`).

With ``precision`` bf16 each step's forward (the teacher's too) runs under bfloat16 autocast
(``pipeline/train/device.py``), the loss in float32; validation, evaluation and the export stay
float32 (``python bench/speed/bench_policy_precision.py`` measures the speed and the loss's change).

    kibitz train policy go --games kibitz-out/games-go --out kibitz-out/go-policy --max-minutes 40
    kibitz train policy go --games kibitz-out/games-go --out kibitz-out/go-policy-katago \
        --trunk katago-g170-b6c96 --trunk-mode frozen --device cuda --batch-size 256
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.core import tracking
from pipeline.core.errors import KibitzError
from pipeline.go_game import spec as go_spec
from pipeline.nets.formats import GO_POLICY_FORMAT
from pipeline.nets.go_rank_policy import (
    BOARD_SYMMETRIES,
    GO_POLICY_RANKS,
    SYMMETRY_COUNTS,
    TRUNK_MODES,
    GoRankPolicyConfig,
    GoRankPolicyNet,
    TrunkError,
    katago_trunk_config,
    policy_on_katago_trunk,
    rank_indices,
)
from pipeline.nets.katago_net import KataGoNet
from pipeline.nets.legal_softmax import legal_mask, masked_log_softmax
from pipeline.nets.model_export import ExportedModel
from pipeline.train.device import check_precision, module_device, step_autocast
from pipeline.train.games import load_split_games, read_games
from pipeline.train.loop import (
    StepOutput,
    TimeBudget,
    TrainSettings,
    export_tracked,
    initial_weights,
    restore_best,
    run_loop,
    run_params,
    run_record,
    start_run,
)
from pipeline.train.sscore_batches import GO_RANK_GROUPS, PositionPool, build_pool

logger = logging.getLogger(__name__)

EXPERIMENT = "kibitz-train-go-policy"
# The rank a rank group is represented by when the net is conditioned on a group: its most
# common rank in the ingested Fox selection (3k: 2,579 of the 3-5k group's 3,806 player
# instances; 1k: 2,697 of 3,652 in 1-2k), whose parameters the training games determine best.
GROUP_REPRESENTATIVE = {"3-5k": "3k", "1-2k": "1k", **{g: g for g in GO_RANK_GROUPS[2:]}}


class TeacherError(KibitzError, ValueError):
    """A self-distillation setting that cannot run: a user error, one line on the command line."""


@dataclass(kw_only=True)
class GoPolicyTrainConfig(TrainSettings):
    """Everything that decides a run; saved in checkpoints, MLflow and the model card."""

    blocks: int = 6  # Kibitz's own trunk only: a KataGo trunk has its file's shape
    channels: int = 64
    head_channels: int = 32
    batch_size: int = 64
    max_validation_games: int = 300
    max_steps: int = 6000
    validation_positions: int = 2048
    # Registry name (or .bin.gz path) of a KataGo net whose trunk the policy starts from;
    # None: Kibitz's residual trunk of blocks × channels, trained from scratch.
    trunk: str | None = None
    # with a trunk: "frozen" (head only), "finetune" (trunk too) or "rank-layers" (the per-rank
    # layers only, on the shared features of the --init-from policy)
    trunk_mode: str = "frozen"
    trunk_lr_scale: float = 0.1  # finetune: the trunk's LR is the schedule's times this
    # Board symmetries the exported model averages its features over (GoRankPolicyConfig):
    # the final evaluation and the model run so; training sees one orientation.
    symmetries: int = 1
    # Each training board under a random one of the 8 symmetries, its features turned back
    # (GoRankPolicyNet.turned_features); validation sees the boards as played.
    random_symmetries: bool = False
    # Self-distillation: > 0 makes the --init-from policy, its features averaged over this many
    # symmetries, a frozen teacher whose move distribution at the mover's rank is a soft target
    # beside the played move (the symmetry ensemble reads moves better than one orientation,
    # and distillation moves part of that into a net that runs one trunk pass; docs/research/log-nets.md).
    teacher_symmetries: int = 0
    teacher_weight: float = 0.5  # the soft target's share of the loss; the played move's 1 − it
    # fp32, or bf16: each step's forward under bfloat16 autocast (step_autocast). Not a resume
    # key, as the device is not: a run may resume at another precision (the card's commands
    # show each invocation's).
    precision: str = "fp32"

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.trunk_mode not in TRUNK_MODES:
            raise TrunkError(f"trunk mode {self.trunk_mode!r} is not one of {TRUNK_MODES!r}")
        if not self.trunk_lr_scale > 0:
            raise TrunkError(f"trunk LR scale must be > 0, got {self.trunk_lr_scale!r}")
        if self.trunk_mode == "rank-layers" and not self.init_from:
            raise TrunkError(
                "trunk mode 'rank-layers' refits a trained policy's rank layers on its own "
                "features: name the policy with --init-from"
            )
        if self.teacher_symmetries:
            if self.teacher_symmetries not in SYMMETRY_COUNTS:
                raise TeacherError(
                    f"teacher symmetries must be one of {SYMMETRY_COUNTS}, "
                    f"got {self.teacher_symmetries}"
                )
            if not self.init_from:
                raise TeacherError(
                    "--teacher-symmetries distils the --init-from policy over board symmetries:"
                    " name the policy with --init-from"
                )
            if not 0 < self.teacher_weight <= 1:
                raise TeacherError(f"teacher weight must be in (0, 1], got {self.teacher_weight!r}")

    def net_config(self) -> GoRankPolicyConfig:
        """The shape of Kibitz's own trunk and head (a KataGo trunk: :func:`katago_trunk_config`)."""
        return GoRankPolicyConfig(self.blocks, self.channels, self.head_channels)

    def resume_keys(self) -> dict[str, Any]:
        """As every trainer's, less the settings this run does not use: without a trunk the
        trunk settings (so checkpoints written before trunks existed still resume), with one
        blocks × channels (the trunk has its KataGo net's shape), unless fine-tuned its LR scale."""
        keys = super().resume_keys()
        # symmetries: how the exported model runs, so a finished run resumed with another
        # count re-exports the same weights
        unused: tuple[str, ...] = ("symmetries", "precision")
        if not self.random_symmetries:  # checkpoints written before it existed still resume
            unused += ("random_symmetries",)
        if not self.teacher_symmetries:  # likewise for those written before the teacher
            unused += ("teacher_symmetries", "teacher_weight")
        unused += (
            ("blocks", "channels") if self.trunk else ("trunk", "trunk_mode", "trunk_lr_scale")
        )
        if self.trunk and self.trunk_mode != "finetune":
            unused += ("trunk_lr_scale",)
        return {k: v for k, v in keys.items() if k not in unused}


@dataclass
class PolicyEvaluation:
    """Per-group quality at the mover's own rank, and the group × group matrix."""

    groups: tuple[str, ...]
    accuracy: np.ndarray  # (R,) % top-1 = played, own rank
    loglik: np.ndarray  # (R,) mean log-likelihood of the played move, own rank
    positions: np.ndarray  # (R,)
    matrix_accuracy: np.ndarray  # (A, B) % conditioned on group a's representative, games of b
    matrix_loglik: np.ndarray  # (A, B)
    # (B,) per column: mean log-likelihood of the own conditioning minus the best other one, and
    # its standard error, paired (both conditionings score the same positions) and clustered by
    # player instance (positions of one game are correlated).
    diagonal_margin: np.ndarray
    diagonal_margin_sem: np.ndarray

    @property
    def diagonal_best_loglik(self) -> int:
        """Columns (game groups) whose best conditioning group is their own."""
        return int((self.matrix_loglik.argmax(axis=0) == np.arange(len(self.groups))).sum())

    @property
    def strictly_falling_columns(self) -> int:
        """Columns whose mean log-likelihood falls with every step of conditioning away from
        their own group, both ways (issue #28: far-rank gaps rising strictly)."""
        m = self.matrix_loglik
        steps = np.diff(m, axis=0)  # (A-1, B): row a+1 minus row a
        above = np.arange(len(steps))[:, None] < np.arange(m.shape[1])[None, :]  # a+1 <= own
        falling = np.where(above, steps > 0, steps < 0)
        return int(falling.all(axis=0).sum())

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": list(self.groups),
            "accuracy": [round(float(v), 2) for v in self.accuracy],
            "loglik": [round(float(v), 4) for v in self.loglik],
            "positions": [int(v) for v in self.positions],
            "matrix_accuracy": np.round(self.matrix_accuracy, 2).tolist(),
            "matrix_loglik": np.round(self.matrix_loglik, 5).tolist(),
            "diagonal_margin": np.round(self.diagonal_margin, 5).tolist(),
            "diagonal_margin_sem": np.round(self.diagonal_margin_sem, 5).tolist(),
            "diagonal_best_loglik": self.diagonal_best_loglik,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyEvaluation:
        """Inverse of :meth:`to_dict` (model headers store the dict)."""
        arrays = {
            k: np.asarray(d[k], dtype=float)
            for k in ("accuracy", "loglik", "matrix_accuracy", "matrix_loglik",
                      "diagonal_margin", "diagonal_margin_sem")
        }  # fmt: skip
        return cls(
            groups=tuple(d["groups"]), positions=np.asarray(d["positions"], np.int64), **arrays
        )

    def pooled(self) -> tuple[float, float]:
        """Own-rank accuracy (%) and mean log-likelihood over every group's moves (#28's target)."""
        w = self.positions / self.positions.sum()
        return float(w @ self.accuracy), float(w @ self.loglik)

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
            "Mean log-likelihood, net conditioned on row group (representative rank), games of "
            "column group; last row: the diagonal's margin over the best other conditioning of "
            "its column, in millinats per move ± standard error (paired, clustered by player "
            "instance):",
            "",
        ]
        lines.append("| cond \\ games | " + " | ".join(self.groups) + " |")
        lines.append("|---" * (len(self.groups) + 1) + "|")
        best = self.matrix_loglik.argmax(axis=0)
        for a, g in enumerate(self.groups):
            cells = [
                f"**{v:.4f}**" if best[b] == a else f"{v:.4f}"
                for b, v in enumerate(self.matrix_loglik[a])
            ]
            lines.append(f"| {g} ({GROUP_REPRESENTATIVE[g]}) | " + " | ".join(cells) + " |")
        margins = [
            f"{1000 * m:+.1f} ± {1000 * e:.1f}"
            for m, e in zip(self.diagonal_margin, self.diagonal_margin_sem, strict=True)
        ]
        lines.append("| margin | " + " | ".join(margins) + " |")
        lines.append("")
        lines.append(
            "Bold: the best conditioning of each column; it is the column's own group in "
            f"{self.diagonal_best_loglik} of {len(self.groups)} columns."
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


@dataclass(frozen=True)
class TrunkSource:
    """The KataGo net a run's trunk comes from, and what the model header records of it."""

    net: KataGoNet
    record: dict[str, Any]  # model, sha256, KataGo's model name and version, licence, mode


def load_trunk_source(config: GoPolicyTrainConfig) -> TrunkSource:
    """Load ``config.trunk`` through the registry (sha256-verified) or as a file."""
    from pipeline.nets.loading import load_net
    from pipeline.nets.registry import find_entry, is_registry_name, model_sha256

    net = load_net(config.trunk)
    if not isinstance(net, KataGoNet):
        raise TrunkError(
            f"--trunk {config.trunk!r} is a {type(net).__name__}; a trunk must be a KataGo net"
        )
    record = {
        "model": str(config.trunk),
        "sha256": model_sha256(config.trunk),
        "katago_model": net.meta.name,
        "model_version": net.meta.version,
        "license": find_entry(config.trunk).license if is_registry_name(config.trunk) else None,
        "mode": config.trunk_mode,
        "lr_scale": config.trunk_lr_scale if config.trunk_mode == "finetune" else None,
    }
    return TrunkSource(net, record)


def position_ranks(pool: PositionPool) -> np.ndarray:
    """(N,) rank-axis index of each position's mover (-1 outside GO_POLICY_RANKS)."""
    return rank_indices(pool.instance_rank)[pool.position_instance]


def _inputs(
    pool: PositionPool, rows: np.ndarray, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(spatial, global) of ``rows`` on ``device``; the planes travel as uint8."""
    spatial = torch.from_numpy(pool.planes[rows]).to(device).float()
    return spatial, torch.from_numpy(pool.global_[rows]).to(device)


def _legal_and_target(
    pool: PositionPool, rows: np.ndarray, size: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, size) legal-move mask and (B,) played move of ``rows``, on ``device``."""
    mask = legal_mask(pool.legal_offsets, pool.legal_index, rows, size).to(device)
    return mask, torch.from_numpy(pool.played[rows]).to(device)


def policy_loss(
    net: GoRankPolicyNet,
    pool: PositionPool,
    rows: np.ndarray,
    ranks: np.ndarray,
    symmetry: np.ndarray | None = None,
    teacher: GoRankPolicyNet | None = None,
    teacher_weight: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy at the movers' ranks and the top-1 hits: (scalar, (B,) bool).

    ``symmetry``: each board seen under that symmetry (0-7), features turned back
    (:meth:`GoRankPolicyNet.turned_features`); None: as played. ``teacher``: a frozen policy
    (its own ``config.symmetries``) whose legal-move distribution q at the mover's rank is a
    soft target: the loss is (1 − w)·CE(played move) + w·CE(q), w = ``teacher_weight``.
    """
    device = module_device(net)
    inputs = _inputs(pool, rows, device)
    h = (  # (B, H, 361)
        net.features(*inputs)
        if symmetry is None
        else net.turned_features(*inputs, torch.from_numpy(symmetry).to(device))
    )
    ranks_on = torch.from_numpy(ranks).to(device)
    logits = net.mover_logits(h, ranks_on).float()  # (B, 362); float32 under bf16 autocast
    mask, target = _legal_and_target(pool, rows, logits.shape[1], device)
    logp = masked_log_softmax(logits, mask)
    rows_on = torch.arange(len(rows), device=device)
    loss = -logp[rows_on, target].mean()
    if teacher is not None:
        with torch.no_grad():  # illegal moves: q = 0 against a finite (masked) log p
            q_logits = teacher.mover_logits(teacher.features(*inputs), ranks_on).float()
            q = masked_log_softmax(q_logits, mask)
        soft = -(q.exp() * logp).sum(dim=1).mean()
        loss = (1 - teacher_weight) * loss + teacher_weight * soft
    return loss, logp.argmax(dim=1) == target


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
        loss, hit = policy_loss(net, pool, chunk, ranks[chunk])
        losses.append(float(loss) * len(chunk))
        hits.append(hit.cpu().numpy())
    net.train()
    return {
        "val_loss": sum(losses) / len(rows),
        "val_accuracy": 100.0 * float(np.concatenate(hits).mean()),
    }


@dataclass
class PositionScores:
    """Per position of an evaluation pool: the played move's log-likelihood and top-1 hit with
    the net conditioned on the mover's own rank and on each group's representative rank.
    Scores of several pools concatenate (:meth:`concat`) into one pooled evaluation."""

    group: np.ndarray  # (N,) rank-group index of the mover
    instance: np.ndarray  # (N,) player instance (one player's moves in one game), unique
    own_ll: np.ndarray  # (N,)
    own_hit: np.ndarray  # (N,) bool
    rep_ll: np.ndarray  # (A, N)
    rep_hit: np.ndarray  # (A, N) bool

    @classmethod
    def concat(cls, parts: list[PositionScores]) -> PositionScores:
        offsets = np.cumsum([0] + [int(p.instance.max(initial=-1)) + 1 for p in parts[:-1]])
        return cls(
            np.concatenate([p.group for p in parts]),
            np.concatenate([p.instance + o for p, o in zip(parts, offsets, strict=True)]),
            np.concatenate([p.own_ll for p in parts]),
            np.concatenate([p.own_hit for p in parts]),
            np.concatenate([p.rep_ll for p in parts], axis=1),
            np.concatenate([p.rep_hit for p in parts], axis=1),
        )

    def own_rank_sem(self) -> tuple[float, float]:
        """Standard errors of the own-rank accuracy (points) and mean log-likelihood over every
        position, clustered by player instance: whether a pooled figure is above #28's 52 % or
        only near it depends on this, and a game's moves are not independent draws."""
        return (
            clustered_sem(100.0 * self.own_hit, self.instance),
            clustered_sem(self.own_ll, self.instance),
        )

    def own_rank_gain(self, base: PositionScores) -> tuple[float, float, float, float]:
        """This net's own-rank accuracy (points) and mean log-likelihood less ``base``'s on the
        same positions, each with its standard error, paired and clustered by player instance.
        Two nets' pooled figures each carry ± 0.09 points on all 430,160 held-out moves, but
        most of that is which moves are hard, which both nets share: the paired difference is
        what says whether one net reads moves better than the other."""
        if not (
            np.array_equal(self.group, base.group) and np.array_equal(self.instance, base.instance)
        ):
            raise ValueError("own_rank_gain needs both nets' scores of the same positions")
        hit = 100.0 * (self.own_hit.astype(np.float64) - base.own_hit)
        ll = self.own_ll - base.own_ll
        return (
            float(hit.mean()),
            clustered_sem(hit, self.instance),
            float(ll.mean()),
            clustered_sem(ll, self.instance),
        )


@torch.inference_mode()
def score_positions(
    net: GoRankPolicyNet, pool: PositionPool, *, batch: int = 256
) -> PositionScores:
    """Score every pool position with a known rank: one trunk pass, then the group
    representatives' heads and the position's own rank's head, nothing else."""
    net.eval()
    device = module_device(net)
    reps = np.array([GO_POLICY_RANKS.index(GROUP_REPRESENTATIVE[g]) for g in GO_RANK_GROUPS])
    reps_on = torch.from_numpy(reps).to(device)
    ranks = position_ranks(pool)
    group = pool.instance_group[pool.position_instance].astype(np.int64)
    rows = np.flatnonzero((ranks >= 0) & (group >= 0))
    own_hit = np.zeros(len(rows), bool)
    own_ll = np.zeros(len(rows))
    rep_hit = np.zeros((len(reps), len(rows)), bool)
    rep_ll = np.zeros((len(reps), len(rows)))
    every = torch.arange(batch, device=device)
    for start in range(0, len(rows), batch):
        sl = slice(start, start + batch)
        chunk = rows[sl]
        b = len(chunk)
        h = net.features(*_inputs(pool, chunk, device))  # (b, H, 361): one trunk pass
        own_rank = torch.from_numpy(ranks[chunk]).to(device)
        logits = torch.cat(
            [net.rank_logits(h, reps_on),  # (b, A, 362)
             net.mover_logits(h, own_rank)[:, None]],  # (b, 1, 362)
            dim=1,
        )  # fmt: skip
        mask, target = _legal_and_target(pool, chunk, go_spec.POLICY_SIZE, device)
        logp = masked_log_softmax(logits, mask[:, None])  # (b, A+1, 362)
        played_lp = logp[every[:b], :, target].cpu()  # (b, A+1)
        top = (logp.argmax(dim=2) == target[:, None]).cpu()  # (b, A+1)
        own_ll[sl] = played_lp[:, -1].numpy()
        own_hit[sl] = top[:, -1].numpy()
        rep_ll[:, sl] = played_lp[:, :-1].T.numpy()
        rep_hit[:, sl] = top[:, :-1].T.numpy()
    instance = pool.position_instance[rows].astype(np.int64)
    return PositionScores(group[rows], instance, own_ll, own_hit, rep_ll, rep_hit)


def clustered_sem(values: np.ndarray, clusters: np.ndarray) -> float:
    """Standard error of the mean of ``values`` whose members share ``clusters`` (correlated
    within, independent between): the cluster-robust variance Σ_c (Σ_{i∈c} (v_i − v̄))² / n²,
    scaled by C / (C − 1) for C clusters. With one value per cluster it is the usual sd/√n."""
    n = len(values)
    _, cluster = np.unique(clusters, return_inverse=True)
    c = int(cluster.max(initial=-1)) + 1
    if n < 2 or c < 2:
        return 0.0
    sums = np.bincount(cluster, weights=values - values.mean(), minlength=c)
    return float(np.sqrt((sums**2).sum() * c / (c - 1)) / n)


def summarise(scores: PositionScores) -> PolicyEvaluation:
    """Quality per rank group (own rank), the conditioning matrix and each column's diagonal
    margin over its best rival with its standard error: paired (same positions, two heads) and
    clustered by player instance, since the moves of one game are not independent."""
    groups = GO_RANK_GROUPS
    g, rep_ll = scores.group, scores.rep_ll
    counts = np.bincount(g, minlength=len(groups))
    denom = np.maximum(counts, 1)

    def per_group(values: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=values.astype(np.float64), minlength=len(groups)) / denom

    matrix_loglik = np.stack([per_group(row) for row in rep_ll])  # (A, B)
    margin, margin_sem = np.zeros(len(groups)), np.zeros(len(groups))
    for b in range(len(groups)):  # one column per rank group (11), not per position
        others = np.delete(np.arange(len(rep_ll)), b)
        rival = others[matrix_loglik[others, b].argmax()]
        here = g == b
        diff = rep_ll[b, here] - rep_ll[rival, here]  # (n_b,) paired differences
        margin[b] = diff.mean() if len(diff) else 0.0
        margin_sem[b] = clustered_sem(diff, scores.instance[here])
    return PolicyEvaluation(
        groups=groups,
        accuracy=100.0 * per_group(scores.own_hit),
        loglik=per_group(scores.own_ll),
        positions=counts,
        matrix_accuracy=100.0 * np.stack([per_group(row) for row in scores.rep_hit]),
        matrix_loglik=matrix_loglik,
        diagonal_margin=margin,
        diagonal_margin_sem=margin_sem,
    )


def evaluate_policy(
    net: GoRankPolicyNet, pool: PositionPool, *, batch: int = 256
) -> PolicyEvaluation:
    """Quality per rank group (own rank) and the conditioning matrix, over all pool positions."""
    return summarise(score_positions(net, pool, batch=batch))


def _pool(
    games_dir: Path,
    split: str,
    max_games: int | None,
    config: GoPolicyTrainConfig,
    seed: int,
    table,
    per_instance: int | None,
) -> PositionPool:
    games = load_split_games(
        games_dir, "go", split, max_games=max_games, split_config=config.split_config(), table=table
    )
    t0 = time.perf_counter()
    pool = build_pool(
        games,
        "go",
        positions_per_instance=per_instance,
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


def symmetry_teacher(
    config: GoPolicyTrainConfig,
    build: Callable[[], GoRankPolicyNet],
    net_config: GoRankPolicyConfig,
    device: torch.device,
) -> GoRankPolicyNet:
    """The ``--init-from`` policy, frozen, its features averaged over
    ``config.teacher_symmetries`` board symmetries: the soft target of self-distillation. Read
    from the model files rather than copied from the run's net, so a resumed run's teacher is
    still the policy it started from."""
    teacher = build()
    weights, _ = initial_weights(config.init_from, GO_POLICY_FORMAT, net_config.to_dict(), teacher)
    teacher.load_state_dict(weights)
    teacher.config = replace(teacher.config, symmetries=config.teacher_symmetries)
    teacher.requires_grad_(False)
    return teacher.to(device).eval()


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
    command: str | None = None,
) -> PolicyTrainResult:
    """Train (or resume) into ``out_dir``: checkpoints/, model files, MLflow run.

    ``stop_after``: end this invocation after that many steps (a deterministic stand-in for the
    time budget, for staged runs and tests); the schedule still spans ``config.max_steps``.
    ``command``: the command line, recorded in the model header for the model card.
    """
    out_dir = Path(out_dir)
    budget = TimeBudget(max_minutes)
    ckpt_dir = out_dir / "checkpoints"
    source = load_trunk_source(config) if config.trunk else None
    net_config = (
        katago_trunk_config(source.net, config.head_channels) if source else config.net_config()
    )

    def build() -> GoRankPolicyNet:
        if source is None:
            return GoRankPolicyNet(net_config)
        built = policy_on_katago_trunk(source.net, config.head_channels)
        if config.trunk_mode == "frozen":
            built.freeze_trunk()
        elif config.trunk_mode == "rank-layers":
            built.freeze_features()
        return built

    net, optimizer, state = start_run(
        build, config, ckpt_dir, resume=resume, command=command,
        init_shape=(GO_POLICY_FORMAT, net_config.to_dict()),
        param_groups=(lambda n: n.parameter_groups(config.trunk_lr_scale)) if source else None,
    )  # fmt: skip
    teacher = (
        symmetry_teacher(config, build, net_config, module_device(net))
        if config.teacher_symmetries
        else None
    )
    table = read_games(games_dir, "go")
    per = config.positions_per_instance
    train_pool = _pool(games_dir, "train", config.max_train_games, config, config.seed, table, per)
    val_pool = _pool(
        games_dir, "validation", config.max_validation_games, config, config.seed + 1, table, per
    )
    ranks = position_ranks(train_pool)
    usable = np.flatnonzero(ranks >= 0)
    trained = sorted(
        {GO_POLICY_RANKS[r] for r in np.unique(ranks[usable])}, key=GO_POLICY_RANKS.index
    )
    epoch_steps = config.epoch_steps or max(1, len(usable) // config.batch_size)
    params = run_params(config, net, games_dir, epoch_steps=epoch_steps, precision=config.precision,
                        train_positions=len(usable), trained_ranks=",".join(trained))  # fmt: skip
    autocast = step_autocast(module_device(net), config.precision)

    def step(rng: np.random.Generator) -> StepOutput:
        rows = np.sort(usable[rng.integers(0, len(usable), size=config.batch_size)])
        symmetry = (
            rng.integers(0, BOARD_SYMMETRIES, size=len(rows)) if config.random_symmetries else None
        )
        with autocast:
            loss, _ = policy_loss(
                net, train_pool, rows, ranks[rows], symmetry, teacher, config.teacher_weight
            )
        return StepOutput(loss, {}, len(rows))

    with tracking.tracked_run(
        EXPERIMENT, run_name="go-policy", tracking_uri=tracking_uri, params=params
    ):
        rate = run_loop(
            net, optimizer, state, config, step=step,
            validate=lambda: validate(net, val_pool, config), epoch_steps=epoch_steps,
            checkpoint_dir=ckpt_dir, budget=budget, stop_after=stop_after, progress=progress,
            desc="go policy",
        )  # fmt: skip
        restore_best(net, state)  # select_best: the best validation's weights
        net.config = replace(net.config, symmetries=config.symmetries)  # as the model will run
        result = PolicyTrainResult(
            steps=state.step,
            train_seconds=state.train_seconds,
            positions_per_second=rate,
            history=state.history,
            trained_ranks=trained,
            pools={"train": len(train_pool), "validation": len(val_pool)},
        )
        if evaluate:
            eval_pool = _pool(
                games_dir, "evaluation", config.max_evaluation_games, config, config.seed + 3,
                table, config.evaluation_positions_per_instance,
            )  # fmt: skip
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
                "net": net.config.to_dict(),
                **({"trunk": source.record} if source else {}),
                "ranks": list(GO_POLICY_RANKS),
                "trained_ranks": trained,
                "train": run_record(params, state, config.batch_size, games_dir),
                "quality": result.evaluation.to_dict() if result.evaluation else None,
                "history": state.history,
            }
            result.exported = export_tracked(net, out_dir, header)
    return result
