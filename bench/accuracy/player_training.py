"""Meta-models trained for one player's own games, against the rank-group training they replace.

``kibitz estimate`` reads one player's games, the shipped meta-models are fitted on samples of n
different players of a group (issue #63). This fits, at each n, the same feature set several
ways and scores each on both protocols: one player's own n games (Kuboki et al. 2025, Table 6:
players of a ``--player-aggregates`` set, ``repeats`` samples a unit) and the rank-group
samples of the evaluation split (Table 2). Players are cut into halves by a hash of the name
with a salt re-drawn ``--halvings`` times; each half is judged by models fitted on the other
half's players (and the rank-group fit split), so no player is both fitted and judged::

    python bench/accuracy/player_training.py go models/kibitz-meta-go/aggregates \\
        --player-aggregates models/kibitz-meta-go/player-aggregates --halvings 5

Ways (``--ways``):

- ``rank_group``: the shipped training, rank-group samples of the fit split only;
- ``players``: the same plus ``--unit-draws`` samples of n games of each fit-half player unit;
- ``players_only``: only those player samples (no rank-group sample);
- ``shift``: ``rank_group`` with a constant added to its output, the fit-half players' mean
  signed error (the lean of one player's games, measured);
- ``cuts``: ``rank_group`` decided by cut points fitted on the fit-half players' samples
  (``pipeline/meta/decision.py``) instead of rounding.

Prints, per n and way, exact and ±1 accuracy on one player's games and on rank-group samples
(mean over the 2 × halvings judged halves, their sd), and the paired difference to
``rank_group`` on one player's games (mean ± sd over the halves).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from meta_bench import add_fitting_option, fitting, sample_sizes

from pipeline.core.data_split import game_unit
from pipeline.meta.aggregate import load_mart
from pipeline.meta.decision import apply_cut_points, fit_cut_points, rounding_cut_points
from pipeline.meta.model import (
    MetaConfig,
    build_samples,
    drop_empty_columns,
    fit_model,
    instance_data,
    unseen_instances,
)
from pipeline.meta.player_training import with_player_samples
from pipeline.meta.samples import player_samples

WAYS = ("rank_group", "players", "players_only", "shift", "cuts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("aggregates", type=Path, help="rank-group aggregates (the fit split)")
    parser.add_argument("--player-aggregates", type=Path, required=True)
    parser.add_argument("--n", default="5,10,15,20", help="sample sizes, comma-separated")
    parser.add_argument("--feature-set", default="full_dcloss")
    parser.add_argument("--halvings", type=int, default=5, help="re-drawn halves of the players")
    parser.add_argument("--unit-draws", type=int, default=60, help="training samples a unit")
    parser.add_argument("--repeats", type=int, default=20, help="judged samples a unit")
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument(
        "--params", type=json.loads, default={}, help="LightGBM parameters over the defaults (JSON)"
    )
    add_fitting_option(parser)
    args = parser.parse_args()
    ways = args.ways.split(",")
    groups = load_mart(args.aggregates, "rank_groups")
    data = drop_empty_columns(
        instance_data(
            load_mart(args.aggregates, "player_instance_features"), groups, game=args.game
        )
    )
    other = instance_data(load_mart(args.player_aggregates, "player_instance_features"), groups,
                          game=args.game)  # fmt: skip
    other = unseen_instances(
        other.with_columns([other.columns.index(c) for c in data.columns]), data
    )
    names = other.unit_player  # (U,)
    # (n, way) -> per judged half: (player exact, player ±1, rank-group exact, rank-group ±1)
    figures: dict[tuple[int, str], list[tuple[float, float, float, float]]] = {}
    for n in sample_sizes(args.n):
        config = MetaConfig(ns=(n,), feature_sets=(args.feature_set,), **fitting(args))
        config.lgbm_params |= args.params
        samples = build_samples(data, n, config)
        train, monitor, evaluation = (samples[k] for k in ("train", "validation", "evaluation"))
        base = fit_model(data.columns, args.feature_set, n, train, monitor, groups=data.groups,
                         config=config)  # fmt: skip
        pick = [data.columns.index(c) for c in base.columns]
        for h in range(args.halvings):
            half_of_unit = game_unit(names.tolist(), f"kibitz-player-training-{h}") >= 0.5
            for judged in (0, 1):
                fit_units = np.flatnonzero(half_of_unit != judged)
                fit_rows = np.flatnonzero(np.isin(other.unit, fit_units))
                judged_rows = np.flatnonzero(np.isin(other.unit, fit_units, invert=True))
                rng = np.random.default_rng([n, h, judged])
                fit_part = other.subset(fit_rows)
                extra = player_samples(fit_part.features, fit_part.unit, fit_part.group, n=n,
                                       repeats=args.unit_draws, rng=rng)  # fmt: skip
                judged_part = other.subset(judged_rows)
                held = player_samples(judged_part.features, judged_part.unit, judged_part.group,
                                      n=n, repeats=args.repeats,
                                      rng=np.random.default_rng([n, h, judged, 1]))  # fmt: skip
                boosters = {"rank_group": base.booster}
                if "players" in ways:
                    boosters["players"] = fit_model(
                        data.columns, args.feature_set, n, with_player_samples(train, extra), monitor,
                        groups=data.groups, config=config,
                    ).booster  # fmt: skip
                if "players_only" in ways:
                    boosters["players_only"] = fit_model(
                        data.columns, args.feature_set, n, extra, monitor, groups=data.groups,
                        config=config,
                    ).booster  # fmt: skip
                for way in ways:
                    booster = boosters.get(way, base.booster)
                    cuts = rounding_cut_points(data.groups)
                    if way == "cuts":
                        cuts = fit_cut_points(
                            booster.predict(extra.features[:, pick]), extra.label, data.groups
                        )
                    offset = 0.0
                    if way == "shift":  # measured on players the rank-group model never fit
                        offset = float(
                            np.mean(extra.label - booster.predict(extra.features[:, pick]))
                        )
                    scores = []
                    for s in (held, evaluation):
                        raw = booster.predict(s.features[:, pick]) + offset
                        predicted = apply_cut_points(raw, cuts)
                        gap = np.abs(predicted - s.label)
                        scores += [float(np.mean(gap == 0)), float(np.mean(gap <= 1))]
                    figures.setdefault((n, way), []).append(tuple(scores))
            print(f"n={n} halving {h} done", flush=True)
    _, counts = np.unique(other.unit, return_counts=True)
    print(f"\n{args.game} {args.feature_set}: {args.halvings} halvings × 2 judged halves;"
          f" {int((counts >= max(sample_sizes(args.n))).sum())} player units with"
          f" {max(sample_sizes(args.n))}+ games")  # fmt: skip
    print(
        "| n | way | one player exact | ±1 | rank-group exact | ±1 | player exact vs rank_group |"
    )
    print("|---|---|---|---|---|---|---|")
    for (n, way), rows in figures.items():
        a = 100 * np.array(rows)
        d = a[:, 0] - 100 * np.array(figures[(n, "rank_group")])[:, 0]
        print(f"| {n} | {way} | {a[:, 0].mean():.1f} ± {a[:, 0].std(ddof=1):.1f} |"
              f" {a[:, 1].mean():.1f} | {a[:, 2].mean():.1f} | {a[:, 3].mean():.1f} |"
              f" {d.mean():+.1f} ± {d.std(ddof=1):.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
