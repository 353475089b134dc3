"""Chess extraction steps on real games and real nets (no Ray: the plain step classes)."""

from __future__ import annotations

from pathlib import Path

import chess
import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pipeline import settings
from pipeline.chess_policy import policy_over_legal
from pipeline.chunk_store import ChunkStore
from pipeline.encode_chess import encode_games
from pipeline.evaluator import make_evaluator
from pipeline.extract_chess import ChessNetStep, ChessValueStep, assemble_chess, encode_chess
from pipeline.extract_config import config_from_dict
from pipeline.extract_steps import Part, read_games_rows
from pipeline.features_schema import PARTITION_COLUMNS
from pipeline.ingest_pgn import plan_chunks, read_chunk
from pipeline.model_registry import load_net
from pipeline.stockfish_eval import StockfishSettings, win_rate_to_v

BANDS = ("1000-1200", "2000-2200")
NODES = 300  # low: these tests check identities and plumbing, not Stockfish's strength


def ingest_games(root: Path, per_band: int) -> Path:
    """A real games table (as `kibitz ingest` lays it out) of the first games of two bands."""
    store = ChunkStore(root, PARTITION_COLUMNS)
    split = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "candidating"
    for band in BANDS:
        chunk = plan_chunks([split / f"{band}.pgn.zst"], games_per_chunk=per_band)[0]
        games = read_chunk(chunk).games
        store.commit(chunk.chunk_id, {"": games}, {})
    return root


def small_config(**overrides):
    raw = {
        "game": "chess",
        "imitation_nets": ["maia-1100", "maia-1500"],
        "value": {"evaluator": "stockfish", "nodes": NODES},
        "expected_loss": {"net": "maia-1500", "prior_share": 0.9, "max_moves": 3},
        "games_per_chunk": 2,
    }
    raw.update(overrides)
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    root = ingest_games(tmp_path_factory.mktemp("games"), per_band=2)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("part-*.parquet"))
    config = small_config()
    games = pa.concat_tables([read_games_rows(root, Part(f, 0, 2)) for f in files])
    work = encode_chess(games)
    nets = ChessNetStep(config)(work)
    step = ChessValueStep(StockfishSettings(nodes=NODES))
    try:
        values = [step(work, nets, 0, 1), step(work, nets, 1, games.num_rows)]
    finally:
        step.close()
    return config, games, work, nets, values, assemble_chess(config, work, nets, values)


def test_schema_is_the_contract(extracted):
    config, games, *_, table = extracted
    assert table.schema == config.schema()
    assert table.num_rows == sum(games["num_plies"].to_pylist())
    assert {"prior_maia_1100", "logprior_maia_1500", "top1_maia_1500"} <= set(table.column_names)


def test_values_follow_the_movers_view(extracted):
    *_, table = extracted
    t = table.to_pandas()
    for _, g in t.groupby("game_id"):
        g = g.sort_values("ply")
        vb, va = g["v_before"].to_numpy(), g["v_after"].to_numpy()
        np.testing.assert_array_equal(va[:-1], -vb[1:])  # each position searched once
        np.testing.assert_allclose(g["loss"], vb - va, atol=1e-6)
        assert list(g["colour"][:2]) == ["white", "black"]
        assert list(g["move_number"][:3]) == [1, 1, 2]
    assert (t["v_before"].abs() <= 9.22).all()


def test_prior_matches_the_evaluator_directly(extracted):
    """maia-1500's prior of the played move, recomputed from the net by hand at one position."""
    _, games, _work, _, _, table = extracted
    moves = games["moves"][0].as_py()
    ply = 10
    pos = encode_games([moves[: ply + 1]])
    logits = make_evaluator(load_net("maia-1500"))({"planes": pos.planes})["policy"]
    expected = policy_over_legal(logits, pos).played_prob[ply]
    row = table.filter(pa.compute.equal(table["ply"], ply)).slice(0, 1).to_pylist()[0]
    assert row["played_move"] == moves[ply]
    assert row["prior_maia_1500"] == pytest.approx(float(expected), rel=1e-5)
    assert row["logprior_maia_1500"] == pytest.approx(float(np.log(expected)), abs=1e-5)


def test_expected_loss_is_the_prior_weighted_mean(extracted):
    _config, _games, work, nets, values, table = extracted
    likely = nets.likely
    assert likely is not None and (likely.count >= 1).all() and (likely.count <= 3).all()
    # position 0 of game 0, by hand: evaluate each likely move's position with python-chess FENs
    w_likely = values[0].w_likely[0]
    v_before = table["v_before"][0].as_py()
    v_after_played = table["v_after"][0].as_py()
    num, den = 0.0, 0.0
    for j in np.flatnonzero(likely.keep[0]):
        is_played = likely.index[0, j] == work.positions.played_legal_pos[0]
        v_after = v_after_played if is_played else -float(win_rate_to_v(w_likely[j]))
        num += likely.prior[0, j] * (v_before - v_after)
        den += likely.prior[0, j]
    assert table["expected_loss"][0].as_py() == pytest.approx(num / den, rel=1e-5)
    assert table["expected_loss_moves"][0].as_py() == int(likely.count[0])


def test_clock_and_players_come_from_the_games_table(extracted):
    _, games, *_, table = extracted
    g0 = games.slice(0, 1).to_pylist()[0]
    rows = table.slice(0, 2).to_pylist()
    assert rows[0]["player"] == g0["white"] and rows[1]["player"] == g0["black"]
    assert rows[0]["rating"] == g0["white_rating"] and rows[1]["opponent"] == g0["white"]
    assert rows[0]["clock_s"] == pytest.approx(g0["clocks_s"][0])
    assert rows[0]["rank_group"] == g0["white_rank_group"]


def test_duckdb_reads_the_partitioned_output(extracted, tmp_path):
    *_, table = extracted
    ChunkStore(tmp_path, PARTITION_COLUMNS).commit("c0", {"": table}, {})
    n, games, month = (
        duckdb.connect()
        .execute(
            f"select count(*), count(distinct game_id), any_value(month) from read_parquet("
            f"'{tmp_path}/**/*.parquet', hive_partitioning = true)"
        )
        .fetchall()[0]
    )
    assert (n, games, month) == (table.num_rows, 4, "2024-02")
    # the staging view keeps the grain (game_id, ply) unique and every column of the contract
    con = duckdb.connect()
    con.execute(
        f"create view features as select * from read_parquet('{tmp_path}/game=*/**/*.parquet',"
        " hive_partitioning = true)"
    )
    sql = (settings.SQL_DIR / "staging" / "stg_moves.sql").read_text()
    con.execute(f"create view stg_moves as {sql}")
    cols = [r[0] for r in con.execute("describe stg_moves").fetchall()]
    assert cols == table.schema.names
    dupes = con.execute(
        "select count(*) from (select game_id, ply from stg_moves group by all having count(*) > 1)"
    ).fetchall()[0][0]
    assert dupes == 0


def test_a_mate_in_the_game_gives_the_clip_maximum():
    """Fool's mate: Black's mating move is worth the most a move can be worth."""
    from pipeline.stockfish_eval import V_MAX

    moves = ["f2f3", "e7e5", "g2g4", "d8h4"]
    board = chess.Board()
    for m in moves:
        board.push_uci(m)
    assert board.is_checkmate()
    games = pa.table(
        {
            "game_id": ["fool"], "game": ["chess"], "source": ["test"], "month": ["2024-02"],
            "white": ["w"], "black": ["b"], "white_rating": pa.array([1500], pa.int32()),
            "black_rating": pa.array([1500], pa.int32()), "white_rank": pa.nulls(1, pa.string()),
            "black_rank": pa.nulls(1, pa.string()), "white_rank_num": pa.nulls(1, pa.float32()),
            "black_rank_num": pa.nulls(1, pa.float32()), "white_rank_group": ["1400-1600"],
            "black_rank_group": ["1400-1600"], "num_plies": pa.array([4], pa.int32()),
            "moves": [moves], "clocks_s": pa.nulls(1, pa.list_(pa.float32())),
        }
    )  # fmt: skip
    config = small_config(imitation_nets=["maia-1100"], expected_loss={"net": None})
    work = encode_chess(games)
    nets = ChessNetStep(config)(work)
    step = ChessValueStep(StockfishSettings(nodes=NODES))
    try:
        table = assemble_chess(config, work, nets, [step(work, nets, 0, 1)])
    finally:
        step.close()
    last = table.to_pylist()[-1]
    assert last["colour"] == "black" and last["played_move"] == "d8h4"
    assert last["v_after"] == pytest.approx(V_MAX, abs=1e-4)
    assert last["expected_loss"] is None and last["clock_s"] is None
