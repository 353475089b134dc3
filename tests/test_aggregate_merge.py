"""Merging the aggregates of disjoint extraction runs (pipeline/meta/aggregate_merge.py): the
merge of two halves of a features table equals the aggregation of the whole, table by table,
and a game in two parts or another config is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from synthetic_features import synthetic_features, write_features

from pipeline.cli.main import main
from pipeline.meta.aggregate import load_mart, load_summary, run_aggregate
from pipeline.meta.aggregate_merge import MergeError, merge_aggregates

KEYS = {
    "player_instance_features": ["game_id", "player"],
    "player_features": ["game", "player"],
    "rank_groups": ["game", "rank_group"],
    "prior_profile": ["game", "rank_group", "net"],
    "loss_by_move_number": ["game", "rank_group", "move_number"],
}


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> Path:
    """A features table aggregated whole and in two halves of its games (by game id)."""
    root = tmp_path_factory.mktemp("merge")
    table = synthetic_features(groups=3, games_per_group=30, seed=4)
    games = pc.unique(table["game_id"]).to_pylist()
    first = pc.is_in(table["game_id"], pa.array(games[::2]))
    for name, rows in (("whole", table), ("a", table.filter(first)),
                       ("b", table.filter(pc.invert(first)))):  # fmt: skip
        write_features(rows, root / f"features-{name}")
        run_aggregate(root / f"features-{name}", root / f"aggregates-{name}")
    return root


def test_the_merge_of_two_halves_is_the_aggregation_of_the_whole(parts: Path, capsys):
    code = main(["aggregate", "--merge", str(parts / "aggregates-a"), str(parts / "aggregates-b"),
                 "--out", str(parts / "merged")])  # fmt: skip
    assert code == 0 and "merged 2 aggregates folders" in capsys.readouterr().out
    summary = load_summary(parts / "merged")
    whole = load_summary(parts / "aggregates-whole")
    assert summary["moves"] == whole["moves"] and summary["rows"] == whole["rows"]
    assert [m["moves"] for m in summary["merged_from"]] == [
        load_summary(parts / f"aggregates-{p}")["moves"] for p in "ab"
    ]
    for name, keys in KEYS.items():
        got = load_mart(parts / "merged", name).sort_by([(k, "ascending") for k in keys])
        want = load_mart(parts / "aggregates-whole", name).sort_by([(k, "ascending") for k in keys])
        assert got.column_names == want.column_names, name
        for column in want.column_names:
            a, b = got[column].to_pylist(), want[column].to_pylist()
            if pa.types.is_floating(want.schema.field(column).type):
                np.testing.assert_allclose(
                    np.array(a, dtype=float), np.array(b, dtype=float), rtol=1e-9, atol=1e-12,
                    err_msg=f"{name}.{column}",
                )  # fmt: skip
            else:
                assert a == b, f"{name}.{column}"


def test_a_game_in_two_parts_or_another_config_is_refused(parts: Path, tmp_path: Path):
    with pytest.raises(MergeError, match="in more than one folder"):
        merge_aggregates([parts / "aggregates-a", parts / "aggregates-whole"], tmp_path / "x")
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(load_mart(parts / "aggregates-b", "player_instance_features"),
                   other / "player_instance_features.parquet")  # fmt: skip
    summary = load_summary(parts / "aggregates-b") | {"parameters": {"alpha": 0.2, "gamma": 1.0}}
    (other / "_aggregate.json").write_text(json.dumps(summary))
    with pytest.raises(MergeError, match="differ in parameters"):
        merge_aggregates([parts / "aggregates-a", other], tmp_path / "y")


def test_a_part_with_instances_only_merges_what_it_can(parts: Path, tmp_path: Path):
    """A player-specific set ships only its instances: the tables read from instances are
    rebuilt, the loss report (read from moves) is left out."""
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("player_instance_features.parquet", "_aggregate.json"):
        (bare / name).write_bytes((parts / "aggregates-b" / name).read_bytes())
    summary = merge_aggregates([parts / "aggregates-a", bare], tmp_path / "merged")
    assert set(summary["rows"]) == set(KEYS) - {"loss_by_move_number"}
    assert summary["rows"]["rank_groups"] == 3


def test_train_meta_fits_on_merged_aggregates(parts: Path, tmp_path: Path):
    """Merged aggregates have no one features folder: the manifest says so, the models fit."""
    merged = tmp_path / "merged"
    merge_aggregates([parts / "aggregates-a", parts / "aggregates-b"], merged)
    code = main(["train", "meta", "chess", "--aggregates", str(merged), "--out", str(tmp_path / "meta"),
                 "--n", "1", "--feature-sets", "full", "--train-draws", "50", "--eval-draws", "20",
                 "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])  # fmt: skip
    assert code == 0
    manifest = json.loads((tmp_path / "meta" / "meta_models.json").read_text())
    assert manifest["features_dir"] is None and manifest["instances"]["train"] > 0
