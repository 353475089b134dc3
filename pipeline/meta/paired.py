"""Two extractions of the same games as paired instance data, to compare what each net gives.

A net swapped for another (the Go skill levels of ``kibitz-go-policy-4x32`` against
``kibitz-go-policy`` on KataGo's trunk) is judged by what it does to rank estimation. Two meta-models trained
on two extractions measure only the features' difference when everything else is the same: the
games, the feature columns other than the swapped net's, the split and the seeded samples. The
samples are drawn by row (:mod:`pipeline.meta.samples`), so the two instance tables must hold the
same instances in the same order; :func:`paired_instances` makes them so (an instance is one
player's side of one game), or says why not.
``bench/accuracy/meta_compare.py`` prints Table 2 for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.data_split import SplitConfig
from pipeline.meta.aggregate import INSTANCES, load_mart
from pipeline.meta.model import (
    InstanceData,
    MetaConfig,
    MetaDataError,
    instance_data,
    keep_sscore_nets,
    train_and_evaluate,
)


def instance_keys(table: pa.Table) -> pa.Array:
    """One key per player instance: its game and colour."""
    return pc.binary_join_element_wise(table["game_id"], table["colour"], "\x00")


def shared_instances(a: pa.Table, b: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Both instance tables on the instances they share, in (game, colour) order."""
    keys_a, keys_b = instance_keys(a), instance_keys(b)
    shared = pa.array(sorted(set(keys_a.to_pylist()) & set(keys_b.to_pylist())))
    order = [("game_id", "ascending"), ("colour", "ascending")]
    return tuple(
        t.filter(pc.is_in(keys, shared)).sort_by(order) for t, keys in ((a, keys_a), (b, keys_b))
    )


def paired_instances(
    first: Path,
    second: Path,
    *,
    game: str,
    split: SplitConfig | None = None,
    sscore_nets: Sequence[str] = (),
) -> tuple[InstanceData, InstanceData]:
    """The instances of two aggregates folders on their shared instances and feature columns
    (in ``first``'s order), with the s-scores of ``sscore_nets`` only (all when empty).

    A column of one folder only (a strength net one extraction did not run) is left out: it
    would make the comparison about that net instead of the swapped one.
    """
    a, b = shared_instances(load_mart(first, INSTANCES), load_mart(second, INSTANCES))
    if a.num_rows == 0:
        raise MetaDataError(f"{str(first)!r} and {str(second)!r} share no player instances")
    one, two = (
        keep_sscore_nets(
            instance_data(table, load_mart(folder, "rank_groups"), game=game, split=split),
            sscore_nets,
        )
        for table, folder in ((a, first), (b, second))
    )
    if not np.array_equal(one.group, two.group) or not np.array_equal(one.game_id, two.game_id):
        raise MetaDataError(
            f"{str(first)!r} and {str(second)!r} disagree on the rank groups of their shared games"
        )
    columns = [c for c in one.columns if c in set(two.columns)]
    return tuple(d.with_columns([d.columns.index(c) for c in columns]) for d in (one, two))


def rank_group_accuracy(
    data: InstanceData, n: int, config: MetaConfig
) -> dict[str, tuple[float, float]]:
    """Feature set of ``config`` → (accuracy %, accuracy ±1 %) of rank-group sampling at ``n``:
    one side of a pair, measured as Table 2 measures it."""
    result = train_and_evaluate(data, n, config)
    return {
        e.method: (100 * e.accuracy, 100 * e.accuracy_pm1)
        for e in result.evaluations
        if e.sampling == "rank_group" and e.method in config.feature_sets
    }
