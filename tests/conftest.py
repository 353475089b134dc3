"""Fixtures shared by the training tests."""

from __future__ import annotations

import pytest
from train_real_games import chess_games, write_games_dir


@pytest.fixture(scope="module")
def chess_dir(tmp_path_factory):
    """The first 8 games of each Lichess band as a games-table folder (one per test module)."""
    return write_games_dir(chess_games(8), tmp_path_factory.mktemp("games-chess"))


@pytest.fixture(scope="session", autouse=True)
def _session_mlflow_store(tmp_path_factory):
    """Commands run without ``--tracking-uri`` track into a store of this session, never into
    ``./kibitz-out/mlflow.db`` (the project store, ``settings.tracking_uri``)."""
    store = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
        yield
