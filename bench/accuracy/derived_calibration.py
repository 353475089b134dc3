"""Player intervals derived from the error one player's games share, checked where it is known.

Chess has no player with many games in one band, so its intervals for one player's n games are
derived (``pipeline/meta/player_variance.py``): the share ρ of the one-game error that a
player's games share, measured on the players with two or more games of the model's own
aggregates, widens the rank-group intervals by √(1 + (n − 1)·ρ). On Go the answer is known: ρ
from the testing split alone, the derived widths are judged on the ``by-player`` players' own n
games, beside the coverage of the widths calibrated on those players (the shipped model's
cross-fitted figure) and of the rank-group widths::

    python bench/accuracy/derived_calibration.py go
    python bench/accuracy/derived_calibration.py chess
    python bench/accuracy/derived_calibration.py go --n 5,10,15,20 --through-n-model
    python bench/accuracy/derived_calibration.py go --n 5,10,15,20 --through-n-model --shape laplace
    python bench/accuracy/derived_calibration.py go --n 5,10,20 --through-features

``--through-n-model`` adds a second derivation: the rank-group n-game error (its quantiles, the
model's widths, with a random sign) plus a player offset whose variance is measured through
the n-game model itself, ``--shape`` its distribution; the widths are the quantiles of the sum
(a Monte Carlo convolution). ``--through-features`` adds a third: a player offset drawn in the
feature space, from the covariance that the games of the players with two or more games share
beyond their rating, added to rank-group samples of the splits the model was not fitted on and
passed through each n's model; the rank-group widths are widened by the ratio of its |error|
quantiles to the unmoved samples'.

Prints ρ and how many players it rests on; then per n the widths and, where the model has a
player-specific set, the coverage of the 80 % and 95 % intervals on one player's games under
each calibration.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

import numpy as np

from pipeline.meta.aggregate import load_mart
from pipeline.meta.intervals import LEVEL_GRID, LEVELS
from pipeline.meta.model import (
    MetaConfig,
    drop_empty_columns,
    fit_and_monitor_splits,
    instance_data,
    player_eval_samples,
)
from pipeline.meta.player_variance import (
    centred_within,
    derived_half_widths,
    out_of_fold_residuals,
    shared_share,
)
from pipeline.meta.registered import resolve_meta_models
from pipeline.meta.samples import Samples, rank_group_samples


def shared_variance_at_n(data, feature_set: str, n: int) -> float:
    """The variance one player's games share through the n-game strength model: that model,
    fitted out of fold by player on rank-group samples, applied to single games, its residuals
    centred within each group; ρ times their variance."""
    residual = out_of_fold_residuals(data, feature_set, MetaConfig(), n=n)
    rho, _ = shared_share(residual, data.unit_player[data.unit], data.group)
    return rho * float(np.nanvar(centred_within(residual, data.group)))


def convolved_widths(
    rank: dict[float, float], variance: float, shape: str, rng: np.random.Generator
) -> dict[float, float]:
    """Half-widths of |e + u| at each level: e the rank-group error (its |e| quantiles are
    ``rank``, its sign random), u a player offset of ``variance`` and ``shape``; by Monte Carlo
    (beyond the grid's last level, |e| stays at its last width)."""
    draws = 400_000
    levels = np.array([0.0, *rank])
    widths = np.array([0.0, *rank.values()])
    e = rng.choice([-1.0, 1.0], draws) * np.interp(rng.uniform(size=draws), levels, widths)
    if shape == "normal":
        u = rng.normal(0.0, np.sqrt(variance), draws)
    else:  # a Laplace of that variance: heavier tails, more players near their group
        u = rng.laplace(0.0, np.sqrt(variance / 2), draws)
    total = np.abs(e + u)
    return {lv: float(np.quantile(total, lv)) for lv in rank}


def shared_feature_covariance(
    features: np.ndarray, player: np.ndarray, group: np.ndarray, strength: np.ndarray
) -> tuple[np.ndarray, int]:
    """((F, F) Σ, players): the covariance of the feature offset that one player's games share,
    beyond what their rating explains, over the players with two or more rated games.

    Each feature is first taken relative to its rank ``group``'s line on the rating (a group
    mean plus a slope on the rating within the group, fitted on that group's instances), so
    what is left shared is the player's own way of playing against their rating, not where in
    the band the rating lies; a missing value counts as on that line. Σ is the multivariate
    one-way random-effects estimate, (between − within) / k₀ as in :func:`shared_share`, with
    its negative eigenvalues set to zero so that offsets can be drawn from it."""
    x = np.array(features, np.float64)
    player = np.asarray(player).astype(str)
    group = np.asarray(group)
    rated = np.isfinite(strength) & (player != "")
    x, player, group, rating = x[rated], player[rated], group[rated], strength[rated]
    for g in np.unique(group):
        rows = group == g
        centred = x[rows] - np.nanmean(x[rows], axis=0)
        s = rating[rows] - rating[rows].mean()
        slope = np.nansum(centred * s[:, None], axis=0) / max(float(s @ s), 1e-12)
        x[rows] = np.nan_to_num(centred - slope * s[:, None])
    _, member, counts = np.unique(player, return_inverse=True, return_counts=True)
    several = counts[member] >= 2
    x, member = x[several], member[several]
    _, member, k = np.unique(member, return_inverse=True, return_counts=True)
    a, total = k.size, x.shape[0]
    if a < 2:
        return np.zeros((x.shape[1], x.shape[1])), int(a)
    means = np.zeros((a, x.shape[1]))
    np.add.at(means, member, x)
    means /= k[:, None]
    within = x - means[member]
    between = (means - x.mean(axis=0)) * np.sqrt(k)[:, None]
    k0 = (total - np.sum(k**2) / total) / (a - 1)
    shared = (between.T @ between / (a - 1) - within.T @ within / (total - a)) / k0
    values, vectors = np.linalg.eigh((shared + shared.T) / 2)
    return (vectors * np.clip(values, 0.0, None)) @ vectors.T, int(a)


def offset_error_ratio(
    predict: Callable[[np.ndarray], np.ndarray],
    samples: Samples,
    covariance: np.ndarray,
    n: int,
    levels: Sequence[float],
    rng: np.random.Generator,
) -> dict[float, float]:
    """At each level, the |error| quantile of rank-group ``samples`` moved by a player offset
    over the same quantile unmoved: the factor by which one player's n games widen an interval.

    One player's n games share one offset u ~ N(0, Σ); n different players' games hold the
    mean of n independent ones (Σ / n), so a rank-group sample is moved by √(1 − 1/n)·u to
    carry a whole u. ``predict`` maps (S, F) sample features to strengths; the offsets pass
    through the model itself, so a model that saturates at the ends of its training range
    widens only as much as it responds."""
    keep = np.isfinite(samples.strength)
    x, target = samples.features[keep], samples.strength[keep]
    values, vectors = np.linalg.eigh(covariance)
    factor = vectors * np.sqrt(np.clip(values, 0.0, None))
    offset = rng.standard_normal(x.shape) @ factor.T * math.sqrt(1.0 - 1.0 / n)
    moved = np.abs(predict(x + offset) - target)
    still = np.abs(predict(x) - target)
    return {lv: float(np.quantile(moved, lv) / np.quantile(still, lv)) for lv in levels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--model", default=None, help="registry name or folder (default shipped)")
    parser.add_argument("--n", default="5,10,20", help="sample sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=20, help="judged samples a player unit")
    parser.add_argument(
        "--through-n-model", action="store_true",
        help="also the rank-group widths plus the shared variance measured through each n's model",
    )  # fmt: skip
    parser.add_argument(
        "--through-features", action="store_true",
        help="also the rank-group widths times the widening of a feature offset drawn from the"
        " covariance one player's games share, passed through each n's model",
    )  # fmt: skip
    parser.add_argument(
        "--shape",
        choices=("normal", "laplace"),
        default="normal",
        help="the player offset's distribution under --through-n-model",
    )
    args = parser.parse_args()
    models = resolve_meta_models(args.model, args.game)
    strength = models.strength()
    groups = load_mart(models.aggregates_dir, "rank_groups")
    data = drop_empty_columns(
        instance_data(
            load_mart(models.aggregates_dir, "player_instance_features"), groups, game=args.game
        )
    )
    residual = out_of_fold_residuals(data, strength.record["feature_set"], MetaConfig())
    rho, players = shared_share(residual, data.unit_player[data.unit], data.group)
    print(f"{models.manifest['name']}: ρ = {rho:.3f} from {players:,} players with 2+ games"
          f" ({strength.scale}; one-game residual sd {np.nanstd(residual):.2f})")  # fmt: skip
    if args.through_features:
        covariance, cov_players = shared_feature_covariance(
            data.features, data.unit_player[data.unit], data.group, data.strength
        )
        print(
            f"feature offset covariance from {cov_players:,} players, trace {np.trace(covariance):.3f}"
        )
        # the rank-group samples the offsets move: games the models were not fitted on
        held = data.subset(np.flatnonzero(data.split != fit_and_monitor_splits(MetaConfig())[0]))
    player = None
    if models.player_aggregates_dir is not None:
        player = instance_data(models.player_instances(), groups, game=args.game)
        player = player.with_columns([player.columns.index(c) for c in data.columns])
    record = strength.record
    print("| n | calibration | width 80 % | width 95 % | one player: coverage 80 % | 95 % |")
    print("|---|---|---|---|---|---|")
    ns = [int(k) for k in args.n.split(",")]
    unknown = [n for n in ns if str(n) not in record["half_width"]]
    if unknown:
        parser.error(
            f"n {unknown} not trained; the model has n = {', '.join(record['half_width'])}"
        )
    for n in ns:
        rank = dict(zip(LEVEL_GRID, record["half_width"][str(n)], strict=True))
        rank = {lv: np.inf if w is None else w for lv, w in rank.items()}
        ways = {"rank-group": rank, "derived": derived_half_widths(rank, rho, n)}
        if args.through_n_model:
            shared = shared_variance_at_n(data, strength.record["feature_set"], n)
            ways[f"added through the n-model ({args.shape})"] = convolved_widths(
                rank, (1 - 1 / n) * shared, args.shape, np.random.default_rng(n)
            )
        if args.through_features:
            samples = rank_group_samples(
                held.features, held.group, n=n, draws_per_group=2000,
                rng=np.random.default_rng([7, n]),
            ).with_strength(held.strength)  # fmt: skip
            ratio = offset_error_ratio(
                lambda x, n=n: strength.predict(x, data.columns, n), samples, covariance, n,
                list(rank), np.random.default_rng([8, n]),
            )  # fmt: skip
            print(f"  n = {n}: widening {ratio[0.8]:.3f} at 80 %, {ratio[0.95]:.3f} at 95 %")
            ways["feature offset through the n-model"] = {
                lv: w * ratio[lv] for lv, w in rank.items()
            }
        error = None
        if player is not None:
            config = MetaConfig(player_repeats=args.repeats)
            samples = player_eval_samples(player, n, config)
            keep = np.isfinite(samples.strength)
            error = np.abs(strength.predict(samples.features[keep], player.columns, n)
                           - samples.strength[keep])  # fmt: skip
        for name, widths in ways.items():
            cover = ("–", "–")
            if error is not None:
                cover = tuple(f"{100 * np.mean(error <= widths[lv]):.1f}" for lv in LEVELS)
            print(f"| {n} | {name} | {2 * widths[0.8]:.2f} | {2 * widths[0.95]:.2f} |"
                  f" {cover[0]} | {cover[1]} |")  # fmt: skip
        for row in record.get("results", []):
            if (row["n"], row["sampling"], row["calibration"]) == (n, "player", "player"):
                print(f"| {n} | measured on players (cross-fitted) | {row['width_80']:.2f} |"
                      f" {row['width_95']:.2f} | {100 * row['coverage_80']:.1f} |"
                      f" {100 * row['coverage_95']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
