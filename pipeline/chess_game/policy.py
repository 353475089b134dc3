"""Policy decoding: from an Lc0 net's (N, 1858) raw policy logits to probabilities over each
position's legal moves, the played move's probability and log-probability, and the top-1 move.

The softmax runs over the legal moves only (as lc0 does), as one vectorised segment softmax
over the CSR layout of :class:`pipeline.chess_game.encode.ChessPositions` (``np.maximum.reduceat`` /
``np.add.reduceat``), never one position at a time. Probabilities are computed in float64 and
stored as float32.

Use::

    from pipeline.chess_game.encode import encode_games
    from pipeline.chess_game.policy import policy_over_legal
    pos = encode_games(games)
    pol = policy_over_legal(out["policy"], pos)  # out from an Lc0 net evaluator
    pol.played_prob, pol.top1_is_played

Tests: ``pytest tests/test_chess_policy.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.chess_game.encode import ChessPositions
from pipeline.chess_game.spec import (
    MIRROR,
    POLICY_FROM,
    POLICY_PROMO,
    POLICY_SIZE,
    POLICY_TO,
    PROMO_LETTERS,
    SQUARE_NAMES,
    unpack_move,
)


class PolicyShapeError(ValueError):
    """Policy logits whose shape does not match the encoded positions."""


@dataclass
class LegalPolicy:
    """The net's policy restricted to legal moves, laid out like ``ChessPositions`` (CSR)."""

    probs: np.ndarray  # (L,) float32 softmax over each position's legal moves
    logprobs: np.ndarray  # (L,) float32 natural log of probs (exact, not log of the rounded)
    played_prob: np.ndarray  # (N,) float32 probability of the move actually played
    played_logprob: np.ndarray  # (N,) float64 its natural log
    top1_legal_pos: np.ndarray  # (N,) int32 position of the most likely move in the legal list
    top1_policy_index: np.ndarray  # (N,) int16 its lc0 policy index (mover's view)
    top1_is_played: np.ndarray  # (N,) bool the played move is the most likely one


def policy_over_legal(logits: np.ndarray, pos: ChessPositions) -> LegalPolicy:
    """Softmax of ``logits`` (N, 1858) over each position's legal moves (segment softmax).

    Ties for the top move go to the first legal move in the encoder's order.
    """
    n = len(pos)
    if logits.ndim != 2 or logits.shape != (n, POLICY_SIZE):
        raise PolicyShapeError(
            f"policy logits of shape {logits.shape!r} for {n} positions; expected ({n}, 1858)"
        )
    rows, cols = legal_move_entries(pos)
    return softmax_over_legal(logits[rows, cols], pos)


def legal_move_entries(
    pos: ChessPositions, start: int = 0, stop: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Where the legal moves of positions ``start:stop`` sit in their (stop − start, 1858)
    policy: (L,) int64 row within the slice and (L,) int64 lc0 policy index, in CSR order."""
    stop = len(pos) if stop is None else stop
    offsets = pos.legal_offsets
    rows = np.repeat(np.arange(stop - start), np.diff(offsets[start : stop + 1]))  # (L,)
    return rows, pos.legal_policy_index[offsets[start] : offsets[stop]].astype(np.int64)


def softmax_over_legal(legal_logits: np.ndarray, pos: ChessPositions) -> LegalPolicy:
    """:func:`policy_over_legal` from the legal moves' logits alone, (L,) in CSR order.

    A GPU net bank gathers these on the device (``NetJob.gather``), so only ~30 numbers per
    position cross PCIe instead of 1858.
    """
    n = len(pos)
    offsets = pos.legal_offsets
    starts = offsets[:-1]
    counts = np.diff(offsets)
    n_legal = int(offsets[-1])
    if legal_logits.shape != (n_legal,):
        raise PolicyShapeError(
            f"{legal_logits.shape!r} legal-move logits for {n_legal} legal moves of {n} positions"
        )
    if n == 0:
        empty_f = np.zeros(0, dtype=np.float32)
        return LegalPolicy(
            empty_f, empty_f, empty_f, np.zeros(0, np.float64), np.zeros(0, np.int32),
            np.zeros(0, np.int16), np.zeros(0, bool),
        )  # fmt: skip
    if (counts <= 0).any():
        raise PolicyShapeError("every position needs at least one legal move")
    values = legal_logits.astype(np.float64)  # (L,)
    seg_max = np.maximum.reduceat(values, starts)  # (N,)
    shifted = values - np.repeat(seg_max, counts)  # (L,) <= 0, 0 at each maximum
    log_z = np.log(np.add.reduceat(np.exp(shifted), starts))  # (N,)
    logprobs = shifted - np.repeat(log_z, counts)  # (L,)

    played = starts + pos.played_legal_pos  # (N,) flat index of the played move
    candidates = np.where(shifted == 0.0, np.arange(n_legal), n_legal)  # (L,)
    top1 = np.minimum.reduceat(candidates, starts)  # (N,) first maximum of each segment
    return LegalPolicy(
        probs=np.exp(logprobs).astype(np.float32),
        logprobs=logprobs.astype(np.float32),
        played_prob=np.exp(logprobs[played]).astype(np.float32),
        played_logprob=logprobs[played],
        top1_legal_pos=(top1 - starts).astype(np.int32),
        top1_policy_index=pos.legal_policy_index[top1],
        top1_is_played=top1 == played,
    )


def moves_uci(pos: ChessPositions, flat_legal: np.ndarray) -> list[str]:
    """python-chess UCI of legal-move entries given by flat index into ``pos.legal_move``
    (e.g. ``pos.legal_offsets[:-1] + pol.top1_legal_pos`` for every top-1 move)."""
    return [unpack_move(int(c)) for c in pos.legal_move[np.asarray(flat_legal)]]


def index_to_uci(policy_index: int, *, white_to_move: bool, castling: bool = False) -> str:
    """An lc0 policy index back to python-chess UCI for the side to move.

    Un-mirrors Black's moves; ``castling`` says the index is the king-takes-rook castling move
    (``e1h1`` → ``e1g1``, ``e1a1`` → ``e1c1``), which the index alone cannot tell apart from a
    rook on e1 moving to h1. A knight promotion shares the plain move's index, so it decodes as
    the plain move: prefer ``pipeline.chess_game.encode.legal_uci`` where the position is at hand.
    """
    if not 0 <= policy_index < POLICY_SIZE:
        raise ValueError(f"policy index {policy_index!r} outside 0..{POLICY_SIZE - 1}")
    src = int(POLICY_FROM[policy_index])
    dst = int(POLICY_TO[policy_index])
    if castling:
        if src != 4 or dst not in (0, 7):
            raise ValueError(f"policy index {policy_index!r} is not a castling move")
        dst = 6 if dst == 7 else 2
    if not white_to_move:
        src ^= MIRROR
        dst ^= MIRROR
    return SQUARE_NAMES[src] + SQUARE_NAMES[dst] + PROMO_LETTERS[int(POLICY_PROMO[policy_index])]
