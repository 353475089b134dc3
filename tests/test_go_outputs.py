"""KataGo's g170 net in Kibitz against KataGo itself, and the post-processing by hand.

Reference: ``../shared/reference/katago-g170.jsonl`` (Japanese rules) and
``katago-g170-chinese.jsonl`` (Chinese rules), KataGo v1.16.4's ``kata-raw-nn`` on 28 real Fox
positions each, with KataGo's own input tensors beside them (``*-inputs.npz``, rows matched to
records by ``ids``). Every record is checked: policy per move within 1e-4 of the full-precision
(``hp``) values, win/loss/no-result within 1e-4, lead and score mean within 0.01 points, score
stdev within 0.01, ownership within 1e-3 — first on KataGo's own input tensors, then end to end
from the records' moves through Kibitz's own featurizer (``pipeline.go_game.encode``).

Run: ``pytest tests/test_go_outputs.py``
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from pipeline.core import settings
from pipeline.nets.katago_model_file import KataGoModelMeta, PostProcessParams
from pipeline.nets.katago_net import KataGoNet, load_katago_net
from pipeline.nets.katago_outputs import GoEval, NoLegalMoveError, policy_probabilities, postprocess

G170 = "katago/g170-b6c96-s175395328-d26788732.bin.gz"
REFERENCE_SETS = ("katago-g170", "katago-g170-chinese")


@dataclass
class ReferenceSet:
    records: list[dict]  # in the order of the input tensors
    spatial: np.ndarray  # (N, 22, 19, 19) KataGo's binaryInputNCHW
    global_: np.ndarray  # (N, 19) KataGo's globalInputNC

    @property
    def legal(self) -> np.ndarray:
        """KataGo prints null for illegal points (occupied, ko-banned, suicide)."""
        return np.array([[p is not None for p in r["hp"]["policy"]] for r in self.records])

    @property
    def black_to_move(self) -> np.ndarray:
        return np.array([r["to_move"] == "B" for r in self.records])

    def hp(self, key: str) -> np.ndarray:
        return np.array([r["hp"][key] for r in self.records], dtype=np.float64)


def load_reference(name: str) -> ReferenceSet:
    folder = settings.reference_dir()
    lines, inputs = folder / f"{name}.jsonl", folder / f"{name}-inputs.npz"
    for path in (lines, inputs):
        if not path.is_file():
            pytest.fail(f"KataGo reference file missing: {path}")
    by_id = {}
    for line in lines.read_text().splitlines():
        record = json.loads(line)
        by_id[record["id"]] = record
    data = np.load(inputs)
    records = [by_id[int(i)] for i in data["ids"]]
    assert len(records) == len(by_id) == 28
    return ReferenceSet(records, data["binaryInputNCHW"], data["globalInputNC"])


@pytest.fixture(scope="module")
def net() -> KataGoNet:
    path = settings.models_dir() / G170
    if not path.is_file():
        pytest.fail(f"real KataGo net missing: {path} (set KIBITZ_MODELS_DIR)")
    return load_katago_net(path)


def evaluate(
    net: KataGoNet,
    spatial: np.ndarray,
    global_: np.ndarray,
    legal: np.ndarray,
    black_to_move: np.ndarray,
) -> GoEval:
    with torch.inference_mode():
        outputs = net(torch.from_numpy(spatial), torch.from_numpy(global_))
    raw = {name: out.numpy() for name, out in zip(net.output_names, outputs, strict=True)}
    return postprocess(raw, legal, black_to_move, net.meta)


def assert_matches_katago(got: GoEval, ref: ReferenceSet, legal: np.ndarray) -> None:
    hp_policy = np.array(
        [[0.0 if p is None else p for p in r["hp"]["policy"]] for r in ref.records]
    )
    np.testing.assert_allclose(got.policy, hp_policy, atol=1e-4, rtol=0, err_msg="policy")
    assert np.all(got.policy[~legal] == 0.0)
    np.testing.assert_allclose(got.policy.sum(axis=1), 1.0, atol=1e-5)
    for field, key, tol in [
        ("white_win", "whiteWin", 1e-4),
        ("white_loss", "whiteLoss", 1e-4),
        ("no_result", "noResult", 1e-4),
        ("white_lead", "whiteLead", 0.01),
        ("white_score_mean", "whiteScoreMean", 0.01),
        ("white_score_stdev", "whiteScoreStdev", 0.01),
    ]:
        np.testing.assert_allclose(getattr(got, field), ref.hp(key), atol=tol, rtol=0, err_msg=key)
    ownership = np.array([r["hp"]["whiteOwnership"] for r in ref.records])
    np.testing.assert_allclose(got.ownership, ownership, atol=1e-3, rtol=0, err_msg="ownership")


@pytest.mark.parametrize("name", REFERENCE_SETS)
def test_every_record_matches_katago_on_its_own_inputs(net: KataGoNet, name: str) -> None:
    ref = load_reference(name)
    got = evaluate(net, ref.spatial, ref.global_, ref.legal, ref.black_to_move)
    assert_matches_katago(got, ref, ref.legal)
    # Perspective made explicit: the mover's lead is White's lead with Black's sign flipped.
    sign = np.where(ref.black_to_move, -1.0, 1.0)
    np.testing.assert_allclose(got.mover_lead, ref.hp("whiteLead") * sign, atol=0.01)
    mover_win = np.where(ref.black_to_move, ref.hp("whiteLoss"), ref.hp("whiteWin"))
    np.testing.assert_allclose(got.mover_win, mover_win, atol=1e-4)


@pytest.mark.parametrize("name", REFERENCE_SETS)
def test_every_record_matches_katago_from_its_moves(net: KataGoNet, name: str) -> None:
    from pipeline.go_game.encode import encode_games
    from pipeline.go_game.rules import GoGameSpec

    ref = load_reference(name)
    games = []
    for r in ref.records:
        moves = [f"{colour}:{point}" for colour, point in r["moves"]]
        # Positions are encoded BEFORE each move: a final pass by the side to move makes the
        # position after the record's moves the game's last encoded position.
        moves.append(f"{r['to_move']}:pass")
        games.append(GoGameSpec(moves=moves, komi=r["komi"], rules=r["rules"]))
    positions = encode_games(games)
    assert positions.illegal_moves == []
    last = np.flatnonzero(np.diff(np.append(positions.game_index, len(games))))
    assert len(last) == len(games)
    spatial, global_ = positions.spatial[last], positions.global_[last]
    np.testing.assert_array_equal(spatial, ref.spatial)
    np.testing.assert_array_equal(global_, ref.global_)
    np.testing.assert_array_equal(positions.legal[last], ref.legal)
    got = evaluate(net, spatial, global_, positions.legal[last], positions.black_to_move[last])
    assert_matches_katago(got, ref, ref.legal)


# ---------------------------------------------------------------------------------------------
# Post-processing by hand


def meta(version: int, post: PostProcessParams | None = None) -> KataGoModelMeta:
    return KataGoModelMeta(
        name="hand",
        version=version,
        post_process=post or PostProcessParams(),
        policy_channels=2 if version >= 12 else 1,
        score_channels=6 if version >= 9 else 4,
        meta_encoder_version=0,
    )


def one_position(misc: list[float]) -> dict[str, np.ndarray]:
    return {
        # win : loss : no-result = 6 : 3 : 1
        "value": np.log(np.array([[6.0, 3.0, 1.0]])),
        "misc": np.array([misc]),
        "ownership": np.array([[0.5, -2.0] + [0.0] * 359]),
        "policy": np.zeros((1, 1, 362)),
    }


def test_v8_values_by_hand_white_and_black_to_move() -> None:
    legal = np.ones((1, 362), bool)
    raw = one_position([0.5, 0.0, -0.25, 0.0])
    white = postprocess(raw, legal, np.array([False]), meta(8))
    stdev = 20.0 * math.log(2.0)  # softplus(0) = ln 2
    assert white.white_win[0] == pytest.approx(0.6)
    assert white.no_result[0] == pytest.approx(0.1)
    assert white.white_score_mean[0] == pytest.approx(10.0 * 0.9)  # 20 * 0.5 * (1 - noResult)
    assert white.white_lead[0] == pytest.approx(-5.0 * 0.9)
    mean_sq = (100.0 + stdev**2) * 0.9
    assert white.white_score_mean_sq[0] == pytest.approx(mean_sq)
    assert white.white_score_stdev[0] == pytest.approx(math.sqrt(mean_sq - 81.0))
    assert np.isnan(white.var_time_left[0]) and np.isnan(white.shortterm_score_error[0])
    np.testing.assert_allclose(white.ownership[0, :2], np.tanh([0.5, -2.0]), rtol=1e-6)

    black = postprocess(raw, legal, np.array([True]), meta(8))
    assert black.white_win[0] == pytest.approx(0.3)  # Black's win is White's loss
    assert black.white_loss[0] == pytest.approx(0.6)
    assert black.white_lead[0] == pytest.approx(+4.5)
    assert black.white_score_mean[0] == pytest.approx(-9.0)
    assert black.white_score_mean_sq[0] == pytest.approx(mean_sq)
    assert black.mover_lead[0] == pytest.approx(-4.5) and black.mover_win[0] == pytest.approx(0.6)
    np.testing.assert_allclose(black.ownership[0, :2], -np.tanh([0.5, -2.0]), rtol=1e-6)


def test_v13_multipliers_from_the_file_scale_scores() -> None:
    post = PostProcessParams(20.0, 18.0, 21.0, 17.0, 41.0, 0.3, 29.0)
    raw = one_position([0.5, 0.0, -0.25, 1.0, 0.0, 0.0])
    got = postprocess(raw, np.ones((1, 362), bool), np.array([False]), meta(13, post))
    assert got.white_score_mean[0] == pytest.approx(18.0 * 0.5 * 0.9)
    assert got.white_lead[0] == pytest.approx(17.0 * -0.25 * 0.9)
    stdev = 21.0 * math.log(2.0)
    assert got.white_score_mean_sq[0] == pytest.approx(((18.0 * 0.5) ** 2 + stdev**2) * 0.9)
    assert got.var_time_left[0] == pytest.approx(41.0 * math.log1p(math.e))
    # v10-v13: sqrt(softplus(x) * multiplier)
    assert got.shortterm_winloss_error[0] == pytest.approx(math.sqrt(math.log(2.0) * 0.3))
    assert got.shortterm_score_error[0] == pytest.approx(math.sqrt(math.log(2.0) * 29.0))


@pytest.mark.parametrize(
    ("version", "winloss", "score"),
    [
        (9, math.log(2.0), 10.0 * math.log(2.0)),
        (10, math.sqrt(0.25 * math.log(2.0)), math.sqrt(30.0 * math.log(2.0))),
        (14, math.sqrt(0.25) * math.log(2.0), math.sqrt(30.0) * math.log(2.0)),
    ],
)
def test_shortterm_errors_per_version(version: int, winloss: float, score: float) -> None:
    raw = one_position([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    raw["policy"] = np.zeros((1, 2 if version >= 12 else 1, 362))
    got = postprocess(raw, np.ones((1, 362), bool), np.array([False]), meta(version))
    assert got.shortterm_winloss_error[0] == pytest.approx(winloss)
    assert got.shortterm_score_error[0] == pytest.approx(score)


def test_no_result_forced_to_zero_where_rules_exclude_it() -> None:
    raw = one_position([0.5, 0.0, -0.25, 0.0])
    got = postprocess(
        raw, np.ones((1, 362), bool), np.array([False]), meta(8), no_result_possible=False
    )
    assert got.no_result[0] == 0.0
    assert got.white_win[0] == pytest.approx(6.0 / 9.0)
    assert got.white_lead[0] == pytest.approx(-5.0)


def test_policy_masks_illegal_moves_and_mixes_optimism() -> None:
    logits = np.zeros((1, 2, 362))
    logits[0, 0, :3] = [0.0, math.log(3.0), 5.0]
    logits[0, 1, :3] = [math.log(4.0), math.log(3.0), 5.0]
    legal = np.zeros((1, 362), bool)
    legal[0, :2] = True  # point 2 (the highest logit) is illegal
    plain = policy_probabilities(logits, legal)
    np.testing.assert_allclose(plain[0, :3], [0.25, 0.75, 0.0], rtol=1e-6)
    assert plain[0, 3:].sum() == 0.0
    mixed = policy_probabilities(logits, legal, policy_optimism=0.5)  # logit 0 -> ln 2
    np.testing.assert_allclose(mixed[0, :2], [0.4, 0.6], rtol=1e-6)
    with pytest.raises(NoLegalMoveError, match=r"\[0\]"):
        policy_probabilities(logits, np.zeros((1, 362), bool))


# ---------------------------------------------------------------------------------------------
# kibitz models check NAME --sgf FILE


def test_move_matching_on_real_fox_games() -> None:
    from pipeline.nets.check_go import check_net

    games_file = settings.data_dir() / "go" / "fox-selected" / "candidating" / "1d.sgf"
    if not games_file.is_file():
        pytest.fail(f"Fox games missing: {games_file}")
    first_two = games_file.read_text(encoding="utf-8", errors="replace").splitlines()[:2]
    moves = sum(len(re.findall(r";[BW]\[", line)) for line in first_two)
    result = check_net("katago-g170-b6c96", games_file, max_games=2)
    assert (result.games, result.positions, result.skipped_games) == (2, moves, 0)
    assert [row.band for row in result.rows] == ["1d"]
    # A 6-block self-play net predicts roughly 4 in 10 moves of 1-dan amateurs (42 % on the
    # first 10 games of this file); the played move averages a probability around e^-2.3.
    assert 0.25 < result.accuracy < 0.6
    assert -3.5 < result.mean_loglik < -1.5
    assert "1d" in result.to_text()
