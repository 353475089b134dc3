"""The levels s-score (pipeline/nets/sscore_levels.py): a Bradley-Terry head on the 9 Maia-1 nets'
policies, trained by ``kibitz train sscore-levels`` on real games, loaded through the registry.

Real nets and games: the 9 Maia-1 nets of ../shared and the first games of each Lichess band;
for Go, Kibitz's rank-conditioned policy (models/) and the first games of each Fox rank group.
"""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml
from train_real_games import go_games, write_games_dir

from pipeline.cli import main as cli
from pipeline.cli.train_nets import levels_config
from pipeline.nets import registry as model_registry
from pipeline.nets.evaluator import make_evaluator
from pipeline.nets.go_rank_policy import rank_index
from pipeline.nets.kibitz_model_file import ModelFileError, read_model_file
from pipeline.nets.legal_softmax import legal_mask
from pipeline.nets.loading import load_net, load_net_file
from pipeline.nets.sscore_levels import (
    GO_LEVELS,
    GO_RANK_LEVELS,
    MAIA_LEVELS,
    LevelsHead,
    LevelsHeadConfig,
    LevelsModelError,
    LevelsSScore,
    level_features,
    level_nets,
)
from pipeline.train.games import load_split_games, read_games
from pipeline.train.level_policies import compute_level_policies
from pipeline.train.model_cards import write_card
from pipeline.train.sscore_batches import build_pool, net_inputs
from pipeline.train.sscore_eval import score_rows
from pipeline.train.sscore_levels import CACHE_DIR, LevelsTrainConfig, ScoredPool, train


def test_level_features_are_each_levels_loglik_then_entropy():
    # Level a: logits (0, log 3) → p = (1/4, 3/4); level b: (0, 0) → (1/2, 1/2); move 1 played.
    logits = [torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([[0.0, 0.0]])]
    played = torch.tensor([[0.0, 1.0]])
    got = level_features(logits, played)[0].tolist()
    h_a = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert got == pytest.approx([math.log(0.75), math.log(0.5), h_a, math.log(2.0)], abs=1e-6)


def test_level_features_under_a_legal_softmax_ignore_illegal_moves():
    # Logits (0, log 3, 9) with move 2 illegal: p = (1/4, 3/4, 0), as without move 2.
    logits = [torch.tensor([[0.0, math.log(3.0), 9.0]])]
    played = torch.tensor([[0.0, 1.0, 0.0]])
    legal = torch.tensor([[True, True, False]])
    got = level_features(logits, played, legal)[0].tolist()
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert got == pytest.approx([math.log(0.75), h], abs=1e-6)


def test_head_config_is_checked():
    with pytest.raises(LevelsModelError, match="two or more distinct"):
        LevelsHeadConfig(("maia-1100", "maia-1100"))
    with pytest.raises(ValueError, match="game must be one of"):
        LevelsTrainConfig(game="shogi")
    with pytest.raises(LevelsModelError, match="softmax must be one of"):
        LevelsHeadConfig(("a", "b"), softmax="masked")
    assert LevelsTrainConfig(game="go").head_config() == LevelsHeadConfig(GO_LEVELS, 64, "legal")
    assert LevelsTrainConfig().head_config() == LevelsHeadConfig(MAIA_LEVELS, 64, "whole")


# A seconds-long run on 8 real games a band: half train, 30 % validate, 20 % evaluate.
KATAGO = "katago-g170-b6c96"
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
    assert "`maia-1100` GPL-3.0" in card and "| 2400-2600 |" in card


def test_loaded_model_scores_moves_as_the_head_on_cached_policies(trained, chess_dir):
    """The registry-loaded model (9 Maia nets + head) and the trainer's cached-feature path give
    the same s-score; the exported ONNX head and the ONNX export of the whole model agree."""
    out, _, _ = trained
    net = load_net(out / "model.kibitz.pt")
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
        load_net(tmp_path / "model.kibitz.pt")
    with pytest.raises(ModelFileError, match="expected 'kibitz-sscore'"):
        load_net_file(out / "model.kibitz.pt", "kibitz-sscore")


def test_head_standardises_by_the_training_features():
    head = LevelsHead(LevelsHeadConfig(("a", "b")))
    features = np.array([[0.0, 1.0, 2.0, 3.0], [2.0, 3.0, 4.0, 7.0]], np.float32)
    head.standardise_by(features)
    assert head.mean.tolist() == [1.0, 2.0, 3.0, 5.0]
    assert head.std.numpy() == pytest.approx([1.0, 1.0, 1.0, 2.0], abs=1e-5)


# -- Go: the levels are ranks of Kibitz's rank-conditioned policy, one trunk pass --------------


@pytest.fixture(scope="module")
def go_trained(tmp_path_factory):
    """``kibitz train sscore-levels go``' run function on the first 6 games of each Fox group
    (with 4, the 3d group had no training instance)."""
    root = tmp_path_factory.mktemp("levels-go")
    games = write_games_dir(go_games(6), root / "games")
    config = LevelsTrainConfig(game="go", max_steps=8, evaluation_positions_per_instance=4,
                               **{**SMALL_LEVELS, "groups": 2})  # fmt: skip
    train(config, games, root / "run", progress=False, tracking_uri=f"sqlite:///{root}/m.db",
          command="kibitz train sscore-levels go --games G --out O")  # fmt: skip
    return root / "run", games


def test_go_levels_are_ranks_of_one_policy_and_katago_read_over_legal_moves(go_trained):
    out, _ = go_trained
    header = yaml.safe_load((out / "model.yaml").read_text(encoding="utf-8"))
    assert header["game"] == "go" and header["net"]["levels"] == list(GO_LEVELS)
    assert header["net"]["softmax"] == "legal"
    sha = model_registry.model_sha256("kibitz-go-policy")
    kata = model_registry.model_sha256(KATAGO)
    assert header["net"]["level_sha256"] == {**dict.fromkeys(GO_RANK_LEVELS, sha), KATAGO: kata}
    net = load_net(out / "model.kibitz.pt")
    assert net.input_names == ("spatial", "global", "legal", "played")
    assert len(net.nets) == 2  # the 11 rank levels share one net, run once; then KataGo
    assert net.ranks == [[rank_index(level.split("@")[1]) for level in GO_RANK_LEVELS], []]
    card = write_card(out).read_text(encoding="utf-8")
    assert f"`kibitz-go-policy` (sha256 `{sha[:12]}…`; ranks 4k, 2k, 1d," in card
    assert f"`{KATAGO}` (sha256 `{kata[:12]}…`)" in card and "legal-move mask" in card
    assert "`kibitz-go-policy` Apache-2.0" in card and "MIT-style" in card
    assert "| 9d |" in card and "Maia" not in card


def test_go_levels_model_scores_as_its_head_on_each_ranks_legal_policy(go_trained):
    """Three paths agree: the loaded model on (spatial, global, legal, played), the trainer's
    cached features through the head, and, per level, the one-rank view of the policy net
    (``at_rank``) or KataGo's policy channel 0, with a legal-move softmax computed here; the
    ONNX export of the whole model agrees too."""
    out, games_dir = go_trained
    net = load_net(out / "model.kibitz.pt")
    games = load_split_games(games_dir, "go", "validation",
                             split_config=LevelsTrainConfig(game="go").split_config(),
                             table=read_games(games_dir, "go"))  # fmt: skip
    pool = build_pool(games, "go", positions_per_instance=3, seed=5)
    rows = np.arange(min(len(pool), 40))
    direct = score_rows(net, pool, rows, pool.played[rows])
    policies = compute_level_policies(net, pool)
    features = policies.played_features(pool, rows)
    with torch.inference_mode():
        cached = net.head(torch.from_numpy(features))[:, 0].numpy()
    np.testing.assert_allclose(cached, direct, atol=5e-3)  # policies are stored as float16
    assert np.ptp(direct) > 0.01
    policy = load_net("kibitz-go-policy")
    spatial, global_ = (torch.from_numpy(a[rows]).float() for a in (pool.planes, pool.global_))
    legal = legal_mask(pool.legal_offsets, pool.legal_index, rows, 362)
    for i in (0, 5, 10):  # 4k, 4d, 9d
        with torch.inference_mode():
            logits = policy.at_rank(GO_LEVELS[i].split("@")[1])(spatial, global_)
        logp = torch.log_softmax(logits.masked_fill(~legal, -torch.inf), dim=1)
        played = logp[torch.arange(len(rows)), torch.from_numpy(pool.played[rows])].numpy()
        np.testing.assert_allclose(features[:, i], played, atol=5e-3)
    kata = load_net(KATAGO)
    with torch.inference_mode():
        logits = kata(spatial, global_)[0][:, 0]  # KataGo's policy channel 0, (B, 362)
    logp = torch.log_softmax(logits.masked_fill(~legal, -torch.inf), dim=1)
    played = logp[torch.arange(len(rows)), torch.from_numpy(pool.played[rows])].numpy()
    np.testing.assert_allclose(features[:, 11], played, atol=5e-3)
    assert np.abs(features[:, 0] - features[:, 10]).max() > 0.05  # the ranks differ
    whole = make_evaluator(net, backend="onnx", cache_dir=out / "onnx-cache")
    inputs = net_inputs(pool, rows, pool.played[rows], legal=True)
    feed = dict(zip(net.input_names, (t.numpy() for t in inputs), strict=True))
    np.testing.assert_allclose(whole(feed)["sscore"][:, 0], direct, atol=1e-4)


def go_levels_header(name: str, policy: str) -> dict:
    """The header of the Go levels head ``name`` after checking that it is the shipped recipe
    (command settings, games and seed) on ``policy``'s 11 ranks and KataGo g170, its groups'
    means rising strictly on the evaluation games."""
    header = yaml.safe_load((model_registry.resolve(name).file.parent / "model.yaml").read_text())
    ranks = [level.split("@")[1] for level in GO_RANK_LEVELS]
    assert header["net"]["levels"] == [*(f"{policy}@{r}" for r in ranks), KATAGO]
    shas = {model_registry.model_sha256(n) for n in (policy, KATAGO)}
    assert set(header["net"]["level_sha256"].values()) == shas
    train = header["train"]
    settings = ("max_train_games", "max_evaluation_games", "max_reference_games", "seed")
    assert [train[k] for k in settings] == [6000, 1000, 600, 0]
    assert header["quality"]["strictly_increasing"] and header["quality"]["spearman"] == 1.0
    return header


def test_the_shipped_go_levels_head_reads_the_default_policys_ranks():
    """``kibitz-sscore-go-levels`` (trained as ``kibitz-sscore-go-levels-distill``, #28's switch,
    docs/research/log-nets.md): the previous head's command, games and seed on the 11 ranks of today's
    ``kibitz-go-policy`` (named in its header by the former name ``kibitz-go-policy-distill``,
    which the registry resolves to the same file) and KataGo g170. On the same 1,000 evaluation
    games, against the head it replaced (18.9/32.8/40.8/46.5/51.1 %, shipped on as
    ``kibitz-sscore-go-levels-gpu``): −0.1 and 0.0 points at n = 1 and 5, +0.3 … +0.9 from
    n = 10 (±1 at n = 20: 94.7 against 93.9 %). The registry keeps the replaced heads' figures."""
    header = go_levels_header("kibitz-sscore-go-levels", "kibitz-go-policy-distill")
    policy = model_registry.model_sha256("kibitz-go-policy")
    assert model_registry.model_sha256("kibitz-go-policy-distill") == policy
    assert header["quality"]["accuracy"] == {1: 18.8, 5: 32.8, 10: 41.1, 15: 47.3, 20: 52.0}
    assert header["quality"]["accuracy_pm1"][20] == 94.7
    history = model_registry.resolve("kibitz-sscore-go-levels").history
    (cpu,) = [line for line in history if line.startswith("From 27 to 29 November")]
    assert "n = 1/5/10/15/20 of 18.7/31.4/40.0/45.7/49.6 %" in cpu
    gpu, gone = history[-2:]  # the head this one replaced, and where it went
    assert "`kibitz-sscore-go-levels-gpu`" in gpu and "18.9/32.8/40.8/46.5/51.1" in gpu
    assert "left the tree" in gone and "commit 9ba4a73 holds it" in gone


def test_a_level_must_name_a_rank_exactly_for_a_rank_conditioned_net():
    with pytest.raises(LevelsModelError, match="rank-conditioned; name a rank"):
        level_nets(LevelsHeadConfig(("kibitz-go-policy", "kibitz-go-policy@3d")), load=load_net)
    with pytest.raises(LevelsModelError, match="not rank-conditioned; name it without @3d"):
        level_nets(LevelsHeadConfig(("maia-1100", "maia-1500@3d")), load=load_net)
    with pytest.raises(LevelsModelError, match="'12k'"):
        level_nets(LevelsHeadConfig(("kibitz-go-policy@1d", "kibitz-go-policy@12k")), load=load_net)
