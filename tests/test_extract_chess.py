"""Chess extraction steps on real games and real nets (no Ray: the plain step classes, except
one end-to-end run of the value-net evaluator): Stockfish and an Lc0-format value net."""

from __future__ import annotations

import time
from pathlib import Path

import chess
import duckdb
import numpy as np
import pyarrow as pa
import pytest
import torch
from scipy.stats import spearmanr

from actors.extract_runner import ActorPlan, plan_actors
from pipeline.chess_game.encode import (
    OUTCOME_CHECKMATE,
    OUTCOME_DRAW,
    OUTCOME_NONE,
    IllegalAfterMoveError,
    encode_after,
    encode_games,
    legal_uci,
)
from pipeline.chess_game.policy import policy_over_legal
from pipeline.chess_game.spec import unpack_move
from pipeline.core import settings
from pipeline.core.catalog import load_models
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.features_schema import PARTITION_COLUMNS
from pipeline.extract.chess import (
    ChessNetStep,
    ChessValueStep,
    assemble_chess,
    encode_chess,
    encode_chess_children,
)
from pipeline.extract.child_positions import ChildPositions
from pipeline.extract.config import config_from_dict
from pipeline.extract.levels_head import levels_on_imitation
from pipeline.extract.steps import Part, read_games_rows, run_nets
from pipeline.ingest.pgn import plan_chunks, read_chunk
from pipeline.kinds import CHESS
from pipeline.nets.evaluator import make_evaluator
from pipeline.nets.loading import load_net
from pipeline.nets.registry import model_sha256
from pipeline.nets.sscore_levels import MAIA_LEVELS
from pipeline.nets.stockfish import V_MAX, StockfishSettings, terminal_win_rate, win_rate_to_v

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
def games_root(tmp_path_factory) -> Path:
    return ingest_games(tmp_path_factory.mktemp("games"), per_band=2)


@pytest.fixture(scope="module")
def games(games_root) -> pa.Table:
    files = sorted(p.relative_to(games_root).as_posix() for p in games_root.rglob("part-*.parquet"))
    return pa.concat_tables([read_games_rows(games_root, Part(f, 0, 2)) for f in files])


@pytest.fixture(scope="module")
def extracted(games):
    config = small_config()
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
    # the time control the time-usage features divide by, for both movers
    assert [r["tc_base_s"] for r in rows] == [g0["tc_base_s"]] * 2 and g0["tc_base_s"] > 0
    assert [r["tc_increment_s"] for r in rows] == [g0["tc_increment_s"]] * 2


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
    con.execute(f"create view stg_moves as {load_models()['stg_moves'].sql}")
    cols = [r[0] for r in con.execute("describe stg_moves").fetchall()]
    assert cols == table.schema.names
    dupes = con.execute(
        "select count(*) from (select game_id, ply from stg_moves group by all having count(*) > 1)"
    ).fetchall()[0][0]
    assert dupes == 0


def test_a_mate_in_the_game_gives_the_clip_maximum():
    """Fool's mate: Black's mating move is worth the most a move can be worth."""
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
            "tc_base_s": pa.nulls(1, pa.int32()), "tc_increment_s": pa.nulls(1, pa.int32()),
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


# -- an Lc0-format value net instead of Stockfish (value.evaluator: net) ---------------------

VALUE_NET = "maia-1900"  # Maia nets carry lc0's WDL head


@pytest.fixture(scope="module")
def net_extracted(games):
    config = small_config(value={"evaluator": "net", "model": VALUE_NET})
    work = encode_chess(games)
    nets, kids = run_nets(CHESS.extraction, config, ChessNetStep(config), work)
    return config, games, work, nets, kids, assemble_chess(config, work, nets, [], kids)


def wdl_v(planes: np.ndarray) -> np.ndarray:
    """The value net's v of each position, by hand: softmax WDL → W + D/2 → clipped logit."""
    wdl = make_evaluator(load_net(VALUE_NET))({"planes": planes})["wdl"].astype(np.float64)
    p = np.exp(wdl) / np.exp(wdl).sum(axis=1, keepdims=True)  # (N, 3) the mover's W, D, L
    w = np.clip(p[:, 0] + p[:, 1] / 2, 1e-4, 1 - 1e-4)
    return np.log(w / (1 - w))


def hand_v_after(moves: list[str]) -> float:
    """The mover's v after the last of ``moves``: exact if the game is over there, else minus
    the net's v of the position (encoded by appending any legal reply)."""
    board = chess.Board()
    for m in moves:
        board.push_uci(m)
    w = terminal_win_rate(board)
    if w is not None:
        return -float(win_rate_to_v(w))
    reply = next(iter(board.legal_moves)).uci()
    return -float(wdl_v(encode_games([[*moves, reply]]).planes)[-1])


def test_net_value_is_the_wdl_expected_score_by_hand(net_extracted):
    _, games, *_, table = net_extracted
    moves = games["moves"][0].as_py()
    plies = [0, 7, 30]
    expected = wdl_v(encode_games([moves[: max(plies) + 1]]).planes)[plies]
    got = [table["v_before"][p].as_py() for p in plies]
    assert [table["ply"][p].as_py() for p in plies] == plies
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_net_loss_of_the_played_move_is_v_minus_v_after(net_extracted):
    """v_after of a middle move and of every game's last move (the position after the game,
    exact when it is mate), each recomputed independently of the extraction."""
    _, games, *_, table = net_extracted
    t = table.to_pandas()
    checked_mate = False
    for g, game_id in enumerate(games["game_id"].to_pylist()):
        rows = t[t["game_id"] == game_id].sort_values("ply")
        moves = games["moves"][g].as_py()
        for ply in (9, len(moves) - 1):
            row = rows.iloc[ply]
            expected = hand_v_after(moves[: ply + 1])
            assert row["v_after"] == pytest.approx(expected, abs=1e-4)
            assert row["loss"] == pytest.approx(row["v_before"] - expected, abs=2e-4)
            checked_mate |= expected == pytest.approx(V_MAX)
    assert checked_mate  # one of these games ends in mate: w = 0 without the net


def test_net_expected_loss_by_hand(net_extracted):
    _, games, work, nets, _, table = net_extracted
    moves = games["moves"][0].as_py()
    ply = 5
    likely, pos = nets.likely, work.positions
    kept = np.flatnonzero(likely.keep[ply])
    legal = legal_uci(pos, ply)
    v_before = table["v_before"][ply].as_py()
    prior = likely.prior[ply, kept].astype(np.float64)
    v_after = [hand_v_after([*moves[:ply], legal[likely.index[ply, j]]]) for j in kept]
    expected = float(np.dot(prior, v_before - np.array(v_after)) / prior.sum())
    assert table["expected_loss"][ply].as_py() == pytest.approx(expected, abs=2e-4)
    assert table["expected_loss_moves"][ply].as_py() == len(kept) >= 2


def test_net_and_stockfish_values_mean_the_same_thing(extracted, net_extracted):
    """Both are the mover's expected score on the same logit scale: they order the same 275
    positions alike (Maia's WDL is calibrated on human results, so it is less decisive)."""
    v_sf = extracted[-1]["v_before"].to_numpy()
    v_net = net_extracted[-1]["v_before"].to_numpy()
    assert spearmanr(v_sf, v_net).statistic > 0.8
    assert np.abs(v_net).mean() < np.abs(v_sf).mean()


def test_a_value_net_that_is_also_an_imitation_net_runs_once():
    config = small_config(
        imitation_nets=["maia-1100", VALUE_NET],
        value={"evaluator": "net", "model": VALUE_NET},
        expected_loss={"net": None},
    )
    step = ChessNetStep(config)
    assert [job.outputs for job in step.jobs.values()] == [("policy",), ("policy", "wdl")]


LEVELS = "kibitz-sscore-chess-levels"


def test_a_levels_sscore_on_the_imitation_nets_runs_only_its_head(games):
    """The preset's case: every level of kibitz-sscore-chess-levels is an imitation net, so only
    its head runs, on those nets' whole-policy statistics; its s-scores are the ones the model
    gives run as a strength net (its own nine nets, as when its levels are not all extracted)."""
    work = encode_chess(games)
    head = ChessNetStep(small_config(imitation_nets=list(MAIA_LEVELS), strength_nets=[LEVELS]))
    full = ChessNetStep(small_config(strength_nets=[LEVELS]))
    assert list(head.levels) == [LEVELS] and head.levels[LEVELS].imitation == MAIA_LEVELS
    assert LEVELS not in head.jobs and LEVELS not in head.bank.nets
    assert all(job.stats["policy"].whole for job in head.jobs.values())
    assert full.levels == {} and full.jobs[LEVELS].outputs == ("sscore",)
    on_imitation, as_net = head(work).sscore[LEVELS], full(work).sscore[LEVELS]
    assert on_imitation.shape == (len(work.positions),) and on_imitation.dtype == np.float32
    np.testing.assert_allclose(on_imitation, as_net, atol=1e-4)
    assert on_imitation.std() > 0.5  # real scores: the shipped head spreads moves by ~1 unit


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_levels_head_on_gpu_statistics_gives_the_cpu_scores(games):
    """On a GPU the whole-policy statistics are reduced where the nets ran (FP32, TF32 off);
    the head's s-scores match the CPU's."""
    work = encode_chess(games)
    config = small_config(imitation_nets=list(MAIA_LEVELS), strength_nets=[LEVELS])
    cpu = ChessNetStep(config, device="cpu")(work).sscore[LEVELS]
    gpu = ChessNetStep(config, device="cuda")(work).sscore[LEVELS]
    np.testing.assert_allclose(gpu, cpu, atol=1e-3)


def test_a_levels_sscore_maps_its_levels_to_imitation_nets_by_weights():
    """Levels match imitation nets by the sha256 of their weights, whatever the config names
    them; one level missing or with other weights, or another format, runs as a strength net."""
    sha = {level: model_sha256(level) for level in MAIA_LEVELS}
    renamed = {f"m{level[-4:]}": sha[level] for level in reversed(MAIA_LEVELS)}
    assert levels_on_imitation(LEVELS, renamed).imitation == tuple(
        f"m{level[-4:]}" for level in MAIA_LEVELS
    )
    assert levels_on_imitation(LEVELS, {**sha, "maia-1500": "0" * 64}) is None
    assert levels_on_imitation(LEVELS, {k: v for k, v in sha.items() if k != "maia-1900"}) is None
    assert levels_on_imitation("kibitz-sscore-chess", sha) is None
    assert levels_on_imitation("maia-1500", sha) is None


def test_encode_after_equals_the_prefix_encoding_and_knows_finished_games(games):
    """Random legal moves at random real positions, plus a mate and a stalemate by hand."""
    pos = encode_games(games["moves"])
    rng = np.random.default_rng(3)
    rows = rng.choice(len(pos), 40, replace=False)
    at = np.array([rng.integers(pos.legal_offsets[r], pos.legal_offsets[r + 1]) for r in rows])
    after = encode_after(games["moves"], pos.game_index[rows], pos.ply[rows], pos.legal_move[at])
    all_moves = games["moves"].to_pylist()
    for i, (r, a) in enumerate(zip(rows, at, strict=True)):
        line = [*all_moves[pos.game_index[r]][: pos.ply[r]], unpack_move(int(pos.legal_move[a]))]
        board = chess.Board()
        for m in line:
            board.push_uci(m)
        if terminal_win_rate(board) is None:
            reply = next(iter(board.legal_moves)).uci()
            np.testing.assert_array_equal(
                after.planes[i], encode_games([[*line, reply]]).planes[-1]
            )
            assert after.outcome[i] == OUTCOME_NONE
    fools_mate = ["f2f3", "e7e5", "g2g4", "d8h4"]
    loyd_stalemate = [
        "e2e3",
        "a7a5",
        "d1h5",
        "a8a6",
        "h5a5",
        "h7h5",
        "h2h4",
        "a6h6",
        "a5c7",
        "f7f6",
        "c7d7",
        "e8f7",
        "d7b7",
        "d8d3",
        "b7b8",
        "d3h7",
        "b8c8",
        "f7g6",
        "c8e6",
    ]
    ends = [fools_mate, loyd_stalemate]
    last = encode_games(ends)
    final = np.flatnonzero(np.append(last.game_index[1:] != last.game_index[:-1], True))
    code = last.legal_move[last.legal_offsets[final] + last.played_legal_pos[final]]
    done = encode_after(ends, last.game_index[final], last.ply[final], code)
    assert done.outcome.tolist() == [OUTCOME_CHECKMATE, OUTCOME_DRAW]
    with pytest.raises(IllegalAfterMoveError, match="e2e5"):
        encode_after([["e2e4"]], np.array([0]), np.array([0]), np.array([12 | (36 << 6)]))


def test_net_evaluator_runs_on_ray_without_stockfish(games_root, net_extracted, tmp_path):
    """`kibitz extract` with a value net: no engine pool, the same features as the steps."""
    from pipeline.jobs.extract import run_extract

    config = net_extracted[0]
    summary = run_extract(config, games_root, tmp_path, num_cpus=2, show_progress=False)
    assert summary["this_run"]["stockfish_searches"] == 0
    assert "stockfish" not in summary["this_run"]["stage_s"]
    assert summary["this_run"]["stage_s"]["encode_after_moves"] > 0
    got = (
        duckdb.connect()
        .execute(
            f"select game_id, ply, v_before, v_after, expected_loss from read_parquet("
            f"'{tmp_path}/**/*.parquet', hive_partitioning = true) order by game_id, ply"
        )
        .fetchnumpy()
    )
    want = net_extracted[-1].sort_by([("game_id", "ascending"), ("ply", "ascending")])
    assert got["game_id"].tolist() == want["game_id"].to_pylist()
    for col in ("v_before", "v_after", "expected_loss"):
        np.testing.assert_allclose(got[col], want[col].to_numpy(), rtol=1e-4, atol=1e-4)


def test_net_actor_runs_other_chunks_while_a_chunks_children_are_encoded(net_extracted, tmp_path):
    """A chunk's second call waits for its children task; the actor must meanwhile run calls
    sent after it (out-of-order execution), or the nets idle while Python encodes."""
    import ray

    from actors.evaluator_actor import start_evaluators

    config, _, work, nets, kids, _ = net_extracted
    gate = tmp_path / "open"

    @ray.remote(num_cpus=0)
    def children_after_gate(path: str, children: ChildPositions) -> ChildPositions:
        while not Path(path).exists():
            time.sleep(0.05)
        return children

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        actor = start_evaluators(config.to_dict(), 1, cpus=1, gpus=False)[0]
        waiting = actor.evaluate_children.remote(
            children_after_gate.remote(str(gate), encode_chess_children(work, nets))
        )
        later = ray.get(actor.evaluate.remote(work), timeout=300)  # sent after, done first
        assert ray.wait([waiting], timeout=0)[1] == [waiting]  # still not done
        np.testing.assert_allclose(later.w_positions, nets.w_positions, rtol=1e-6)
        gate.touch()
        np.testing.assert_allclose(ray.get(waiting, timeout=300).value, kids.value, rtol=1e-6)
    finally:
        ray.shutdown()


@pytest.mark.parametrize("value", ["stockfish", "net"])
@pytest.mark.parametrize(
    ("cpus", "gpus"), [(1, 0), (2, 0), (3, 0), (16, 0), (1, 1), (2, 1), (16, 1), (16, 8), (64, 8)]
)
def test_every_actor_of_the_plan_can_be_scheduled(cpus: int, gpus: int, value: str) -> None:
    """Net actors and engines together never ask for more CPUs than the cluster, or a net actor
    more than a node, has: an actor that cannot be scheduled waits forever, and the run with it."""
    config = small_config(value={"evaluator": value, "model": "maia-1500"})
    for node_cpus in {cpus, max(1, cpus // 2)}:
        plan = plan_actors(config, cpus=cpus, gpus=gpus, node_cpus=node_cpus)
        assert plan.evaluators == max(gpus, 1) and (plan.engines >= 1) == (value == "stockfish")
        assert plan.evaluators * plan.evaluator_cpus + plan.engines * plan.cpus_per_engine <= cpus
        assert plan.evaluator_cpus <= node_cpus and plan.evaluator_threads >= 1


def test_a_gpu_node_keeps_a_cpu_for_its_net_actor() -> None:
    """The lent H100 node (16 CPUs, 1 GPU): one CPU beside the GPU, 15 whole-CPU engines. Before,
    the net actor's CPU counted as free, 16 engines were asked for, and the run hung."""
    assert plan_actors(small_config(), cpus=16, gpus=1) == ActorPlan(1, 1.0, 15, 1.0)
    assert plan_actors(small_config(), cpus=2, gpus=0) == ActorPlan(1, 1.0, 1, 1.0)
    assert plan_actors(small_config(), cpus=1, gpus=0) == ActorPlan(1, 0.5, 1, 0.5)
    value_net = small_config(value={"evaluator": "net", "model": "maia-1500"})
    assert plan_actors(value_net, cpus=16, gpus=1) == ActorPlan(1, 1.0, 0, 0.0)


def test_a_cpu_net_actor_without_stockfish_takes_a_node() -> None:
    """When the nets are the only work (a value net, or Go), the CPU net actor holds a node's
    CPUs and runs that many torch threads: on this 2-core machine the Go preset ran 75.6
    positions/s with 2 threads against 44.9 with the 1 it held before. A fixed evaluator_cpus
    still wins."""
    value_net = small_config(value={"evaluator": "net", "model": "maia-1500"})
    assert plan_actors(value_net, cpus=2, gpus=0) == ActorPlan(1, 2.0, 0, 0.0)
    assert plan_actors(value_net, cpus=2, gpus=0).evaluator_threads == 2
    # two nodes of 2 CPUs (the CI's two-node cluster): the actor fits on one node
    assert plan_actors(value_net, cpus=4, gpus=0, node_cpus=2) == ActorPlan(1, 2.0, 0, 0.0)
    two_actors = small_config(value={"evaluator": "net", "model": "maia-1500"}, num_evaluators=2)
    assert plan_actors(two_actors, cpus=16, gpus=0) == ActorPlan(2, 8.0, 0, 0.0)
    fixed = small_config(value={"evaluator": "net", "model": "maia-1500"}, evaluator_cpus=1)
    assert plan_actors(fixed, cpus=16, gpus=0) == ActorPlan(1, 1.0, 0, 0.0)
