"""Policy decoding against lc0's own numbers, and the whole chess path end to end.

- the segment softmax over legal moves, fed lc0's raw 1858 logits for all 9 nets × 40
  positions, reproduces lc0's exact priors (``hp_priors_exact_pct``) within 0.01 pp;
- Kibitz's encoder + torch Lc0 net give lc0's raw logits within 1e-3 and its priors within
  0.01 pp for maia-1100 … maia-1900;
- ``check_net`` on real games gives Maia's published move-matching level (~50 %).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.chess_game.encode import encode_games, legal_uci
from pipeline.chess_game.policy import (
    PolicyShapeError,
    index_to_uci,
    moves_uci,
    policy_over_legal,
    softmax_over_legal,
)
from pipeline.chess_game.spec import POLICY_INDEX_OF
from pipeline.core import settings
from pipeline.nets import registry as model_registry
from pipeline.nets.check_chess import check_net

REFERENCE = settings.reference_dir()
TESTING = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "testing"
NETS = [f"maia-{level}" for level in range(1100, 2000, 100)]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    with (REFERENCE / "maia-lc0.jsonl").open() as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def reference_logits() -> dict[tuple[str, str, int], np.ndarray]:
    """lc0's raw (1858,) policy per (net, site, ply)."""
    with np.load(REFERENCE / "maia-lc0-logits1858.npz") as data:
        logits, nets, sites, plies = data["logits"], data["nets"], data["game_site"], data["ply"]
    return {
        (str(net), str(site), int(ply)): logits[i, j]
        for i, net in enumerate(nets)
        for j, (site, ply) in enumerate(zip(sites, plies, strict=True))
    }


@pytest.fixture(scope="module")
def positions(records):
    """Each reference position alone (its history as the game before it), one row per record."""
    pos = encode_games([r["moves_uci"] + [r["game_move"]] for r in records])
    rows = np.flatnonzero(np.diff(np.append(pos.game_index, len(records))) != 0)
    return pos, rows


def _subset(pos, rows: np.ndarray):
    """Rows of ``pos`` as their own ChessPositions (planes and CSR sliced consistently)."""
    from pipeline.chess_game.encode import ChessPositions

    starts, ends = pos.legal_offsets[rows], pos.legal_offsets[rows + 1]
    take = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
    return ChessPositions(
        planes=pos.planes[rows],
        game_index=pos.game_index[rows],
        ply=pos.ply[rows],
        white_to_move=pos.white_to_move[rows],
        legal_offsets=np.concatenate([[0], np.cumsum(ends - starts)]),
        legal_policy_index=pos.legal_policy_index[take],
        legal_move=pos.legal_move[take],
        played_legal_pos=pos.played_legal_pos[rows],
        errors=[],
    )


def test_segment_softmax_reproduces_lc0_priors(records, reference_logits, positions) -> None:
    pos, rows = positions
    sub = _subset(pos, rows)
    logits = np.stack(
        [reference_logits[(r["net"], r["game_site"], r["ply"])] for r in records]
    )  # (360, 1858)
    pol = policy_over_legal(logits, sub)
    for i, record in enumerate(records):
        moves = legal_uci(sub, i)
        start = sub.legal_offsets[i]
        priors = {m: 100.0 * float(pol.probs[start + k]) for k, m in enumerate(moves)}
        expected = record["hp_priors_exact_pct"]
        assert priors.keys() == expected.keys()
        worst = max(abs(priors[m] - expected[m]) for m in moves)
        assert worst < 0.01, (record["net"], record["game_site"], record["ply"], worst)
        played = record["game_move"]
        assert pol.played_prob[i] == pytest.approx(expected[played] / 100, abs=1e-4)
        assert pol.played_logprob[i] == pytest.approx(np.log(expected[played] / 100), abs=1e-3)
        best = max(expected, key=expected.get)
        assert moves[pol.top1_legal_pos[i]] == best
        assert pol.top1_is_played[i] == (best == played)
    np.testing.assert_allclose(np.add.reduceat(pol.probs, sub.legal_offsets[:-1]), 1.0, atol=1e-5)


def test_softmax_from_gathered_legal_logits_equals_the_full_policy_path(
    records, reference_logits, positions
) -> None:
    """What a GPU net bank returns (the legal moves' logits only) decodes identically."""
    pos, rows = positions
    sub = _subset(pos, rows)
    logits = np.stack([reference_logits[(r["net"], r["game_site"], r["ply"])] for r in records])
    full = policy_over_legal(logits, sub)
    legal_rows = np.repeat(np.arange(len(sub)), sub.legal_counts)
    gathered = softmax_over_legal(logits[legal_rows, sub.legal_policy_index], sub)
    for field in ("probs", "logprobs", "played_prob", "played_logprob", "top1_legal_pos"):
        np.testing.assert_array_equal(getattr(gathered, field), getattr(full, field))
    with pytest.raises(PolicyShapeError, match="legal-move logits"):
        softmax_over_legal(logits[legal_rows[:-1], sub.legal_policy_index[:-1]], sub)


def test_top1_moves_and_index_decoding() -> None:
    first = encode_games([["e2e4", "e7e5"]])  # the start position, then Black after 1. e4
    logits = np.zeros((2, 1858), dtype=np.float32)
    logits[0, POLICY_INDEX_OF["g1f3"]] = 5.0
    logits[1, POLICY_INDEX_OF["e2e4"]] = 5.0  # mirrored: Black's e7e5
    pol = policy_over_legal(logits, first)
    assert moves_uci(first, first.legal_offsets[:-1] + pol.top1_legal_pos) == ["g1f3", "e7e5"]
    assert index_to_uci(POLICY_INDEX_OF["e2e4"], white_to_move=False) == "e7e5"
    assert index_to_uci(103, white_to_move=True, castling=True) == "e1g1"
    assert index_to_uci(97, white_to_move=False, castling=True) == "e8c8"
    assert index_to_uci(103, white_to_move=True) == "e1h1"
    assert index_to_uci(POLICY_INDEX_OF["a7a8q"], white_to_move=False) == "a2a1q"
    with pytest.raises(PolicyShapeError, match=r"\(2, 1858\)"):
        policy_over_legal(np.zeros((3, 1858), dtype=np.float32), first)


@pytest.mark.parametrize("net_name", NETS)
def test_torch_net_on_kibitz_planes_matches_lc0(net_name, records, positions) -> None:
    from pipeline.nets.evaluator import make_evaluator
    from pipeline.nets.loading import load_net

    pos, rows = positions
    mine = [i for i, r in enumerate(records) if r["net"] == net_name]
    sub = _subset(pos, rows[mine])
    out = make_evaluator(load_net(net_name), backend="torch")({"planes": sub.planes})
    pol = policy_over_legal(out["policy"], sub)
    for i, record in enumerate(records[k] for k in mine):
        start = sub.legal_offsets[i]
        for k, move in enumerate(legal_uci(sub, i)):
            logit = out["policy"][i, sub.legal_policy_index[start + k]]
            assert abs(logit - record["hp_policy_logits"][move]) < 1e-3, (record["ply"], move)
            prior = 100.0 * pol.probs[start + k]
            assert abs(prior - record["hp_priors_exact_pct"][move]) < 0.01, (record["ply"], move)


def test_check_net_move_matching_is_maia_level() -> None:
    result = check_net("maia-1500", TESTING / "1400-1600.pgn.zst", max_games=10)
    assert result.games == 10 and result.skipped_games == 0
    assert result.positions > 500
    assert 0.40 < result.accuracy < 0.62
    assert -2.2 < result.mean_loglik < -1.2
    assert [row.band for row in result.rows] == ["1400-1600"]
    text = result.to_text()
    assert "1400-1600" in text and "accuracy" in text


def test_maia_2200_is_registered_verified_and_reads_top_players_better_than_maia_1900() -> None:
    """The tenth level (../shared/README.md: a Maia-1-format net trained on Lichess games of
    players rated 2200-2299): registered with the sha256 the data's README gives, GPL-3.0, and
    loaded as an Lc0 net. On the first 10 games of the testing split's 2400-2600 band (922
    positions) its move matching is 53.80 % against Maia-1900's 49.46 %, mean log-likelihood
    -1.3762 against -1.4654: the top band's moves are closer to its play."""
    entry = model_registry.resolve("maia-2200")  # resolve verifies the file's sha256
    assert entry.sha256 == "284dc0280faef11f78b9ccd62b51cc6861afc4d8de646fe3d32039cc1432ba8b"
    assert (entry.format, entry.license) == ("lc0", "GPL-3.0")
    top = {net: check_net(net, TESTING / "2400-2600.pgn.zst", max_games=10)
           for net in ("maia-1900", "maia-2200")}  # fmt: skip
    assert top["maia-2200"].positions == top["maia-1900"].positions == 922
    assert top["maia-2200"].accuracy == pytest.approx(0.537961, abs=1e-6)
    assert top["maia-1900"].accuracy == pytest.approx(0.494577, abs=1e-6)
    assert top["maia-2200"].mean_loglik == pytest.approx(-1.376246, abs=1e-5)
    assert top["maia-2200"].mean_loglik > top["maia-1900"].mean_loglik
