"""Benchmark: DuckDB aggregation of the features table, and meta-model sample building.

    python bench/speed/bench_aggregate.py                     # chess-sized (testing split), 3 repeats
    python bench/speed/bench_aggregate.py --game go           # Go-sized (~2M moves)
    python bench/speed/bench_aggregate.py --features DIR      # real extracted features instead

1. ``player_instance_features`` (sql/marts, reading the ``stg_moves`` view that
   ``open_features`` creates) over a features table the size of the whole testing split,
   against a pandas groupby computing the same aggregates in the same run; moves/s and the
   ratio. Without ``--features`` the table is synthetic with the real schema
   (tests/synthetic_features.py: 9 imitation nets and one s-score net; chess 9,600 games ≈ 770k
   moves, Go 9,900 games ≈ 2M moves), because the whole split has not been extracted on this
   machine; the SQL's cost depends on rows and columns, not on the values.
2. Sample building (mean features of n = 20 instances, 500 draws per rank group): the
   vectorised :func:`pipeline.meta.samples.rank_group_samples` against a per-sample Python loop.

Medians over ``--repeats``; the machine is shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from synthetic_features import synthetic_features, write_features  # noqa: E402

from pipeline.meta.aggregate import AggregateConfig, feature_columns, open_features, read_sql  # noqa: E402
from pipeline.meta.samples import rank_group_samples  # noqa: E402

SIZES = {  # games per rank group, rank groups, plies per game: the testing splits' shape
    "chess": (1200, 8, (40, 120)),
    "go": (900, 11, (150, 270)),
}
NETS = {
    "chess": tuple(f"maia-{r}" for r in range(1100, 2000, 100)),
    "go": tuple(f"rank-{r}" for r in ("5k", "3k", "1k", "1d", "2d", "3d", "4d", "5d", "7d", "9d")),
}


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median wall seconds of ``fn`` over ``repeats`` runs, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def pandas_instances(moves: pd.DataFrame, alpha: float, gamma: float) -> pd.DataFrame:
    """The same aggregates as player_instance_features.sql, the way a pandas script does it."""
    df = moves.copy()
    lf = df["loss"].clip(lower=0)
    ef = df["expected_loss"].clip(lower=0)
    df["loss_c61"] = lf / (ef + alpha)
    df["loss_c62"] = (lf + alpha) / (ef + alpha)
    df["loss_c63"] = lf + gamma * (lf - ef) / (ef + alpha)
    denominator = (lf + ef).where(lf + ef != 0)
    df["loss_c64"] = lf + (gamma * (lf - ef) / denominator).fillna(0).where(lf.notna())
    logprior = [c for c in df.columns if c.startswith("logprior_")]
    top1 = [c for c in df.columns if c.startswith("top1_")]
    spread = ["loss"] + [c for c in df.columns if c.startswith("sscore_")]
    corrected = ["loss_c61", "loss_c62", "loss_c63", "loss_c64"]
    df[top1] = df[top1].astype(float)
    parts = []
    for suffix, limit in (("k25", 25), ("k50", 50), ("all", None)):
        sub = df if limit is None else df[df["move_number"] <= limit]
        grouped = sub.groupby(["game_id", "colour"], sort=False)
        geo = np.exp(grouped[logprior].mean()).add_suffix(f"_geomean_{suffix}")
        rates = grouped[top1].mean().add_suffix(f"_rate_{suffix}")
        means = grouped[spread + corrected].mean().add_suffix(f"_mean_{suffix}")
        medians = grouped[spread].median().add_suffix(f"_median_{suffix}")
        stds = grouped[spread].std(ddof=0).add_suffix(f"_std_{suffix}")
        counts = grouped.size().rename(f"moves_{suffix}")
        parts += [geo, rates, means, medians, stds, counts]
    return pd.concat(parts, axis=1)


def loop_samples(
    features: np.ndarray, group: np.ndarray, n: int, draws: int, seed: int
) -> np.ndarray:
    """Per-sample baseline: choose n rows of the group, average them, one sample at a time."""
    rng = np.random.default_rng(seed)
    out = []
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        for _ in range(draws):
            out.append(np.nanmean(features[rng.choice(rows, size=n, replace=False)], axis=0))
    return np.stack(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--game", choices=sorted(SIZES), default="chess")
    parser.add_argument("--features", type=Path, help="real features folder (default: synthetic)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        features_dir = args.features
        if features_dir is None:
            games, groups, plies = SIZES[args.game]
            t0 = time.perf_counter()
            table = synthetic_features(
                groups=groups,
                games_per_group=games,
                plies=plies,
                nets=NETS[args.game],
                game=args.game,
            )
            features_dir = write_features(table, Path(tmp) / "features")
            print(f"synthetic {args.game} features: {table.num_rows:,} moves, {table.num_columns} columns"
                  f" ({time.perf_counter() - t0:.1f} s to generate)")  # fmt: skip
        config = AggregateConfig()
        con = open_features(features_dir, config=config)
        moves = con.execute("select count(*) from features").fetchone()[0]
        sql = read_sql("player_instance_features")
        duck_s, duck = timed(lambda: con.execute(sql).df(), args.repeats)
        print(f"DuckDB player_instance_features: {moves:,} moves → {len(duck):,} instances in"
              f" {duck_s:.2f} s = {moves / duck_s:,.0f} moves/s (median of {args.repeats})")  # fmt: skip
        read_s, frame = timed(lambda: pd.read_parquet(features_dir), args.repeats)
        pandas_s, pandas_out = timed(
            lambda: pandas_instances(frame, config.alpha, config.gamma), args.repeats
        )
        print(f"pandas baseline: read Parquet {read_s:.2f} s + groupby {pandas_s:.2f} s ="
              f" {moves / (read_s + pandas_s):,.0f} moves/s ({moves / pandas_s:,.0f} groupby only)")  # fmt: skip
        print(f"ratio pandas (read + groupby) / DuckDB (read + SQL): {(read_s + pandas_s) / duck_s:.2f}×;"
              f" pandas groupby alone / DuckDB: {pandas_s / duck_s:.2f}×")  # fmt: skip
        check = duck.set_index(["game_id", "colour"]).loc[pandas_out.index]
        np.testing.assert_allclose(
            check["loss_mean_all"], pandas_out["loss_mean_all"], rtol=1e-4, atol=1e-6
        )
        np.testing.assert_allclose(
            check["loss_c64_mean_all"], pandas_out["loss_c64_mean_all"], rtol=1e-4, atol=1e-6
        )

        columns = feature_columns(duck.columns)
        x = duck[columns].to_numpy(dtype=np.float64)
        group = pd.factorize(duck["rank_group"])[0]
        n, draws = 20, 500
        vec_s, _ = timed(
            lambda: rank_group_samples(
                x, group, n=n, draws_per_group=draws, rng=np.random.default_rng(0)
            ),
            args.repeats,
        )
        loop_s, _ = timed(lambda: loop_samples(x, group, n, draws, 0), args.repeats)
        samples = draws * len(np.unique(group))
        print(f"sample building (n={n}, {samples:,} samples × {len(columns)} features): vectorised"
              f" {vec_s * 1000:.1f} ms, per-sample loop {loop_s * 1000:.0f} ms → {loop_s / vec_s:.0f}× faster")  # fmt: skip


if __name__ == "__main__":
    main()
