"""The DuckDB catalog of an output home, on real data: the first Lichess game of each band and
the first Fox game of each rank group as the games table, real features of two chess games
(Maia-1100 + Stockfish, extracted here), their aggregates, and synthetic Go features beside them.

- ``refresh_catalog`` makes one view per table found (``chess_games``, ``go_games``,
  ``chess_features``, ``chess_player_instance_features`` …) that reads the Parquet in place;
- refreshing is idempotent, drops the views of tables that are gone and keeps a user's tables;
- ``kibitz aggregate`` into a folder of the home refreshes it (the stage hook);
- on the real features every mart equals the same SQL reading the features directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from synthetic_features import synthetic_features
from synthetic_features import write_features as write_synthetic
from train_real_games import chess_games, go_games, write_games_dir

from pipeline.core import catalog
from pipeline.estimate.in_process import extract_in_process
from pipeline.extract.config import config_from_dict
from pipeline.jobs.estimate import write_features
from pipeline.meta.aggregate import build_marts, mart_names, open_features, run_aggregate

CONFIG = {
    "game": "chess",
    "imitation_nets": ["maia-1100"],
    # low: the test checks the tables, not Stockfish's strength
    "value": {"evaluator": "stockfish", "nodes": 10},
    "expected_loss": {"net": "maia-1100", "prior_share": 0.8, "max_moves": 2},
}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """An output home as ``kibitz run`` lays it out, aggregated with KIBITZ_HOME pointing at it."""
    root = tmp_path_factory.mktemp("home")
    chess = chess_games(1)
    write_games_dir(chess, root / "games")
    write_games_dir(go_games(1), root / "games")
    features, dropped = extract_in_process(config_from_dict(CONFIG), chess.slice(0, 2))
    assert dropped == 0 and features.num_rows > 0
    write_features(features, root / "features-chess")
    go = synthetic_features(groups=2, games_per_group=3, nets=("rank-1d",), game="go")
    write_synthetic(go, root / "features-go")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KIBITZ_HOME", str(root))
        for kind in ("chess", "go"):
            summary = run_aggregate(root / f"features-{kind}", root / f"aggregates-{kind}")
            assert summary["catalog"] == str(root / catalog.CATALOG_FILE)  # the stage hook
    return root


def connect(home: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(home / catalog.CATALOG_FILE), read_only=True)


def count(con: duckdb.DuckDBPyConnection, relation: str) -> int:
    return con.execute(f"select count(*) from {relation}").fetchall()[0][0]


def test_one_view_per_table_of_both_kinds(home: Path):
    views = catalog.refresh_catalog(home)
    expected = {f"{kind}_{t}" for kind in ("chess", "go") for t in ("games", "features")}
    expected |= {f"{kind}_{m}" for kind in ("chess", "go") for m in mart_names()}
    assert set(views) == expected
    assert (
        views["chess_features"] == (home / "features-chess").resolve().as_posix() + "/**/*.parquet"
    )
    con = connect(home)
    games = pq.read_table(home / "games").to_pandas()
    assert count(con, "chess_games") == (games["game"] == "chess").sum() == 8
    assert count(con, "go_games") == (games["game"] == "go").sum() > 0
    # the staging models: renamed columns, one row per game / per move
    assert con.execute("select count(distinct white_name) from chess_games").fetchall()[0][0] > 0
    assert count(con, "chess_features") == pq.read_table(home / "features-chess").num_rows
    columns = [r[0] for r in con.execute("describe chess_features").fetchall()]
    assert columns[-3:] == ["prior_maia_1100", "logprior_maia_1100", "top1_maia_1100"]
    assert count(con, "chess_player_instance_features") == 4  # 2 games × 2 colours
    assert con.execute("select distinct game from go_player_instance_features").fetchall() == [
        ("go",)
    ]
    comment = con.execute(
        "select comment from duckdb_views() where view_name = 'chess_rank_groups'"
    ).fetchall()[0][0]
    assert comment.startswith(catalog.VIEW_COMMENT) and comment.endswith("rank_groups.parquet")


def test_refresh_is_idempotent_drops_gone_tables_and_keeps_user_tables(home: Path, tmp_path):
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    first = catalog.refresh_catalog(copy)
    assert first == catalog.refresh_catalog(copy)
    with duckdb.connect(str(copy / catalog.CATALOG_FILE)) as con:
        con.execute("create table notes as select 42 as answer")
    (copy / "aggregates-go" / "prior_profile.parquet").unlink()
    shutil.rmtree(copy / "features-go")
    views = catalog.refresh_catalog(copy)
    assert set(first) - set(views) == {"go_prior_profile", "go_features"}
    con = connect(copy)
    names = {r[0] for r in con.execute("select view_name from duckdb_views()").fetchall()}
    assert "go_prior_profile" not in names and "chess_features" in names
    assert con.execute("select answer from notes").fetchall() == [(42,)]


def test_views_see_new_data_without_a_refresh(home: Path, tmp_path):
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    catalog.refresh_catalog(copy)
    before = count(connect(copy), "chess_features")
    march = pq.read_table(next((copy / "features-chess").rglob("*.parquet")))
    folder = copy / "features-chess" / "game=chess" / "source=lichess" / "month=2024-03"
    folder.mkdir(parents=True)
    pq.write_table(march, folder / "part-new.parquet")
    assert count(connect(copy), "chess_features") == before + march.num_rows


def test_the_hook_refreshes_homes_only(home: Path, tmp_path, monkeypatch):
    elsewhere = tmp_path / "somewhere" / "aggregates-chess"
    elsewhere.mkdir(parents=True)
    monkeypatch.setenv("KIBITZ_HOME", str(tmp_path / "kibitz-out"))
    assert catalog.refresh_home_of(elsewhere) is None
    assert not (tmp_path / "somewhere" / catalog.CATALOG_FILE).exists()
    # a folder with a catalog is a home (`kibitz run --out DIR` made one)
    assert catalog.refresh_home_of(home / "games") == home / catalog.CATALOG_FILE


def test_default_aggregates_folder_is_beside_the_features(home: Path, tmp_path):
    assert catalog.aggregates_dir_for(home / "features-go") == home / "aggregates-go"
    other = tmp_path / "feats"
    shutil.copytree(home / "features-chess", other)
    assert catalog.aggregates_dir_for(other) == tmp_path / "aggregates-chess"
    assert catalog.aggregates_dir_for(tmp_path / "x") == tmp_path / "aggregates"


def test_marts_on_stg_moves_equal_the_direct_read_on_real_features(home: Path):
    con = open_features(home / "features-chess")
    build_marts(con)
    models = catalog.load_models()
    direct = {"stg_moves": "select * from features"}  # how the marts read before staging
    for name in mart_names(models):
        # the marts that read other marts read the direct versions too
        relations = dict(direct)
        for ref in catalog.run_order(models, [name])[:-1]:
            if ref != "stg_moves":
                relations[ref] = catalog.bind_sql(models[ref].sql, direct)
        old = con.sql(catalog.bind_sql(models[name].sql, relations)).df()
        pd.testing.assert_frame_equal(con.sql(f"from {name}").df(), old, check_exact=True)
