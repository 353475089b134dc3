"""The chess evaluator table's swap of the loss columns (bench/accuracy/evaluator_table.py), on
real aggregates: the shipped model's instances and part 7 of 8 of the testing split's loss-only
extraction with Stockfish at 100 nodes (bench/aggregates/chess-loss-sf100-testing-7, 700 games).

A row of the table must differ from the preset in the evaluator only: every column that reads
the loss comes from the other extraction, every other column stays the base's, the rows are the
games both hold, and ``--write`` records the extraction one run with that evaluator would have.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "accuracy"))  # the bench scripts import each other

import evaluator_table  # noqa: E402
from meta_bench import instance_tables  # noqa: E402

from pipeline.extract.config import config_from_dict  # noqa: E402

BASE = ROOT / "models" / "kibitz-meta-chess" / "aggregates"
SF100 = ROOT / "bench" / "aggregates" / "chess-loss-sf100-testing-7"
KEY = ["game_id", "colour"]


@pytest.fixture(scope="module")
def tables():
    base, _ = instance_tables(BASE)
    other, _ = instance_tables(SF100)
    common = evaluator_table.of_common_games(base, [other])
    return base, other, common, evaluator_table.with_loss_of(common, other)


def _by_key(table, column: str) -> dict:
    rows = table.select([*KEY, column]).to_pylist()
    return {(r["game_id"], r["colour"]): r[column] for r in rows}


def test_rows_are_the_games_both_hold(tables) -> None:
    base, other, common, _ = tables
    assert base.num_rows == 19_196 and other.num_rows == 1_400
    assert common.num_rows == 1_400  # both colours of the part's 700 games
    assert set(common["game_id"].to_pylist()) == set(other["game_id"].to_pylist())


def test_loss_columns_are_the_evaluators_and_the_rest_the_bases(tables) -> None:
    _, other, common, swapped = tables
    reads_loss = [c for c in common.column_names if evaluator_table.READS_LOSS.match(c)]
    assert {"loss_mean_k25", "clock_trouble_loss_mean_all", "clock_think_loss_corr_all"} <= set(
        reads_loss
    )
    assert swapped.column_names == common.column_names
    for column in reads_loss:
        assert _by_key(swapped, column) == _by_key(other, column), column
    for column in ("prior_maia_1500_geomean_k25", "clock_think_base_mean_all", "rating"):
        assert _by_key(swapped, column) == _by_key(common, column), column
    # a 100-node search finds more of the loss than the preset's 500 nodes on the same moves
    assert pc.mean(common["loss_mean_k25"]).as_py() == pytest.approx(0.3753, abs=1e-4)
    assert pc.mean(swapped["loss_mean_k25"]).as_py() == pytest.approx(1.4706, abs=1e-4)


def test_written_row_records_the_evaluators_extraction(tables, tmp_path: Path) -> None:
    _, _, _, swapped = tables
    config_hash = evaluator_table.write_aggregates(swapped, BASE, SF100, tmp_path)
    # the base's extraction (the chess preset at 500 nodes, fb541da34399b975) at 100 nodes
    base_config = json.loads((BASE / "_aggregate.json").read_text())["features_config"]
    assert base_config["config_hash"] == "fb541da34399b975"
    at_100 = dict(base_config["config"], value=dict(base_config["config"]["value"], nodes=100))
    assert config_hash == config_from_dict(at_100).config_hash() == "150e10d6528d2768"
    summary = json.loads((tmp_path / "_aggregate.json").read_text())
    assert summary["features_config_hash"] == config_hash
    assert summary["features_config"]["config"]["value"]["nodes"] == 100
    assert summary["rows"]["player_instance_features"] == 1_400
    written = pq.read_schema(tmp_path / "player_instance_features.parquet")
    assert written == pq.read_schema(BASE / "player_instance_features.parquet")  # its types
    assert {"rank_groups.parquet", "loss_by_move_number.parquet"} <= {
        p.name for p in tmp_path.iterdir()
    }
