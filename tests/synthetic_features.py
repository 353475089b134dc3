"""A per-move features table with the real schema and a known skill structure, for tests and
``bench/speed/bench_aggregate.py`` (where real extracted features of a whole split do not exist yet).

Each rank group g (0 = weakest) has players whose moves have, per move: the played move's prior
under each imitation net rising with g (and most with the net of the player's own level), a
loss whose mean falls with g, an expected loss tied to the loss, and an s-score around g. The
numbers only need to separate the groups the way real features do, not to look like chess.

    table = synthetic_features(groups=8, games_per_group=50, seed=0)
    write_features(table, Path("/tmp/features"))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.features_schema import PARTITION_COLUMNS, features_schema

NETS = ("maia-1100", "maia-1500", "maia-1900")


def synthetic_features(
    *,
    groups: int = 4,
    games_per_group: int = 40,
    plies: tuple[int, int] = (40, 120),
    nets: tuple[str, ...] = NETS,
    strength_nets: tuple[str, ...] = ("sscore-test",),
    signal: float = 1.0,
    seed: int = 0,
    game: str = "chess",
) -> pa.Table:
    """Moves of ``groups × games_per_group`` games; ``signal=0`` makes features ignore skill."""
    rng = np.random.default_rng(seed)
    n_games = groups * games_per_group
    game_group = np.repeat(np.arange(groups), games_per_group)  # (G,)
    lengths = rng.integers(plies[0], plies[1] + 1, size=n_games)  # (G,)
    game_of = np.repeat(np.arange(n_games), lengths)  # (M,)
    ply = np.arange(game_of.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # (M,)
    rows = game_of.size
    skill = signal * game_group[game_of] / max(groups - 1, 1)  # (M,) in [0, 1]
    white = ply % 2 == 0
    names = np.array(
        [f"p{g:05d}{'w' if w else 'b'}" for g in range(n_games) for w in (True, False)]
    )
    player = names[2 * game_of + (~white)]
    opponent = names[2 * game_of + white]
    base = 1000 + 200 * game_group[game_of]
    columns: dict[str, pa.Array] = {
        "game_id": pa.array(np.char.add("g", game_of.astype(str)).astype(object)),
        "game": pa.array(np.full(rows, game, dtype=object)),
        "source": pa.array(np.full(rows, "lichess", dtype=object)),
        "month": pa.array(np.full(rows, "2024-02", dtype=object)),
        "ply": pa.array(ply, pa.int32()),
        "move_number": pa.array(ply // 2 + 1, pa.int32()),
        "colour": pa.array(np.where(white, "white", "black").astype(object)),
        "player": pa.array(player.astype(object)),
        "opponent": pa.array(opponent.astype(object)),
        "rating": pa.array(base + rng.integers(0, 200, rows), pa.int32()),
        "rank": pa.nulls(rows, pa.string()),
        "rank_num": pa.nulls(rows, pa.float32()),
        "rank_group": pa.array(
            np.array([f"{1000 + 200 * g}-{1200 + 200 * g}" for g in range(groups)])[
                game_group[game_of]
            ].astype(object)
        ),
        "played_move": pa.array(np.full(rows, "e2e4", dtype=object)),
        "num_legal": pa.array(np.full(rows, 30), pa.int16()),
    }
    loss = rng.exponential(0.6 - 0.4 * skill).astype(np.float32)  # (M,)
    expected = (0.5 * loss + rng.exponential(0.2, rows)).astype(np.float32)
    v_before = rng.normal(0, 1, rows).astype(np.float32)
    columns |= {
        "v_before": pa.array(v_before),
        "v_after": pa.array(v_before - loss),
        "loss": pa.array(loss),
        "expected_loss": pa.array(expected),
        "expected_loss_moves": pa.array(np.full(rows, 3), pa.int16()),
        "clock_s": pa.array(np.full(rows, 60.0, np.float32)),
        "tc_base_s": pa.array(np.full(rows, 180), pa.int32()),
        "tc_increment_s": pa.array(np.zeros(rows), pa.int32()),
    }
    for k, net in enumerate(nets):
        level = k / max(len(nets) - 1, 1)
        logit = -2.0 + 1.2 * skill - 1.5 * np.abs(skill - level * signal) + rng.normal(0, 1.0, rows)
        prior = (1 / (1 + np.exp(-logit))).astype(np.float32)
        slug = net.replace("-", "_")
        columns[f"prior_{slug}"] = pa.array(prior)
        columns[f"logprior_{slug}"] = pa.array(
            np.maximum(np.log(prior), np.log(1e-6)).astype(np.float32)
        )
        columns[f"top1_{slug}"] = pa.array(prior > 0.5)
    for net in strength_nets:
        columns[f"sscore_{net.replace('-', '_')}"] = pa.array(
            (3 * skill + rng.normal(0, 2.0, rows)).astype(np.float32)
        )
    schema = features_schema(list(nets), list(strength_nets))
    return pa.table({f.name: columns[f.name] for f in schema}, schema=schema)


def write_features(table: pa.Table, root: Path, *, rows_per_file: int = 1_000_000) -> Path:
    """Write ``table`` in the hive layout of ``kibitz extract`` (partition columns in paths)."""
    keys = [table[c][0].as_py() for c in PARTITION_COLUMNS]
    folder = Path(root).joinpath(
        *(f"{c}={v}" for c, v in zip(PARTITION_COLUMNS, keys, strict=True))
    )
    folder.mkdir(parents=True, exist_ok=True)
    body = table.drop_columns(list(PARTITION_COLUMNS))
    for i, start in enumerate(range(0, table.num_rows, rows_per_file)):
        pq.write_table(body.slice(start, rows_per_file), folder / f"part-{i:04d}.parquet")
    return Path(root)
