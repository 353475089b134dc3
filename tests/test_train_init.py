"""``--init-from``: a new run starts from a trained model's weights (or the mean of several
models' weights), checks that the model fits, and its header and card record the model it came
from."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from train_real_games import SMALL_SSCORE, go_games, train_small, write_games_dir

from pipeline.nets.kibitz_model_file import read_model_file
from pipeline.nets.registry import file_sha256
from pipeline.train.go_policy import GoPolicyTrainConfig
from pipeline.train.go_policy import train as train_policy
from pipeline.train.loop import positions_trained
from pipeline.train.model_cards import render_card
from pipeline.train.sscore import SScoreTrainConfig


@pytest.fixture(scope="module")
def first_model(chess_dir, tmp_path_factory):
    """A 4-step s-score run with its export: the model the tests start from."""
    out = tmp_path_factory.mktemp("first")
    result = train_small(
        SScoreTrainConfig(**SMALL_SSCORE), chess_dir, out, command="kibitz train sscore chess a"
    )
    return result.exported


def test_run_starts_from_the_model_weights_and_records_it(chess_dir, first_model, tmp_path):
    path = str(first_model.weights)
    config = SScoreTrainConfig(**{**SMALL_SSCORE, "init_from": path})
    # No step: the net is exactly the exported one.
    still = train_small(config, chess_dir, tmp_path / "zero", stop_after=0, command="kibitz b")
    _, start = read_model_file(still.exported.weights)
    _, first = read_model_file(first_model.weights)
    assert start.keys() == first.keys()
    assert all(torch.equal(start[k], first[k]) for k in first)
    # Training moves on from there; the header names the initial model by name and sha256.
    more = train_small(config, chess_dir, tmp_path / "more", command="kibitz c")
    record = more.exported.header["train"]["init_from_model"]
    assert record["model"] == path and record["sha256"] == file_sha256(first_model.weights)
    assert record["steps"] == 4 and record["commands"] == ["kibitz train sscore chess a"]
    # Two runs of 4 steps × G 2 × R (8 bands + r∞) × P 2 positions: 144 each.
    assert record["positions"] == 4 * 2 * 9 * 2
    card = render_card(more.exported.header, "continued")
    assert f"Started from the weights of `{path}` (sha256 `{record['sha256']}`" in card
    assert "- `kibitz train sscore chess a`" in card and "Command: `kibitz c`" in card
    assert positions_trained(more.exported.header["train"]) == 2 * 144
    _, weights = read_model_file(more.exported.weights)
    assert any(not torch.equal(weights[k], first[k]) for k in first)


def test_several_models_start_the_run_from_the_mean_of_their_weights(
    chess_dir, first_model, tmp_path
):
    # A second line of the same net: 2 more steps from the first model (6 steps, 216 positions).
    second = train_small(
        SScoreTrainConfig(**{**SMALL_SSCORE, "init_from": str(first_model.weights)}),
        chess_dir, tmp_path / "second", stop_after=2, command="kibitz d",
    ).exported  # fmt: skip
    names = f"{first_model.weights}, {second.weights}"
    # --max-steps 0: the mean itself is the model.
    config = SScoreTrainConfig(**{**SMALL_SSCORE, "init_from": names, "max_steps": 0})
    soup = train_small(config, chess_dir, tmp_path / "soup").exported
    _, mean = read_model_file(soup.weights)
    _, a = read_model_file(first_model.weights)
    _, b = read_model_file(second.weights)
    for key, value in mean.items():
        if value.is_floating_point():  # each weight half of each model's, by hand
            torch.testing.assert_close(value, a[key] / 2 + b[key] / 2, rtol=0, atol=1e-7)
        else:  # counters: the last model's
            assert torch.equal(value, b[key])
    assert any(not torch.equal(mean[k], b[k]) for k in b if b[k].is_floating_point())
    # The record is the line's end (the model with the most positions), the other beside it.
    record = soup.header["train"]["init_from_model"]
    assert record["model"] == str(second.weights) and record["positions"] == 144 + 72
    assert record["averaged_with"] == [
        {"model": str(first_model.weights), "sha256": file_sha256(first_model.weights),
         "positions": 144}
    ]  # fmt: skip
    card = render_card(soup.header, "soup")
    assert (
        f"Started from the mean of the weights of `{first_model.weights}` (sha256 "
        f"`{file_sha256(first_model.weights)}`, 144 training positions) and `{second.weights}`"
    ) in card


def test_resume_keeps_the_record_of_the_initial_model(chess_dir, first_model, tmp_path):
    config = SScoreTrainConfig(**{**SMALL_SSCORE, "init_from": str(first_model.weights)})
    train_small(config, chess_dir, tmp_path / "run", stop_after=2, export=False)
    resumed = train_small(config, chess_dir, tmp_path / "run", resume=True)
    assert resumed.steps == 4
    record = resumed.exported.header["train"]["init_from_model"]
    assert record["sha256"] == file_sha256(first_model.weights)


def test_a_model_of_another_shape_or_format_is_refused(chess_dir, first_model, tmp_path):
    wider = SScoreTrainConfig(
        **{**SMALL_SSCORE, "channels": 16, "init_from": str(first_model.weights)}
    )
    with pytest.raises(ValueError, match="set --blocks/--channels to match"):
        train_small(wider, chess_dir, tmp_path / "wider")
    policy = GoPolicyTrainConfig(
        blocks=1, channels=8, head_channels=4, batch_size=8, positions_per_instance=4,
        max_steps=1, init_from=str(first_model.weights),
    )  # fmt: skip
    games = write_games_dir(go_games(1), tmp_path / "games-go")
    with pytest.raises(ValueError, match="'kibitz-sscore' model, expected 'kibitz-go-policy'"):
        train_policy(policy, games, tmp_path / "policy", progress=False, evaluate=False,
                     tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")  # fmt: skip


def test_init_from_is_a_setting_a_resume_must_share():
    assert "init_from" in SScoreTrainConfig(**SMALL_SSCORE).resume_keys()
    fields = {f.name for f in dataclasses.fields(GoPolicyTrainConfig)}
    assert {"init_from", "evaluation_positions_per_instance"} <= fields
