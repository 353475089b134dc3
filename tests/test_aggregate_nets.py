"""Adding a level from an extraction of the same games with that net alone
(pipeline/meta/aggregate_nets.py, ``kibitz aggregate --add-nets``), on real games: Maia-2200's
columns joined to the nine levels' instances of the chess testing split equal those of one
extraction that ran all ten nets, and the extraction record is that run's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main
from pipeline.meta.aggregate import INSTANCES, load_mart, load_summary
from pipeline.meta.aggregate_nets import AddNetsError, add_nets

ROOT = Path(__file__).resolve().parents[1] / "bench" / "aggregates"
# A part of the testing split extracted with all ten levels, Stockfish and the s-score nets, and
# the whole split extracted with Maia-2200 alone (bench/configs/extract-chess-maia2200-only.yaml).
WHOLE = ROOT / "chess-maia2200-testing-0"
ALONE = ROOT / "chess-maia2200-only-testing"
NEW = "maia_2200"


@pytest.fixture(scope="module")
def nine_levels(tmp_path_factory) -> Path:
    """The ten-level part as the nine-level run would have written it: no Maia-2200 column,
    Maia-2200 out of the extraction record."""
    root = tmp_path_factory.mktemp("nine")
    instances = load_mart(WHOLE, INSTANCES)
    pq.write_table(
        instances.drop_columns([c for c in instances.column_names if f"_{NEW}_" in c]),
        root / f"{INSTANCES}.parquet",
    )
    summary = load_summary(WHOLE)
    record = summary["features_config"]
    config = dict(record["config"])
    config["imitation_nets"] = [n for n in config["imitation_nets"] if n["name"] != "maia-2200"]
    nets = {k: v for k, v in record["nets"].items() if k != "maia-2200"}
    summary["features_config"] = {**record, "config": config, "nets": nets}
    (root / "_aggregate.json").write_text(json.dumps(summary))
    return root


def test_a_level_extracted_alone_joins_as_one_run_of_all_levels(nine_levels, tmp_path, capsys):
    out = tmp_path / "ten"
    code = main(["aggregate", "--add-nets", str(nine_levels), str(ALONE), "--out", str(out)])
    assert code == 0
    assert "added maia-2200 (6 columns) to 2,400 instances" in capsys.readouterr().out
    got, want = load_mart(out, INSTANCES), load_mart(WHOLE, INSTANCES)
    assert got["game_id"].to_pylist() == want["game_id"].to_pylist()  # the base's row order
    added = load_summary(out)["nets_added_from"]["columns"]
    assert sorted(added) == sorted(
        f"{family}_{NEW}_{stat}_{cut}"
        for family, stat in (("prior", "geomean"), ("top1", "rate"))
        for cut in ("k25", "k50", "all")
    )
    for column in added:  # the same positions through the same net: float32 rounding apart
        np.testing.assert_allclose(
            got[column].to_numpy(), want[column].to_numpy(), rtol=2e-5, err_msg=column
        )
    # top-1 rates are shares of a few dozen moves: equal unless a near-tie flipped
    top1 = f"top1_{NEW}_rate_all"
    assert pc.sum(pc.equal(got[top1], want[top1])).as_py() >= 0.99 * got.num_rows
    # the record is that of the run with all ten levels, so estimate extracts what it read
    record, whole = load_summary(out)["features_config"], load_summary(WHOLE)["features_config"]
    assert record["config"]["imitation_nets"] == whole["config"]["imitation_nets"]
    assert record["nets"] == whole["nets"]
    assert record["config_hash"] == whole["config_hash"]
    # the tables read from the instances are rebuilt with the new level: one profile row a band
    profile = load_mart(out, "prior_profile")
    bands = pc.count_distinct(profile["rank_group"]).as_py()
    assert pc.sum(pc.equal(profile["net"], NEW)).as_py() == bands == 7  # this part's bands


def test_a_game_the_other_run_lacks_or_no_new_net_is_refused(nine_levels, tmp_path):
    with pytest.raises(AddNetsError, match="ran no imitation net that"):
        add_nets(nine_levels, nine_levels, tmp_path / "x")
    partial = tmp_path / "partial"
    partial.mkdir()
    alone = load_mart(ALONE, INSTANCES)
    some = load_mart(nine_levels, INSTANCES)["game_id"][0].as_py()
    pq.write_table(alone.filter(pc.not_equal(alone["game_id"], some)),
                   partial / f"{INSTANCES}.parquet")  # fmt: skip
    (partial / "_aggregate.json").write_text(json.dumps(load_summary(ALONE)))
    with pytest.raises(AddNetsError, match=f"2 instance.* have no .*{some}"):
        add_nets(nine_levels, partial, tmp_path / "y")
