"""Go feature extraction steps: games → KataGo inputs → priors and score leads → features.

Plain step classes (no ray); ``pipeline/extract.py`` runs them on Ray, tests call them directly::

    encode_go(games, config)            CPU task   GoWork: every position before each move AND
                                                   the final position of each game (bit-packed)
    GoNetStep(config)(work)             net actor  policy of every imitation net (HumanSL
                                                   profiles as their "meta" input), White's lead
    assemble_go(config, work, nets)     CPU task   the features table

Evaluation (Kuboki et al. 2025): KataGo's score lead in points. ``v_before[i]`` is the lead of
the position before ply i from the mover's view, ``v_after[i]`` the lead of the next position
from the same player's view, ``loss = v_before − v_after``. Each position is evaluated once:
with alternating moves ``v_after[i] == −v_before[i+1]``. The final position after the last
move is encoded by appending a pass for the side to move (legal everywhere; only its input
row is used), so it comes out of the same compiled encoder call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pipeline.encode_go import GoPositions, encode_games
from pipeline.extract_config import ExtractConfig
from pipeline.features_rows import build_table, game_columns
from pipeline.features_schema import column_slug
from pipeline.go_metadata import humansl_metadata
from pipeline.go_outputs import postprocess
from pipeline.go_rules import GoGameSpec
from pipeline.net_bank import NetBank, NetJob
from pipeline.packed_planes import PackedPlanes, pack_planes

LOG_PRIOR_FLOOR = float(np.log(1e-6))  # features_schema: logprior floored at log(1e-6)


@dataclass
class GoWork:
    """One chunk's games encoded; ``is_move`` marks rows of real moves (not final positions)."""

    games: pa.Table
    positions: GoPositions  # spatial / global_ emptied: they travel packed
    spatial: PackedPlanes
    global_: np.ndarray  # (N, 19) float32
    is_move: np.ndarray  # (N,) bool
    failed: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class GoNetResult:
    prior: dict[str, np.ndarray]  # (M,) per imitation net, rows of real moves only
    logprior: dict[str, np.ndarray]
    top1: dict[str, np.ndarray]
    sscore: dict[str, np.ndarray]
    white_lead: np.ndarray  # (N,) every encoded row, final positions included
    seconds: float = 0.0
    net_seconds: float = 0.0


def _specs(games: pa.Table, rows: np.ndarray) -> list[GoGameSpec]:
    """Game specs with a pass appended for the side to move after the last move."""
    cols = {c: games[c].to_pylist() for c in ("moves", "setup_black", "setup_white")}
    cols.update({c: games[c].to_pylist() for c in ("komi", "rules", "board_size")})
    specs = []
    for g in rows:
        moves = list(cols["moves"][g])
        nxt = "W" if moves[-1].startswith("B") else "B"
        specs.append(
            GoGameSpec(
                moves=[*moves, f"{nxt}:pass"],
                setup_black=cols["setup_black"][g] or (),
                setup_white=cols["setup_white"][g] or (),
                board_size=cols["board_size"][g] or 19,
                komi=6.5 if cols["komi"][g] is None else float(cols["komi"][g]),
                rules=cols["rules"][g] or "japanese",
            )
        )
    return specs


def encode_go(games: pa.Table, config: ExtractConfig) -> GoWork:
    """Encode every position of ``games`` plus each final position.

    Games with no move have no rows; games the rules engine rejects are dropped with the reason.
    """
    t0 = time.perf_counter()
    n_moves = np.asarray(games["num_plies"].to_numpy(zero_copy_only=False), dtype=np.int64)
    rows = np.flatnonzero(n_moves > 0)
    failed: dict[int, str] = {}
    while True:
        pos = encode_games(_specs(games, rows), rules=config.go_rules, komi=config.go_komi)
        bad = {int(rows[g]): f"{why} at ply {ply}" for g, ply, why in pos.illegal_moves}
        if not bad:
            break
        failed.update(bad)
        rows = np.array([r for r in rows if r not in bad], dtype=np.int64)
    counts = np.bincount(pos.game_index, minlength=len(rows))
    is_move = np.ones(len(pos.game_index), dtype=bool)
    is_move[np.cumsum(counts) - 1] = False  # the last row of each game is its final position
    pos.game_index = rows[pos.game_index].astype(np.int32)
    spatial = pack_planes(pos.spatial)
    global_ = np.ascontiguousarray(pos.global_)
    pos.spatial = np.empty((0, *pos.spatial.shape[1:]), np.float32)
    pos.global_ = np.empty((0, global_.shape[1]), np.float32)
    return GoWork(games, pos, spatial, global_, is_move, failed, time.perf_counter() - t0)


class GoNetStep:
    """Holds every Go net of a run (imitation levels, value net); one pass per distinct net."""

    def __init__(self, config: ExtractConfig, *, device: str | None = None, cache_dir=None):
        self.config = config
        models = [n.model for n in config.imitation_nets + config.strength_nets]
        models.append(config.value.model)
        self.bank = NetBank(
            models,
            backend=config.backend,
            precision=config.precision,
            batch_size=config.batch_size,
            device=device,
            cache_dir=cache_dir,
            threads=config.evaluator_cpus,
        )
        # One job per distinct (model, profile): KataGo as imitation AND value net runs once.
        self.jobs: dict[tuple[str, str | None], NetJob] = {}
        for net in [*config.imitation_nets, *config.strength_nets]:
            key = (net.model, net.profile)
            if key not in self.jobs:
                renames = {"meta": f"meta:{net.profile}"} if net.profile else {}
                outputs = (
                    ("sscore",)
                    if net in config.strength_nets
                    else ("policy", "value", "misc", "ownership")
                )
                self.jobs[key] = NetJob(f"{net.model}#{net.profile}", net.model, outputs, renames)
        # HumanSL profiles: KataGo's metadata row, which depends on the side to move.
        self.meta_rows = {
            f"meta:{net.profile}": (
                humansl_metadata(net.profile, black_to_move=True),
                humansl_metadata(net.profile, black_to_move=False),
            )
            for net in config.imitation_nets + config.strength_nets
            if net.profile
        }
        value_key = (config.value.model, None)
        if value_key not in self.jobs:
            self.jobs[value_key] = NetJob(f"{config.value.model}#None", config.value.model,
                                          ("policy", "value", "misc", "ownership"))  # fmt: skip

    def __call__(self, work: GoWork) -> GoNetResult:
        t0 = time.perf_counter()
        net_before = self.bank.timer.net_s
        pos = work.positions
        n = len(pos.game_index)

        black = pos.black_to_move

        def source(start: int, stop: int) -> dict[str, np.ndarray]:
            inputs = {
                "spatial": work.spatial.unpack(start, stop),  # (B, 22, 19, 19)
                "global": work.global_[start:stop],  # (B, 19)
            }
            for name, (row_b, row_w) in self.meta_rows.items():  # (192,) each
                inputs[name] = np.where(black[start:stop, None], row_b, row_w)  # (B, 192)
            return inputs

        outputs = self.bank.run(list(self.jobs.values()), source, n)
        moves = np.flatnonzero(work.is_move)
        played = pos.played_index[moves].astype(np.int64)
        result = GoNetResult({}, {}, {}, {}, np.zeros(n))
        post_cache = {}
        for net in self.config.imitation_nets:
            job = self.jobs[(net.model, net.profile)]
            if job.key not in post_cache:
                meta = self.bank.nets[net.model].meta
                post_cache[job.key] = postprocess(
                    outputs[job.key], pos.legal, pos.black_to_move, meta
                )
            policy = post_cache[job.key].policy[moves]  # (M, 362)
            prior = policy[np.arange(len(moves)), played]
            result.prior[net.name] = prior.astype(np.float32)
            with np.errstate(divide="ignore"):
                result.logprior[net.name] = np.maximum(np.log(prior), LOG_PRIOR_FLOOR).astype(
                    np.float32
                )
            result.top1[net.name] = np.argmax(policy, axis=1) == played
        for net in self.config.strength_nets:
            job = self.jobs[(net.model, net.profile)]
            result.sscore[net.name] = (
                outputs[job.key]["sscore"][moves].reshape(-1).astype(np.float32)
            )
        value_job = self.jobs[(self.config.value.model, None)]
        if value_job.key not in post_cache:
            meta = self.bank.nets[self.config.value.model].meta
            post_cache[value_job.key] = postprocess(
                outputs[value_job.key], pos.legal, pos.black_to_move, meta
            )
        result.white_lead = np.asarray(post_cache[value_job.key].white_lead, dtype=np.float64)
        result.net_seconds = self.bank.timer.net_s - net_before
        result.seconds = time.perf_counter() - t0
        return result


def assemble_go(config: ExtractConfig, work: GoWork, nets: GoNetResult) -> pa.Table:
    """The features table of one chunk (schema ``config.schema()``), rows in game / ply order."""
    pos = work.positions
    moves = np.flatnonzero(work.is_move)  # every move row is followed by its game's next row
    black = pos.black_to_move[moves]
    sign = np.where(black, -1.0, 1.0)  # White's view → the mover's
    v_before = (nets.white_lead[moves] * sign).astype(np.float32)
    v_after = (nets.white_lead[moves + 1] * sign).astype(np.float32)
    columns = game_columns(work.games, pos.game_index[moves], pos.ply[moves], ~black)
    columns.update(
        num_legal=pos.legal[moves].sum(axis=1).astype(np.int16),
        v_before=v_before,
        v_after=v_after,
        loss=(v_before - v_after).astype(np.float32),
        expected_loss=np.full(len(moves), np.nan, np.float32),
        expected_loss_moves=pa.nulls(len(moves), pa.int16()),
    )
    for net in config.imitation_nets:
        s = column_slug(net.name)
        columns[f"prior_{s}"] = nets.prior[net.name]
        columns[f"logprior_{s}"] = nets.logprior[net.name]
        columns[f"top1_{s}"] = nets.top1[net.name]
    for net in config.strength_nets:
        columns[f"sscore_{column_slug(net.name)}"] = nets.sscore[net.name]
    return build_table(config.schema(), columns)
