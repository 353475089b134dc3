"""Position pools and the grouped batches of s-score training (Chen, Shih & Wu 2025).

A *player instance* is one player's moves in one game. A :class:`PositionPool` holds encoded
positions of many games, sorted by instance, with each position's legal moves (CSR over lc0 /
KataGo policy indices), the move played and the game outcome from the mover's view. Pools are
built in bounded chunks of games and keep at most ``positions_per_instance`` random positions of
each instance, so a Go pool of 16,000 games fits in a few hundred MB.

A training batch (:func:`sample_batch`) is G groups × R ranks × P positions: in each group, rank
``r`` contributes P distinct positions of ONE instance of rank group ``r``. Rank index 0 is the
weakest. With ``with_r_inf`` (the default, Chen et al.'s "with r∞" variant) rank 0 is an extra
rank r∞ below every real one: real positions of any instance whose played move is replaced by a
uniformly random legal move that differs from the played one (the played move only when it is
the sole legal move). Every step is vectorised over the whole batch; the only Python loops run
over chunks of games and over the R ranks, never over positions.

    from pipeline.train.sscore_batches import build_pool, sample_batch
    pool = build_pool(games_table, "chess", positions_per_instance=16, seed=0)
    batch = sample_batch(pool, np.random.default_rng(0), groups=4, positions=4)
    batch.rows.shape          # (4, 9, 4): 8 chess bands + r∞
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import torch

from pipeline.chess_game import spec as chess_spec
from pipeline.chess_game.encode import encode_games as encode_chess_games
from pipeline.core.csr import gather_rows
from pipeline.core.errors import KibitzError
from pipeline.go_game import spec as go_spec
from pipeline.go_game.encode import encode_games as encode_go_games
from pipeline.go_game.rules import games_from_table
from pipeline.nets.legal_softmax import legal_mask

# Rank groups, weakest first (Kuboki et al. 2025's selection; keep in sync with the presets).
CHESS_RANK_GROUPS = (
    "1000-1200", "1200-1400", "1400-1600", "1600-1800",
    "1800-2000", "2000-2200", "2200-2400", "2400-2600",
)  # fmt: skip
GO_RANK_GROUPS = ("3-5k", "1-2k", "1d", "2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d")
RANK_GROUPS = {"chess": CHESS_RANK_GROUPS, "go": GO_RANK_GROUPS}
R_INF = "r-inf"  # name of the extra weakest rank in reports
# Fox's KM[0] games are played with komi 6.5 in practice; KataGo's Fox data makes the same choice.
GO_DEFAULT_KOMI = 6.5
# Rows encoded at once: bounds the float32 encoder output (Go: 32 KB a position → ~0.5 GB).
ENCODE_CHUNK_POSITIONS = 16_384


class PoolError(KibitzError, ValueError):
    """Games that cannot make a pool (wrong game kind, no usable instances)."""


@dataclass
class PositionPool:
    """Encoded positions sorted by player instance; N positions, I instances."""

    game: str  # "chess" | "go"
    planes: np.ndarray  # chess (N, 112, 8, 8) uint8 (lc0 planes; rule-50 is a count < 256)
    #                     go (N, 22, 19, 19) uint8 (KataGo v7 spatial planes are 0/1)
    global_: np.ndarray | None  # go (N, 19) float32; None for chess
    legal_offsets: np.ndarray  # (N+1,) int64 CSR into legal_index
    legal_index: np.ndarray  # (L,) int16 policy index of each legal move
    played: np.ndarray  # (N,) int64 policy index of the move played
    played_pos: np.ndarray  # (N,) int32 where the played move sits in its legal list
    value: np.ndarray  # (N,) float32 game result from the mover's view: +1 win, 0 draw, -1 loss
    ply: np.ndarray  # (N,) int32
    instance_offsets: np.ndarray  # (I+1,) int64: positions of instance i are rows [o[i], o[i+1])
    instance_group: np.ndarray  # (I,) int16 rank group index (weakest 0), -1 outside the groups
    instance_rank: np.ndarray  # (I,) str the player's own rank or rating band label
    instance_game_id: np.ndarray  # (I,) str game_id of the instance's game
    instance_black: np.ndarray  # (I,) bool the instance plays Black

    def __len__(self) -> int:
        return int(self.played.shape[0])

    @property
    def policy_size(self) -> int:
        """Entries of the game's policy: chess 1858, Go 362."""
        return chess_spec.POLICY_SIZE if self.game == "chess" else go_spec.POLICY_SIZE

    @property
    def num_instances(self) -> int:
        return int(self.instance_group.shape[0])

    @property
    def instance_counts(self) -> np.ndarray:
        """(I,) positions held of each instance."""
        return np.diff(self.instance_offsets)

    @property
    def position_instance(self) -> np.ndarray:
        """(N,) instance of each position."""
        return np.repeat(np.arange(self.num_instances), self.instance_counts)

    @property
    def legal_counts(self) -> np.ndarray:
        return np.diff(self.legal_offsets)

    @property
    def rank_groups(self) -> tuple[str, ...]:
        return RANK_GROUPS[self.game]


@dataclass
class SScoreBatch:
    """One grouped batch; rank axis weakest → strongest (index 0 is r∞ when present)."""

    rows: np.ndarray  # (G, R, P) pool rows
    moves: np.ndarray  # (G, R, P) int64 policy index shown to the net
    instances: np.ndarray  # (G, R, P) instance of each row
    with_r_inf: bool

    @property
    def real(self) -> np.ndarray:
        """(G, R, P) bool: the move shown is the one played (every rank but r∞)."""
        real = np.ones(self.rows.shape, dtype=bool)
        if self.with_r_inf:
            real[:, 0] = False
        return real


def _mover_columns(games: pa.Table, game: str) -> dict[str, np.ndarray]:
    """Per game: both players' group index, rank label and the result as +1/0/-1 for White."""
    groups = {name: i for i, name in enumerate(RANK_GROUPS[game])}
    out: dict[str, np.ndarray] = {}
    for colour in ("white", "black"):
        raw = games[f"{colour}_rank_group"].to_pylist()
        out[f"{colour}_group"] = np.array([groups.get(g, -1) for g in raw], dtype=np.int16)
        label = games[f"{colour}_rank" if game == "go" else f"{colour}_rank_group"].to_pylist()
        out[f"{colour}_label"] = np.array(["" if v is None else v for v in label], dtype=object)
    winner = np.array(games["winner"].to_pylist(), dtype=object)
    out["white_result"] = np.select([winner == "white", winner == "black"], [1.0, -1.0], 0.0)
    return out


def _chunks(num_plies: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive game ranges whose plies add up to at most ``limit`` (one game at least)."""
    ranges, start, total = [], 0, 0
    for g, n in enumerate(num_plies.tolist()):
        if total and total + n > limit:
            ranges.append((start, g))
            start, total = g, 0
        total += n
    if start < len(num_plies):
        ranges.append((start, len(num_plies)))
    return ranges


def _keep_per_instance(
    instance: np.ndarray, keep: int | None, rng: np.random.Generator, skip: int = 0
) -> np.ndarray:
    """Rows to keep: at most ``keep`` (``None``: all) random rows of each instance after its
    first ``skip`` in the random order, sorted by instance then ply. The draw does not depend
    on ``keep`` or ``skip``, so ``skip=k`` keeps rows disjoint from those ``keep=k`` keeps with
    the same seed."""
    if keep is None and not skip:
        return np.lexsort((np.arange(len(instance)), instance))
    order = np.lexsort((rng.random(len(instance)), instance))
    sorted_inst = instance[order]
    place = np.arange(len(order)) - np.searchsorted(sorted_inst, sorted_inst, side="left")
    upper = np.inf if keep is None else skip + keep
    kept = order[(place >= skip) & (place < upper)]
    return kept[np.lexsort((kept, instance[kept]))]


Keep = Callable[[np.ndarray], np.ndarray]  # instance id of each row → the rows to keep


def _kept_rows(
    game_index: np.ndarray, black: np.ndarray, ply: np.ndarray, first_game: int, keep: Keep
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The rows ``keep`` picks from their player instances (``2 · game + black``, games counted
    from the table's row ``first_game``), and the pool's ply and instance columns of them."""
    instance = 2 * (game_index.astype(np.int64) + first_game) + black
    rows = keep(instance)
    return rows, {"ply": ply[rows], "instance": instance[rows]}


def _chess_columns(
    games: pa.Table, first_game: int, keep: Keep, komi: float
) -> dict[str, np.ndarray]:
    """Pool columns of one chunk of chess games (``komi``: Go's, unused)."""
    pos = encode_chess_games(games["moves"])
    rows, kept = _kept_rows(pos.game_index, ~pos.white_to_move, pos.ply, first_game, keep)
    legal_index, counts = gather_rows(pos.legal_offsets, pos.legal_policy_index, rows)
    return kept | {
        "planes": pos.planes[rows].astype(np.uint8),
        "legal_index": legal_index,
        "legal_counts": counts,
        "played": pos.played_policy_index[rows].astype(np.int64),
        "played_pos": pos.played_legal_pos[rows].astype(np.int32),
    }


def _go_columns(games: pa.Table, first_game: int, keep: Keep, komi: float) -> dict[str, np.ndarray]:
    """Pool columns of one chunk of Go games, read as KataGo's Fox data reads them: Japanese
    rules and ``komi`` for every game."""
    pos = encode_go_games(games_from_table(games), rules="japanese", komi=komi)
    rows, kept = _kept_rows(pos.game_index, pos.black_to_move, pos.ply, first_game, keep)
    legal = pos.legal[rows]
    _, legal_index = np.nonzero(legal)  # row-major: grouped by position, ascending index
    played = pos.played_index[rows].astype(np.int64)
    # The played move's place in its legal list = legal moves with a smaller index.
    below = np.cumsum(legal, axis=1)[np.arange(len(rows)), played] - 1
    return kept | {
        "planes": pos.spatial[rows].astype(np.uint8),
        "global_": pos.global_[rows].astype(np.float32),
        "legal_index": legal_index.astype(np.int16),
        "legal_counts": legal.sum(axis=1),
        "played": played,
        "played_pos": below.astype(np.int32),
    }


# A chunk of games (rows ``first_game`` … of the table) → the pool columns of the rows ``keep``
# picks. Everything derived from the encoder's output (uint8 planes, legal lists, the played
# move's place) is computed for the kept rows only: a pool of 16 moves an instance keeps about
# one Go position in six.
POOL_COLUMNS: dict[str, Callable[[pa.Table, int, Keep, float], dict[str, np.ndarray]]] = {
    "chess": _chess_columns,
    "go": _go_columns,
}


def build_pool(
    games: pa.Table,
    game: str,
    *,
    positions_per_instance: int | None = 16,
    seed: int = 0,
    skip_per_instance: int = 0,
    komi: float = GO_DEFAULT_KOMI,
    chunk_positions: int = ENCODE_CHUNK_POSITIONS,
) -> PositionPool:
    """Encode ``games`` (games-table rows of one game kind) into a pool of player instances.

    ``positions_per_instance``: keep at most this many random positions of each instance
    (``None``: all), after the first ``skip_per_instance`` of its random order: a second sample
    of the same seed that shares no position with the first, for figures on moves a model was
    never selected on. Positions after an illegal move are not encoded (the encoders stop there).
    An instance with no more than ``skip_per_instance`` positions is left out.
    """
    if game not in RANK_GROUPS:
        raise PoolError(f"game must be 'chess' or 'go', got {game!r}")
    kinds = set(games["game"].to_pylist()) if games.num_rows else {game}
    if kinds != {game}:
        raise PoolError(f"pool of {game!r} games given games of kinds {sorted(kinds)!r}")
    rng = np.random.default_rng(seed)
    movers = _mover_columns(games, game)
    num_plies = np.asarray(games["num_plies"].to_numpy(zero_copy_only=False), dtype=np.int64)
    keep = partial(_keep_per_instance, keep=positions_per_instance, rng=rng, skip=skip_per_instance)
    parts: dict[str, list[np.ndarray]] = {}
    for start, stop in _chunks(num_plies, chunk_positions):
        cols = POOL_COLUMNS[game](games.slice(start, stop - start), start, keep, komi)
        g, black = np.divmod(cols["instance"], 2)
        cols["value"] = (movers["white_result"][g] * np.where(black, -1.0, 1.0)).astype(np.float32)
        for name, value in cols.items():
            parts.setdefault(name, []).append(value)
    if not parts:
        raise PoolError(f"no {game} positions in {games.num_rows} games")
    instance = np.concatenate(parts["instance"])
    ids = np.unique(instance)
    counts = np.diff(np.concatenate([np.searchsorted(instance, ids), [len(instance)]]))
    instance_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    g_of, black_of = ids // 2, (ids % 2).astype(bool)
    group = np.where(black_of, movers["black_group"][g_of], movers["white_group"][g_of])
    label = np.where(black_of, movers["black_label"][g_of], movers["white_label"][g_of])
    legal_counts = np.concatenate(parts["legal_counts"])
    game_ids = np.asarray(games["game_id"].to_pylist(), dtype=object)
    return PositionPool(
        game=game,
        planes=np.concatenate(parts["planes"]),
        global_=np.concatenate(parts["global_"]) if "global_" in parts else None,
        legal_offsets=np.concatenate([[0], np.cumsum(legal_counts)]).astype(np.int64),
        legal_index=np.concatenate(parts["legal_index"]),
        played=np.concatenate(parts["played"]),
        played_pos=np.concatenate(parts["played_pos"]),
        value=np.concatenate(parts["value"]),
        ply=np.concatenate(parts["ply"]),
        instance_offsets=instance_offsets,
        instance_group=group.astype(np.int16),
        instance_rank=label.astype(str),
        instance_game_id=game_ids[g_of].astype(str),
        instance_black=black_of,
    )


def eligible_instances(pool: PositionPool, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Instances with at least ``positions`` positions, grouped by rank group: (ids, (R+1,) CSR)."""
    ok = (pool.instance_counts >= positions) & (pool.instance_group >= 0)
    ids = np.flatnonzero(ok)
    ids = ids[np.argsort(pool.instance_group[ids], kind="stable")]
    counts = np.bincount(pool.instance_group[ids], minlength=len(pool.rank_groups))
    return ids, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def random_other_slot(pool: PositionPool, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Where a uniformly random legal move other than the played one sits in each row's legal
    list (the played move's place where it is the only legal move): for per-legal-move arrays."""
    n = pool.legal_counts[rows]  # (K,)
    pick = np.floor(rng.random(rows.shape) * np.maximum(n - 1, 1)).astype(np.int64)
    return pick + ((pick >= pool.played_pos[rows]) & (n > 1))  # skip over the played move


def random_other_legal(
    pool: PositionPool, rows: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """A uniformly random legal move of each row other than the played one (policy index).

    Returns the played move where it is the only legal move.
    """
    slot = random_other_slot(pool, rows, rng)
    return pool.legal_index[pool.legal_offsets[rows] + slot].astype(np.int64)


def sample_batch(
    pool: PositionPool,
    rng: np.random.Generator,
    *,
    groups: int,
    positions: int,
    with_r_inf: bool = True,
    eligible: tuple[np.ndarray, np.ndarray] | None = None,
) -> SScoreBatch:
    """G groups × (R [+1]) ranks × P positions, each rank's P positions from one instance."""
    ids, offsets = eligible if eligible is not None else eligible_instances(pool, positions)
    per_rank = np.diff(offsets)
    if (per_rank == 0).any():
        missing = [pool.rank_groups[i] for i in np.flatnonzero(per_rank == 0)]
        raise PoolError(f"no instance with >= {positions} positions in rank groups {missing!r}")
    r = len(per_rank)
    u = rng.random((groups, r))
    chosen = ids[offsets[:-1] + np.floor(u * per_rank).astype(np.int64)]  # (G, R)
    if with_r_inf:
        extra = ids[np.floor(rng.random((groups, 1)) * len(ids)).astype(np.int64)]  # (G, 1)
        chosen = np.concatenate([extra, chosen], axis=1)  # (G, R+1)
    flat = chosen.reshape(-1)  # (G*R',)
    n = pool.instance_counts[flat]
    keys = rng.random((len(flat), int(n.max())))
    keys[np.arange(keys.shape[1])[None, :] >= n[:, None]] = np.inf
    picks = np.argsort(keys, axis=1)[:, :positions]  # (G*R', P) distinct positions
    rows = (pool.instance_offsets[flat][:, None] + picks).reshape(*chosen.shape, positions)
    moves = pool.played[rows]
    if with_r_inf:
        moves[:, 0] = random_other_legal(pool, rows[:, 0], rng)
    instances = np.broadcast_to(chosen[:, :, None], rows.shape).copy()
    return SScoreBatch(rows=rows, moves=moves, instances=instances, with_r_inf=with_r_inf)


def net_inputs(
    pool: PositionPool,
    rows: np.ndarray,
    moves: np.ndarray,
    device: torch.device | str = "cpu",
    *,
    legal: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Float32 net inputs (contract C4 order) on ``device`` for flat ``rows`` shown ``moves``
    (one-hot). The planes travel as uint8 and become float there. With ``legal``, the (B,
    policy) legal-move mask (1.0 where legal) comes before the move (a Go levels s-score,
    ``pipeline/nets/sscore_levels.py``)."""
    rows = rows.reshape(-1)
    size = pool.policy_size
    played = torch.zeros(len(rows), size, device=device)  # (B, policy)
    shown = torch.from_numpy(moves.reshape(-1)).to(device)
    played[torch.arange(len(rows), device=device), shown] = 1.0
    planes = torch.from_numpy(pool.planes[rows]).to(device).float()  # (B, C, H, W)
    inputs = [planes]
    if pool.game == "go":
        inputs.append(torch.from_numpy(pool.global_[rows]).to(device))  # (B, 19)
    if legal:
        mask = legal_mask(pool.legal_offsets, pool.legal_index, rows, size)
        inputs.append(mask.to(device).float())
    return (*inputs, played)
