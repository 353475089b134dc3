"""The levels s-score (pipeline/sscore_levels.py): a Bradley-Terry head on the 9 Maia-1 nets'
policies, trained by ``kibitz train sscore-levels`` on real games, loaded through the registry.

Real nets and games: the 9 Maia-1 nets of ../shared and the first games of each Lichess band.
"""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml

from pipeline import cli, model_registry
from pipeline.cli_train_nets import levels_config
from pipeline.evaluator import make_evaluator
from pipeline.level_policies import compute_level_policies
from pipeline.model_cards import write_card
from pipeline.model_export import ModelFileError, read_model_file
from pipeline.sscore_batches import build_pool, net_inputs
from pipeline.sscore_levels import (
    MAIA_LEVELS,
    LevelsHead,
    LevelsHeadConfig,
    LevelsModelError,
    LevelsSScore,
    level_features,
)
from pipeline.train_sscore_levels import CACHE_DIR, LevelsTrainConfig, ScoredPool, train
from pipeline.training_games import load_split_games, read_games


def test_level_features_are_each_levels_loglik_then_entropy():
    # Level a: logits (0, log 3) → p = (1/4, 3/4); level b: (0, 0) → (1/2, 1/2); move 1 played.
    logits = [torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([[0.0, 0.0]])]
    played = torch.tensor([[0.0, 1.0]])
    got = level_features(logits, played)[0].tolist()
    h_a = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert got == pytest.approx([math.log(0.75), math.log(0.5), h_a, math.log(2.0)], abs=1e-6)


def test_head_config_is_checked():
    with pytest.raises(LevelsModelError, match="two or more distinct"):
        LevelsHeadConfig(("maia-1100", "maia-1100"))
    with pytest.raises(ValueError, match="chess imitation nets"):
        LevelsTrainConfig(game="go")


# A seconds-long run on 8 real games a band: half train, 30 % validate, 20 % evaluate.
SMALL_LEVELS = {
    "positions_per_instance": 6, "groups": 4, "positions": 2, "warmup_steps": 1,
    "epoch_steps": 4, "validation_batches": 1, "split_fractions": (0.5, 0.3, 0.2),
}  # fmt: skip


@pytest.fixture(scope="module")
def trained(chess_dir, tmp_path_factory):
    """``kibitz train sscore-levels``' run function stopped after 12 of 16 steps, then resumed."""
    out = tmp_path_factory.mktemp("levels") / "run"
    uri = f"sqlite:///{out}.db"
    config = LevelsTrainConfig(max_steps=16, **SMALL_LEVELS)
    for stop_after, resume in ((12, False), (None, True)):
        train(config, chess_dir, out, progress=False, tracking_uri=uri, resume=resume,
              stop_after=stop_after,
              command=f"kibitz train sscore-levels chess --games G --out O{' --resume' * resume}")  # fmt: skip
        if not resume:
            first = read_model_file(out / "model.kibitz.pt")[0]
            cached = sorted(p.name for p in (out / CACHE_DIR).iterdir())
    write_card(out)
    return out, first, cached


def test_command_line_sets_the_levels_config():
    args = cli.build_parser().parse_args(
        ["train", "sscore-levels", "chess", "--games", "G", "--out", "O", "--levels",
         "maia-1500,maia-1900", "--hidden", "16", "--groups", "8", "--no-r-inf"]
    )  # fmt: skip
    config = levels_config(args)
    assert config.levels == ("maia-1500", "maia-1900") and config.hidden == 16
    assert config.groups == 8 and not config.with_r_inf and config.positions == 8
    with pytest.raises(SystemExit):  # a levels head has no trunk to size
        cli.build_parser().parse_args(
            ["train", "sscore-levels", "chess", "--games", "G", "--out", "O", "--blocks", "2"]
        )


def test_command_exports_the_head_with_the_levels_sha256(trained):
    out, first, cached = trained
    header = yaml.safe_load((out / "model.yaml").read_text(encoding="utf-8"))
    assert header["format"] == "kibitz-sscore-levels" and header["game"] == "chess"
    assert header["net"]["levels"] == list(MAIA_LEVELS)
    assert header["net"]["level_sha256"] == {
        name: model_registry.model_sha256(name) for name in MAIA_LEVELS
    }
    # The file holds the head only: no Maia weight is in it.
    _, state = read_model_file(out / "model.kibitz.pt")
    assert sorted(state) == ["mean", "mlp.0.bias", "mlp.0.weight", "mlp.2.bias", "mlp.2.weight",
                             "mlp.4.bias", "mlp.4.weight", "std"]  # fmt: skip
    # Resume: the schedule went on to 16 steps, both invocations are recorded, and the second
    # read every pool's policies from the cache the first wrote (no new cache file).
    assert first["train"]["steps"] == 12 and header["train"]["steps"] == 16
    assert len(header["train"]["commands"]) == 2 and "--resume" in header["train"]["commands"][1]
    assert sorted(p.name for p in (out / CACHE_DIR).iterdir()) == cached
    assert {name.split("-")[0] for name in cached} == {"train", "validation", "reference",
                                                      "evaluation"}  # fmt: skip
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "kibitz train sscore-levels chess --games G --out O --resume" in card
    assert "GPL-3.0" in card and "| 2400-2600 |" in card


def test_loaded_model_scores_moves_as_the_head_on_cached_policies(trained, chess_dir):
    """The registry-loaded model (9 Maia nets + head) and the trainer's cached-feature path give
    the same s-score; the exported ONNX head and the ONNX export of the whole model agree."""
    out, _, _ = trained
    net = model_registry.load_net(out / "model.kibitz.pt")
    assert isinstance(net, LevelsSScore) and net.output_names == ("sscore",)
    config = LevelsTrainConfig()
    games = load_split_games(chess_dir, "chess", "validation", split_config=config.split_config(),
                             table=read_games(chess_dir, "chess"))  # fmt: skip
    pool = build_pool(games, "chess", positions_per_instance=4, seed=5)
    rows = np.arange(min(len(pool), 48))
    with torch.inference_mode():
        direct = net(*net_inputs(pool, rows, pool.played[rows]))[0][:, 0].numpy()
    policies = compute_level_policies(net, pool)
    features = policies.played_features(pool, rows)
    with torch.inference_mode():
        cached = net.head(torch.from_numpy(features))[:, 0].numpy()
    np.testing.assert_allclose(cached, direct, atol=5e-3)  # policies are stored as float16
    assert np.ptp(direct) > 0.01  # the scores differ from move to move
    scored = ScoredPool(pool, policies)
    per_instance = scored.instance_scores(net.head)
    assert per_instance.shape == (pool.num_instances,)
    head_onnx = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    got = head_onnx.run(["sscore"], {"features": features})[0][:, 0]
    np.testing.assert_allclose(got, cached, atol=1e-5)
    whole = make_evaluator(net, backend="onnx", cache_dir=out / "onnx-cache")
    planes, played = (t.numpy() for t in net_inputs(pool, rows, pool.played[rows]))
    np.testing.assert_allclose(
        whole({"planes": planes, "played": played})["sscore"][:, 0], direct, atol=1e-4
    )


def test_a_level_net_other_than_the_trained_one_is_refused(trained, tmp_path):
    out, _, _ = trained
    header, state = read_model_file(out / "model.kibitz.pt")
    header["net"]["level_sha256"]["maia-1500"] = "0" * 64
    torch.save({"header": header, "state_dict": state}, tmp_path / "model.kibitz.pt")
    with pytest.raises(LevelsModelError, match=r"maia-1500.*trained on sha256 0000"):
        model_registry.load_net(tmp_path / "model.kibitz.pt")
    with pytest.raises(ModelFileError, match="expected 'kibitz-sscore'"):
        model_registry.load_net_file(out / "model.kibitz.pt", "kibitz-sscore")


def test_head_standardises_by_the_training_features():
    head = LevelsHead(LevelsHeadConfig(("a", "b")))
    features = np.array([[0.0, 1.0, 2.0, 3.0], [2.0, 3.0, 4.0, 7.0]], np.float32)
    head.standardise_by(features)
    assert head.mean.tolist() == [1.0, 2.0, 3.0, 5.0]
    assert head.std.numpy() == pytest.approx([1.0, 1.0, 1.0, 2.0], abs=1e-5)
