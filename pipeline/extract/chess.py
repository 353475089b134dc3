"""Chess feature extraction steps: games → positions → Maia priors + values → features.

Plain step classes (no ray); ``pipeline/jobs/extract.py`` runs them on Ray, and tests call them
directly. A chunk of games flows through four steps::

    encode_chess(games)                 CPU task     ChessWork (bit-packed planes, legal moves)
    ChessNetStep(config)(work)          net actor    priors / log-priors / top-1 per Maia net,
                                                     the expected-loss net's likely moves, the
                                                     strength nets' s-scores (a levels s-score
                                                     on the Maia nets' outputs); with
                                                     ``value.evaluator: net`` also the value
                                                     net's win rates (below)
    ChessValueStep(settings)(work, nets, lo, hi)     Stockfish actor, games [lo, hi): win rate
                                                     of every position, the final one and the
                                                     likely moves' resulting positions
      or, with ``value.evaluator: net``:
    encode_chess_children(work, nets)   CPU task     each game's final position, the likely
                                                     moves' positions (ChildPositions)
    ChessNetStep.evaluate_children(kids)  net actor  their win rates (ChildValues)
    assemble_chess(config, work, nets, values, kids)  CPU task    the features table

Values are from the mover's view: ``v_before[i]`` is the value of the position before ply i for
the side to move; ``v_after[i] = −v(position i+1)`` (the opponent moves there), so
``v_after[i] == −v_before[i+1]`` exactly, and each position is evaluated once.

Both evaluators give the side to move's expected score ``w`` and ``v = log(w / (1 − w))`` with
w clipped to [1e-4, 1 − 1e-4] (``stockfish_eval.win_rate_to_v``), so the columns mean the same:

- Stockfish: ``w = (W + D/2) / 1000`` of its WDL output at ``value.nodes`` nodes.
- An Lc0-format net (``value.evaluator: net``, ``value.model`` a registry name, the Maia
  loader): ``w = W + D/2`` of the softmax of its WDL head (the expected score, the same
  quantity Stockfish's WDL gives; a scalar-value net's ``Q`` gives ``w = (1 + Q) / 2``). The
  positions are evaluated in the imitation nets' batches (one pass when the value net is also
  an imitation net). The position after each game's last move and the likely moves' positions
  are encoded by :func:`encode_chess_children` in a CPU task (``encode_chess.encode_after``)
  and valued by a second call of the net actor (:meth:`ChessNetStep.evaluate_children`),
  in batches of ``batch_size`` (``pipeline/extract/child_positions.py``).
- Positions where the game is over are exact for both: checkmate w = 0, stalemate,
  insufficient material, the 75-move rule and fivefold repetition w = ½ (python-chess
  ``Board.outcome()``; the net path checks the positions after a move, those before a played
  move are never over).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Container
from dataclasses import dataclass, field

import chess
import numpy as np
import pyarrow as pa

from pipeline.chess_game.encode import (
    OUTCOME_CHECKMATE,
    OUTCOME_DRAW,
    ChessPositions,
    encode_after,
    encode_games,
)
from pipeline.chess_game.policy import legal_move_entries
from pipeline.chess_game.spec import POLICY_SIZE, unpack_move
from pipeline.core.features_schema import feature_column
from pipeline.core.packed_planes import PackedPlanes
from pipeline.extract.child_positions import (
    ChildPositions,
    ChildValues,
    unplayed_likely,
    value_children,
)
from pipeline.extract.config import ConfigError, ExtractConfig
from pipeline.extract.expected_loss import LikelyMoves, expected_loss, select_likely
from pipeline.extract.features_rows import build_table, game_columns
from pipeline.extract.levels_head import heads_on_imitation
from pipeline.nets.net_bank import Gather, Input, NetBank, NetJob, OneHot
from pipeline.nets.policy_stats import PolicyStats
from pipeline.nets.stockfish import StockfishEvaluator, StockfishSettings, win_rate_to_v

LOG_PRIOR_FLOOR = float(np.log(1e-6))  # features_schema: logprior floored at log(1e-6)


@dataclass
class ChessWork:
    """One chunk's games, encoded; ``positions.planes`` is empty, the planes travel packed."""

    games: pa.Table
    positions: ChessPositions
    planes: PackedPlanes
    failed: dict[int, str] = field(default_factory=dict)  # games row → why it was dropped
    seconds: float = 0.0


@dataclass
class ChessNetResult:
    """Per position (N,) outputs of every configured net, and the likely moves to evaluate."""

    prior: dict[str, np.ndarray]  # net name → (N,) float32
    logprior: dict[str, np.ndarray]
    top1: dict[str, np.ndarray]  # (N,) bool
    sscore: dict[str, np.ndarray]
    likely: LikelyMoves | None  # (N, k) positions in each legal list
    w_positions: np.ndarray | None = None  # (N,) value.evaluator "net": the value net's win rates
    seconds: float = 0.0
    net_seconds: float = 0.0


@dataclass
class ChessValues:
    """Win rates of the side to move for the games [lo, hi) of a chunk (Stockfish's output)."""

    lo: int
    hi: int
    w_positions: np.ndarray  # (P + G,) every position of these games plus each final one
    w_likely: np.ndarray  # (P, k) the position after each likely move; NaN where not needed
    seconds: float = 0.0
    searches: int = 0


def encode_chess(games: pa.Table) -> ChessWork:
    """Encode every position of ``games``; games with an illegal move are dropped with why."""
    t0 = time.perf_counter()
    positions = encode_games(games["moves"], packed=True)  # bits straight from the bitboards
    failed = {e.game_index: f"{e.reason} {e.move!r} at ply {e.ply}" for e in positions.errors}
    if failed:
        keep = np.ones(games.num_rows, dtype=bool)
        keep[list(failed)] = False
        kept_rows = np.flatnonzero(keep)
        positions = encode_games(games["moves"].take(pa.array(kept_rows)), packed=True)
        positions.game_index = kept_rows[positions.game_index].astype(np.int32)
    packed = positions.packed
    positions = dataclasses.replace(positions, packed=None)
    return ChessWork(games, positions, packed, failed, time.perf_counter() - t0)


def _nets_to_load(config: ExtractConfig, heads_only: Container[str]) -> list[str]:
    strength = [n for n in config.strength_nets if n.name not in heads_only]
    models = [n.model for n in config.imitation_nets + strength]
    if config.value.evaluator == "net":
        models.append(config.value.model)
    return models


def win_rate_from_value_head(out: np.ndarray) -> np.ndarray:
    """(B,) float64 expected score of the side to move from an Lc0 value head's output.

    ``out`` (B, 3): WDL logits → softmax → ``W + D/2``; (B, 1): ``Q`` in [−1, 1] → ``(1 + Q)/2``.
    """
    out = np.asarray(out, dtype=np.float64)
    if out.shape[1] == 1:
        return (1.0 + out[:, 0]) / 2.0
    p = np.exp(out - out.max(axis=1, keepdims=True))  # (B, 3)
    p /= p.sum(axis=1, keepdims=True)
    return p[:, 0] + p[:, 1] / 2.0


def apply_outcome(w: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """Win rates with finished games made exact: checkmate 0 (the mover lost), draws ½."""
    w = np.where(outcome == OUTCOME_CHECKMATE, 0.0, w)
    return np.where(outcome == OUTCOME_DRAW, 0.5, w)


class ChessNetStep:
    """Holds every chess net of a run; turns a chunk's positions into per-net columns."""

    def __init__(self, config: ExtractConfig, *, device: str | None = None, cache_dir=None):
        self.config = config
        # levels s-scores whose levels are all imitation nets: only their heads run, on those
        # nets' statistics (pipeline/extract/levels_head.py)
        self.levels = heads_on_imitation(config)
        # imitation net name → the extra PolicyStats flags its levels heads read
        extra = {name: lv.stats for lv in self.levels.values() for name in lv.imitation}
        self.bank = NetBank(
            _nets_to_load(config, self.levels),
            backend=config.backend,
            precision=config.precision,
            compile=config.compile,
            cuda_graphs=config.cuda_graphs,
            batch_size=config.batch_size,
            device=device,
            cache_dir=cache_dir,
            threads=config.evaluator_cpus,
        )
        el = config.expected_loss
        self.jobs = {}
        for net in config.imitation_nets:
            # legal: each position's legal entries, so likely moves come as legal-list places
            stats = PolicyStats(
                "legal",
                "played_index",
                top_k=el.max_moves if net.name == el.net else 0,
                **extra.get(net.name, {}),
            )
            self.jobs[net.name] = NetJob(net.name, net.model, ("policy",), stats={"policy": stats})
        self.jobs.update(
            {
                net.name: NetJob(net.name, net.model, ("sscore",))
                for net in config.strength_nets
                if net.name not in self.levels
            }
        )
        self.value_key: str | None = None
        if config.value.evaluator == "net":
            model = config.value.model
            names = self.bank.evaluators[model].output_names
            self.value_output = "wdl" if "wdl" in names else "value"
            if self.value_output not in names:
                raise ConfigError(
                    f"value.model {model!r} has outputs {names!r}: an Lc0-format value net"
                    " needs a 'wdl' or 'value' head"
                )
            # A value net that is also an imitation net keeps its value output in that pass.
            shared = [net.name for net in config.imitation_nets if net.model == model]
            if shared:
                self.value_key = shared[0]
                job = self.jobs[shared[0]]
                self.jobs[shared[0]] = NetJob(
                    job.key, model, ("policy", self.value_output), stats=job.stats
                )
            else:
                self.value_key = f"value:{model}"
                self.jobs[self.value_key] = NetJob(self.value_key, model, (self.value_output,))

    def __call__(self, work: ChessWork) -> ChessNetResult:
        t0 = time.perf_counter()
        net_before = self.bank.timer.net_s
        pos = work.positions
        n = len(pos)
        played_index = pos.played_policy_index.astype(np.int64)  # (N,)
        strength = len(self.config.strength_nets) > len(self.levels)  # a net reads "played"

        def source(start: int, stop: int) -> dict[str, Input]:
            inputs: dict[str, Input] = {
                "planes": work.planes.rows(start, stop),  # (B, 112, 8, 8) packed
                # each position's legal moves in its policy, (L_B,) entries
                "legal": Gather(*legal_move_entries(pos, start, stop)),
                "played_index": played_index[start:stop],  # (B,)
            }
            if strength:  # strength nets also see the played move, one-hot over the policy
                inputs["played"] = OneHot(played_index[start:stop], POLICY_SIZE)  # (B, 1858)
            return inputs

        outputs = self.bank.run(list(self.jobs.values()), source, n)

        result = ChessNetResult({}, {}, {}, {}, None)
        el_net = self.config.expected_loss.net
        for net in self.config.imitation_nets:
            stats = outputs[net.name]  # (N, 1) per statistic: pipeline.nets.policy_stats
            result.prior[net.name] = stats["policy.prior"][:, 0]
            result.logprior[net.name] = np.maximum(
                stats["policy.logprior"][:, 0], LOG_PRIOR_FLOOR
            ).astype(np.float32)
            result.top1[net.name] = stats["policy.top1"][:, 0]
            if net.name == el_net:  # likely moves as places in each position's legal list
                result.likely = select_likely(
                    stats["policy.likely_index"][:, 0],
                    stats["policy.likely_prior"][:, 0],
                    prior_share=self.config.expected_loss.prior_share,
                )
        for net in self.config.strength_nets:
            if net.name in self.levels:
                result.sscore[net.name] = self.levels[net.name].score(
                    lambda name, stat: outputs[name][f"policy.{stat}"][:, 0]
                )
            else:
                sscore = outputs[net.name]["sscore"]
                result.sscore[net.name] = sscore.reshape(n).astype(np.float32)
        if self.value_key is not None:
            result.w_positions = win_rate_from_value_head(
                outputs[self.value_key][self.value_output]
            )
        result.net_seconds = self.bank.timer.net_s - net_before
        result.seconds = time.perf_counter() - t0
        return result

    def evaluate_children(self, kids: ChildPositions) -> ChildValues:
        """The value net's win rates of the positions after moves (:func:`encode_chess_children`),
        exact where the game is over there."""
        job = self.jobs[self.value_key]
        job = NetJob(job.key, job.model, (self.value_output,))

        def win_rate(outputs: dict[str, np.ndarray]) -> np.ndarray:
            return apply_outcome(win_rate_from_value_head(outputs[self.value_output]), kids.after)

        return value_children(self.bank, job, kids, win_rate)


def encode_chess_children(work: ChessWork, nets: ChessNetResult) -> ChildPositions:
    """The position after each game's last move, then after each likely move that was not
    played, encoded bit-packed in one call (``encode_chess.encode_after(..., packed=True)``: one
    replay of each game's bitboards, each child's planes written as bits from them, no float
    planes; ~3 µs a child against ~90 µs encoding float planes and packing them)."""
    t0 = time.perf_counter()
    pos = work.positions
    last = last_rows(pos.game_index)
    parents = [last]
    codes = [pos.legal_move[pos.legal_offsets[last] + pos.played_legal_pos[last]]]
    rows = cols = np.zeros(0, np.int64)
    if nets.likely is not None:
        rows, cols = unplayed_likely(nets.likely, pos.played_legal_pos)
        parents.append(rows)
        codes.append(pos.legal_move[pos.legal_offsets[rows] + nets.likely.index[rows, cols]])
    parents = np.concatenate(parents)
    codes = np.concatenate(codes)
    after = encode_after(
        work.games["moves"], pos.game_index[parents], pos.ply[parents], codes, packed=True
    )
    return ChildPositions(
        {"planes": after.packed}, after.outcome, len(last), rows, cols, time.perf_counter() - t0
    )


def net_values(work: ChessWork, nets: ChessNetResult, kids: ChildValues) -> ChessValues:
    """The value net's win rates laid out as Stockfish's: one ChessValues for all games."""
    n = len(work.positions)
    _, rank = game_ranges(work)
    last = last_rows(work.positions.game_index)
    w_ext = np.empty(n + kids.n_final)  # positions, each game's followed by its final one
    w_ext[np.arange(n) + rank] = nets.w_positions
    w_ext[last + rank[last] + 1] = kids.value[: kids.n_final]
    k = nets.likely.index.shape[1] if nets.likely is not None else 0
    return ChessValues(0, work.games.num_rows, w_ext, kids.likely_table((n, k)))


def last_rows(game_index: np.ndarray) -> np.ndarray:
    """(G,) the row of each game's last position, ``game_index`` (N,) sorted by game."""
    n = len(game_index)
    return np.flatnonzero(np.append(game_index[1:] != game_index[:-1], n > 0))


def game_ranges(work: ChessWork) -> tuple[np.ndarray, np.ndarray]:
    """(G+1,) position offsets of each games row, and (N,) rank of each position's game among
    the games that have positions (the index shift between positions and extended positions)."""
    counts = np.bincount(work.positions.game_index, minlength=work.games.num_rows)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    has = (counts > 0).astype(np.int64)
    rank = (np.cumsum(has) - 1)[work.positions.game_index]
    return offsets, rank


class ChessValueStep:
    """One Stockfish engine evaluating the positions of a range of a chunk's games.

    FENs are generated here with python-chess, once per position: this stage is bound by the
    engine's search (milliseconds per position), not by the replay (microseconds).
    """

    def __init__(self, settings: StockfishSettings) -> None:
        self.engine = StockfishEvaluator(settings)

    @property
    def pid(self) -> int:
        return self.engine.pid

    def __call__(self, work: ChessWork, nets: ChessNetResult, lo: int, hi: int) -> ChessValues:
        t0 = time.perf_counter()
        searches0 = self.engine.searches
        pos = work.positions
        offsets, _ = game_ranges(work)
        p_lo, p_hi = int(offsets[lo]), int(offsets[hi])
        likely = nets.likely
        k = likely.index.shape[1] if likely is not None else 0
        w_likely = np.full((p_hi - p_lo, k), np.nan)
        w_positions = []
        moves = work.games["moves"]
        for g in range(lo, hi):
            start, stop = int(offsets[g]), int(offsets[g + 1])
            if start == stop:
                continue
            board = chess.Board()
            game_moves = moves[g].as_py()
            for p in range(start, stop):
                w_positions.append(self.engine.win_rate(board.fen()))
                if likely is not None:
                    base = int(pos.legal_offsets[p])
                    for j in np.flatnonzero(likely.keep[p]):
                        at = int(likely.index[p, j])
                        if at == pos.played_legal_pos[p]:
                            continue  # the played move: its position is the next one
                        board.push(chess.Move.from_uci(unpack_move(int(pos.legal_move[base + at]))))
                        w_likely[p - p_lo, j] = self.engine.win_rate(board.fen())
                        board.pop()
                board.push_uci(game_moves[int(pos.ply[p])])
            w_positions.append(self.engine.win_rate(board.fen()))
        return ChessValues(
            lo,
            hi,
            np.asarray(w_positions, dtype=np.float64),
            w_likely,
            time.perf_counter() - t0,
            self.engine.searches - searches0,
        )

    def close(self) -> None:
        self.engine.close()


def assemble_chess(
    config: ExtractConfig,
    work: ChessWork,
    nets: ChessNetResult,
    values: list[ChessValues],
    kids: ChildValues | None = None,
) -> pa.Table:
    """The features table of one chunk (schema ``config.schema()``), rows in game / ply order.

    ``values`` are Stockfish's; with a value net, ``kids`` are its children's win rates.
    """
    pos = work.positions
    n = len(pos)
    if config.value.evaluator == "net":
        values = [net_values(work, nets, kids)]
    values = sorted(values, key=lambda v: v.lo)
    w_ext = np.concatenate([v.w_positions for v in values]) if values else np.zeros(0)
    _, rank = game_ranges(work)
    at = np.arange(n) + rank  # index of each position in the extended (with finals) order
    v_ext = win_rate_to_v(w_ext)  # side to move's view
    v_before = v_ext[at]
    v_after = -v_ext[at + 1]
    columns = game_columns(work.games, pos.game_index, pos.ply, pos.white_to_move)
    columns.update(
        num_legal=np.diff(pos.legal_offsets).astype(np.int16),
        v_before=v_before,
        v_after=v_after,
        loss=(v_before - v_after).astype(np.float32),
    )
    if nets.likely is not None:
        w_likely = np.concatenate([v.w_likely for v in values])  # (N, k)
        v_moves = -win_rate_to_v(np.nan_to_num(w_likely, nan=0.5))  # mover's view
        played = nets.likely.index == pos.played_legal_pos[:, None]  # (N, k)
        v_moves = np.where(played, v_after[:, None], v_moves)
        columns["expected_loss"] = expected_loss(v_before, v_moves, nets.likely)
        columns["expected_loss_moves"] = nets.likely.count
    else:
        columns["expected_loss"] = np.full(n, np.nan, np.float32)
        columns["expected_loss_moves"] = pa.nulls(n, pa.int16())
    for net in config.imitation_nets:
        columns[feature_column("prior", net.name)] = nets.prior[net.name]
        columns[feature_column("logprior", net.name)] = nets.logprior[net.name]
        columns[feature_column("top1", net.name)] = nets.top1[net.name]
    for net in config.strength_nets:
        columns[feature_column("sscore", net.name)] = nets.sscore[net.name]
    return build_table(config.schema(), columns)
