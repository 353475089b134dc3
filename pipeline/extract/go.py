"""Go feature extraction steps: games → KataGo inputs → priors and score leads → features.

Plain step classes (no ray); ``pipeline/jobs/extract.py`` runs them on Ray, tests call them directly::

    encode_go(games, config)                CPU task   GoWork: every position before each move
                                                       AND the final position of each game
                                                       (bit-packed); with expected loss also
                                                       each position's board state (GoWork.
                                                       states; on Ray they go to the children
                                                       task only)
    GoNetStep(config)(work)                 net actor  policy of every imitation net (HumanSL
                                                       profiles as their "meta" input, every
                                                       rank of a rank-conditioned policy from
                                                       one pass), s-scores of the played moves,
                                                       White's lead of every position, the
                                                       expected-loss net's likely moves
      with expected loss:
    encode_go_children(work, nets, states)  CPU task   the likely moves' positions
    GoNetStep.evaluate_children(kids)       net actor  White's lead there (ChildValues)
    assemble_go(config, work, nets, kids)   CPU task   the features table

Evaluation (Kuboki et al. 2025): KataGo's score lead in points. ``v_before[i]`` is the lead of
the position before ply i from the mover's view, ``v_after[i]`` the lead of the next position
from the same player's view, ``loss = v_before − v_after``. Each position is evaluated once:
with alternating moves ``v_after[i] == −v_before[i+1]``. The final position after the last
move is encoded by appending a pass for the side to move (legal everywhere; only its input
row is used), so it comes out of the same compiled encoder call.

Expected loss: the expected-loss net's likely moves of every position (``pipeline.
expected_loss``) are played on the position's stored board (``encode_children``: one play and
one row encode each, no replay of the game) in a CPU task, and a second call of the net actor
gives the lead after each, in batches of ``batch_size`` (``pipeline/extract/child_positions.py``). The
played move needs no child: its position is the next row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from pipeline.core.features_schema import feature_column
from pipeline.core.packed_planes import PackedPlanes, pack_planes
from pipeline.extract.child_positions import (
    ChildPositions,
    ChildValues,
    encode_packed,
    unplayed_likely,
    value_children,
)
from pipeline.extract.config import ConfigError, ExtractConfig, NetConfig
from pipeline.extract.expected_loss import LikelyMoves, expected_loss, select_likely
from pipeline.extract.features_rows import build_table, game_columns
from pipeline.extract.levels_head import heads_on_imitation
from pipeline.go_game.encode import GoBoardStates, GoPositions, encode_children, encode_games
from pipeline.go_game.metadata import humansl_metadata
from pipeline.go_game.rules import GoGameSpec, games_from_table
from pipeline.go_game.spec import POLICY_SIZE
from pipeline.nets.go_rank_policy import GoRankPolicyNet, rank_index
from pipeline.nets.katago_outputs import white_lead
from pipeline.nets.net_bank import Input, NetBank, NetJob, OneHot
from pipeline.nets.policy_stats import PolicyStats

LOG_PRIOR_FLOOR = float(np.log(1e-6))  # features_schema: logprior floored at log(1e-6)


@dataclass
class GoWork:
    """One chunk's games encoded; ``is_move`` marks rows of real moves (not final positions).

    ``states`` (expected loss only) are read by the children encoder alone, never by the net
    actor, so the Ray runner ships them apart (``pipeline.extract.steps.split_states``; ~0.8 kB a
    position, tests/test_extract_go.py).
    """

    games: pa.Table
    positions: GoPositions  # spatial / global_ emptied: they travel packed; states moved out
    spatial: PackedPlanes
    global_: np.ndarray  # (N, 19) float32
    is_move: np.ndarray  # (N,) bool
    failed: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0
    states: GoBoardStates | None = None  # with expected loss: every row's board state


@dataclass
class GoNetResult:
    prior: dict[str, np.ndarray]  # (M,) per imitation net, rows of real moves only
    logprior: dict[str, np.ndarray]
    top1: dict[str, np.ndarray]
    sscore: dict[str, np.ndarray]  # (M,) per strength net
    white_lead: np.ndarray  # (N,) every encoded row, final positions included
    likely: LikelyMoves | None = None  # (M, k) the expected-loss net's likely moves (policy index)
    seconds: float = 0.0
    net_seconds: float = 0.0


def _specs(games: pa.Table, rows: np.ndarray) -> list[GoGameSpec]:
    """Game specs of ``rows`` with a pass appended for the side to move after the last move, so
    that the final position gets a row of its own (the value net's view after the last move)."""
    return [
        replace(spec, moves=[*spec.moves, f"{'W' if spec.moves[-1].startswith('B') else 'B'}:pass"])
        for spec in games_from_table(games.take(pa.array(rows)))
    ]


def encode_go(games: pa.Table, config: ExtractConfig) -> GoWork:
    """Encode every position of ``games`` plus each final position.

    Games with no move have no rows; games the rules engine rejects are dropped with the reason.
    Board states are kept only when expected loss is on (they cost ~0.8 kB a position).
    """
    t0 = time.perf_counter()
    keep_states = config.expected_loss.net is not None
    n_moves = np.asarray(games["num_plies"].to_numpy(zero_copy_only=False), dtype=np.int64)
    rows = np.flatnonzero(n_moves > 0)
    failed: dict[int, str] = {}
    while True:
        pos = encode_games(
            _specs(games, rows), rules=config.go_rules, komi=config.go_komi,
            keep_states=keep_states,
        )  # fmt: skip
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
    states, pos.states = pos.states, None
    return GoWork(games, pos, spatial, global_, is_move, failed, time.perf_counter() - t0, states)


VALUE_OUTPUTS = ("value", "misc")  # what go_outputs.white_lead reads


class GoNetStep:
    """Holds every Go net of a run (imitation levels, strength nets, value net).

    One pass per distinct net input: KataGo as imitation AND value net runs once; a
    rank-conditioned policy (``pipeline.nets.go_rank_policy``, e.g. ``kibitz-go-policy``) runs its
    trunk once and gives every configured rank (``profile: 3d``); a KataGo HumanSL net runs once
    per profile (its "meta" input differs). Policies are reduced where the nets run
    (``pipeline.nets.policy_stats``): only the played move's prior, the top-1 flag and the
    expected-loss net's likely moves come back, and only the value net's value and score heads.
    """

    def __init__(self, config: ExtractConfig, *, device: str | None = None, cache_dir=None):
        self.config = config
        # levels s-scores whose levels are all imitation nets: only their heads run, on those
        # nets' statistics (pipeline/extract/levels_head.py)
        self.levels = heads_on_imitation(config)
        strength = [n for n in config.strength_nets if n.name not in self.levels]
        models = [n.model for n in config.imitation_nets + strength]
        models.append(config.value.model)
        self.bank = NetBank(
            models,
            backend=config.backend,
            precision=config.precision,
            compile=config.compile,
            cuda_graphs=config.cuda_graphs,
            batch_size=config.batch_size,
            device=device,
            cache_dir=cache_dir,
            threads=config.evaluator_cpus,
        )
        # imitation net name → (job key, channel of the job's policy statistics)
        self.imitation: dict[str, tuple[str, int]] = {}
        self.meta_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        channels: dict[str, list[int]] = {}  # job key → policy channels, in column order
        job_args: dict[str, tuple[str, dict[str, str]]] = {}  # job key → (model, renames)
        for net in config.imitation_nets:
            key, channel, renames = self._imitation_job(net)
            picked = channels.setdefault(key, [])
            if channel not in picked:
                picked.append(channel)
            self.imitation[net.name] = (key, picked.index(channel))
            job_args[key] = (net.model, renames)
        el_key = self.imitation[config.expected_loss.net][0] if config.expected_loss.net else None
        extra: dict[str, dict[str, bool]] = {}  # job key → the PolicyStats flags heads read
        for lv in self.levels.values():
            for name in lv.imitation:
                extra.setdefault(self.imitation[name][0], {}).update(lv.stats)
        self.value_key = f"{config.value.model}#None"
        self.jobs: dict[str, NetJob] = {}  # job key → job
        for key, (model, renames) in job_args.items():
            stats = PolicyStats(
                "legal", "played_index", tuple(channels[key]),
                top_k=config.expected_loss.max_moves if key == el_key else 0,
                **extra.get(key, {}),
            )  # fmt: skip
            outputs = ("policy", *VALUE_OUTPUTS) if key == self.value_key else ("policy",)
            self.jobs[key] = NetJob(key, model, outputs, renames, stats={"policy": stats})
        self.strength_job: dict[str, str] = {}  # strength net name → job key
        for net in strength:
            key = f"{net.model}#sscore"
            self.jobs.setdefault(key, NetJob(key, net.model, ("sscore",)))
            self.strength_job[net.name] = key
        self.jobs.setdefault(
            self.value_key, NetJob(self.value_key, config.value.model, VALUE_OUTPUTS)
        )

    def _imitation_job(self, net: NetConfig) -> tuple[str, int, dict[str, str]]:
        """The job key that gives ``net``'s policy, its channel, and the job's input renames."""
        model = self.bank.nets[net.model]
        if isinstance(model, GoRankPolicyNet):
            if net.profile is None:
                raise ConfigError(
                    f"imitation net {net.name!r}: {net.model!r} is rank-conditioned; give the"
                    " rank as its profile, e.g. profile: 3d"
                )
            # one trunk pass serves every rank of this model
            return f"{net.model}#ranks", rank_index(net.profile), {}
        key = f"{net.model}#{net.profile}"
        if net.profile is None:
            return key, 0, {}  # KataGo's channel 0: policyOptimism 0, KataGo's default
        if "meta" not in self.bank.evaluators[net.model].input_names:
            raise ConfigError(
                f"imitation net {net.name!r}: profile {net.profile!r} given but"
                f" {net.model!r} takes no HumanSL metadata input"
            )
        # KataGo's metadata row depends on the side to move.
        self.meta_rows[f"meta:{net.profile}"] = (
            humansl_metadata(net.profile, black_to_move=True),
            humansl_metadata(net.profile, black_to_move=False),
        )
        return key, 0, {"meta": f"meta:{net.profile}"}

    def evaluate_children(self, kids: ChildPositions) -> ChildValues:
        """White's lead in the positions after the likely moves (:func:`encode_go_children`)."""
        job = self.jobs[self.value_key]
        job = NetJob(job.key, job.model, VALUE_OUTPUTS, job.inputs_from)
        meta = self.bank.nets[job.model].meta
        return value_children(
            self.bank, job, kids, lambda outputs: white_lead(outputs, kids.after, meta)
        )

    def __call__(self, work: GoWork) -> GoNetResult:
        t0 = time.perf_counter()
        net_before = self.bank.timer.net_s
        pos = work.positions
        n = len(pos.game_index)
        black = pos.black_to_move
        played_all = pos.played_index.astype(np.int64)
        strength = len(self.config.strength_nets) > len(self.levels)  # a net reads "played"

        def source(start: int, stop: int) -> dict[str, Input]:
            inputs: dict[str, Input] = {
                "spatial": work.spatial.rows(start, stop),  # (B, 22, 19, 19) packed
                "global": work.global_[start:stop],  # (B, 19)
                "legal": pos.legal[start:stop],  # (B, 362) bool
                "played_index": played_all[start:stop],  # (B,)
            }
            for name, (row_b, row_w) in self.meta_rows.items():  # (192,) each
                inputs[name] = np.where(black[start:stop, None], row_b, row_w)  # (B, 192)
            if strength:  # strength nets also see the played move (keep in sync: sscore_net)
                inputs["played"] = OneHot(played_all[start:stop], POLICY_SIZE)  # (B, 362)
            return inputs

        outputs = self.bank.run(list(self.jobs.values()), source, n)
        moves = np.flatnonzero(work.is_move)
        result = GoNetResult({}, {}, {}, {}, np.zeros(n))
        for net in self.config.imitation_nets:
            key, channel = self.imitation[net.name]
            stats = outputs[key]
            result.prior[net.name] = stats["policy.prior"][moves, channel]
            result.logprior[net.name] = np.maximum(
                stats["policy.logprior"][moves, channel], LOG_PRIOR_FLOOR
            ).astype(np.float32)
            result.top1[net.name] = stats["policy.top1"][moves, channel]
        for net in self.config.strength_nets:
            if net.name in self.levels:
                result.sscore[net.name] = self.levels[net.name].score(
                    lambda name, stat: outputs[self.imitation[name][0]][f"policy.{stat}"][
                        moves, self.imitation[name][1]
                    ]
                )
            else:
                sscore = outputs[self.strength_job[net.name]]["sscore"]
                result.sscore[net.name] = sscore[moves].reshape(-1).astype(np.float32)
        value = self.jobs[self.value_key]
        meta = self.bank.nets[value.model].meta
        result.white_lead = white_lead(outputs[value.key], black, meta)

        el = self.config.expected_loss
        if el.net is not None:
            key, channel = self.imitation[el.net]
            result.likely = select_likely(
                outputs[key]["policy.likely_index"][moves, channel],
                outputs[key]["policy.likely_prior"][moves, channel],
                prior_share=el.prior_share,
            )
        result.net_seconds = self.bank.timer.net_s - net_before
        result.seconds = time.perf_counter() - t0
        return result


def encode_go_children(work: GoWork, nets: GoNetResult, states: GoBoardStates) -> ChildPositions:
    """The position after each likely move that was not played, encoded on the parents'
    stored boards ``states`` (``encode_go.encode_children``) and packed."""
    t0 = time.perf_counter()
    pos = work.positions
    moves = np.flatnonzero(work.is_move)
    rows, cols = unplayed_likely(nets.likely, pos.played_index[moves])
    parents = moves[rows]
    codes = nets.likely.index[rows, cols]

    def encode(start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        kids = encode_children(states, parents[start:stop], codes[start:stop])
        return kids.spatial, kids.global_, kids.black_to_move  # (B, 22, 19, 19), (B, 19), (B,)

    spatial, (global_, black) = encode_packed(len(parents), encode)
    return ChildPositions(
        {"spatial": spatial, "global": global_}, black, 0, rows, cols, time.perf_counter() - t0
    )


def assemble_go(
    config: ExtractConfig, work: GoWork, nets: GoNetResult, kids: ChildValues | None = None
) -> pa.Table:
    """The features table of one chunk (schema ``config.schema()``), rows in game / ply order;
    ``kids`` are the likely moves' leads when expected loss is on."""
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
    )
    if nets.likely is not None:
        lead_moves = kids.likely_table(nets.likely.index.shape)  # (M, k) White's view
        v_moves = (lead_moves * sign[:, None]).astype(np.float32)  # the mover's view
        played = nets.likely.index == pos.played_index[moves, None]  # (M, k)
        v_moves = np.where(played, v_after[:, None], v_moves)
        columns["expected_loss"] = expected_loss(v_before, v_moves, nets.likely)
        columns["expected_loss_moves"] = nets.likely.count
    else:
        columns["expected_loss"] = np.full(len(moves), np.nan, np.float32)
        columns["expected_loss_moves"] = pa.nulls(len(moves), pa.int16())
    for net in config.imitation_nets:
        columns[feature_column("prior", net.name)] = nets.prior[net.name]
        columns[feature_column("logprior", net.name)] = nets.logprior[net.name]
        columns[feature_column("top1", net.name)] = nets.top1[net.name]
    for net in config.strength_nets:
        columns[feature_column("sscore", net.name)] = nets.sscore[net.name]
    return build_table(config.schema(), columns)
