"""Games for training Kibitz's own nets: one game kind, one split, optionally a fixed subset.

Reads a games table folder (``kibitz ingest`` output, hive-partitioned Parquet), keeps the games
of ``split`` under the shared deterministic split of ``pipeline/core/data_split.py`` (owner META) and, when
``max_games`` is given, a subset of that many chosen by each game's split hash (so the subset is
the same on every machine, and a larger subset contains a smaller one).

    python -c "from pipeline.train.games import load_split_games as f; \
        print(f('kibitz-out/games', 'chess', 'train').num_rows)"
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from pipeline.core.data_split import SPLITS, SplitConfig, assign_splits, game_unit

DEFAULT_SPLIT = SplitConfig()


class GamesFolderError(FileNotFoundError):
    """A games folder that is missing or holds no games of the asked kind."""


def read_games(games_dir: Path, game: str) -> pa.Table:
    """All games of kind ``game`` in a games table folder, ordered by game_id (stable input order)."""
    games_dir = Path(games_dir)
    if not games_dir.is_dir():
        raise GamesFolderError(
            f"games folder {str(games_dir)!r} does not exist (run `kibitz ingest`)"
        )
    dataset = ds.dataset(
        games_dir, format="parquet", partitioning="hive", exclude_invalid_files=True,
        ignore_prefixes=["_", "."],
    )  # fmt: skip
    if "game" not in dataset.schema.names:
        raise GamesFolderError(f"{str(games_dir)!r} is not a games table (no game=… partitions)")
    table = dataset.to_table(filter=ds.field("game") == game)
    if table.num_rows == 0:
        raise GamesFolderError(f"no {game!r} games in {str(games_dir)!r}")
    return table.sort_by("game_id")


def load_split_games(
    games_dir: Path,
    game: str,
    split: str,
    *,
    max_games: int | None = None,
    split_config: SplitConfig = DEFAULT_SPLIT,
    table: pa.Table | None = None,
) -> pa.Table:
    """The games of ``split`` ("train" | "validation" | "evaluation"), at most ``max_games``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS!r}, got {split!r}")
    table = read_games(games_dir, game) if table is None else table
    codes = assign_splits(table["game_id"].to_pylist(), split_config)
    chosen = table.filter(pa.array(codes == SPLITS.index(split)))
    if max_games is not None and chosen.num_rows > max_games:
        # A second hash (other salt) orders games within the split, independent of the split.
        unit = game_unit(chosen["game_id"].to_pylist(), f"{split_config.salt}/subset")
        order = np.argsort(unit, kind="stable")
        chosen = chosen.take(np.sort(order[:max_games]))
    return chosen


def ingest_summary(games_dir: Path) -> dict[str, object] | None:
    """Where a games folder came from (``kibitz ingest``'s ``_summary.json``): the sources
    (relative to the working directory, as a user types them from the repository root: the
    model card repeats the ingest command), the selection rules' name and the games kept; None
    for a folder written another way."""
    path = Path(games_dir) / "_summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    return {
        "sources": [os.path.relpath(s) for s in summary.get("sources", [])],
        "rules": (summary.get("rules") or {}).get("name"),
        "kept": summary.get("kept"),
    }
