"""Two extractions of the same games compared through their meta-models (pipeline/meta/paired.py,
bench/accuracy/meta_compare.py): the pairing on real aggregates, and #28's measured findings on Go skill
levels. The levels of the g170-trunk policies raise rank-group accuracy over those of the 4 × 32
net they replaced (`kibitz-go-policy-4x32`), on the same 2,890 games extracted with each
(bench/aggregates/go-4x32-levels, go-g170-levels: both FP32); the levels of
`kibitz-go-policy-gpu` raise it again over those of the g170-trunk net it replaced
(`kibitz-go-policy-cpu`; bench/aggregates/go-g170-levels-testing, the whole testing split the
models shipped from 27 to 29 November 2026 were fitted on), on 2,890 of those games
(bench/aggregates/go-gpu-levels) and on the whole split (go-gpu-levels-testing); and the levels
of its student, today's `kibitz-go-policy`, on the whole split (the shipped kibitz-meta-go's
instances) change nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.meta.aggregate import INSTANCES, load_mart
from pipeline.meta.model import LIGHTGBM_DEFAULTS, InstanceData, MetaConfig, MetaDataError
from pipeline.meta.paired import paired_instances, rank_group_accuracy

AGGREGATES = Path(__file__).resolve().parents[1] / "bench" / "aggregates"
G4X32_LEVELS, G170_LEVELS = AGGREGATES / "go-4x32-levels", AGGREGATES / "go-g170-levels"
# kibitz-go-policy-cpu's levels, the whole testing split at BF16 on an H100: the models shipped
# from 27 to 29 November 2026 were fitted on it
G170_LEVELS_TESTING = AGGREGATES / "go-g170-levels-testing"
GPU_LEVELS = AGGREGATES / "go-gpu-levels"  # kibitz-go-policy-gpu's, 2,890 games, BF16 on a CPU
# the same levels, the whole split compiled at BF16 on a 2-core AMX CPU: the models shipped on 29
# November 2026 were fitted on it
GPU_LEVELS_TESTING = AGGREGATES / "go-gpu-levels-testing"
# the student's levels (today's kibitz-go-policy), the whole split compiled at BF16 on a 2-core
# AVX-512 CPU: the shipped models' instances
SHIPPED = Path(__file__).resolve().parents[1] / "models/kibitz-meta-go/aggregates"


def write_aggregates(folder: Path, instances: pa.Table, rank_groups: pa.Table) -> Path:
    folder.mkdir()
    pq.write_table(instances, folder / f"{INSTANCES}.parquet")
    pq.write_table(rank_groups, folder / "rank_groups.parquet")
    return folder


def test_pairing_aligns_games_rows_and_columns(tmp_path):
    """A second folder holding a third of the instances at random (some games with one colour
    only), in another order and with one strength net fewer, pairs with the first on exactly
    those instances, row for row, on the columns both have."""
    first = G4X32_LEVELS
    instances, groups = load_mart(first, INSTANCES), load_mart(first, "rank_groups")
    rng = np.random.default_rng(0)
    rows = rng.permutation(instances.num_rows)[: instances.num_rows // 3]
    dropped = [c for c in instances.column_names if c.startswith("sscore_kibitz_sscore_go_levels")]
    other = instances.take(pa.array(rows)).drop_columns(dropped)
    second = write_aggregates(tmp_path / "second", other, groups)
    one, two = paired_instances(first, second, game="go")
    assert len(one.group) == other.num_rows  # every instance of the subset, no other
    assert set(one.game_id.tolist()) == set(other["game_id"].to_pylist())
    assert np.array_equal(one.game_id, two.game_id) and np.array_equal(one.group, two.group)
    assert one.columns == two.columns and not any("go_levels" in c for c in one.columns)
    assert np.array_equal(
        one.features, two.features, equal_nan=True
    )  # same instances, same values: same rows


def test_pairing_refuses_games_with_other_rank_groups(tmp_path):
    first = G4X32_LEVELS
    instances, groups = load_mart(first, INSTANCES), load_mart(first, "rank_groups")
    names = groups.sort_by("group_index")["rank_group"].to_pylist()
    moved = pa.array([names[(names.index(g) + 1) % len(names)]
                      for g in instances["rank_group"].to_pylist()])  # fmt: skip
    column = instances.schema.get_field_index("rank_group")
    second = write_aggregates(
        tmp_path / "moved", instances.set_column(column, "rank_group", moved), groups
    )
    with pytest.raises(MetaDataError, match="disagree on the rank groups"):
        paired_instances(first, second, game="go")


SETS = ("full", "no_sscore", "no_prior")


def accuracy_at_20(
    first: Path, second: Path, sets: tuple[str, ...], sscore_nets: tuple[str, ...] = ()
) -> tuple[tuple[InstanceData, InstanceData], dict[str, float], dict[str, float]]:
    """The paired instances of two aggregates folders and each side's rank-group accuracy % at
    n = 20 per feature set, fitted and evaluated on the models' own split with the fitting the
    published figures were measured with (LightGBM's defaults)."""
    pair = paired_instances(first, second, game="go", sscore_nets=sscore_nets)
    config = MetaConfig(ns=(20,), feature_sets=sets, **LIGHTGBM_DEFAULTS)
    old, new = (
        {name: figures[0] for name, figures in rank_group_accuracy(data, 20, config).items()}
        for data in pair
    )
    return pair, old, new


def test_g170_levels_raise_go_accuracy_on_the_same_games():
    """#28 item 4 (docs/research/log-nets.md, "What it does to the meta-model"): on the games the 4 × 32
    levels' meta-model was fitted on, re-extracted with the g170-trunk levels, priors and loss
    alone gain 8.4 points at n = 20 and the full set 2.3; the set that reads no level column
    (no_prior) does not move."""
    pair, old, new = accuracy_at_20(G4X32_LEVELS, G170_LEVELS, SETS, ("kibitz-sscore-go",))
    assert len(pair[0].group) == 5_780 and len(pair[0].columns) == 66
    assert old == pytest.approx({"full": 59.9, "no_sscore": 54.4, "no_prior": 50.2}, abs=0.05)
    assert new == pytest.approx({"full": 62.2, "no_sscore": 62.8, "no_prior": 50.2}, abs=0.05)


# (folder, instances, the levels before at n = 20, today's, floor: no_prior beside
# kibitz-sscore-go alone, before → today's)
GPU_LEVELS_CASES = {
    "2890_games": (
        GPU_LEVELS, 5_780,
        {"full": 59.31, "no_sscore": 62.62, "no_prior": 58.24},
        {"full": 63.38, "no_sscore": 66.38, "no_prior": 62.91},
        (50.22, 49.47),
    ),
    "whole_testing_split": (
        GPU_LEVELS_TESTING, 19_800,
        {"full": 71.93, "no_sscore": 68.27, "no_prior": 69.55},
        {"full": 73.24, "no_sscore": 70.25, "no_prior": 70.91},
        (47.15, 46.98),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", GPU_LEVELS_CASES)
def test_the_gpu_policys_levels_raise_go_accuracy_over_the_ones_before(case: str):
    """#28 items 3 and 4 (docs/research/log-nets.md, "Item 4 on the CPU" and "The whole testing split"): the
    instances the models shipped before were fitted on (kibitz-go-policy-cpu's levels, BF16 on a
    GPU) against the same games re-extracted on this CPU with kibitz-go-policy-gpu's levels
    and their levels s-score: 2,890 games eager (bench/aggregates/go-gpu-levels) and all 9,900
    testing games compiled (go-gpu-levels-testing; the side before's full 71.93 is the card's
    71.9 of the models shipped before those). Every set that reads the levels gains at n = 20 on the
    models' own split (full +4.1 and +1.3, priors and loss +3.8 and +2.0 points); the set that
    reads neither the levels nor their head moves by 0.7 and 0.2."""
    folder, instances, before, today, floor = GPU_LEVELS_CASES[case]
    pair, old, new = accuracy_at_20(G170_LEVELS_TESTING, folder, SETS)
    assert len(pair[0].group) == instances and len(pair[0].columns) == 75
    assert old == pytest.approx(before, abs=0.01) and new == pytest.approx(today, abs=0.01)
    _, old, new = accuracy_at_20(G170_LEVELS_TESTING, folder, ("no_prior",), ("kibitz-sscore-go",))
    assert (old["no_prior"], new["no_prior"]) == pytest.approx(floor, abs=0.01)


def test_the_students_levels_change_nothing_in_go_accuracy():
    """#28 item 4 (docs/research/log-nets.md, "Item 4 on the whole testing split"): the whole testing
    split with kibitz-go-policy-gpu's levels and head (go-gpu-levels-testing) against the same
    games with its student's, today's kibitz-go-policy and kibitz-sscore-go-levels (the shipped
    models' instances). The student reads 0.12 points more held-out moves at their own rank, and
    its head gains 0.9 points at n = 20 in Chen et al.'s protocol, but on the models' own split
    the sets move by −0.7 … +0.4 points at n = 20, the full set by −0.04: no more than the set
    that reads neither the levels nor their head (+0.4); over 5 re-drawn splits full goes 74.0
    → 74.1 % (bench/accuracy/meta_compare.py)."""
    pair, old, new = accuracy_at_20(GPU_LEVELS_TESTING, SHIPPED, SETS)
    assert len(pair[0].group) == 19_800 and len(pair[0].columns) == 75
    assert old == pytest.approx({"full": 73.24, "no_sscore": 70.25, "no_prior": 70.91}, abs=0.01)
    assert new == pytest.approx({"full": 73.20, "no_sscore": 70.65, "no_prior": 70.25}, abs=0.01)
    _, old, new = accuracy_at_20(GPU_LEVELS_TESTING, SHIPPED, ("no_prior",), ("kibitz-sscore-go",))
    assert (old["no_prior"], new["no_prior"]) == pytest.approx((46.98, 47.38), abs=0.01)
