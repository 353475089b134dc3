"""Training is deterministic: a run stopped and resumed from its checkpoint ends with the same
weights as an uninterrupted run with the same seed (CPU), for both trainers."""

from __future__ import annotations

import pytest
import torch
from train_real_games import go_games, write_games_dir

from pipeline.train.go_policy import GoPolicyTrainConfig
from pipeline.train.go_policy import train as train_policy
from pipeline.train.loop import CheckpointError
from pipeline.train.sscore import SScoreTrainConfig
from pipeline.train.sscore import train as train_sscore


def _weights(folder):
    return torch.load(folder / "checkpoints" / "last.pt", weights_only=False)["net"]


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_sscore_resume_reproduces_uninterrupted_run(chess_dir, tmp_path):
    config = SScoreTrainConfig(
        game="chess", blocks=1, channels=8, score_channels=8, groups=2, positions=2,
        max_steps=6, warmup_steps=2, epoch_steps=3, validation_batches=1,
        max_validation_games=40, checkpoint_every=2, split_fractions=(0.5, 0.5, 0.0),
    )  # fmt: skip
    kw = {
        "progress": False,
        "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "evaluate": False,
    }
    whole = train_sscore(config, chess_dir, tmp_path / "whole", export=False, **kw)
    assert whole.steps == 6 and [row["step"] for row in whole.history] == [3, 6]
    first = train_sscore(config, chess_dir, tmp_path / "split", stop_after=4, command="a", **kw)
    assert first.steps == 4 and [row["step"] for row in first.history] == [3, 4]  # + at the stop
    second = train_sscore(config, chess_dir, tmp_path / "split", resume=True, command="b", **kw)
    assert second.steps == 6
    # The model header (and so the model card) lists the command of every invocation.
    assert second.exported.header["train"]["commands"] == ["a", "b"]
    _assert_same(_weights(tmp_path / "whole"), _weights(tmp_path / "split"))
    epochs = [r for r in second.history if r["step"] in (3, 6)]
    assert [r["val_bt_loss"] for r in epochs] == [r["val_bt_loss"] for r in whole.history]
    other = SScoreTrainConfig(**{**config.__dict__, "channels": 16})
    with pytest.raises(CheckpointError, match="channels"):
        train_sscore(other, chess_dir, tmp_path / "split", resume=True, **kw)


def test_go_policy_resume_reproduces_uninterrupted_run(tmp_path):
    games_dir = write_games_dir(go_games(3), tmp_path / "games-go")
    config = GoPolicyTrainConfig(
        blocks=1, channels=8, head_channels=4, batch_size=8, positions_per_instance=4,
        max_steps=4, warmup_steps=1, epoch_steps=2, validation_positions=16, checkpoint_every=2,
    )  # fmt: skip
    kw = {
        "progress": False,
        "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "evaluate": False,
        "export": False,
    }
    train_policy(config, games_dir, tmp_path / "whole", **kw)
    train_policy(config, games_dir, tmp_path / "split", stop_after=2, **kw)
    resumed = train_policy(config, games_dir, tmp_path / "split", resume=True, **kw)
    assert resumed.steps == 4
    _assert_same(_weights(tmp_path / "whole"), _weights(tmp_path / "split"))
