"""The SQL marts on a tiny features table written as real Parquet, against hand-computed values;
the run order derived from the models' references; the staging layer changes no figure.

Instances (one player's moves in one game):
- ("A", white), alice, 60 moves: moves 1–25 have loss 1, prior 1/2; moves 26–50 loss 3, prior
  1/4; moves 51–60 loss 6, prior 1/8; s-score = move number; top-1 on even move numbers.
- ("A", black), bob, 5 moves with (loss, E) = (1, 1), (0, 0), (2, 0.5), (−0.5, 0.2), (null, null),
  every prior at the log floor 1e-6 but the first (1/2).
- ("B", white), alice again, 2 moves of loss 4.
- ("B", black), no rank group (left out of rank_groups).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from synthetic_features import write_features

from pipeline.core import catalog
from pipeline.core.features_schema import (
    feature_column,
    features_schema,
    instance_column,
    net_columns_regex,
)
from pipeline.meta.aggregate import (
    AggregateConfig,
    build_marts,
    feature_columns,
    load_mart,
    mart_names,
    open_features,
    run_aggregate,
)

ALPHA, GAMMA = 0.5, 2.0
FLOOR = math.log(1e-6)


def move(game_id, colour, player, group, rating, number, loss, expected, logprior, sscore, top1):
    ply = 2 * (number - 1) + (colour == "black")
    return {
        "game_id": game_id, "game": "chess", "source": "lichess", "month": "2024-02" if game_id == "A" else "2024-03",
        "ply": ply, "move_number": number, "colour": colour, "player": player, "opponent": "x",
        "rating": rating, "rank": None, "rank_num": None, "rank_group": group, "played_move": "e2e4",
        "num_legal": 20, "v_before": 0.0, "v_after": None if loss is None else -loss, "loss": loss,
        "expected_loss": expected, "expected_loss_moves": 3, "clock_s": None, "tc_base_s": None, "tc_increment_s": None,
        "prior_maia_1100": math.exp(logprior), "logprior_maia_1100": logprior, "top1_maia_1100": top1,
        "sscore_s1": sscore,
    }  # fmt: skip


def tiny_moves() -> list[dict]:
    rows = []
    for k in range(1, 61):
        loss, prior = (1.0, 0.5) if k <= 25 else (3.0, 0.25) if k <= 50 else (6.0, 0.125)
        rows.append(
            move(
                "A",
                "white",
                "alice",
                "1000-1200",
                1100,
                k,
                loss,
                0.5,
                math.log(prior),
                float(k),
                k % 2 == 0,
            )
        )
    pairs = [(1.0, 1.0), (0.0, 0.0), (2.0, 0.5), (-0.5, 0.2), (None, None)]
    for k, (loss, e) in enumerate(pairs, start=1):
        rows.append(
            move(
                "A",
                "black",
                "bob",
                "1000-1200",
                1150,
                k,
                loss,
                e,
                math.log(0.5) if k == 1 else FLOOR,
                0.0,
                False,
            )
        )
    for k in (1, 2):
        rows.append(
            move("B", "white", "alice", "2000-2200", 2100, k, 4.0, 1.0, math.log(0.5), 1.0, True)
        )
        rows.append(move("B", "black", "carol", None, None, k, 0.0, 0.0, math.log(0.5), 1.0, True))
    return rows  # fmt: skip


@pytest.fixture(scope="module")
def aggregates(tmp_path_factory) -> Path:
    """An output home with features-chess/ and aggregates-chess/ (the folder returned)."""
    root = tmp_path_factory.mktemp("agg")
    schema = features_schema(["maia-1100"], ["s1"])
    table = pa.Table.from_pylist(tiny_moves(), schema=schema)
    # two months → two partitions, written like `kibitz extract` does
    for month in ("2024-02", "2024-03"):
        part = table.filter(pa.compute.equal(table["month"], month))
        write_features(part, root / "features-chess")
    out = root / "aggregates-chess"
    summary = run_aggregate(
        root / "features-chess", out, config=AggregateConfig(alpha=ALPHA, gamma=GAMMA)
    )
    assert summary["catalog"] is None  # not in an output home: no catalog written by itself
    catalog.refresh_catalog(root)
    return out


def instance(aggregates: Path, game_id: str, colour: str) -> dict:
    rows = load_mart(aggregates, "player_instance_features").to_pylist()
    return next(r for r in rows if r["game_id"] == game_id and r["colour"] == colour)


def test_grain_key_unique_and_not_null(aggregates: Path):
    # through the home's catalog: chess_<mart> views over aggregates-chess/<mart>.parquet
    con = duckdb.connect(str(aggregates.parent / catalog.CATALOG_FILE), read_only=True)
    for table, key in (
        ("player_instance_features", "game_id, colour"),
        ("player_features", "game, source, player"),
        ("rank_groups", "game, rank_group"),
        ("prior_profile", "game, rank_group, net"),
        ("loss_by_move_number", "game, rank_group, move_number"),
    ):
        total, distinct, nulls = con.execute(
            f"select count(*), count(distinct ({key})), "
            f"count(*) filter (where {' or '.join(f'{c} is null' for c in key.split(', '))})"
            f" from chess_{table}"
        ).fetchone()
        assert total == distinct and nulls == 0, table
    assert con.execute("select count(*) from chess_player_instance_features").fetchone()[0] == 4
    # the catalog's features view is stg_moves over the Parquet, read in place
    assert con.execute("select count(*) from chess_features").fetchone()[0] == 69
    assert not list(aggregates.glob("*.duckdb*"))  # the scratch database is gone


def test_cutoffs_mean_median_std_of_loss_and_sscore(aggregates: Path):
    a = instance(aggregates, "A", "white")
    assert a["moves_k25"] == 25 and a["moves_k50"] == 50 and a["moves_all"] == 60
    assert a["loss_mean_k25"] == pytest.approx(1.0)
    assert a["loss_mean_k50"] == pytest.approx(2.0)
    assert a["loss_mean_all"] == pytest.approx(160 / 60)
    assert a["loss_median_k25"] == pytest.approx(1.0)
    assert a["loss_median_k50"] == pytest.approx(2.0)  # 25 ones and 25 threes
    assert a["loss_median_all"] == pytest.approx(3.0)
    assert a["loss_std_k25"] == pytest.approx(0.0)
    assert a["loss_std_k50"] == pytest.approx(1.0)
    assert a["loss_std_all"] == pytest.approx(math.sqrt(610 / 60 - (160 / 60) ** 2))
    # s-score = move number 1..k: mean (k+1)/2, population std sqrt((k²−1)/12)
    assert a["sscore_s1_mean_k25"] == pytest.approx(13.0)
    assert a["sscore_s1_median_k50"] == pytest.approx(25.5)
    assert a["sscore_s1_std_k25"] == pytest.approx(math.sqrt((25**2 - 1) / 12))
    assert a["sscore_s1_std_all"] == pytest.approx(math.sqrt((60**2 - 1) / 12))
    assert a["top1_maia_1100_rate_k25"] == pytest.approx(12 / 25)
    assert a["top1_maia_1100_rate_all"] == pytest.approx(0.5)


def test_geometric_mean_of_priors(aggregates: Path):
    a = instance(aggregates, "A", "white")
    assert a["prior_maia_1100_geomean_k25"] == pytest.approx(0.5, rel=1e-6)
    assert a["prior_maia_1100_geomean_k50"] == pytest.approx(math.sqrt(0.5 * 0.25), rel=1e-6)
    assert a["prior_maia_1100_geomean_all"] == pytest.approx(2 ** -(105 / 60), rel=1e-6)
    # four moves at the floor 1e-6 and one at 1/2: finite, exp of the mean log
    b = instance(aggregates, "A", "black")
    assert b["prior_maia_1100_geomean_all"] == pytest.approx(
        math.exp((math.log(0.5) + 4 * FLOOR) / 5), rel=1e-5
    )


def test_difficulty_corrected_losses(aggregates: Path):
    b = instance(aggregates, "A", "black")
    # α = 0.5, γ = 2; per move (6.1, 6.2, 6.3, 6.4), loss and E floored at 0:
    #   (1, 1):     2/3,  1,       1,        1
    #   (0, 0):     0,    1,       0,        0      (0/0 of 6.4 taken as 0)
    #   (2, 0.5):   2,    2.5,     5,        3.2
    #   (−.5, 0.2): 0,    0.5/0.7, −0.4/0.7, −2
    #   (null, null) is left out of every mean
    assert b["moves_all"] == 5 and b["moves_with_loss_all"] == 4
    assert b["loss_mean_all"] == pytest.approx((1 + 0 + 2 - 0.5) / 4)  # the raw loss
    assert b["loss_c61_mean_all"] == pytest.approx((2 / 3 + 0 + 2 + 0) / 4)
    assert b["loss_c62_mean_all"] == pytest.approx((1 + 1 + 2.5 + 0.5 / 0.7) / 4)
    assert b["loss_c63_mean_all"] == pytest.approx((1 + 0 + 5 - 0.4 / 0.7) / 4)
    assert b["loss_c64_mean_all"] == pytest.approx((1 + 0 + 3.2 - 2) / 4)


def test_player_features_and_rank_groups(aggregates: Path):
    players = {r["player"]: r for r in load_mart(aggregates, "player_features").to_pylist()}
    alice = players["alice"]
    assert alice["games"] == 2 and alice["games_as_white"] == 2 and alice["moves"] == 62
    assert (alice["first_month"], alice["last_month"]) == ("2024-02", "2024-03")
    assert alice["loss_mean_all"] == pytest.approx((160 / 60 + 4.0) / 2)
    assert alice["rating_mean"] == pytest.approx(1600)
    profile = load_mart(aggregates, "prior_profile").to_pylist()
    assert [(r["rank_group"], r["net"], r["instances"]) for r in profile] == [
        ("1000-1200", "maia_1100", 2),
        ("2000-2200", "maia_1100", 1),
    ]
    bob = math.exp((math.log(0.5) + 4 * FLOOR) / 5)
    assert profile[0]["geomean_mean"] == pytest.approx((2 ** -(105 / 60) + bob) / 2, rel=1e-5)
    by_move = {
        (r["rank_group"], r["move_number"]): r
        for r in load_mart(aggregates, "loss_by_move_number").to_pylist()
    }
    assert by_move[("1000-1200", 1)]["loss_mean"] == pytest.approx((1.0 + 1.0) / 2)  # alice, bob
    assert by_move[("1000-1200", 5)]["moves"] == 1  # bob's 5th move has no loss
    assert by_move[("1000-1200", 60)]["loss_mean"] == pytest.approx(6.0)
    groups = load_mart(aggregates, "rank_groups").to_pylist()
    assert [(g["rank_group"], g["group_index"], g["instances"]) for g in groups] == [
        ("1000-1200", 0, 2),
        ("2000-2200", 1, 1),
    ]


def test_feature_columns_cover_every_net_and_cutoff(aggregates: Path):
    columns = feature_columns(load_mart(aggregates, "player_instance_features").column_names)
    for k in ("k25", "k50", "all"):
        assert f"prior_maia_1100_geomean_{k}" in columns
        assert f"sscore_s1_std_{k}" in columns
        assert f"loss_c64_mean_{k}" in columns
        assert f"moves_{k}" not in columns


def test_marts_read_the_staging_models_in_derived_order():
    models = catalog.load_models()
    assert models["player_instance_features"].refs == {"stg_moves", "int_instance_time_usage"}
    assert models["int_instance_time_usage"].refs == {"stg_moves"}
    assert models["loss_by_move_number"].refs == {"stg_moves"}
    assert models["stg_moves"].refs == {"features"} and models["stg_games"].refs == {"games"}
    order = catalog.run_order(models)
    for name, model in models.items():
        assert all(order.index(ref) < order.index(name) for ref in model.refs if ref in models)
    assert [models[n].layer for n in order] == sorted(
        (models[n].layer for n in order), key=catalog.SQL_LAYERS.index
    )
    # what an aggregation builds: the features' models only (stg_games reads games)
    assert catalog.run_order(models, mart_names(models))[:3] == [
        "stg_moves",
        "int_instance_time_usage",
        "player_instance_features",
    ]
    assert "stg_games" not in mart_names(models) and "stg_moves" not in mart_names(models)
    assert set(mart_names(models)) == {
        "player_instance_features", "player_features", "rank_groups", "prior_profile",
        "loss_by_move_number",
    }  # fmt: skip


def write_models(root: Path, files: dict[str, str]) -> Path:
    for name, sql in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(sql)
    return root


def test_a_cycle_or_an_unknown_reference_is_an_error(tmp_path: Path):
    cycle = catalog.load_models(
        write_models(
            tmp_path / "cycle",
            {
                "staging/stg_a.sql": "select * from features",
                "marts/m1.sql": "with x as (select * from m2) select * from x",
                "marts/m2.sql": "select * from m1 join stg_a using (game_id)",
            },
        )
    )
    assert cycle["m1"].refs == {"m2"}  # the CTE x is no reference
    with pytest.raises(catalog.SqlModelError, match="cycle"):
        catalog.run_order(cycle)
    assert catalog.run_order(cycle, ["stg_a"]) == ["stg_a"]
    unknown = catalog.load_models(
        write_models(tmp_path / "unknown", {"marts/m.sql": "select * from stg_nothing"})
    )
    with pytest.raises(catalog.SqlModelError, match="stg_nothing"):
        catalog.run_order(unknown)
    with pytest.raises(catalog.SqlModelError, match="bad template call"):
        catalog.load_models(
            write_models(tmp_path / "bad", {"marts/m.sql": "select {{ open('x') }} from features"})
        )


def test_net_column_patterns_come_from_features_schema():
    text = "columns({{ net_columns('logprior', 'top1') }}), columns({{ net_column('top1') }})"
    assert catalog.render_sql(text) == "columns('^(logprior|top1)_.+$'), columns('^top1_(.+)$')"
    rendered = catalog.render_sql("{{ net_columns('sscore', also=['loss']) }}")
    assert rendered == "'^(loss|(sscore)_.+)$'"
    assert not [m.name for m in catalog.load_models().values() if "{{" in m.sql]


def test_staging_changes_no_figure(aggregates: Path):
    """Every mart built on stg_moves equals the same SQL reading the features view directly
    (stg_moves bound to ``select * from features``), the way the marts read before."""
    con = open_features(aggregates.parent / "features-chess")
    build_marts(con)
    models = catalog.load_models()
    direct = {"stg_moves": "select * from features"}
    for name in ("player_instance_features", "loss_by_move_number"):
        old = con.sql(catalog.bind_sql(models[name].sql, direct)).df()
        pd.testing.assert_frame_equal(con.sql(f"from {name}").df(), old, check_exact=True)


def test_one_rule_names_every_net_column():
    """Extraction's schema, the SQL's patterns and the marts' names all come from
    ``feature_column``: hand-computed for Maia-1100 and the chess s-score net."""
    names = features_schema(["maia-1100"], ["kibitz-sscore-chess"]).names
    assert names[-4:] == [
        "prior_maia_1100",
        "logprior_maia_1100",
        "top1_maia_1100",
        "sscore_kibitz_sscore_chess",
    ]
    assert feature_column("sscore", "kibitz-sscore-chess") == "sscore_kibitz_sscore_chess"
    assert instance_column("prior", "maia-1100", "geomean") == "prior_maia_1100_geomean_all"
    assert instance_column("sscore", "kibitz_sscore_chess", "std", "k25") == (
        "sscore_kibitz_sscore_chess_std_k25"
    )
    pattern = re.compile(net_columns_regex())
    assert [n for n in names if pattern.match(n)] == names[-4:]
    with pytest.raises(ValueError, match="unknown column family"):
        feature_column("elo", "maia-1100")
