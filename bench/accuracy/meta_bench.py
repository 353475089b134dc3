"""What the meta-model benches share: their command line (a game, an aggregates folder, the
sample sizes) and the two marts they read.

Used by ``meta_learning_curve.py``, ``meta_net_ablation.py``, ``meta_compare.py``,
``conformal_coverage.py``, ``evaluator_table.py`` and ``meta_params.py``, which add their own
options; the last two share one split's figures and the paired cell of their tables.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.core.data_split import SplitConfig
from pipeline.meta.aggregate import INSTANCES, load_mart
from pipeline.meta.intervals import evaluate_strength, fit_strength_model
from pipeline.meta.model import (
    LIGHTGBM_DEFAULTS,
    InstanceData,
    MetaConfig,
    MetaDataError,
    build_samples,
)
from pipeline.meta.paired import rank_group_accuracy


def meta_parser(doc: str, default_n: str) -> argparse.ArgumentParser:
    """A parser with the game, the aggregates folder, ``--n`` (comma-separated) and the
    fitting option."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("aggregates", type=Path, help="a kibitz aggregate output folder")
    parser.add_argument("--n", default=default_n, help="instances per sample, comma-separated")
    add_fitting_option(parser)
    return parser


def add_fitting_option(parser: argparse.ArgumentParser) -> None:
    """``--lightgbm-defaults``: the fitting of the figures measured before 3 December 2026."""
    parser.add_argument(
        "--lightgbm-defaults",
        action="store_true",
        help="fit with LightGBM's defaults on 2,000 training samples a group (the figures"
        " measured before 3 December 2026) instead of the meta-models' fitting",
    )


def fitting(args: argparse.Namespace) -> dict:
    """The ``MetaConfig`` fields of the fitting ``args`` ask for (none: the meta-models')."""
    return dict(LIGHTGBM_DEFAULTS) if args.lightgbm_defaults else {}


def sample_sizes(text: str) -> list[int]:
    """``"5,20"`` → ``[5, 20]``."""
    return [int(x) for x in text.split(",")]


def instance_tables(aggregates: Path) -> tuple[pa.Table, pa.Table]:
    """The per-player-instance features and the rank groups of an aggregates folder."""
    return load_mart(aggregates, INSTANCES), load_mart(aggregates, "rank_groups")


def split_salts(k: int) -> list[str]:
    """The models' own split salt, then ``k - 1`` others: the same fractions re-drawn, since one
    evaluation split's accuracy moves by a few points with the split alone."""
    return [SplitConfig().salt] + [f"kibitz-ablation-{i}" for i in range(1, k)]


def split_figures(
    data: InstanceData, ns: list[int], feature_set: str, config: MetaConfig
) -> tuple[dict[int, float], float]:
    """One split's figures of ``feature_set``: rank-group accuracy % at each n (NaN where a part
    has too few instances) and the strength MAE from one game. ``config`` gives the split and
    the fitting; its ``ns`` and feature sets are set here."""
    accuracy = {}
    for n in ns:
        at_n = replace(config, ns=(n,), feature_sets=(feature_set,))
        try:
            figures = rank_group_accuracy(data, n, at_n)
        except MetaDataError:
            figures = {}
        accuracy[n] = figures.get(feature_set, (np.nan, np.nan))[0]
    one = replace(config, ns=(1,), feature_sets=(feature_set,))
    samples = build_samples(data, 1, one)
    model = fit_strength_model(data.columns, 1, feature_set, samples["train"],
                               samples["validation"], one)  # fmt: skip
    row = evaluate_strength(model, data.columns, samples["evaluation"], "rank_group", 0.0)
    return accuracy, row.get("mae", np.nan)


def paired_cell(values: list[float], base: list[float] | None, digits: int) -> str:
    """The mean of ``values`` over the splits, and with ``base`` (the same splits) the paired
    difference's mean ± sd (one split: the mean alone)."""
    a = np.array(values)
    cell = f"{np.nanmean(a):.{digits}f}"
    if base is not None and len(values) > 1:  # one split has no spread to print
        d = a - np.array(base)
        cell += f" ({np.nanmean(d):+.{digits}f} ± {np.nanstd(d, ddof=1):.{digits}f})"
    return cell
