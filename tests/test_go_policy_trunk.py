"""Issue #28: the rank-conditioned Go policy on KataGo g170-b6c96's trunk, on real Fox games.

- At initialisation the trunk computes exactly what the registered KataGo net's trunk computes,
  on the inputs Kibitz's Go encoder makes for KataGo.
- Frozen: training steps move the head only, the trunk stays bit-identical, the loss on a fixed
  batch falls; finetune: the trunk moves too, at its own learning rate, and a stopped run
  resumes exactly.
- ``kibitz train policy go --trunk katago-g170-b6c96`` runs end to end; its export loads back
  without the KataGo file and gives the training state's logits exactly; header, card and
  registry entry state the trunk and the licence.
- ``--teacher-symmetries``: the loss with a frozen teacher averaged over two symmetries equals
  the formula computed by hand; the command records the setting and trains the student only.
- ``kibitz models check`` of a rank-conditioned policy: one row per rank group at the movers' own
  ranks, checked by hand against the net's own forward.

About 35–45 s on the shared 2-core machine (the b6c96 trunk runs at ~25 positions/s there).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pyarrow as pa
import pytest
import torch
import yaml
from train_real_games import go_games, write_games_dir

from pipeline.cli.main import main
from pipeline.core import settings
from pipeline.go_game import spec as go_spec
from pipeline.nets import katago_model_file, katago_net
from pipeline.nets.check_go import ProfileError, check_net, read_games
from pipeline.nets.formats import GO_POLICY_FORMAT
from pipeline.nets.go_rank_policy import (
    GO_POLICY_RANKS,
    GoRankPolicyConfig,
    GoRankPolicyNet,
    TrunkError,
    UnknownRankError,
    board_symmetry,
    policy_on_katago_trunk,
    rank_index,
)
from pipeline.nets.katago_net import KataGoNet
from pipeline.nets.kibitz_model_file import read_model_file
from pipeline.nets.legal_softmax import legal_mask, masked_log_softmax
from pipeline.nets.loading import load_net
from pipeline.nets.onnx_export import net_fingerprint
from pipeline.nets.registry import find_entry
from pipeline.train.device import DeviceError, step_autocast
from pipeline.train.go_policy import (
    GoPolicyTrainConfig,
    policy_loss,
    position_ranks,
    symmetry_teacher,
)
from pipeline.train.go_policy import train as train_policy
from pipeline.train.loop import initial_weights, set_lr
from pipeline.train.sscore_batches import PositionPool, build_pool

KATAGO = "katago-g170-b6c96"
CANDIDATING = "go/fox-selected/candidating"
SMALL_POLICY = "kibitz-go-policy-4x32"  # the 4 × 32 net trained from scratch: cheap on a CPU


@pytest.fixture(scope="module")
def katago() -> KataGoNet:
    return load_net(KATAGO)


@pytest.fixture(scope="module")
def pool():
    """The first game of each Fox rank-group file, 4 random moves per player: 88 positions."""
    return build_pool(go_games(1), "go", positions_per_instance=4, seed=0)


def _inputs(pool, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(pool.planes[rows]).float(), torch.from_numpy(pool.global_[rows])


def test_katago_trunk_computes_what_the_registered_net_computes(katago, pool):
    # Kibitz's Go encoder makes KataGo's input features v7, the ones this net was built for.
    assert (katago.spatial_channels, katago.global_channels, katago.meta_channels) == (22, 19, 0)
    assert pool.planes.shape[1:] == (go_spec.NUM_SPATIAL, 19, 19)
    assert pool.global_.shape[1] == go_spec.NUM_GLOBAL
    net = policy_on_katago_trunk(katago, head_channels=8).eval()
    assert (net.config.blocks, net.config.channels) == (6, 96)
    rows = np.arange(0, len(pool), 3)[:24]  # 24 real positions of all 11 groups
    spatial, global_ = _inputs(pool, rows)
    seen = {}
    hook = katago.trunk.register_forward_hook(lambda _m, _i, out: seen.setdefault("tip", out))
    try:
        with torch.inference_mode():
            policy = katago(spatial, global_)[0][:, 0]  # (B, 362): the whole KataGo net
            features = net.trunk(spatial, global_)  # (B, 96, 19, 19)
    finally:
        hook.remove()
    assert features.shape == (24, 96, 19, 19)
    assert torch.equal(features, seen["tip"])  # bit for bit, not merely close
    # On these inputs KataGo's own policy finds the human move as often as it does on Fox games
    # (about 4 in 10: 10 of these 24); with the planes shuffled (the board plane kept) it finds
    # 0 of them, so the inputs are the ones the net was trained on.
    mask = legal_mask(pool.legal_offsets, pool.legal_index, rows, go_spec.POLICY_SIZE)
    top1 = policy.masked_fill(~mask, -np.inf).argmax(dim=1).numpy()
    assert 7 <= int((top1 == pool.played[rows]).sum()) <= 14
    with pytest.raises(TrunkError, match="must come from a KataGo net"):
        policy_on_katago_trunk(load_net(SMALL_POLICY), head_channels=8)


def test_frozen_trunk_trains_the_head_only_and_the_loss_falls(katago, pool):
    torch.manual_seed(0)
    net = policy_on_katago_trunk(katago, head_channels=16)
    net.freeze_trunk()
    net.train()
    assert not net.trunk.training and net.head_bn.training  # the frozen trunk stays in eval
    trunk_before = {k: v.clone() for k, v in net.trunk.state_dict().items()}
    head_before = {
        k: p.detach().clone() for k, p in net.named_parameters() if not k.startswith("trunk.")
    }
    groups = net.parameter_groups(trunk_lr_scale=0.1)
    assert len(groups) == 1  # the frozen trunk is no optimiser's business
    optimizer = torch.optim.AdamW(groups, lr=2e-3, weight_decay=1e-4)
    rows = np.arange(0, len(pool), 11)  # one fixed batch of 8 positions
    ranks = position_ranks(pool)[rows]
    assert np.all(ranks >= 0)
    losses = []
    for _ in range(4):
        set_lr(optimizer, 2e-3)
        loss, _ = policy_loss(net, pool, rows, ranks)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        final = float(policy_loss(net, pool, rows, ranks)[0])
    print("loss on the fixed batch:", [round(v, 3) for v in [*losses, final]])
    # A fresh head: about log(legal moves) ≈ 5.7 nats; four Adam steps on the batch cut it.
    assert 5.0 < losses[0] < 6.5
    assert final < losses[0] - 0.5
    assert all(p.grad is None for p in net.trunk.parameters())
    after = net.trunk.state_dict()
    assert all(torch.equal(trunk_before[k], after[k]) for k in trunk_before)
    params = dict(net.named_parameters())
    moved = {k for k, before in head_before.items() if not torch.equal(before, params[k])}
    assert {"head_conv.weight", "head_bn.weight", "gamma.base", "weight.base", "bias.base"} <= moved


def test_finetune_moves_the_trunk_at_its_own_learning_rate(katago, pool):
    torch.manual_seed(0)
    net = policy_on_katago_trunk(katago, head_channels=8).train()
    optimizer = torch.optim.AdamW(net.parameter_groups(trunk_lr_scale=0.1), weight_decay=0.0)
    set_lr(optimizer, 1e-3)
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, pytest.approx(1e-4)]
    stem = net.trunk.trunk.initial_conv.weight.detach().clone()
    head = net.head_conv.weight.detach().clone()
    rows = np.arange(8)
    loss, _ = policy_loss(net, pool, rows, position_ranks(pool)[rows])
    loss.backward()
    optimizer.step()
    # Adam's first step moves every weight with a gradient by almost exactly its group's LR.
    trunk_step = (net.trunk.trunk.initial_conv.weight - stem).abs().max().item()
    head_step = (net.head_conv.weight - head).abs().max().item()
    assert trunk_step == pytest.approx(1e-4, rel=0.01)
    assert head_step == pytest.approx(1e-3, rel=0.01)


def test_random_symmetries_turn_each_board_and_turn_its_features_back(katago, pool):
    """``--random-symmetries``: each board of a batch goes through the trunk under its own
    symmetry and its features come back in the board's own orientation and the batch's order:
    row b equals that one board turned by hand, run alone and turned back, and all-identity is
    the plain forward. The loss reaches the trunk through the turns."""
    torch.manual_seed(0)
    net = policy_on_katago_trunk(katago, head_channels=8).eval()
    rows = np.arange(0, len(pool), 11)  # 8 positions
    spatial, global_ = _inputs(pool, rows)
    symmetry = torch.tensor([5, 0, 3, 5, 7, 1, 0, 2])  # unsorted, repeated: order must survive
    with torch.inference_mode():
        plain = net.features(spatial, global_)
        identity = torch.zeros(len(rows), dtype=torch.long)
        torch.testing.assert_close(net.turned_features(spatial, global_, identity), plain)
        mixed = net.turned_features(spatial, global_, symmetry)
        for b, s in enumerate(symmetry.tolist()):
            alone = net.features(board_symmetry(spatial[b : b + 1], s), global_[b : b + 1])
            by_hand = board_symmetry(alone.unflatten(2, (19, 19)), s, inverse=True).flatten(2)
            torch.testing.assert_close(mixed[b : b + 1], by_hand, atol=1e-4, rtol=1e-4)
            # the fresh head conv's 3×3 kernels are not symmetric, so a turned board's features
            # differ from the plain ones (by 3.2-4.8 here): the turn happened
            gap = (mixed[b] - plain[b]).abs().max().item()
            assert (gap < 1e-5) == (s == 0), (s, gap)
    net.train()
    loss, _ = policy_loss(net, pool, rows, position_ranks(pool)[rows], symmetry.numpy())
    loss.backward()
    assert net.trunk.trunk.initial_conv.weight.grad.abs().sum() > 0
    # a run without it resumes checkpoints written before the option existed
    assert "random_symmetries" not in GoPolicyTrainConfig().resume_keys()
    assert GoPolicyTrainConfig(random_symmetries=True).resume_keys()["random_symmetries"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, katago):
    """``kibitz train policy go --trunk katago-g170-b6c96`` (frozen) for 3 steps of 8 positions on
    the first 4 games of each group (40 train, 3 validation, 1 evaluation game), registered."""
    root = tmp_path_factory.mktemp("katago-trunk")
    games = write_games_dir(go_games(4), root / "games-go")
    out, models = root / "run", root / "models"
    argv = [
        "train", "policy", "go", "--games", str(games), "--out", str(out),
        "--trunk", KATAGO, "--trunk-mode", "frozen", "--head-channels", "8",
        "--max-steps", "3", "--warmup-steps", "1", "--batch-size", "8",
        "--positions-per-instance", "4", "--max-validation-games", "4",
        "--evaluation-positions", "2", "--no-progress",
        "--tracking-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--register", "kibitz-go-policy-katago", "--models-root", str(models),
    ]  # fmt: skip
    assert main(argv) == 0
    return out, models


def test_training_records_the_trunk_keeps_it_frozen_and_states_the_licence(trained, katago):
    out, models = trained
    header, state = read_model_file(out / "model.kibitz.pt")
    assert header["trunk"] == {
        "model": KATAGO,
        "sha256": find_entry(KATAGO).sha256,
        "katago_model": "g170-b6c96-s175395328-d26788732",
        "model_version": 8,
        "license": "KataGo license (MIT-style)",
        "mode": "frozen",
        "lr_scale": None,
    }
    assert (header["net"]["blocks"], header["net"]["channels"]) == (6, 96)
    assert header["train"]["steps"] == 3 and header["train"]["trunk_mode"] == "frozen"
    assert "blocks" not in header["train"]  # the trunk's shape is KataGo's, not a setting
    # The exported trunk is KataGo's, bit for bit: three frozen steps did not touch it.
    for key, value in katago.trunk.state_dict().items():
        assert torch.equal(state[f"trunk.trunk.{key}"], value), key
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "Trunk: KataGo's `g170-b6c96-s175395328-d26788732` (model version 8, 6 residual " in card
    assert f"sha256 `{find_entry(KATAGO).sha256}`" in card and "kept frozen" in card
    assert "## Quality (evaluation split)" in card and "## How far from KataGo" in card
    assert "## Licence\n\nThe trunk's weights are KataGo's" in card
    assert "MIT licence" in card and "Apache-2.0" in card
    registry = yaml.safe_load((models / "registry.yaml").read_text(encoding="utf-8"))
    (entry,) = registry["models"]
    assert entry["license"] == "Apache-2.0 (rank head); trunk weights: KataGo license (MIT-style)"
    assert entry["format"] == "kibitz-go-policy"


def test_export_loads_without_the_katago_file_and_gives_the_same_logits(
    trained, katago, pool, monkeypatch
):
    out, _ = trained
    checkpoint = torch.load(out / "checkpoints" / "last.pt", weights_only=False)["net"]
    in_training = policy_on_katago_trunk(katago, head_channels=8).eval()
    in_training.load_state_dict(checkpoint)

    def no_katago_file(*_args, **_kw):
        raise AssertionError("loading the exported policy read a KataGo model file")

    for module, name in ((katago_model_file, "read_model_file"),
                         (katago_model_file, "parse_model_bytes"),
                         (katago_net, "read_model_file"), (katago_net, "load_katago_net")):  # fmt: skip
        monkeypatch.setattr(module, name, no_katago_file)
    monkeypatch.setenv("KIBITZ_MODELS_DIR", str(out / "no-models-here"))  # no registry file
    loaded = load_net(out / "model.kibitz.pt")
    assert isinstance(loaded, GoRankPolicyNet) and not loaded.training
    rows = np.arange(0, len(pool), 11)
    spatial, global_ = _inputs(pool, rows)
    with torch.inference_mode():
        expected = in_training(spatial, global_)  # (B, 19, 362)
        got = loaded(spatial, global_)
    assert got.shape == (len(rows), 19, 362)
    assert torch.equal(got, expected)
    assert not torch.equal(got[:, 0], got[:, -1])  # the ranks' logits differ
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    (onnx_logits,) = session.run(
        ["policy"], {"spatial": spatial.numpy(), "global": global_.numpy()}
    )
    np.testing.assert_allclose(onnx_logits, expected.numpy(), atol=1e-4, rtol=1e-4)


def test_a_finished_run_resumed_with_symmetries_exports_its_weights_averaged_over_them(
    trained, pool, tmp_path
):
    """``--resume --symmetries 8`` on a finished run re-exports the same weights with a header
    that makes the policy average its features over the board's 8 symmetries: its logits, less
    the per-rank bias map (a learned prior per point, which stays where it is), then turn with
    the board exactly (Go is the same game turned or mirrored), which one orientation's do not,
    and the ONNX export computes the same."""
    out, _ = trained
    run = tmp_path / "run"
    shutil.copytree(out, run)
    argv = [
        "train", "policy", "go", "--games", str(out.parent / "games-go"), "--out", str(run),
        "--trunk", KATAGO, "--trunk-mode", "frozen", "--head-channels", "8",
        "--max-steps", "3", "--warmup-steps", "1", "--batch-size", "8",
        "--positions-per-instance", "4", "--max-validation-games", "4",
        "--evaluation-positions", "2", "--no-progress", "--resume", "--symmetries", "8",
        "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
    ]  # fmt: skip
    assert main(argv) == 0
    header, state = read_model_file(run / "model.kibitz.pt")
    before_header, before = read_model_file(out / "model.kibitz.pt")
    assert header["net"]["symmetries"] == 8 and "symmetries" not in before_header["net"]
    assert header["train"]["steps"] == 3 and header["quality"] is not None
    for key, value in before.items():
        assert torch.equal(state[key], value), key
    one, averaged = load_net(out / "model.kibitz.pt"), load_net(run / "model.kibitz.pt")
    assert (one.config.symmetries, averaged.config.symmetries) == (1, 8)
    # the same weights run another way: ONNX exports and engines are cached apart
    assert net_fingerprint(one) != net_fingerprint(averaged)
    # ... and a one-orientation run may start from them (--init-from checks weights, not how a
    # net runs)
    weights, _ = initial_weights(
        str(run / "model.kibitz.pt"), GO_POLICY_FORMAT, one.config.to_dict(), one
    )
    assert all(torch.equal(weights[k], v) for k, v in before.items())
    spatial, global_ = _inputs(pool, np.arange(0, len(pool), 23))
    b = len(spatial)

    def board(logits: torch.Tensor, net: GoRankPolicyNet) -> torch.Tensor:
        """(B, R, 362) logits → (B, R, 19, 19), less the rank's bias map."""
        return (logits - net.bias())[..., :361].reshape(b, -1, 19, 19)

    with torch.inference_mode():
        for net, turns_exactly in ((averaged, True), (one, False)):
            plain = net(spatial, global_)
            for s in range(1, 8):
                turned = net(board_symmetry(spatial, s), global_)
                gap = (board(turned, net) - board_symmetry(board(plain, net), s)).abs().max().item()
                assert (gap < 1e-3) == turns_exactly, (s, gap)
                if turns_exactly:
                    torch.testing.assert_close(turned[..., 361], plain[..., 361])  # pass
        expected = averaged(spatial, global_)
    session = ort.InferenceSession(str(run / "model.onnx"), providers=["CPUExecutionProvider"])
    (onnx_logits,) = session.run(
        ["policy"], {"spatial": spatial.numpy(), "global": global_.numpy()}
    )
    np.testing.assert_allclose(onnx_logits, expected.numpy(), atol=1e-4, rtol=1e-4)
    assert GoRankPolicyConfig(symmetries=1).to_dict() == GoRankPolicyConfig().to_dict()
    with pytest.raises(ValueError, match="symmetries must be one of"):
        GoRankPolicyConfig(symmetries=3)


def _continue_trained(out: Path, run: Path, *options: str) -> tuple[dict, dict]:
    """``kibitz train policy go`` from the ``trained`` fixture's policy (its games, 8-channel
    head, batches of 8) into ``run`` with ``options``: the exported header and weights."""
    argv = [
        "train", "policy", "go", "--games", str(out.parent / "games-go"), "--out", str(run),
        "--trunk", KATAGO, "--head-channels", "8", "--init-from", str(out / "model.kibitz.pt"),
        "--warmup-steps", "1", "--batch-size", "8", "--positions-per-instance", "4",
        "--max-validation-games", "4", "--evaluation-positions", "2", "--no-progress",
        "--tracking-uri", f"sqlite:///{run.parent / (run.name + '-mlflow.db')}", *options,
    ]  # fmt: skip
    assert main(argv) == 0
    return read_model_file(run / "model.kibitz.pt")


def test_rank_layers_refit_only_the_per_rank_layers_of_a_trained_policy(trained, tmp_path):
    """``--trunk-mode rank-layers --init-from POLICY`` trains the per-rank layers alone on the
    policy's own shared features: the trunk, the head conv and its batch norm (statistics too)
    leave the run bit for bit as they came, the rank layers move, and the card says so. Without
    ``--init-from`` there are no trained features to refit on, and the run is refused."""
    out, _ = trained
    run = tmp_path / "refit"
    header, state = _continue_trained(
        out, run, "--trunk-mode", "rank-layers", "--max-steps", "3", "--lr", "0.01"
    )
    _, before = read_model_file(out / "model.kibitz.pt")
    assert header["trunk"]["mode"] == "rank-layers" and header["trunk"]["lr_scale"] is None
    rank_layers = ("gamma.", "beta.", "weight.", "pass_weight.", "bias.")
    moved = {k for k in before if not torch.equal(state[k], before[k])}
    assert moved and all(k.startswith(rank_layers) for k in moved), sorted(moved)
    assert any(k.startswith("bias.delta") for k in moved)  # a trained rank's own parameters
    card = (run / "MODEL_CARD.md").read_text()
    assert "only the per-rank layers trained" in card
    with pytest.raises(TrunkError, match="name the policy with --init-from"):
        GoPolicyTrainConfig(trunk=KATAGO, trunk_mode="rank-layers")


def _student_batch(model: Path) -> tuple[GoRankPolicyNet, PositionPool, np.ndarray, np.ndarray]:
    """The trained policy as a run starts from it (one orientation; in eval mode, so that the
    head's batch norm uses the same statistics in the loss and by hand), a pool of real
    positions, every 9th row and the movers' ranks."""
    student = load_net(str(model)).eval()
    pool = build_pool(go_games(1), "go", positions_per_instance=4, seed=1)
    rows = np.arange(0, len(pool), 9)
    return student, pool, rows, position_ranks(pool)[rows]


def test_teacher_symmetries_distil_the_start_policy_averaged_over_symmetries(trained, tmp_path):
    """``--teacher-symmetries 2 --teacher-weight W``: the --init-from policy, read from its file
    and averaged over two board symmetries, is a frozen teacher; the loss is (1 − W)·CE of the
    played move + W·CE of the teacher's legal-move distribution at the mover's rank. Checked by
    hand on the trained policy (its own teacher), then a run of the command records the setting
    and keeps the teacher fixed; without --init-from, or with 3 symmetries, it is refused."""
    out, _ = trained
    model = out / "model.kibitz.pt"
    student, pool, rows, ranks = _student_batch(model)
    config = GoPolicyTrainConfig(
        trunk=KATAGO, trunk_mode="finetune", head_channels=8, init_from=str(model),
        teacher_symmetries=2, teacher_weight=0.7,
    )  # fmt: skip
    teacher = symmetry_teacher(
        config, lambda: policy_on_katago_trunk(load_net(KATAGO), 8), student.config,
        torch.device("cpu"),
    )  # fmt: skip
    assert teacher.config.symmetries == 2 and not teacher.training
    assert not any(p.requires_grad for p in teacher.parameters())
    loss, hits = policy_loss(student, pool, rows, ranks, teacher=teacher, teacher_weight=0.7)
    # By hand: the teacher's features are the mean of the board's and its first symmetry's,
    # turned back; both nets' log-probabilities at the mover's rank over the legal moves.
    spatial, global_ = _inputs(pool, rows)
    mask = legal_mask(pool.legal_offsets, pool.legal_index, rows, go_spec.POLICY_SIZE)
    at = torch.from_numpy(ranks)
    with torch.inference_mode():
        mine = student.mover_logits(student.features(spatial, global_), at)
        views = [student.features(board_symmetry(spatial, s), global_) for s in (0, 1)]
        back = [
            board_symmetry(v.unflatten(2, (19, 19)), s, inverse=True).flatten(2)
            for s, v in zip((0, 1), views, strict=True)
        ]
        theirs = student.mover_logits((back[0] + back[1]) / 2, at)
    logp = masked_log_softmax(mine, mask).double().numpy()
    q = masked_log_softmax(theirs, mask).double().exp().numpy()
    played = logp[np.arange(len(rows)), pool.played[rows]]
    by_hand = 0.3 * -played.mean() + 0.7 * -(q * logp).sum(axis=1).mean()
    assert loss.item() == pytest.approx(by_hand, rel=1e-4)
    assert loss.item() != pytest.approx(-played.mean(), rel=1e-3)  # the soft target counts
    np.testing.assert_array_equal(hits.numpy(), logp.argmax(axis=1) == pool.played[rows])
    loss.backward()  # the gradient reaches the student, never the teacher
    assert student.head_conv.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in teacher.parameters())
    # The command: two fine-tuning steps from the trained policy with its 2-symmetry teacher.
    run = tmp_path / "distil"
    header, state = _continue_trained(
        out, run, "--trunk-mode", "finetune", "--max-steps", "2",
        "--teacher-symmetries", "2", "--teacher-weight", "0.7",
    )  # fmt: skip
    train = header["train"]
    assert (train["teacher_symmetries"], train["teacher_weight"], train["steps"]) == (2, 0.7, 2)
    assert header["net"].get("symmetries", 1) == 1  # the student runs one orientation
    _, start = read_model_file(model)
    assert not torch.equal(state["trunk.trunk.initial_conv.weight"],
                           start["trunk.trunk.initial_conv.weight"])  # fmt: skip
    assert "teacher_symmetries=2" in (run / "MODEL_CARD.md").read_text(encoding="utf-8")
    # Checkpoints from before the teacher resume; a teacher run's setting is part of its resume.
    assert "teacher_symmetries" not in GoPolicyTrainConfig().resume_keys()
    assert config.resume_keys()["teacher_weight"] == 0.7
    with pytest.raises(ValueError, match="name the policy with --init-from"):
        GoPolicyTrainConfig(teacher_symmetries=2)
    with pytest.raises(ValueError, match="teacher symmetries must be one of"):
        GoPolicyTrainConfig(init_from=str(model), teacher_symmetries=3)
    with pytest.raises(ValueError, match="teacher weight must be in"):
        GoPolicyTrainConfig(init_from=str(model), teacher_symmetries=2, teacher_weight=0.0)


def test_bf16_precision_runs_the_forward_in_bfloat16_and_the_loss_in_float32(trained, tmp_path):
    """``--precision bf16``: each step's forward (the teacher's too) under bfloat16 autocast, the
    loss and the gradients in float32. On real positions the loss moves by bfloat16's rounding
    (under 1 %), not more; the run records the setting, resumes at fp32 (precision is not a
    resume key, as the device is not), and an unknown precision is refused."""
    out, _ = trained
    model = out / "model.kibitz.pt"
    student, pool, rows, ranks = _student_batch(model)
    teacher = load_net(str(model)).eval().requires_grad_(False)
    fp32, hits32 = policy_loss(student, pool, rows, ranks, teacher=teacher, teacher_weight=0.5)
    with step_autocast(torch.device("cpu"), "bf16"):
        bf16, hits16 = policy_loss(student, pool, rows, ranks, teacher=teacher, teacher_weight=0.5)
    assert bf16.dtype == torch.float32
    assert bf16.item() == pytest.approx(fp32.item(), rel=1e-2)
    assert bf16.item() != pytest.approx(fp32.item(), rel=1e-6)  # the forward did run in bf16
    assert (hits16 == hits32).float().mean() >= 0.9  # the top move, but for near ties
    bf16.backward()
    grad = student.head_conv.weight.grad
    assert grad.dtype == torch.float32 and grad.abs().sum() > 0
    run = tmp_path / "bf16"
    header, _ = _continue_trained(
        out, run, "--trunk-mode", "finetune", "--max-steps", "2", "--precision", "bf16"
    )
    assert (header["train"]["precision"], header["train"]["steps"]) == ("bf16", 2)
    assert "precision=bf16" in (run / "MODEL_CARD.md").read_text(encoding="utf-8")
    header, _ = _continue_trained(
        out, run, "--trunk-mode", "finetune", "--max-steps", "2", "--resume"
    )
    assert header["train"]["precision"] == "fp32" and len(header["train"]["commands"]) == 2
    assert "precision" not in GoPolicyTrainConfig(precision="bf16").resume_keys()
    with pytest.raises(DeviceError, match="--precision 'fp16': one of fp32, bf16"):
        GoPolicyTrainConfig(precision="fp16")


def _first_games(group: str, n: int) -> tuple[pa.Table, str]:
    """The first ``n`` games of a candidating collection as a games table, and their SGF text."""
    path = settings.data_dir() / CANDIDATING / f"{group}.sgf"
    if not path.is_file():
        pytest.fail(f"Fox games missing: {path}")
    table = pa.concat_tables(read_games(path, max_games=n))
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[:n]
    return table, "\n".join(lines)


def test_models_check_scores_a_rank_conditioned_policy_at_the_own_rank(capsys):
    # The first two 3-5k games are 3k vs 3k and 5k vs 5k: one band, two own ranks. Komi 6.5
    # for Fox's KM[0], as the trainer encodes these games.
    games, text = _first_games("3-5k", 2)
    moves = sum(len(re.findall(r";[BW]\[", line)) for line in text.splitlines())
    assert re.findall(r"BR\[(\w+)\]", text) == ["3k", "5k"] == re.findall(r"WR\[(\w+)\]", text)
    path = settings.data_dir() / CANDIDATING / "3-5k.sgf"
    result = check_net(SMALL_POLICY, path, max_games=2, komi=6.5, profile="9d")
    assert (result.games, result.positions, result.unranked_positions) == (2, moves, 0)
    (row,) = result.rows
    assert (row.band, row.games, row.positions) == ("3-5k", 2, moves)
    assert result.conditionings == GO_POLICY_RANKS and result.profile == "9d"
    # By hand: every move through the net (all ranks at once), softmax over its legal moves,
    # the played move's log-probability at the mover's own rank.
    pool = build_pool(games, "go", positions_per_instance=None, komi=6.5)
    assert len(pool) == moves
    rows = np.arange(len(pool))
    with torch.inference_mode():
        logits = load_net(SMALL_POLICY)(*_inputs(pool, rows))  # (N, 19, 362)
    mask = legal_mask(pool.legal_offsets, pool.legal_index, rows, go_spec.POLICY_SIZE)
    logp = masked_log_softmax(logits, mask[:, None]).numpy()  # (N, 19, 362)
    played = logp[rows, :, pool.played]  # (N, 19)
    hits = logp.argmax(axis=2) == pool.played[:, None]  # (N, 19)
    own = position_ranks(pool)
    assert np.bincount(own, minlength=19)[[rank_index("3k"), rank_index("5k")]].sum() == moves
    assert row.accuracy == pytest.approx(hits[rows, own].mean(), abs=1e-12)
    assert row.mean_loglik == pytest.approx(played[rows, own].mean(), abs=1e-5)
    np.testing.assert_allclose(row.conditioned_loglik, played.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(row.conditioned_accuracy, hits.mean(axis=0), atol=1e-12)
    best, best_loglik = result.best_conditioning(row)
    assert best == GO_POLICY_RANKS[int(played.mean(axis=0).argmax())]
    assert best_loglik >= row.mean_loglik - 1e-9
    # Two own ranks: the own-rank figure is neither rank's alone.
    assert row.mean_loglik not in {row.conditioned_loglik[rank_index(r)] for r in ("3k", "5k")}
    # The 4 × 32 policy finds about 4 in 10 human moves at the mover's rank.
    assert 0.3 < row.accuracy < 0.6 and -3.0 < row.mean_loglik < -1.5
    argv = ["models", "check", SMALL_POLICY, "--sgf", str(path), "--max-games", "1",
            "--profile", "9d"]  # fmt: skip
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "accuracy and mean loglik at the mover's own rank" in shown
    assert "best rank" in shown and "9d acc." in shown
    line = r"^{} +1 +\d+ +[\d.]+% +-\d\.\d{{4}} +\d+[kd] +-\d\.\d{{4}} +[\d.]+% +-\d\.\d{{4}}$"
    for band in ("3-5k", "all"):
        assert re.search(line.format(band), shown, re.MULTILINE), shown
    # A profile must be a rank of the net, and means nothing to a net without a rank input.
    with pytest.raises(UnknownRankError, match="'pro'"):
        check_net(SMALL_POLICY, path, max_games=1, profile="pro")
    with pytest.raises(ProfileError, match="has no rank input"):
        check_net(KATAGO, path, max_games=1, profile="3d")


def test_the_trainer_refuses_unknown_trunk_modes_and_other_nets(tmp_path):
    with pytest.raises(TrunkError, match="'partial' is not one of"):
        GoPolicyTrainConfig(trunk=KATAGO, trunk_mode="partial")
    # A scratch run's settings stay what they were before trunks existed (old checkpoints
    # resume); a trunk run's name the trunk instead of blocks × channels.
    assert "trunk" not in GoPolicyTrainConfig().resume_keys()
    finetune = GoPolicyTrainConfig(trunk=KATAGO, trunk_mode="finetune").resume_keys()
    assert finetune["trunk_lr_scale"] == 0.1 and "blocks" not in finetune
    argv = ["train", "policy", "go", "--games", str(tmp_path), "--out", str(tmp_path / "o"),
            "--trunk", KATAGO, "--channels", "64"]  # fmt: skip
    assert main(argv) == 2


def test_finetune_run_resumes_exactly(tmp_path):
    """A fine-tuned run (two optimiser groups, the trunk's at 0.1 × the LR) stopped after one
    step and resumed ends with the weights of the uninterrupted run."""
    games = write_games_dir(go_games(1), tmp_path / "games-go")
    config = GoPolicyTrainConfig(
        trunk=KATAGO, trunk_mode="finetune", head_channels=4, batch_size=4,
        positions_per_instance=2, max_steps=2, warmup_steps=1, epoch_steps=2,
        validation_positions=8, split_fractions=(0.5, 0.5, 0.0),
    )  # fmt: skip
    kw = {"progress": False, "evaluate": False, "export": False,
          "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}  # fmt: skip
    train_policy(config, games, tmp_path / "whole", **kw)
    train_policy(config, games, tmp_path / "split", stop_after=1, **kw)
    resumed = train_policy(config, games, tmp_path / "split", resume=True, **kw)
    assert resumed.steps == 2
    whole, split = (
        torch.load(tmp_path / run / "checkpoints" / "last.pt", weights_only=False)
        for run in ("whole", "split")
    )
    assert [g["lr_scale"] for g in split["optimizer"]["param_groups"]] == [1.0, 0.1]
    for key, value in whole["net"].items():
        assert torch.equal(split["net"][key], value), key
    stem = "trunk.trunk.initial_conv.weight"
    assert not torch.equal(whole["net"][stem], load_net(KATAGO).trunk.initial_conv.weight)
