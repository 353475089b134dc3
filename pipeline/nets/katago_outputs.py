"""KataGo's output post-processing (contract C8): raw net outputs -> probabilities and points.

``postprocess(raw, legal, black_to_move, model_meta)`` does, vectorised over a batch, what
KataGo's ``NNEvaluator`` does to one position (``cpp/neuralnet/nneval.cpp``):

- policy: logits of illegal points set to -inf, softmax over the legal moves only (pass included;
  ``policy_log_probabilities`` gives exact log-probabilities for log-likelihoods);
  for v12+ nets the optimistic channel is mixed in by ``policy_optimism`` (KataGo's default 0);
- win / loss / no-result = softmax of the value logits (no-result forced to 0 where the rules make
  it impossible: ``no_result_possible=False``);
- scoreMean = scoreMeanMultiplier * out0, stdev = scoreStdevMultiplier * softplus(out1),
  lead = leadMultiplier * out2, varTime = varianceTimeMultiplier * softplus(out3): the multipliers
  are 20, 20, 20, 40 before v13 and read from the model file from v13 (``KataGoModelMeta``);
- scoreMean, scoreMean² + stdev² and lead are multiplied by (1 - noResult);
- shortterm errors (v9+) as KataGo computes them for each version;
- ownership = tanh(out).

Perspective: the net speaks for the side to move. ``GoEval`` gives White's view of everything
(win/loss swapped and scores negated when Black is to move, exactly KataGo's ``white*`` fields)
AND the mover's view of the values that features need (``mover_win``, ``mover_lead``,
``mover_score_mean``), so no caller has to remember which way to flip.

The arithmetic runs in float64 like KataGo's (it post-processes in double).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pipeline.go_game.spec import POLICY_SIZE
from pipeline.nets.katago_model_file import KataGoModelMeta


class NoLegalMoveError(ValueError):
    """A position's legal-move mask has no legal move (pass is always legal in Go)."""


@dataclass(frozen=True)
class GoEval:
    """Post-processed outputs for N positions (float32 arrays unless noted)."""

    policy: np.ndarray  # (N, 362) probabilities over legal moves, 0 on illegal ones
    white_win: np.ndarray  # (N,) float64
    white_loss: np.ndarray  # (N,) float64
    no_result: np.ndarray  # (N,) float64
    white_lead: np.ndarray  # (N,) float64 points
    white_score_mean: np.ndarray  # (N,) float64 points
    white_score_mean_sq: np.ndarray  # (N,) float64, KataGo's whiteScoreSelfplaySq
    white_score_stdev: np.ndarray  # (N,) float64, sqrt(meanSq - mean^2)
    var_time_left: np.ndarray  # (N,) float64, NaN before v9
    shortterm_winloss_error: np.ndarray  # (N,) float64, NaN before v9
    shortterm_score_error: np.ndarray  # (N,) float64, NaN before v9
    ownership: np.ndarray  # (N, 361) White's view, +1 = White owns
    mover_win: np.ndarray  # (N,) float64 side to move's win probability
    mover_lead: np.ndarray  # (N,) float64 side to move's lead in points
    mover_score_mean: np.ndarray  # (N,) float64 side to move's score mean


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def policy_log_probabilities(
    policy_logits: np.ndarray, legal: np.ndarray, *, policy_optimism: float = 0.0
) -> np.ndarray:
    """(N, P, 362) or (N, 362) logits + (N, 362) legal mask -> (N, 362) float64 log-softmax.

    Illegal moves get -inf. Log-probabilities are exact even where float32 probabilities would
    underflow to 0 (a human move the net finds absurd), which mean log-likelihoods need.
    """
    logits = np.asarray(policy_logits, dtype=np.float64)
    if logits.ndim == 3:
        if logits.shape[1] >= 2:  # v12+: optimistic channel mixed in as KataGo does
            logits = logits[:, 0] + (logits[:, 1] - logits[:, 0]) * policy_optimism
        else:
            logits = logits[:, 0]  # (N, 362)
    legal = np.asarray(legal, dtype=bool)
    if logits.shape != legal.shape or logits.shape[1:] != (POLICY_SIZE,):
        raise ValueError(
            f"policy logits {logits.shape!r} and legal mask {legal.shape!r} must be (N, 362)"
        )
    no_legal = ~legal.any(axis=1)
    if no_legal.any():
        rows = np.flatnonzero(no_legal)[:5].tolist()
        raise NoLegalMoveError(f"positions {rows!r} have no legal move in their legal mask")
    masked = np.where(legal, logits, -np.inf)  # (N, 362)
    masked -= masked.max(axis=1, keepdims=True)
    return masked - np.log(np.exp(masked).sum(axis=1, keepdims=True))


def policy_probabilities(
    policy_logits: np.ndarray, legal: np.ndarray, *, policy_optimism: float = 0.0
) -> np.ndarray:
    """(N, 362) float32 probabilities over the legal moves (0 on illegal ones)."""
    log_probs = policy_log_probabilities(policy_logits, legal, policy_optimism=policy_optimism)
    return np.exp(log_probs).astype(np.float32)


def _outcome(
    value_logits: np.ndarray, black: np.ndarray, no_result_possible: bool | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The side to move's (win, loss, no-result) probabilities, (N,) float64 each."""
    value = np.array(value_logits, dtype=np.float64)  # (N, 3) a copy
    impossible = ~np.broadcast_to(np.asarray(no_result_possible, dtype=bool), black.shape)
    value[:, 2] -= np.where(impossible, 100000.0, 0.0)
    value -= value.max(axis=1, keepdims=True)
    probs = np.exp(value)
    probs[:, 2] = np.where(impossible, 0.0, probs[:, 2])
    probs /= probs.sum(axis=1, keepdims=True)
    return probs[:, 0], probs[:, 1], probs[:, 2]


def white_lead(
    raw: Mapping[str, np.ndarray],
    black_to_move: np.ndarray,
    model_meta: KataGoModelMeta,
    *,
    no_result_possible: bool | np.ndarray = True,
) -> np.ndarray:
    """(N,) float64 White's lead in points from the ``value`` and ``misc`` outputs alone:
    :func:`postprocess`'s ``white_lead`` for extraction, which needs no policy or ownership."""
    black = np.asarray(black_to_move, dtype=bool)
    _, _, no_result = _outcome(raw["value"], black, no_result_possible)
    lead = np.asarray(raw["misc"], dtype=np.float64)[:, 2] * model_meta.post_process.lead_multiplier
    return lead * (1.0 - no_result) * np.where(black, -1.0, 1.0)


def postprocess(
    raw: Mapping[str, np.ndarray],
    legal: np.ndarray,
    black_to_move: np.ndarray,
    model_meta: KataGoModelMeta,
    *,
    policy_optimism: float = 0.0,
    no_result_possible: bool | np.ndarray = True,
) -> GoEval:
    """Turn a KataGoNet's raw outputs (``policy``, ``value``, ``misc``, ``ownership``) into GoEval.

    ``no_result_possible``: KataGo zeroes the no-result probability when the ko rule is not
    simple ko AND the scoring is area scoring; Japanese and Chinese rules (simple ko) keep it.
    """
    black = np.asarray(black_to_move, dtype=bool)  # (N,)
    sign = np.where(black, -1.0, 1.0)  # mover -> White
    post = model_meta.post_process
    win, loss, no_result = _outcome(raw["value"], black, no_result_possible)

    misc = np.asarray(raw["misc"], dtype=np.float64)  # (N, 4) v8, (N, 6) v9+
    has_result = 1.0 - no_result
    score_mean = misc[:, 0] * post.score_mean_multiplier
    score_stdev = _softplus(misc[:, 1]) * post.score_stdev_multiplier
    score_mean_sq = (score_mean * score_mean + score_stdev * score_stdev) * has_result
    score_mean = score_mean * has_result
    lead = misc[:, 2] * post.lead_multiplier * has_result

    nan = np.full(black.shape, np.nan)
    var_time, winloss_error, score_error = nan, nan, nan
    version = model_meta.version
    if version >= 9:
        var_time = _softplus(misc[:, 3]) * post.variance_time_multiplier
        if version >= 14:
            s_value = _softplus(misc[:, 4] * 0.5)
            s_score = _softplus(misc[:, 5] * 0.5)
            winloss_error = np.sqrt(s_value * s_value * post.shortterm_value_error_multiplier)
            score_error = np.sqrt(s_score * s_score * post.shortterm_score_error_multiplier)
        elif version >= 10:
            winloss_error = np.sqrt(_softplus(misc[:, 4]) * post.shortterm_value_error_multiplier)
            score_error = np.sqrt(_softplus(misc[:, 5]) * post.shortterm_score_error_multiplier)
        else:
            winloss_error = _softplus(misc[:, 4])
            score_error = _softplus(misc[:, 5]) * 10.0

    white_mean = score_mean * sign
    ownership = np.tanh(np.asarray(raw["ownership"], dtype=np.float64)) * sign[:, None]
    return GoEval(
        policy=policy_probabilities(raw["policy"], legal, policy_optimism=policy_optimism),
        white_win=np.where(black, loss, win),
        white_loss=np.where(black, win, loss),
        no_result=no_result,
        white_lead=lead * sign,
        white_score_mean=white_mean,
        white_score_mean_sq=score_mean_sq,
        white_score_stdev=np.sqrt(np.maximum(score_mean_sq - white_mean * white_mean, 0.0)),
        var_time_left=var_time,
        shortterm_winloss_error=winloss_error,
        shortterm_score_error=score_error,
        ownership=ownership.astype(np.float32),  # (N, 361)
        mover_win=win,
        mover_lead=lead,
        mover_score_mean=score_mean,
    )
