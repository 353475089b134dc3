"""How good an s-score net is: Chen, Shih & Wu (2025)'s rank-prediction protocol and rank means.

Protocol (their Section 5): every rank group gets a reference score, the mean s-score of its
player instances in TRAINING games. To predict the rank of a player from ``n`` instances (one
instance = one player's moves in one game), average the instances' scores and pick the group
whose reference is nearest. Accuracy is the share of correct predictions, "±1" also counts the
adjacent groups; we draw ``trials`` random sets of n evaluation instances per group (with
replacement) and average over groups. An instance's score is the mean s-score over its moves in
the pool (at most ``positions_per_instance`` random moves of it, as the pool was built).

    from pipeline.train.sscore_eval import evaluate_sscore
    result = evaluate_sscore(net, reference_pool, evaluation_pool)
    print(result.to_markdown())
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import spearmanr
from torch import nn

from pipeline.train.device import module_device
from pipeline.train.sscore_batches import PositionPool, net_inputs

NS = (1, 5, 10, 15, 20)
# Published accuracies for n = 1, 5, 10, 15, 20 (Chen, Shih & Wu 2025, "with r∞" estimator).
PUBLISHED_ACCURACY = {
    "go": (33.7, 56.3, 71.4, 78.2, 83.8),
    "chess": (31.8, 51.7, 66.5, 73.6, 79.5),
}


@dataclass
class SScoreEvaluation:
    """Rank means and rank-prediction accuracy of one net on one evaluation pool."""

    game: str
    rank_groups: tuple[str, ...]
    reference_mean: np.ndarray  # (R,) mean instance score per group, training games
    evaluation_mean: np.ndarray  # (R,) same on the evaluation games
    evaluation_instances: np.ndarray  # (R,) instances per group in the evaluation pool
    evaluation_sem: np.ndarray  # (R,) standard error of evaluation_mean (instance scores' sd/√n)
    spearman: float  # rank correlation of evaluation_mean with the group order
    accuracy: dict[int, float] = field(default_factory=dict)  # n -> % correct
    accuracy_pm1: dict[int, float] = field(default_factory=dict)  # n -> % within one group

    @property
    def strictly_increasing(self) -> bool:
        return bool(np.all(np.diff(self.evaluation_mean) > 0))

    @property
    def gap_z(self) -> np.ndarray:
        """(R-1,) each adjacent gap of the evaluation means over its standard error."""
        return adjacent_gap_z(self.evaluation_mean, self.evaluation_sem)

    @classmethod
    def from_dict(cls, d: dict) -> SScoreEvaluation:
        """Inverse of :meth:`to_dict` (model headers store the dict)."""
        return cls(
            game=d["game"],
            rank_groups=tuple(d["rank_groups"]),
            reference_mean=np.asarray(d["reference_mean"], dtype=float),
            evaluation_mean=np.asarray(d["evaluation_mean"], dtype=float),
            evaluation_instances=np.asarray(d["evaluation_instances"], dtype=np.int64),
            evaluation_sem=np.asarray(d["evaluation_sem"], dtype=float),
            spearman=float(d["spearman"]),
            accuracy={int(k): float(v) for k, v in d["accuracy"].items()},
            accuracy_pm1={int(k): float(v) for k, v in d["accuracy_pm1"].items()},
        )

    def to_dict(self) -> dict:
        return {
            "game": self.game,
            "rank_groups": list(self.rank_groups),
            "reference_mean": [round(float(v), 4) for v in self.reference_mean],
            "evaluation_mean": [round(float(v), 4) for v in self.evaluation_mean],
            "evaluation_instances": [int(v) for v in self.evaluation_instances],
            "evaluation_sem": [round(float(v), 5) for v in self.evaluation_sem],
            "spearman": round(self.spearman, 4),
            "strictly_increasing": self.strictly_increasing,
            "accuracy": {int(k): round(v, 1) for k, v in self.accuracy.items()},
            "accuracy_pm1": {int(k): round(v, 1) for k, v in self.accuracy_pm1.items()},
        }

    def to_markdown(self) -> str:
        published = PUBLISHED_ACCURACY[self.game]
        lines = [
            "| n | accuracy % | accuracy ±1 % | published accuracy % (Chen et al. 2025) |",
            "|---|---|---|---|",
        ]
        for n, pub in zip(NS, published, strict=True):
            lines.append(f"| {n} | {self.accuracy[n]:.1f} | {self.accuracy_pm1[n]:.1f} | {pub} |")
        lines += [
            "",
            "| rank group | mean s-score (evaluation) | ± s.e. | gap to the group below (s.e.) "
            "| mean s-score (training) | instances |",
            "|---|---|---|---|---|---|",
        ]
        gaps = ["", *(f"{z:+.1f}" for z in self.gap_z)]
        for g, e, se, z, r, c in zip(
            self.rank_groups, self.evaluation_mean, self.evaluation_sem, gaps,
            self.reference_mean, self.evaluation_instances, strict=True,
        ):  # fmt: skip
            lines.append(f"| {g} | {e:+.3f} | {se:.3f} | {z} | {r:+.3f} | {c} |")
        lines.append("")
        lines.append(
            f"Spearman correlation of the evaluation means with the group order: {self.spearman:.3f}; "
            f"strictly increasing: {'yes' if self.strictly_increasing else 'no'} "
            f"(smallest adjacent gap {self.gap_z.min():+.1f} standard errors)."
        )
        return "\n".join(lines)


@torch.inference_mode()
def score_rows(
    net: nn.Module, pool: PositionPool, rows: np.ndarray, moves: np.ndarray, *, batch: int = 512
) -> np.ndarray:
    """(K,) s-score of each (row, move) pair, in eval mode, on the net's device."""
    device = module_device(net)
    legal = "legal" in getattr(net, "input_names", ())  # a levels s-score on legal policies
    was_training = net.training
    net.eval()
    out = np.empty(len(rows), np.float32)
    for start in range(0, len(rows), batch):
        stop = min(start + batch, len(rows))
        inputs = net_inputs(pool, rows[start:stop], moves[start:stop], device, legal=legal)
        out[start:stop] = net(*inputs)[0][:, 0].cpu().numpy()  # (b,)
    net.train(was_training)
    return out


def instance_means(pool: PositionPool, values: np.ndarray) -> np.ndarray:
    """(I,) mean of a per-position ``values`` (N,) over each instance's positions."""
    sums = np.bincount(pool.position_instance, weights=values, minlength=pool.num_instances)
    return sums / np.maximum(pool.instance_counts, 1)


def instance_scores(net: nn.Module, pool: PositionPool, *, batch: int = 512) -> np.ndarray:
    """(I,) mean s-score of the played moves of each instance in the pool."""
    rows = np.arange(len(pool))
    return instance_means(pool, score_rows(net, pool, rows, pool.played, batch=batch))


def group_means(
    scores: np.ndarray, groups: np.ndarray, num_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """(R,) mean score and (R,) count per group (groups < 0 ignored)."""
    ok = groups >= 0
    counts = np.bincount(groups[ok], minlength=num_groups)
    sums = np.bincount(groups[ok], weights=scores[ok], minlength=num_groups)
    return sums / np.maximum(counts, 1), counts


def group_sems(scores: np.ndarray, groups: np.ndarray, num_groups: int) -> np.ndarray:
    """(R,) standard error of each group's mean score (sample sd / √count; 0 below 2 members)."""
    mean, counts = group_means(scores, groups, num_groups)
    ok = groups >= 0
    dev = np.bincount(
        groups[ok], weights=(scores[ok] - mean[groups[ok]]) ** 2, minlength=num_groups
    )
    var = dev / np.maximum(counts - 1, 1)
    return np.where(counts > 1, np.sqrt(var / np.maximum(counts, 1)), 0.0)


def adjacent_gap_z(mean: np.ndarray, sem: np.ndarray) -> np.ndarray:
    """(R-1,) each adjacent gap of group means over the standard error of the difference."""
    se = np.sqrt(sem[1:] ** 2 + sem[:-1] ** 2)
    return np.diff(mean) / np.maximum(se, 1e-12)


def rank_prediction_accuracy(
    reference_mean: np.ndarray,
    scores: np.ndarray,
    groups: np.ndarray,
    *,
    ns: tuple[int, ...] = NS,
    trials: int = 1000,
    seed: int = 0,
) -> tuple[dict[int, float], dict[int, float]]:
    """Chen et al.'s nearest-mean prediction from n instances: (% exact, % within ±1) per n."""
    rng = np.random.default_rng(seed)
    num_groups = len(reference_mean)
    exact: dict[int, float] = {}
    near: dict[int, float] = {}
    for n in ns:
        hit, hit1, total = 0, 0, 0
        for g in range(num_groups):
            members = scores[groups == g]
            if len(members) == 0:
                continue
            means = members[rng.integers(0, len(members), size=(trials, n))].mean(axis=1)  # (T,)
            predicted = np.abs(means[:, None] - reference_mean[None, :]).argmin(axis=1)  # (T,)
            hit += int((predicted == g).sum())
            hit1 += int((np.abs(predicted - g) <= 1).sum())
            total += trials
        exact[n] = 100.0 * hit / max(total, 1)
        near[n] = 100.0 * hit1 / max(total, 1)
    return exact, near


def evaluate_sscore(
    net: nn.Module,
    reference_pool: PositionPool,
    evaluation_pool: PositionPool,
    *,
    trials: int = 1000,
    seed: int = 0,
) -> SScoreEvaluation:
    """Rank means (reference: training games) and Chen et al.'s accuracy on the evaluation pool."""
    return evaluate_instance_scores(
        reference_pool, instance_scores(net, reference_pool),
        evaluation_pool, instance_scores(net, evaluation_pool), trials=trials, seed=seed,
    )  # fmt: skip


def evaluate_instance_scores(
    reference_pool: PositionPool,
    ref_scores: np.ndarray,
    evaluation_pool: PositionPool,
    eval_scores: np.ndarray,
    *,
    trials: int = 1000,
    seed: int = 0,
) -> SScoreEvaluation:
    """``evaluate_sscore`` from (I,) instance scores already computed for both pools (by an
    estimator that scores from cached features, ``pipeline/train/sscore_levels.py``)."""
    r = len(reference_pool.rank_groups)
    ref_mean, _ = group_means(ref_scores, reference_pool.instance_group.astype(np.int64), r)
    eval_groups = evaluation_pool.instance_group.astype(np.int64)
    eval_mean, eval_counts = group_means(eval_scores, eval_groups, r)
    exact, near = rank_prediction_accuracy(
        ref_mean, eval_scores, eval_groups, trials=trials, seed=seed
    )
    present = eval_counts > 0
    rho = (
        float(spearmanr(np.arange(r)[present], eval_mean[present]).statistic)
        if present.sum() > 1
        else 0.0
    )
    return SScoreEvaluation(
        game=reference_pool.game,
        rank_groups=reference_pool.rank_groups,
        reference_mean=ref_mean,
        evaluation_mean=eval_mean,
        evaluation_instances=eval_counts,
        evaluation_sem=group_sems(eval_scores, eval_groups, r),
        spearman=rho,
        accuracy=exact,
        accuracy_pm1=near,
    )
