"""What the meta-model benches share: their command line (a game, an aggregates folder, the
sample sizes) and the two marts they read.

Used by ``meta_learning_curve.py``, ``meta_net_ablation.py``, ``meta_compare.py`` and
``conformal_coverage.py``, which add their own options.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa

from pipeline.core.data_split import SplitConfig
from pipeline.meta.aggregate import INSTANCES, load_mart


def meta_parser(doc: str, default_n: str) -> argparse.ArgumentParser:
    """A parser with the game, the aggregates folder and ``--n`` (comma-separated)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("aggregates", type=Path, help="a kibitz aggregate output folder")
    parser.add_argument("--n", default=default_n, help="instances per sample, comma-separated")
    return parser


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
