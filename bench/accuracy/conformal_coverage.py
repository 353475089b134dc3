"""How calibrated the strength intervals are, beyond one split: coverage over many splits.

`kibitz train meta` measures the 80 % and 95 % intervals' coverage on one evaluation split. With
a few dozen evaluation instances per group, the 500 draws per group of n instances reuse the
same instances, so that one figure moves by several points with the split alone. Split
conformal promises coverage ≥ 1 − α on average over the calibration and test draws; this script
measures that average: it refits the strength models (pipeline/meta/intervals.py) on
``--splits`` re-drawn game splits (the same fractions, another salt each) and prints, per n and
level, the mean coverage over splits, its standard error, and the range::

    python bench/accuracy/conformal_coverage.py chess models/kibitz-meta-chess/aggregates --n 1,5,20
    python bench/accuracy/conformal_coverage.py go models/kibitz-meta-go/aggregates --n 1,5,10
    python bench/accuracy/conformal_coverage.py go models/kibitz-meta-go/aggregates --n 5,10 --folds 5
    python bench/accuracy/conformal_coverage.py go models/kibitz-meta-go/aggregates --n 1,5,20 \
        --player-aggregates models/kibitz-meta-go/player-aggregates

With ``--player-aggregates`` (a player-specific set, like the shipped Go model's) it also
measures coverage on one player's own n games, for the rank-group calibration and for the player
calibration (pipeline/meta/intervals.py:calibrate_on_players), each split re-drawing the halves
of the players too.

A mean within ±3 points of nominal with a small standard error says the method is calibrated
and a single split's deviation is the evaluation sample's size; a mean outside says it is not.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

from meta_bench import fitting, instance_tables, meta_parser, sample_sizes

from pipeline.core.data_split import SplitConfig
from pipeline.meta.aggregate import INSTANCES, load_mart
from pipeline.meta.intervals import LEVELS, strength_at_n
from pipeline.meta.model import (
    MetaConfig,
    MetaDataError,
    instance_data,
    train_and_evaluate,
    unseen_instances,
)


def main() -> None:
    parser = meta_parser(__doc__, default_n="1,5,20")
    parser.add_argument("--splits", type=int, default=10, help="re-drawn splits (salts)")
    parser.add_argument("--feature-set", default="full", help="the set the intervals use")
    parser.add_argument("--folds", type=int, default=0, help="cross-fitting folds (0: the rule)")
    parser.add_argument(
        "--player-aggregates", type=Path,
        help="a player-specific set: also measure the player calibration, halves re-drawn",
    )  # fmt: skip
    args = parser.parse_args()

    instances, rank_groups = instance_tables(args.aggregates)
    players = load_mart(args.player_aggregates, INSTANCES) if args.player_aggregates else None
    ns = sample_sizes(args.n)
    rows: dict[tuple[int, str, str], list[dict]] = {}
    for k in range(args.splits):
        split = SplitConfig(salt=f"kibitz-coverage-{k}")
        data = instance_data(instances, rank_groups, game=args.game, split=split)
        player_data = None
        if players is not None:
            other = instance_data(players, rank_groups, game=args.game, split=split)
            player_data = unseen_instances(other, data)
        config = MetaConfig(
            ns=tuple(ns),
            feature_sets=(args.feature_set,),
            split=split,
            conformal_folds=args.folds,
            **fitting(args),
        )
        for n in ns:
            try:
                result = train_and_evaluate(
                    data, n, replace(config, ns=(n,)), player_data=player_data
                )
            except MetaDataError as exc:
                print(f"split {k} n={n}: skipped ({exc})", flush=True)
                continue
            fit = strength_at_n(
                data, result, config, feature_set=args.feature_set,
                player_salt=f"kibitz-coverage-halves-{k}",
            )  # fmt: skip
            for row in fit.rows if fit is not None else []:
                if "mae" not in row or (row["sampling"] == "player" and players is None):
                    continue
                rows.setdefault((n, row["sampling"], row["calibration"]), []).append(row)
                print(f"split {k} n={n} {row['sampling']} sampling, {row['calibration']}"
                      " calibration: " + ", ".join(
                    f"coverage {round(100 * lv)} % {100 * row[f'coverage_{round(100 * lv)}']:.1f}"
                    for lv in LEVELS) + f", MAE {row['mae']:g}", flush=True)  # fmt: skip
    for (n, sampling, calibration), got in sorted(rows.items()):
        if len(got) < 2:
            print(f"n={n} {sampling}/{calibration}: fewer than two splits measured")
            continue
        cells = []
        for level in LEVELS:
            values = [100 * r[f"coverage_{round(100 * level)}"] for r in got]
            se = statistics.stdev(values) / len(values) ** 0.5
            cells.append(
                f"{round(100 * level)} %: mean {statistics.mean(values):.1f} ± {se:.1f} (SE),"
                f" range {min(values):.1f}–{max(values):.1f}"
            )
        mae = statistics.mean(r["mae"] for r in got)
        print(f"n={n} {sampling} sampling, {calibration} calibration, {len(got)} splits: "
              + "; ".join(cells) + f"; MAE {mae:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
