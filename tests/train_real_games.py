"""Small real game tables for the training tests: the first games of each rank group's file.

Read straight from ../shared/data with the ingestion readers (no Ray), so the tests see the
same rows ``kibitz ingest`` writes; missing data fails the tests (settings.data_dir()).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import settings
from pipeline.core.data_split import EVALUATION, assign_splits
from pipeline.ingest import pgn as ingest_pgn
from pipeline.ingest import sgf as ingest_sgf
from pipeline.train.sscore_batches import (
    CHESS_RANK_GROUPS,
    GO_RANK_GROUPS,
    PositionPool,
    build_pool,
)

CHESS_DIR = "chess/lichess-2024-02-blitz/testing"
GO_DIR = "go/fox-selected/testing"
# A seconds-long s-score run on real chess games: 1 block × 8 channels, 2 groups × 2 positions,
# half the games train and half validate (no evaluation split). Tests override what they test.
SMALL_SSCORE = {
    "game": "chess", "blocks": 1, "channels": 8, "score_channels": 8, "groups": 2,
    "positions": 2, "max_steps": 4, "warmup_steps": 1, "epoch_steps": 2, "validation_batches": 1,
    "max_validation_games": 40, "split_fractions": (0.5, 0.5, 0.0),
}  # fmt: skip


def _first_games(reader, path: Path, n: int) -> pa.Table:
    if not path.is_file():
        raise FileNotFoundError(f"real game file {str(path)!r} is missing (KIBITZ_DATA_DIR)")
    chunk = reader.plan_chunks([path], games_per_chunk=n)[0]
    return reader.read_chunk(chunk).games


def chess_games(per_band: int) -> pa.Table:
    """The first ``per_band`` games of each Lichess band file (testing split of the data)."""
    root = settings.data_dir() / CHESS_DIR
    return pa.concat_tables(
        _first_games(ingest_pgn, root / f"{b}.pgn.zst", per_band) for b in CHESS_RANK_GROUPS
    )


def go_games(per_group: int) -> pa.Table:
    """The first ``per_group`` games of each Fox rank-group file."""
    root = settings.data_dir() / GO_DIR
    return pa.concat_tables(
        _first_games(ingest_sgf, root / f"{g}.sgf", per_group) for g in GO_RANK_GROUPS
    )


def write_games_dir(table: pa.Table, folder: Path) -> Path:
    """A games-table folder (hive layout of ``kibitz ingest``) holding ``table``."""
    pq.write_to_dataset(table, folder, partition_cols=["game", "source", "month"])
    return folder


def evaluation_games(game: str, read_per_group: int) -> pa.Table:
    """The evaluation-split games (default split of pipeline/core/data_split.py) among the first
    ``read_per_group`` games of each rank group's file: games no Kibitz net was trained on."""
    games = chess_games(read_per_group) if game == "chess" else go_games(read_per_group)
    codes = assign_splits(games["game_id"].to_pylist())
    return games.filter(pa.array(codes == EVALUATION))


@lru_cache(maxsize=4)
def evaluation_pool(game: str, read_per_group: int, positions_per_instance: int) -> PositionPool:
    """Pool of :func:`evaluation_games` (seed 3), built once per test session (Go encodes at
    ~5k positions/s, and the s-score and policy tests read the same held-out games)."""
    return build_pool(
        evaluation_games(game, read_per_group),
        game,
        positions_per_instance=positions_per_instance,
        seed=3,
    )


def train_small(config, games: Path, out: Path, **kw):
    """``kibitz train sscore``'s run function without progress bar or final evaluation, tracked
    in ``out/mlflow.db``; ``kw`` as :func:`pipeline.train.sscore.train` takes them."""
    from pipeline.train.sscore import train  # mlflow is slow to import: only for the runs

    return train(
        config, games, out, progress=False, evaluate=False,
        tracking_uri=f"sqlite:///{out / 'mlflow.db'}", **kw,
    )  # fmt: skip
