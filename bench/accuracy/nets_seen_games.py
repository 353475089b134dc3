"""Do the meta-model's figures on the player-specific set lean on games the nets trained on?

The player-specific set of a shipped model (``--player-aggregates``: Fox ``by-player`` games)
is new to the meta-models, but not to every net: Kibitz's own Go nets (``kibitz-go-policy``,
``kibitz-sscore-go``, ``kibitz-sscore-go-levels``) trained on the training part of the shared
game split of ``testing/`` + ``by-player/`` (docs/research/log-nets.md). A net is sharper on positions it
learned, so the player-specific rows could be flattered. This measures how much: the applied
model's one-game accuracy (``n = 1``: one instance is one sample) and the strength model's
one-game error and 80 % / 95 % coverage on the set's instances, apart by the part of the shared
split their game falls in — ``train`` (the nets learned these games) and ``validation`` +
``evaluation`` (the nets never trained on them). Run::

    python bench/accuracy/nets_seen_games.py go
    python bench/accuracy/nets_seen_games.py go --model DIR --n 1

Prints one row per part: instances, accuracy, accuracy ±1, strength MAE, coverage at 80 / 95 %.
"""

from __future__ import annotations

import argparse

import numpy as np

from pipeline.core.data_split import TRAIN, SplitConfig
from pipeline.meta.aggregate import load_mart
from pipeline.meta.model import instance_data
from pipeline.meta.registered import resolve_meta_models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--model", help="registry name or folder (default: kibitz-meta-GAME)")
    parser.add_argument("--n", type=int, default=1, help="the trained n whose models score")
    args = parser.parse_args()
    models = resolve_meta_models(args.model, args.game)
    data = instance_data(
        models.player_instances(),
        load_mart(models.aggregates_dir, "rank_groups"),
        game=args.game,
        split=SplitConfig(),  # the shared split Kibitz's nets were trained on (docs/research/log-nets.md)
    )
    feature_set = models.feature_set()
    _, group = models.predict(data.features, data.columns, feature_set, args.n)
    strength = models.strength()
    point = strength.predict(data.features, data.columns, args.n)
    error = np.abs(point - data.strength)
    covered = {}
    for level in (0.8, 0.95):
        low, high = strength.interval(point, args.n, level).T
        covered[level] = (low <= data.strength) & (data.strength <= high)
    print(
        f"{models.manifest['name']} ({feature_set}, n = {args.n}) on {models.player_aggregates_dir}"
    )
    print(
        "| games of the shared split's | instances | accuracy % | ±1 % | MAE | cover 80 % | cover 95 % |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, rows in (
        ("train part (nets trained on them)", data.split == TRAIN),
        ("validation + evaluation parts (never trained on)", data.split != TRAIN),
    ):
        hit = group[rows] == data.group[rows]
        near = np.abs(group[rows] - data.group[rows]) <= 1
        print(
            f"| {name} | {int(rows.sum()):,} | {100 * hit.mean():.1f} | {100 * near.mean():.1f}"
            f" | {error[rows].mean():.2f} | {100 * covered[0.8][rows].mean():.1f}"
            f" | {100 * covered[0.95][rows].mean():.1f} |"
        )  # fmt: skip


if __name__ == "__main__":
    main()
