"""``--select-best``: a run exports the weights of its best validation (early stopping by
validation games), per-group rank gaps in the validation rows, and the score head's dropout."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from train_real_games import SMALL_SSCORE, train_small

from pipeline.cli.main import build_parser
from pipeline.cli.train_nets import sscore_config
from pipeline.nets.kibitz_model_file import read_model_file
from pipeline.nets.sscore_net import SScoreNet, SScoreNetConfig
from pipeline.train.loop import (
    CHECKPOINT_NAME,
    TrainState,
    keep_if_best,
    restore_best,
    selected_validation,
)
from pipeline.train.model_cards import render_card
from pipeline.train.sscore import SScoreTrainConfig

SMALL = {**SMALL_SSCORE, "max_steps": 6, "select_best": "val_min_gap_z"}
BANDS = ("1200-1400", "1400-1600", "1600-1800", "1800-2000", "2000-2200", "2200-2400", "2400-2600")


def _state(values: list[float]) -> TrainState:
    rows = [{"step": 10 * (i + 1), "val_x": v} for i, v in enumerate(values)]
    return TrainState(0, np.random.default_rng(0), rows, 0.0)


def test_keep_if_best_keeps_only_improvements():
    net, state = nn.Linear(2, 1), _state([])
    kept = []
    for i, value in enumerate([0.1, 0.3, 0.3, 0.2]):
        state.step = 10 * (i + 1)
        state.history.append({"step": state.step, "val_x": value})
        with torch.no_grad():
            net.bias.fill_(float(i))  # the weights of validation i
        kept.append(keep_if_best(net, state, "val_x"))
    # A tie keeps the earlier weights: fewer steps for the same validation figure.
    assert kept == [True, True, False, False]
    assert selected_validation(state.history, "val_x") == {
        "metric": "val_x",
        "value": 0.3,
        "step": 20,
    }
    assert float(net.bias.detach()) == 3.0
    restore_best(net, state)
    assert float(net.bias.detach()) == 1.0
    with pytest.raises(KeyError, match="no validation metric 'val_y'; there are"):
        keep_if_best(net, state, "val_y")


def test_run_exports_the_weights_of_its_best_validation(chess_dir, tmp_path):
    result = train_small(
        SScoreTrainConfig(**SMALL), chess_dir, tmp_path / "run", command="kibitz s"
    )
    history = result.history
    assert [row["step"] for row in history] == [2, 4, 6]
    for row in history:  # one gap per band over the band below; the smallest is val_min_gap_z
        gaps = [row[f"val_gap_z_{band}"] for band in BANDS]
        assert row["val_min_gap_z"] == min(gaps)
    values = [row["val_min_gap_z"] for row in history]
    best_step = history[int(np.argmax(values))]["step"]  # argmax: the first of equal maxima
    header = result.exported.header
    assert header["train"]["selected"] == {
        "metric": "val_min_gap_z", "value": max(values), "step": best_step,
    }  # fmt: skip
    _, exported = read_model_file(result.exported.weights)
    saved = torch.load(tmp_path / "run" / "checkpoints" / CHECKPOINT_NAME, weights_only=False)
    assert selected_validation(saved["history"], "val_min_gap_z") == header["train"]["selected"]
    assert all(torch.equal(exported[k], saved["best_net"][k]) for k in exported)
    card = render_card(header, "selected")
    assert f"Weights: those of step {best_step}, the validation with the highest " in card
    # A run stopped after the first validation and resumed selects the same weights.
    train_small(
        SScoreTrainConfig(**SMALL), chess_dir, tmp_path / "staged", stop_after=3, export=False
    )
    resumed = train_small(SScoreTrainConfig(**SMALL), chess_dir, tmp_path / "staged", resume=True)
    assert resumed.exported.header["train"]["selected"] == header["train"]["selected"]
    _, again = read_model_file(resumed.exported.weights)
    assert all(torch.equal(again[k], exported[k]) for k in exported)


def test_score_dropout_acts_in_training_only():
    config = SScoreNetConfig("chess", blocks=1, channels=8, score_channels=8)
    torch.manual_seed(0)
    plain = SScoreNet(config)
    dropped = SScoreNet(config, score_dropout=0.5)
    # Same weights (dropout has none): a model trained with it loads into a plain net.
    assert plain.state_dict().keys() == dropped.state_dict().keys()
    dropped.load_state_dict(plain.state_dict())
    inputs = plain.example_inputs(64)
    plain.eval(), dropped.eval()
    with torch.inference_mode():
        assert torch.equal(plain(*inputs)[0], dropped(*inputs)[0])
    dropped.train(), plain.train()
    with torch.inference_mode():
        torch.manual_seed(1)
        assert not torch.equal(plain(*inputs)[0], dropped(*inputs)[0])


def test_command_line_sets_the_new_settings():
    args = build_parser().parse_args(
        ["train", "sscore", "chess", "--games", "g", "--out", "o", "--select-best",
         "val_min_gap_z", "--weight-decay", "0.05", "--score-dropout", "0.3",
         "--no-policy-features", "--no-r-inf"]
    )  # fmt: skip
    config = sscore_config(args)
    assert (config.select_best, config.weight_decay, config.score_dropout) == (
        "val_min_gap_z", 0.05, 0.3,
    )  # fmt: skip
    assert not config.policy_features and not config.with_r_inf
    assert not config.net_config().policy_features
    defaults = sscore_config(build_parser().parse_args(["train", "sscore", "go", "--games", "g",
                                                        "--out", "o"]))  # fmt: skip
    assert defaults.select_best is None and defaults.policy_features and defaults.with_r_inf
