"""Go extraction steps on real Fox games and real nets (no Ray): KataGo g170 as imitation and
value net, Kibitz's rank-conditioned policy as two more levels, expected loss over KataGo's
likely moves, and the s-score net on the played moves.

The games are cut at PLIES moves: what these tests check is identities and hand computations,
and the KataGo net costs ~20 ms a position on one CPU core.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import torch

from actors.extract_runner import plan_actors
from pipeline.cli.extract import configure
from pipeline.cli.main import build_parser
from pipeline.core import settings
from pipeline.core.chunk_store import ChunkStore
from pipeline.core.features_schema import PARTITION_COLUMNS
from pipeline.extract.child_positions import ChildValues
from pipeline.extract.config import (
    ConfigError,
    ExtractConfig,
    config_from_dict,
    load_config,
    preset,
)
from pipeline.extract.go import GoNetResult, GoNetStep, GoWork, assemble_go, encode_go
from pipeline.extract.steps import Part, read_games_rows, run_nets, split_states
from pipeline.go_game import spec as go_spec
from pipeline.go_game.encode import IllegalCandidateError, encode_children, encode_games
from pipeline.go_game.rules import GoGameSpec, games_from_table
from pipeline.ingest.sgf import plan_chunks, read_chunk
from pipeline.kinds import GO
from pipeline.nets import registry as model_registry
from pipeline.nets.evaluator import make_evaluator
from pipeline.nets.go_rank_policy import UnknownRankError
from pipeline.nets.katago_outputs import policy_probabilities, postprocess
from pipeline.nets.loading import load_net

GAMES = 2
PLIES = 40
KATAGO = "katago-g170-b6c96"
GO_POLICY = "kibitz-go-policy"  # the preset's skill levels (a rank head on KataGo g170's trunk)
SMALL_POLICY = "kibitz-go-policy-4x32"  # a rank-conditioned policy cheap enough for many tests
REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "bench" / "configs"  # the extraction configs of the shipped models and benches
SSCORE = "kibitz-sscore-go"


def _base_config() -> dict:
    """The Go preset without its rank-policy levels and strength net (tests add their own)."""
    raw = preset("go").to_dict()
    raw["imitation_nets"] = [n for n in raw["imitation_nets"] if n["model"] != GO_POLICY]
    raw["strength_nets"] = []
    return raw


RANK_LEVELS = [
    {"name": "go-policy-3d", "model": SMALL_POLICY, "profile": "3d"},
    {"name": "go-policy-5k", "model": SMALL_POLICY, "profile": "5k"},
]


@dataclass
class Extracted:
    config: ExtractConfig
    games: pa.Table
    work: GoWork
    step: GoNetStep
    nets: GoNetResult
    kids: ChildValues | None
    table: pa.Table


def ingest_games(root: Path) -> Path:
    """The first SGF collection of the candidating split as a games table (kibitz ingest's)."""
    split = settings.data_dir() / "go" / "fox-selected" / "candidating"
    chunk = plan_chunks(sorted(split.glob("*.sgf"))[:1], games_per_chunk=GAMES)[0]
    ChunkStore(root, PARTITION_COLUMNS).commit(chunk.chunk_id, {"": read_chunk(chunk).games}, {})
    return root


def cut(games: pa.Table, plies: int) -> pa.Table:
    """The games with their first ``plies`` moves only."""
    moves = pc.list_slice(games["moves"], 0, plies)
    n = pc.list_value_length(moves).cast(pa.int32())
    games = games.set_column(games.schema.get_field_index("moves"), "moves", moves)
    return games.set_column(games.schema.get_field_index("num_plies"), "num_plies", n)


def spec(game: dict, moves: list[str]) -> GoGameSpec:
    """A games-table row with other moves, as the encoder takes it."""
    return GoGameSpec(
        moves=moves, komi=game["komi"], rules=game["rules"] or "japanese",
        setup_black=game["setup_black"] or (), setup_white=game["setup_white"] or (),
    )  # fmt: skip


def sgf_move(colour: str, index: int) -> str:
    """``B:pd`` / ``W:pass`` of a policy index."""
    if index == go_spec.PASS_INDEX:
        return f"{colour}:pass"
    return f"{colour}:{go_spec.xy_to_sgf(index % go_spec.NN_LEN, index // go_spec.NN_LEN)}"


def other(colour: str) -> str:
    return "W" if colour == "B" else "B"


def extract(games: pa.Table, raw: dict) -> Extracted:
    config = config_from_dict(raw)
    work = encode_go(games, config)
    step = GoNetStep(config)
    nets, kids = run_nets(GO.extraction, config, step, work)
    return Extracted(config, games, work, step, nets, kids, assemble_go(config, work, nets, kids))


@pytest.fixture(scope="module")
def fox_games(tmp_path_factory) -> pa.Table:
    """One game from each of the first GAMES month partitions (one ingest chunk spans them)."""
    root = ingest_games(tmp_path_factory.mktemp("games"))
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("part-*.parquet"))
    return pa.concat_tables([read_games_rows(root, Part(f, 0, 1)) for f in files[:GAMES]])


@pytest.fixture(scope="module")
def go(fox_games) -> Extracted:
    raw = _base_config()
    raw["imitation_nets"] += RANK_LEVELS
    raw["expected_loss"] = {"net": "katago-g170", "prior_share": 0.9, "max_moves": 3}
    return extract(cut(fox_games, PLIES), raw)


@pytest.fixture(scope="module")
def long_games() -> list[GoGameSpec]:
    """Six whole real games (a few hundred moves each), for the encoder-only checks."""
    split = settings.data_dir() / "go" / "fox-selected" / "candidating"
    chunk = plan_chunks(sorted(split.glob("*.sgf"))[:1], games_per_chunk=6)[0]
    return games_from_table(read_chunk(chunk).games.slice(0, 6))


# -- the features table ----------------------------------------------------------------------


def test_schema_and_rows(go):
    assert go.table.schema == go.config.schema()
    assert go.table.num_rows == sum(go.games["num_plies"].to_pylist()) == GAMES * PLIES
    assert go.table["played_move"].to_pylist()[:2] == go.games["moves"][0].as_py()[:2]
    assert {"prior_go_policy_3d", "top1_go_policy_5k"} <= set(go.table.column_names)


def test_lead_is_from_the_movers_view(go):
    t = go.table.to_pandas()
    for _, g in t.groupby("game_id"):
        g = g.sort_values("ply")
        vb, va = g["v_before"].to_numpy(), g["v_after"].to_numpy()
        alternate = g["colour"].to_numpy()[1:] != g["colour"].to_numpy()[:-1]
        assert alternate.all()
        np.testing.assert_allclose(va[:-1], -vb[1:], atol=1e-6)  # one evaluation per position
        np.testing.assert_allclose(g["loss"], vb - va, atol=1e-5)


def test_prior_and_lead_match_the_net_directly(go):
    """Recompute one position by hand: encode the prefix, run KataGo, post-process."""
    g0 = go.games.slice(0, 1).to_pylist()[0]
    ply = 20
    pos = encode_games([spec(g0, g0["moves"][: ply + 1])])
    net = load_net(KATAGO)
    raw = make_evaluator(net)({"spatial": pos.spatial, "global": pos.global_})
    ev = postprocess(raw, pos.legal, pos.black_to_move, net.meta)
    row = go.table.slice(ply, 1).to_pylist()[0]
    assert row["ply"] == ply
    assert row["prior_katago_g170"] == pytest.approx(
        float(ev.policy[ply, pos.played_index[ply]]), rel=1e-4
    )
    assert row["v_before"] == pytest.approx(float(ev.mover_lead[ply]), abs=1e-3)
    assert row["colour"] == ("black" if pos.black_to_move[ply] else "white")


# -- expected loss -------------------------------------------------------------------------


@pytest.mark.parametrize("ply", [3, 12, 27])
def test_expected_loss_by_hand_from_each_childs_lead(go, ply):
    """E[loss] recomputed independently: KataGo's priors on the position, then for each likely
    move the lead of the position reached by replaying the game prefix with that move."""
    g0 = go.games.slice(0, 1).to_pylist()[0]
    moves = g0["moves"]
    colour = moves[ply][0]
    net = load_net(KATAGO)
    evaluate = make_evaluator(net)

    def leads(pos) -> np.ndarray:  # the side to move's lead of every row
        raw = evaluate({"spatial": pos.spatial, "global": pos.global_})
        return postprocess(raw, pos.legal, pos.black_to_move, net.meta)

    here = encode_games([spec(g0, moves[: ply + 1])])
    ev = leads(here)
    v_before, probs = float(ev.mover_lead[ply]), ev.policy[ply].astype(np.float64)
    ranked = np.argsort(-probs, kind="stable")[:3]  # max_moves 3
    kept = [a for i, a in enumerate(ranked) if probs[ranked[:i]].sum() < 0.9]
    children = [
        spec(g0, [*moves[:ply], sgf_move(colour, a), f"{other(colour)}:pass"]) for a in kept
    ]
    child_rows = np.arange(len(kept)) * (ply + 2) + ply + 1  # the position after the move
    v_after = -leads(encode_games(children)).mover_lead[child_rows]  # the mover's view
    expected = float(np.dot(probs[kept], v_before - v_after) / probs[kept].sum())

    row = go.table.slice(ply, 1).to_pylist()[0]
    assert row["ply"] == ply and row["expected_loss_moves"] == len(kept)
    assert row["expected_loss"] == pytest.approx(expected, abs=2e-3)
    assert go.nets.likely.index[ply, : len(kept)].tolist() == [int(a) for a in kept]


def test_expected_loss_children_are_evaluated_except_the_played_move(go):
    likely, played = go.nets.likely, go.work.positions.played_index[go.work.is_move]
    evaluated = np.isfinite(go.kids.likely_table(likely.index.shape))
    assert (evaluated == (likely.keep & (likely.index != played[:, None]))).all()
    assert likely.count.min() >= 1 and likely.count.max() <= 3
    assert go.table["expected_loss"].null_count == 0


def test_expected_loss_on_ray_equals_the_steps(go, tmp_path):
    """`kibitz extract go` with expected loss: the children, encoded in a CPU task between the
    net actor's two calls, give the features of the steps run in one process."""
    from pipeline.jobs.extract import run_extract

    root = tmp_path / "games"
    ChunkStore(root, PARTITION_COLUMNS).commit("cut", {"": go.games}, {})
    summary = run_extract(go.config, root, tmp_path / "out", num_cpus=2, show_progress=False)
    assert summary["this_run"]["stage_s"]["encode_after_moves"] > 0
    got = (
        duckdb.connect()
        .execute(
            "select game_id, ply, v_before, expected_loss, expected_loss_moves from read_parquet("
            f"'{tmp_path / 'out'}/**/*.parquet', hive_partitioning = true) order by game_id, ply"
        )
        .fetchnumpy()
    )
    want = go.table.sort_by([("game_id", "ascending"), ("ply", "ascending")])
    assert got["game_id"].tolist() == want["game_id"].to_pylist()
    np.testing.assert_array_equal(got["expected_loss_moves"], want["expected_loss_moves"])
    for col in ("v_before", "expected_loss"):
        np.testing.assert_allclose(got[col], want[col].to_numpy(), rtol=1e-4, atol=1e-4)


def test_board_states_travel_apart_from_what_the_net_actor_reads(go):
    """Ray's encode task returns ``split_states``: the net actor's work without the board
    states (which only the children encoder reads), and the states, every row's."""
    assert go.work.states is not None  # expected loss is on
    net_work, states = split_states(go.work)
    assert net_work.states is None and states is go.work.states
    assert states.board.shape[0] == len(go.work.is_move) == GAMES * (PLIES + 1)
    np.testing.assert_array_equal(net_work.is_move, go.work.is_move)
    assert states.legal is go.work.positions.legal  # the legal masks travel either way
    own = [a for k, a in vars(states).items() if isinstance(a, np.ndarray) and k != "legal"]
    state_bytes = sum(a.nbytes for a in own)
    sent = len(pickle.dumps(net_work, protocol=5))
    assert len(pickle.dumps(go.work, protocol=5)) - sent >= state_bytes
    assert state_bytes / len(states.board) > 800  # ~0.8 kB a position stays on the CPU side
    without = config_from_dict({**go.config.to_dict(), "expected_loss": {"net": None}})
    assert split_states(encode_go(go.games, without))[1] is None


# -- children encoded from stored board states -----------------------------------------------


@pytest.mark.parametrize("rules", [None, "tromp-taylor"], ids=["japanese", "tromp-taylor"])
def test_child_of_the_played_move_is_the_next_position_bit_exactly(long_games, rules):
    """Every position of six whole real games, rebuilt as a child of the one before it.

    Tromp-Taylor adds positional superko bans, multi-stone suicide and the area planes.
    """
    pos = encode_games(long_games, rules=rules, keep_states=True)
    assert pos.illegal_moves == [] and len(pos.ply) > 1000
    parents = np.flatnonzero(pos.game_index[1:] == pos.game_index[:-1])
    kids = encode_children(pos.states, parents, pos.played_index[parents])
    np.testing.assert_array_equal(kids.spatial, pos.spatial[parents + 1])
    np.testing.assert_array_equal(kids.global_, pos.global_[parents + 1])
    np.testing.assert_array_equal(kids.legal, pos.legal[parents + 1])
    np.testing.assert_array_equal(kids.black_to_move, pos.black_to_move[parents + 1])
    np.testing.assert_array_equal(kids.ko_point, pos.ko_point[parents + 1])
    np.testing.assert_array_equal(
        kids.captured_by_last_move, pos.captured_by_last_move[parents + 1]
    )
    assert (pos.ko_point >= 0).any() and (pos.captured_by_last_move > 0).any()


@pytest.mark.parametrize("rules", [None, "tromp-taylor"], ids=["japanese", "tromp-taylor"])
def test_child_of_any_legal_move_equals_encoding_the_prefix_with_it(long_games, rules):
    """Random legal moves and passes at random positions: each child equals the position
    reached by encoding the game prefix plus that move (a replay from the first move)."""
    pos = encode_games(long_games, rules=rules, keep_states=True)
    rng = np.random.default_rng(7)
    parents, moves = [], []
    for row in rng.choice(len(pos.ply), 10, replace=False):
        legal = np.flatnonzero(pos.legal[row, :-1])
        for a in [*rng.choice(legal, 4, replace=False), go_spec.PASS_INDEX]:
            parents.append(int(row))
            moves.append(int(a))
    kids = encode_children(pos.states, np.array(parents), np.array(moves))
    specs = []
    for row, a in zip(parents, moves, strict=True):
        game, ply = long_games[pos.game_index[row]], int(pos.ply[row])
        colour = game.moves[ply][0]
        prefix = [*game.moves[:ply], sgf_move(colour, a), f"{other(colour)}:pass"]
        specs.append(GoGameSpec(prefix, game.setup_black, game.setup_white, game.board_size,
                                game.komi, game.rules))  # fmt: skip
    ref = encode_games(specs, rules=rules)
    assert ref.illegal_moves == []
    rows = np.cumsum([len(s.moves) for s in specs]) - 1  # before the appended pass
    np.testing.assert_array_equal(kids.spatial, ref.spatial[rows])
    np.testing.assert_array_equal(kids.global_, ref.global_[rows])
    np.testing.assert_array_equal(kids.legal, ref.legal[rows])


def test_a_child_move_must_be_legal(long_games):
    pos = encode_games(long_games[:1], keep_states=True)
    occupied = int(pos.played_index[0])  # the first stone's point, taken one move later
    with pytest.raises(IllegalCandidateError, match=rf"\(1, {occupied}\)"):
        encode_children(pos.states, np.array([1]), np.array([occupied]))


# -- rank-conditioned policy and s-score nets -------------------------------------------------


def test_rank_levels_come_from_one_pass_and_match_the_net_at_each_rank(go):
    assert [k for k in go.step.jobs if k.startswith(SMALL_POLICY)] == [f"{SMALL_POLICY}#ranks"]
    g0 = go.games.slice(0, 1).to_pylist()[0]
    ply = 15
    pos = encode_games([spec(g0, g0["moves"][: ply + 1])])
    played = int(pos.played_index[ply])
    net = load_net(SMALL_POLICY)
    priors = []
    for level in RANK_LEVELS:
        logits = make_evaluator(net.at_rank(level["profile"]))(
            {"spatial": pos.spatial, "global": pos.global_}
        )["policy"]  # (N, 362) at that rank
        prior = float(policy_probabilities(logits, pos.legal)[ply, played])
        column = f"prior_{level['name'].replace('-', '_')}"
        assert go.table[column][ply].as_py() == pytest.approx(prior, rel=1e-4)
        priors.append(prior)
    assert priors[0] != pytest.approx(priors[1], rel=1e-3)  # the rank really conditions


def test_a_rank_policy_level_needs_a_known_rank():
    raw = _base_config()
    raw["imitation_nets"].append({"name": "go-policy", "model": SMALL_POLICY})
    with pytest.raises(ConfigError, match="profile: 3d"):
        GoNetStep(config_from_dict(raw))
    raw["imitation_nets"][-1]["profile"] = "12k"
    with pytest.raises(UnknownRankError, match="'12k'"):
        GoNetStep(config_from_dict(raw))


def test_sscore_is_the_strength_net_on_the_played_move(fox_games):
    """sscore_<net> equals the s-score net called directly with the one-hot played move."""
    raw = _base_config()
    raw["imitation_nets"] = RANK_LEVELS[:1]
    raw["strength_nets"] = [SSCORE]
    games = cut(fox_games.slice(0, 1), 12)
    got = extract(games, raw).table["sscore_kibitz_sscore_go"].to_numpy()
    g0 = games.to_pylist()[0]
    pos = encode_games([spec(g0, g0["moves"])])
    evaluate = make_evaluator(load_net(SSCORE))
    one_hot = np.zeros((len(pos.ply), go_spec.POLICY_SIZE), np.float32)
    one_hot[np.arange(len(pos.ply)), pos.played_index] = 1.0
    feed = {"spatial": pos.spatial, "global": pos.global_, "played": one_hot}
    direct = evaluate(feed)["sscore"][:, 0]
    np.testing.assert_allclose(got, direct, rtol=1e-4, atol=1e-5)
    feed["played"] = np.roll(one_hot, 1, axis=1)  # other moves score differently
    assert not np.allclose(evaluate(feed)["sscore"][:, 0], direct, atol=1e-4)


LEVELS = "kibitz-sscore-go-levels"


def test_a_levels_sscore_on_the_rank_levels_runs_only_its_head(fox_games):
    """The preset's case: every level of kibitz-sscore-go-levels is one of the preset's ranks of
    kibitz-go-policy or its KataGo net, so only its head runs, on the legal-move statistics of
    the rank-policy job and the KataGo job; its s-scores are the model's own run as a strength
    net (its levels not all extracted: one rank other than the model's)."""
    games = cut(fox_games, PLIES)
    preset_levels = [n for n in preset("go").to_dict()["imitation_nets"] if n["model"] == GO_POLICY]
    raw = _base_config()
    raw["imitation_nets"] += preset_levels
    raw["strength_nets"] = [LEVELS]
    head = extract(games, raw)
    assert list(head.step.levels) == [LEVELS] and LEVELS not in head.step.bank.nets
    kata = next(n["name"] for n in raw["imitation_nets"] if n["model"] == KATAGO)
    assert head.step.levels[LEVELS].imitation == (*(n["name"] for n in preset_levels), kata)
    assert head.step.jobs[f"{GO_POLICY}#ranks"].stats["policy"].entropy
    assert head.step.jobs[f"{KATAGO}#None"].stats["policy"].entropy
    raw["imitation_nets"][-1]["profile"] = "8d"  # 9d → 8d: no longer every level
    full = extract(games, raw)
    assert full.step.levels == {} and full.step.jobs[f"{LEVELS}#sscore"].outputs == ("sscore",)
    column = "sscore_kibitz_sscore_go_levels"
    on_imitation, as_net = head.table[column].to_numpy(), full.table[column].to_numpy()
    assert len(on_imitation) == GAMES * PLIES
    np.testing.assert_allclose(on_imitation, as_net, atol=1e-4)
    assert on_imitation.std() > 0.1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_go_levels_head_on_gpu_statistics_gives_the_cpu_scores(fox_games):
    """On a GPU the legal-move log p and entropy are reduced where the rank policy and KataGo
    ran (FP32, TF32 off); the head's s-scores match the CPU's."""
    raw = _base_config()
    raw["imitation_nets"] += [
        n for n in preset("go").to_dict()["imitation_nets"] if n["model"] == GO_POLICY
    ]
    raw["strength_nets"] = [LEVELS]
    config = config_from_dict(raw)
    work = encode_go(cut(fox_games, PLIES), config)
    cpu = GoNetStep(config, device="cpu")
    gpu = GoNetStep(config, device="cuda")
    assert list(gpu.levels) == [LEVELS] and LEVELS not in gpu.bank.nets
    np.testing.assert_allclose(gpu(work).sscore[LEVELS], cpu(work).sscore[LEVELS], atol=1e-3)


# -- config ----------------------------------------------------------------------------------


def test_expected_loss_and_levels_are_config_entries():
    """Expected loss, a HumanSL rank and a rank-conditioned level are entries; columns appear."""
    raw = _base_config()
    raw["imitation_nets"].append({"name": "rank-5k", "model": "some-humansl", "profile": "rank_5k"})
    raw["imitation_nets"] += RANK_LEVELS
    raw["strength_nets"] = [SSCORE]
    raw["expected_loss"] = {"net": "go-policy-3d", "prior_share": 0.8, "max_moves": 4}
    cfg = config_from_dict(raw)
    names = set(cfg.schema().names)
    assert {"prior_rank_5k", "logprior_rank_5k", "top1_rank_5k", "prior_go_policy_5k"} <= names
    assert {"sscore_kibitz_sscore_go", "expected_loss", "expected_loss_moves"} <= names
    raw["expected_loss"]["net"] = "no-such-level"
    with pytest.raises(ConfigError, match="no-such-level"):
        config_from_dict(raw)


def test_precision_is_a_config_entry_that_changes_the_hash():
    """BF16 features are other values than FP32 ones (a few hundredths of a nat, bench/
    bench_cpu_precision.py), so a run at another precision is another config."""
    raw = _base_config()
    fp32 = config_from_dict(raw)
    raw["precision"] = "bf16"
    assert config_from_dict(raw).config_hash() != fp32.config_hash()
    raw["precision"] = "int8"
    with pytest.raises(ConfigError, match="precision must be one of"):
        config_from_dict(raw)


def test_compile_changes_the_hash_only_when_on():
    """Compiled nets fuse other kernels (other roundings), and CUDA graphs run them at padded
    batch sizes (other cuDNN algorithms), so each is another config; off, the hash is the one
    written before the options (the preset at BF16: ce5f217fcc2c8772)."""
    config = preset("go")
    config.precision = "bf16"
    assert config.config_hash() == "ce5f217fcc2c8772"
    config.compile = True
    compiled = config.config_hash()
    assert compiled != "ce5f217fcc2c8772"
    config.cuda_graphs = True
    assert config.validate().config_hash() not in (compiled, "ce5f217fcc2c8772")
    raw = _base_config()
    raw.update(compile=True, backend="onnx")
    with pytest.raises(ConfigError, match="compile applies to the torch backend"):
        config_from_dict(raw)
    raw.update(compile=False, cuda_graphs=True, backend="torch")
    with pytest.raises(ConfigError, match="cuda_graphs replays compiled nets"):
        config_from_dict(raw)


def gpu_config_with_levels(name: str, policy: str) -> tuple[ExtractConfig, ExtractConfig]:
    """bench/configs/``name`` and bench/configs/extract-go-gpu.yaml, after checking that the
    first takes the second's imitation nets with ``policy``'s ranks for the default policy's."""
    levels, gpu = (load_config(CONFIGS / f) for f in (name, "extract-go-gpu.yaml"))
    assert levels.imitation_nets == [
        replace(n, model=policy) if n.model == GO_POLICY else n for n in gpu.imitation_nets
    ]
    return levels, gpu


def test_the_distill_levels_config_changes_the_levels_and_runs_their_own_head():
    """#28's switch to the student of eight symmetries (docs/research/log-nets.md, "A student of eight
    symmetries"), the config the shipped kibitz-meta-go's features were extracted with (both Fox
    splits): the GPU config with its 11 ranks and the levels s-score retrained on them under
    the names they were registered as (kibitz-go-policy-distill, kibitz-sscore-go-levels-distill:
    the registry's former names of today's defaults, so the runs started under them keep their
    hash), the preset's column names, and the head still run on those levels, not as passes of
    its own."""
    distill, gpu = gpu_config_with_levels("extract-go-distill-levels.yaml", f"{GO_POLICY}-distill")
    assert [n.name for n in distill.strength_nets] == [n.name for n in gpu.strength_nets]
    assert [n.model for n in distill.strength_nets] == [SSCORE, f"{LEVELS}-distill"]
    for name in (GO_POLICY, LEVELS):  # the same files as the preset's
        assert model_registry.model_sha256(f"{name}-distill") == model_registry.model_sha256(name)
    assert (
        replace(distill, imitation_nets=gpu.imitation_nets, strength_nets=gpu.strength_nets) == gpu
    )
    step = GoNetStep(replace(distill, precision="fp32"))  # the GPU's FP16 needs CUDA
    assert list(step.levels) == [LEVELS] and LEVELS not in step.bank.nets


def test_a_gpu_config_runs_on_a_cpu_with_the_command_lines_overrides():
    """The shipped kibitz-meta-go's features (docs/guide/estimate.md): ``kibitz extract go
    --config bench/configs/extract-go-distill-levels.yaml --precision bf16 --batch-size 256
    --compile`` keeps every setting of the file but the number format, the torch batch and
    compilation, all in the hash (at BF16 a batch of 4,096 ran KataGo's b6c96 at half the
    speed of 256 on this CPU, docs/research/log-speed.md), and its net actor takes the node's
    CPUs as torch threads, where the file once held it to one. Its hash is the one the shipped
    aggregates record."""
    path = CONFIGS / "extract-go-distill-levels.yaml"
    argv = ["extract", "go", "--config", str(path), "--precision", "bf16", "--batch-size", "256"]
    config = configure(build_parser().parse_args([*argv, "--compile"]))
    file = load_config(path)
    assert (config.batch_size, config.precision, file.batch_size) == (256, "bf16", 4096)
    assert (config.compile, file.compile) == (True, False)
    assert config.batch_sizes == {**file.batch_sizes, "torch": 256}
    assert replace(
        config, precision=file.precision, batch_sizes=file.batch_sizes, compile=file.compile
    ) == file
    shipped = REPO / "models/kibitz-meta-go/aggregates/_aggregate.json"
    run = json.loads(shipped.read_text())
    assert config.config_hash() == run["features_config_hash"] == "40f900abb6b77b26"
    assert plan_actors(config, cpus=2, gpus=0).evaluator_threads == 2
    assert plan_actors(config, cpus=16, gpus=1).evaluator_cpus == 1.0


def test_the_4x32_levels_config_changes_only_the_levels():
    """Issue #28's comparison, the old side: the preset with the levels of the 4 × 32 net that
    was the default before, so the columns keep their names; it leaves out the levels s-score,
    a head on the preset's levels, which it would run as passes of their own."""
    old = load_config(CONFIGS / "extract-go-4x32-levels.yaml")
    new = preset("go")
    assert old.imitation_nets == [
        replace(n, model=SMALL_POLICY) if n.model == GO_POLICY else n for n in new.imitation_nets
    ]
    assert [n.model for n in new.strength_nets] == ["kibitz-sscore-go", "kibitz-sscore-go-levels"]
    assert [n.model for n in old.strength_nets] == ["kibitz-sscore-go"]
    assert replace(old, imitation_nets=new.imitation_nets, strength_nets=new.strength_nets) == new


def test_a_config_states_what_it_changes_over_its_base(tmp_path):
    """``base:`` (a file relative to the config): mappings merge key by key, a net list
    replaces the base's, and a base may have its own base; a cycle and a missing base are
    errors naming the files. The bench variants above are written this way."""
    (tmp_path / "variants").mkdir()
    (tmp_path / "gpu.yaml").write_text(
        f"base: {CONFIGS / 'extract-go-gpu.yaml'}\nvalue: {{hash_mb: 32}}\n"
        "batch_sizes: {torch: 256}\n"
    )
    (tmp_path / "variants" / "levels.yaml").write_text(
        "base: ../gpu.yaml\nstrength_nets: [kibitz-sscore-go]\nprecision: bf16\n"
    )
    shipped = load_config(CONFIGS / "extract-go-gpu.yaml")
    config = load_config(tmp_path / "variants" / "levels.yaml")
    assert config.value == replace(shipped.value, hash_mb=32)
    assert config.batch_sizes == {**shipped.batch_sizes, "torch": 256}
    assert [n.name for n in config.strength_nets] == ["kibitz-sscore-go"]
    assert config.imitation_nets == shipped.imitation_nets and config.precision == "bf16"
    (tmp_path / "a.yaml").write_text("base: b.yaml\ngame: go\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match=r"cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("base: gone.yaml\ngame: go\n")
    with pytest.raises(ConfigError, match=r"c\.yaml': base: cannot read extraction config .*gone"):
        load_config(tmp_path / "c.yaml")
