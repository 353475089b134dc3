"""Go extraction steps on real Fox games and the real KataGo g170 net (no Ray)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipeline import settings
from pipeline.chunk_store import ChunkStore
from pipeline.encode_go import encode_games
from pipeline.evaluator import make_evaluator
from pipeline.extract_config import ConfigError, config_from_dict, preset
from pipeline.extract_go import GoNetStep, assemble_go, encode_go
from pipeline.extract_steps import Part, read_games_rows
from pipeline.features_schema import PARTITION_COLUMNS
from pipeline.go_outputs import postprocess
from pipeline.go_rules import GoGameSpec
from pipeline.ingest_sgf import plan_chunks, read_chunk
from pipeline.model_registry import load_net

GAMES = 2


def ingest_games(root: Path) -> Path:
    """The first games of the candidating split as a games table (kibitz ingest's layout)."""
    split = settings.data_dir() / "go" / "fox-selected" / "candidating"
    chunk = plan_chunks(sorted(split.glob("*.sgf"))[:1], games_per_chunk=GAMES)[0]
    ChunkStore(root, PARTITION_COLUMNS).commit(chunk.chunk_id, {"": read_chunk(chunk).games}, {})
    return root


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    root = ingest_games(tmp_path_factory.mktemp("games"))
    # a collection is one ingest chunk whatever games_per_chunk says: take one game from each
    # of the first GAMES month partitions
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("part-*.parquet"))
    games = pa.concat_tables([read_games_rows(root, Part(f, 0, 1)) for f in files[:GAMES]])
    config = preset("go")
    work = encode_go(games, config)
    nets = GoNetStep(config)(work)
    return config, games, work, nets, assemble_go(config, work, nets)


def test_schema_and_rows(extracted):
    config, games, *_, table = extracted
    assert table.schema == config.schema()
    assert table.num_rows == sum(games["num_plies"].to_pylist())
    assert table["played_move"].to_pylist()[:2] == games["moves"][0].as_py()[:2]


def test_lead_is_from_the_movers_view(extracted):
    *_, table = extracted
    t = table.to_pandas()
    for _, g in t.groupby("game_id"):
        g = g.sort_values("ply")
        vb, va = g["v_before"].to_numpy(), g["v_after"].to_numpy()
        alternate = g["colour"].to_numpy()[1:] != g["colour"].to_numpy()[:-1]
        assert alternate.all()
        np.testing.assert_allclose(va[:-1], -vb[1:], atol=1e-6)  # one evaluation per position
        np.testing.assert_allclose(g["loss"], vb - va, atol=1e-5)


def test_prior_and_lead_match_the_net_directly(extracted):
    """Recompute one position by hand: encode the prefix, run KataGo, post-process."""
    _, games, _, _, table = extracted
    g0 = games.slice(0, 1).to_pylist()[0]
    ply = 20
    spec = GoGameSpec(
        moves=g0["moves"][: ply + 1], komi=g0["komi"], rules=g0["rules"] or "japanese",
        setup_black=g0["setup_black"] or (), setup_white=g0["setup_white"] or (),
    )  # fmt: skip
    pos = encode_games([spec])
    net = load_net("katago-g170-b6c96")
    raw = make_evaluator(net)({"spatial": pos.spatial, "global": pos.global_})
    ev = postprocess(raw, pos.legal, pos.black_to_move, net.meta)
    row = table.slice(ply, 1).to_pylist()[0]
    assert row["ply"] == ply
    assert row["prior_katago_g170"] == pytest.approx(
        float(ev.policy[ply, pos.played_index[ply]]), rel=1e-4
    )
    assert row["v_before"] == pytest.approx(float(ev.mover_lead[ply]), abs=1e-3)
    assert row["colour"] == ("black" if pos.black_to_move[ply] else "white")


def test_expected_loss_is_refused_for_go():
    with pytest.raises(ConfigError, match="expected_loss"):
        config_from_dict({"game": "go", "imitation_nets": [{"name": "k", "model": "katago-g170-b6c96"}],
                          "value": {"evaluator": "net", "model": "katago-g170-b6c96"},
                          "expected_loss": {"net": "k"}})  # fmt: skip


def test_a_humansl_level_is_a_config_entry():
    """A rank-conditioned level is one more entry; its columns appear without code changes."""
    raw = preset("go").to_dict()
    raw["imitation_nets"].append({"name": "rank-5k", "model": "some-humansl", "profile": "rank_5k"})
    cfg = config_from_dict(raw)
    assert {"prior_rank_5k", "logprior_rank_5k", "top1_rank_5k"} <= set(cfg.schema().names)
