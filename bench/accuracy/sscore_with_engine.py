"""Would the chess levels s-score rise at the top if it also read an engine's view of the move?

    python bench/accuracy/sscore_with_engine.py --cache kibitz-out/maia-levels     # ~16 min on 2 cores

Every Kibitz chess s-score leaves 2400-2600 level with 2200-2400 on the pooled held-out sets,
while Stockfish's loss per move, at the chess preset's 1,500 nodes, puts the top band 2.0
standard errors below (``python bench/accuracy/chess_eval_loss_by_band.py --stockfish 1500``). This
measures the simplest s-score that reads both: per move ``s(move) − λ · loss(move)``, where s is
``kibitz-sscore-chess-levels`` and loss is ``kibitz extract``'s ``v_before − v_after`` from
Stockfish. One number, λ, is fitted on the testing files' *validation* split (12 random moves per
instance, never trained on by the head): the least-squares fit of the rank-group index on the
instances' mean s and mean loss, λ = −(loss coefficient) / (s coefficient). Then each held-out
set of ``bench/accuracy/sscore_held_out.py`` (all moves) gets the gap of every band over the one below, in
standard errors of the difference, for s alone, −loss alone and the combination, and both sets
pooled. It is a measurement for the design of an engine-aware s-score, not a shipped model.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from chess_eval_loss_by_band import game_values
from sscore_held_out import held_out_scores, held_out_sets, read_split

from pipeline.core.data_split import VALIDATION, assign_splits
from pipeline.nets.loading import load_net
from pipeline.train.sscore_batches import RANK_GROUPS, PositionPool
from pipeline.train.sscore_eval import adjacent_gap_z, group_means, group_sems, instance_means

MODEL = "kibitz-sscore-chess-levels"


def row_losses(pool: PositionPool, games: pa.Table, values: list[np.ndarray]) -> np.ndarray:
    """(N,) loss of each pool row's played move, ``v[ply] + v[ply + 1]`` of its game's values
    (``values`` in the order of ``games``)."""
    game_at = pc.index_in(pa.array(pool.instance_game_id), games["game_id"]).to_numpy()
    offsets = np.r_[0, np.cumsum([len(v) for v in values])]
    flat = np.concatenate(values).astype(np.float64)
    at = offsets[game_at[pool.position_instance]] + pool.ply.astype(np.int64)
    return flat[at] + flat[at + 1]


def fit_lambda(scores: np.ndarray, losses: np.ndarray, groups: np.ndarray) -> float:
    """λ of ``s − λ · loss`` from the least-squares fit of the group index on (1, s, loss)."""
    ok = groups >= 0
    x = np.stack([np.ones(ok.sum()), scores[ok], losses[ok]], axis=1)
    coef, *_ = np.linalg.lstsq(x, groups[ok].astype(np.float64), rcond=None)
    return float(-coef[2] / coef[1])


def gaps(scores: np.ndarray, groups: np.ndarray) -> str:
    """Each band's gap over the one below, in standard errors, as table cells."""
    n = len(RANK_GROUPS["chess"])
    z = adjacent_gap_z(group_means(scores, groups, n)[0], group_sems(scores, groups, n))
    return " | ".join(f"{g:+.1f}" for g in z)


def scored(
    net, games: pa.Table, positions: int | None, cache: Path | None, name: str,
    nodes: int, engines: int,
):  # fmt: skip
    """(instance mean s, instance mean loss, groups) of ``games``' pool."""
    scores, pool = held_out_scores(net, games, "chess", positions, cache, name)
    values = game_values(games, nodes, engines)
    losses = instance_means(pool, row_losses(pool, games, values))
    return scores, losses, pool.instance_group.astype(np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="folder for the levels' policies")
    parser.add_argument("--nodes", type=int, default=1500, help="Stockfish nodes a position")
    parser.add_argument("--engines", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    net = load_net(MODEL)

    testing = read_split("chess", "testing")
    validation = testing.filter(
        pa.array(assign_splits(testing["game_id"].to_pylist()) == VALIDATION)
    )
    s, loss, groups = scored(
        net, validation, 12, args.cache, "validation-12", args.nodes, args.engines
    )
    lam = fit_lambda(s, loss, groups)
    print(f"λ = {lam:.3f} (fitted on {validation.num_rows} validation games, {len(s)} instances)")

    header = " | ".join(label.split("-")[0] for label in RANK_GROUPS["chess"][1:])
    print(f"\n| set | score | {header} |\n|---|---|{'---|' * (len(RANK_GROUPS['chess']) - 1)}")
    sets = {"validation (fit)": (s, loss, groups)}
    for i, (name, games) in enumerate(held_out_sets("chess").items()):
        sets[name] = scored(net, games, None, args.cache, f"held-out-{i}", args.nodes, args.engines)
    held = [v for k, v in sets.items() if k != "validation (fit)"]
    sets["held-out, pooled"] = tuple(np.concatenate(parts) for parts in zip(*held, strict=True))
    for name, (s, loss, groups) in sets.items():
        print(f"| {name} | s | {gaps(s, groups)} |")
        print(f"| | −loss | {gaps(-loss, groups)} |")
        print(f"| | s − λ·loss | {gaps(s - lam * loss, groups)} |")


if __name__ == "__main__":
    main()
