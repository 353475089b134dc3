"""``--device``: where a training run computes. The CPU paths and the errors run everywhere; the
CUDA runs (train on the GPU, export, resume on the CPU, evaluate the Go policy there) run where
torch sees a GPU and skip cleanly elsewhere."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from train_real_games import SMALL_SSCORE, chess_games, go_games, train_small, write_games_dir

from pipeline.cli.main import build_parser, main
from pipeline.cli.train_nets import sscore_config
from pipeline.nets.kibitz_model_file import read_model_file
from pipeline.nets.loading import load_net
from pipeline.train.device import DeviceError, resolve_device
from pipeline.train.go_policy import GoPolicyTrainConfig
from pipeline.train.go_policy import train as train_policy
from pipeline.train.model_cards import render_card
from pipeline.train.sscore import SScoreTrainConfig
from pipeline.train.sscore_batches import build_pool
from pipeline.train.sscore_eval import score_rows

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_device_names_resolve_or_fail_clearly():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        # A run that asks for a GPU must not quietly train on the CPU.
        with pytest.raises(DeviceError, match="'cuda': this machine has no CUDA GPU"):
            resolve_device("cuda")
    with pytest.raises(DeviceError, match="'cuda:99'"):
        resolve_device("cuda:99")
    with pytest.raises(DeviceError, match="only cpu and cuda"):
        resolve_device("meta")
    with pytest.raises(DeviceError, match="'gpu'"):
        resolve_device("gpu")  # not a torch device name


def test_cli_option_sets_the_device_and_resume_allows_another(tmp_path):
    args = build_parser().parse_args(
        ["train", "sscore", "chess", "--games", "g", "--out", "o", "--device", "cuda:1"]
    )
    config = sscore_config(args)
    assert config.device == "cuda:1"
    # The device is not a resume key: a run stopped on a GPU may go on on the CPU.
    assert "device" not in config.resume_keys()
    if not torch.cuda.is_available():  # the command stops before reading any games
        argv = ["train", "sscore", "chess", "--games", str(tmp_path / "none"), "--out",
                str(tmp_path / "out"), "--device", "cuda"]  # fmt: skip
        with pytest.raises(SystemExit, match="kibitz train: --device 'cuda': this machine has no"):
            main(argv)


def test_cpu_run_records_its_device_in_header_and_card(chess_dir, tmp_path):
    result = train_small(
        SScoreTrainConfig(**SMALL_SSCORE, device="cpu"),
        chess_dir,
        tmp_path / "cpu",
        command="kibitz a",
    )
    header, _ = read_model_file(result.exported.weights)
    assert header["train"]["device"] == "cpu"
    card = render_card(header, "test")
    threads = header["train"]["torch_threads"]
    assert f"of training on the CPU, {threads} torch thread(s)" in card
    assert "`device=" not in card  # a run fact, not listed among the settings
    # Headers written before --device (the shipped models) keep their card text.
    del header["train"]["device"]
    assert "on a 2-core CPU shared with other jobs" in render_card(header, "test")


@needs_cuda
def test_gpu_run_exports_cpu_weights_and_resumes_on_the_cpu(chess_dir, tmp_path):
    out = tmp_path / "gpu"
    first = train_small(
        SScoreTrainConfig(**SMALL_SSCORE, device="cuda"),
        chess_dir,
        out,
        stop_after=2,
        command="kibitz a",
    )
    header, weights = read_model_file(first.exported.weights)
    assert header["train"]["device"].startswith(f"cuda:0 ({torch.cuda.get_device_name(0)}")
    assert {t.device.type for t in weights.values()} == {"cpu"}
    assert f"of training on GPU cuda:0 ({torch.cuda.get_device_name(0)})" in render_card(
        header, "test"
    )
    # The exported model scores real positions alike on the CPU and on the GPU (score_rows
    # places the inputs on the net's device); TF32 convolutions round at about 1e-3.
    cpu_net = load_net(str(first.exported.weights))
    pool = build_pool(chess_games(2), "chess", positions_per_instance=4, seed=0)
    rows = np.arange(len(pool))
    on_cpu = score_rows(cpu_net, pool, rows, pool.played)
    on_gpu = score_rows(copy.deepcopy(cpu_net).cuda(), pool, rows, pool.played)
    np.testing.assert_allclose(on_gpu, on_cpu, atol=5e-3)
    # The GPU checkpoint resumes on the CPU and finishes the schedule there.
    rest = train_small(
        SScoreTrainConfig(**SMALL_SSCORE, device="cpu"),
        chess_dir,
        out,
        resume=True,
        command="kibitz b",
    )
    assert rest.steps == SMALL_SSCORE["max_steps"]
    header, _ = read_model_file(rest.exported.weights)
    assert header["train"]["device"] == "cpu"
    assert len(header["train"]["commands"]) == 2


@needs_cuda
def test_go_policy_trains_and_evaluates_on_the_gpu(tmp_path):
    games = write_games_dir(go_games(2), tmp_path / "games-go")
    config = GoPolicyTrainConfig(
        blocks=1, channels=8, head_channels=4, batch_size=8, positions_per_instance=4,
        max_steps=2, epoch_steps=1, max_validation_games=10, split_fractions=(0.5, 0.25, 0.25),
        device="cuda",
    )  # fmt: skip
    result = train_policy(config, games, tmp_path / "policy", progress=False,
                          tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")  # fmt: skip
    header, weights = read_model_file(result.exported.weights)
    assert header["train"]["device"].startswith("cuda:0 (")
    assert {t.device.type for t in weights.values()} == {"cpu"}
    assert result.evaluation is not None and len(result.history) == 2


@needs_cuda
def test_go_policy_finetunes_a_katago_trunk_on_the_gpu(tmp_path):
    """``--trunk katago-g170-b6c96 --trunk-mode finetune --device cuda``: the trunk trains on the
    GPU with the head, and the export (the fine-tuned trunk inside) gives the GPU's logits on
    the CPU."""
    games = write_games_dir(go_games(2), tmp_path / "games-go")
    config = GoPolicyTrainConfig(
        trunk="katago-g170-b6c96", trunk_mode="finetune", head_channels=8, batch_size=16,
        positions_per_instance=4, max_steps=2, epoch_steps=1, max_validation_games=10,
        split_fractions=(0.5, 0.25, 0.25), device="cuda",
    )  # fmt: skip
    result = train_policy(config, games, tmp_path / "policy", progress=False,
                          tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")  # fmt: skip
    header, weights = read_model_file(result.exported.weights)
    assert header["train"]["device"].startswith("cuda:0 (")
    assert (header["trunk"]["mode"], header["trunk"]["lr_scale"]) == ("finetune", 0.1)
    katago = load_net("katago-g170-b6c96")
    assert not torch.equal(weights["trunk.trunk.initial_conv.weight"],
                           katago.trunk.initial_conv.weight)  # fmt: skip
    cpu_net = load_net(str(result.exported.weights))
    pool = build_pool(go_games(1), "go", positions_per_instance=2, seed=0)
    spatial, global_ = (
        torch.from_numpy(pool.planes[:16]).float(),
        torch.from_numpy(pool.global_[:16]),
    )
    with torch.inference_mode():
        on_cpu = cpu_net(spatial, global_)
        on_gpu = copy.deepcopy(cpu_net).cuda()(spatial.cuda(), global_.cuda()).cpu()
    np.testing.assert_allclose(on_gpu.numpy(), on_cpu.numpy(), atol=5e-3)
