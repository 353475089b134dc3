"""Which way a shipped meta-model misses on one player's own games, rank group by rank group.

Issue #63 saw new players' estimates read below their rated group (10 of 12 misses); this
measures the same on the players no model was fitted on (Go's ``by-player`` split) beside the
rank-group protocol's samples of the same model, so a lean of one player's games shows apart
from the regression's pull to the middle, which both protocols share::

    python bench/accuracy/player_lean.py go --n 15

Prints, per rank group and protocol, the samples, the mean signed error of the raw output in
groups (negative: read weaker than rated), the share read below and above the rated group,
and the spread of the players' own mean errors (how much one player's games share an offset);
then, from one game, the mean signed error of instances by how many games their player has at
that rank in the table: whether players who stay at a rank for many games sit lower in it.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
import pyarrow as pa

from pipeline.meta.aggregate import feature_columns, load_mart
from pipeline.meta.model import MetaConfig, instance_data, player_eval_samples
from pipeline.meta.registered import resolve_meta_models
from pipeline.meta.samples import rank_group_samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--n", type=int, default=15, help="instances per sample (a trained n)")
    parser.add_argument("--model", default=None, help="registry name or folder (default shipped)")
    args = parser.parse_args()
    models = resolve_meta_models(args.model, args.game)
    feature_set = models.feature_set()
    groups = load_mart(models.aggregates_dir, "rank_groups")
    config = MetaConfig(ns=(args.n,))
    evaluation = instance_data(
        models.evaluation_instances(), groups, game=args.game, split=config.split
    )
    player = instance_data(models.player_instances(), groups, game=args.game, split=config.split)
    protocols = {
        "rank-group": rank_group_samples(
            evaluation.features,
            evaluation.group,
            n=args.n,
            draws_per_group=500,
            rng=np.random.default_rng(0),
        ),
        "one player": player_eval_samples(player, args.n, config),
    }
    names = models.group_names
    print(f"{models.manifest.get('name')} ({feature_set}, n={args.n}): signed error in groups")
    print("| protocol | group | samples | mean error | read below | read above | players' sd |")
    print("|---|---|---|---|---|---|---|")
    for protocol, samples in protocols.items():
        columns = evaluation.columns if protocol == "rank-group" else player.columns
        raw, predicted = models.predict(samples.features, columns, feature_set, args.n)
        error = raw - samples.label
        for g, name in [*enumerate(names), (None, "all")]:
            rows = np.ones(len(error), bool) if g is None else samples.label == g
            if not rows.any():
                continue
            spread = "–"
            if protocol == "one player":
                units = samples.unit[rows]
                means = [error[rows][units == u].mean() for u in np.unique(units)]
                spread = f"{np.std(means, ddof=1):.2f}" if len(means) > 1 else "–"
            below = (predicted[rows] < samples.label[rows]).mean()
            above = (predicted[rows] > samples.label[rows]).mean()
            print(f"| {protocol} | {name} | {rows.sum():,} | {error[rows].mean():+.2f} | "
                  f"{100 * below:.1f} % | {100 * above:.1f} % | {spread} |")  # fmt: skip
    print("\nfrom one game, by the games of the instance's player at its rank")
    print("| instances | player's games at the rank | instances | mean error |")
    print("|---|---|---|---|")
    by_games_at_rank(models, models.player_instances(), "one-player set")
    by_games_at_rank(models, models.evaluation_instances(), "evaluation split")


def by_games_at_rank(models, table: pa.Table, label: str) -> None:
    """Signed error from one game, by the number of games of the instance's player at its rank."""
    names = models.group_names
    columns = feature_columns(table.column_names)
    features = np.column_stack(
        [table[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in columns]
    )
    raw, _ = models.predict(features, columns, models.feature_set(), 1)
    error = raw - np.array([names.index(g) for g in table["rank_group"].to_pylist()])
    keys = list(zip(table["player"].to_pylist(), table["rank_group"].to_pylist(), strict=True))
    games = np.array([Counter(keys)[k] for k in keys])
    for low, high in ((1, 1), (2, 4), (5, 14), (15, None)):
        rows = (games >= low) & (games <= (high or games.max()))
        if rows.any():
            span = f"{low}" if low == high else f"{low}+" if high is None else f"{low}-{high}"
            print(f"| {label} | {span} | {rows.sum():,} | {error[rows].mean():+.3f} |")


if __name__ == "__main__":
    main()
