"""What extraction keeps of a policy, computed where the net ran: the played move's prior and
log-prior, whether it was the net's top move, the net's most likely moves and, for a levels
s-score's head, the policy's entropy and the played move's log p and entropy under the whole
(unmasked) policy.

A policy output is (B, P) logits over the game's whole move space (Go 362, chess 1858) or
(B, C, P) (KataGo's policy channels, a rank-conditioned policy's ranks). Features need a few
numbers per position and net, so the net bank reduces each batch with :func:`policy_stats`
before anything leaves the device: on a GPU only (B, C) and (B, C, k) arrays cross PCIe
instead of 1.4 kB (one Go policy) to 27.5 kB (the 19 ranks of ``kibitz-go-policy``) per
position, and no softmax runs in numpy. On a CPU the same torch code runs, so both devices
compute the same thing.

The arithmetic is a log-softmax over the legal moves in float64 (as
``pipeline.nets.katago_outputs.policy_log_probabilities``): a human move the net finds absurd keeps an
exact log-prior instead of ``log(0)``. Ties for the top move go to the lowest move index, and
the likely moves are ordered by prior, ties by move index (a stable sort), so the selection is
deterministic on every device.

Usage (what ``NetBank`` does with a job's ``stats``)::

    stats = policy_stats(logits, PolicyStats(legal="legal", played="played_index", top_k=5), inputs)
    stats["prior"]            # (B, C) float32 prior of the played move
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class PolicyStats:
    """The reduction a job asks for one policy output.

    ``legal`` names an input that is either a (B, P) bool mask or a ``net_bank.Gather`` of
    each position's legal entries in a CSR order (chess: ``legal_move_entries``); with a
    Gather, ``likely_index`` gives a move's place in its position's legal list instead of its
    policy index. ``channels`` picks entries of a (B, C, P) output's channel axis (empty: the
    output is (B, P)).
    """

    legal: str  # input key: (B, P) bool mask or a Gather of legal entries
    played: str  # input key: (B,) int64 policy index of the played move
    channels: tuple[int, ...] = ()
    top_k: int = 0  # with k > 0 also the k most likely moves of each channel
    # also the played move's log p and the entropy under the softmax over all P entries, legal
    # or not: the inputs of a levels s-score head (pipeline.extract.levels_head) trained on
    # the nets' whole policies
    whole: bool = False
    # also the entropy of the softmax over the legal moves: with ``logprior``, the inputs of a
    # levels head trained on legal-move policies
    entropy: bool = False


def _legal_mask(legal: Any, batch: int, size: int, device: torch.device) -> torch.Tensor:
    """(B, P) bool mask from a mask tensor or a Gather's (rows, cols)."""
    if isinstance(legal, torch.Tensor):
        return legal.to(device=device, dtype=torch.bool)
    mask = torch.zeros((batch, size), dtype=torch.bool, device=device)
    mask[legal.rows, legal.cols] = True
    return mask


def _legal_places(legal: Any, batch: int, size: int, device: torch.device) -> torch.Tensor:
    """(B, P) int64 place of each legal move in its position's list (−1 elsewhere)."""
    rows = legal.rows
    first = torch.searchsorted(rows, rows)  # (L,) CSR order: the first entry of each row
    places = torch.full((batch, size), -1, dtype=torch.int64, device=device)
    places[rows, legal.cols] = torch.arange(len(rows), device=device) - first
    return places


def policy_stats(
    logits: torch.Tensor, request: PolicyStats, inputs: dict[str, Any]
) -> dict[str, torch.Tensor]:
    """Reduce (B, P) or (B, C', P) ``logits`` to the few arrays features need.

    Returns ``prior`` (B, C) float32, ``logprior`` (B, C) float64, ``top1`` (B, C) bool and,
    with ``top_k``, ``likely_index`` (B, C, k) int64 and ``likely_prior`` (B, C, k) float32
    (k is capped at P); with ``entropy``, ``entropy`` (B, C) float32 of the legal moves'
    softmax; with ``whole``, ``whole_logprior`` and ``whole_entropy`` (B, C) float32 of the
    unmasked softmax. Positions with no legal move are an error upstream (the
    encoders give every position at least one).
    """
    if request.channels:
        logits = logits[:, list(request.channels)]  # (B, C, P)
    elif logits.ndim == 2:
        logits = logits[:, None]  # (B, 1, P)
    batch, _, size = logits.shape
    device = logits.device
    legal = inputs[request.legal]
    mask = _legal_mask(legal, batch, size, device)[:, None]  # (B, 1, P)
    masked = torch.where(mask, logits.double(), float("-inf"))  # (B, C, P)
    logp = torch.log_softmax(masked, dim=-1)  # (B, C, P) −inf on illegal moves
    played = inputs[request.played].to(device=device, dtype=torch.int64)  # (B,)
    index = played[:, None, None].expand(batch, logp.shape[1], 1)  # (B, C, 1)
    played_logp = logp.gather(-1, index)[..., 0]  # (B, C)
    out = {
        "prior": played_logp.exp().float(),
        "logprior": played_logp,
        "top1": logp.argmax(dim=-1) == played[:, None],
    }
    if request.top_k:
        k = min(request.top_k, size)
        order = torch.sort(logp, dim=-1, descending=True, stable=True).indices[..., :k]
        out["likely_prior"] = logp.gather(-1, order).exp().float()  # (B, C, k), 0 if illegal
        if not isinstance(legal, torch.Tensor):
            places = _legal_places(legal, batch, size, device)  # (B, P)
            order = places[:, None].expand(-1, order.shape[1], -1).gather(-1, order)
        out["likely_index"] = order
    if request.entropy:  # illegal moves have p = 0 and add nothing
        terms = torch.where(mask, logp.exp() * logp, 0.0)  # (B, C, P)
        out["entropy"] = -terms.sum(dim=-1).float()
    if request.whole:  # float32, as the levels head's training features (level_policies)
        whole = torch.log_softmax(logits.float(), dim=-1)  # (B, C, P)
        out["whole_logprior"] = whole.gather(-1, index)[..., 0]
        out["whole_entropy"] = -(whole.exp() * whole).sum(dim=-1)
    return out
