"""Does an engine's judgement of the moves separate the top chess bands? Mean win-% loss per move
by rank band, from the Lichess server's own ``%eval`` annotations of the data.

    python bench/chess_eval_loss_by_band.py

Every Kibitz s-score net and head trained on these games leaves 2400-2600 level with 2200-2400 on
held-out games (docs/train.md). This asks whether the moves carry the difference at all: about
13 % of the games were analysed on Lichess (Stockfish, deep), and their ``%eval`` after each move
gives each move's loss in win probability, with Lichess's own conversion
``win% = 50 + 50 · (2 / (1 + exp(−0.00368208 · cp)) − 1)`` (mates clipped to ±1000 cp; the
position before the first move counts as +20 cp for White). An instance (one player's moves in
one game) scores its mean loss; only games evaluated after every move count. Both held-out
sets of ``bench/sscore_held_out.py``'s data are read (testing/ and candidating/, all games: no
net is trained here). Analysed games are those a player asked Lichess to analyse, a selection that
differs by band (2400-2600 has 3–4 times the share of the others), so the figures describe
those games, not the whole band.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sscore_held_out import read_split

from pipeline.sscore_batches import RANK_GROUPS
from pipeline.sscore_eval import adjacent_gap_z, group_means, group_sems

START_CP = 20  # the initial position, White's view
MATE_CLIP_CP = 1000


def win_percent(cp: np.ndarray) -> np.ndarray:
    """Lichess's win probability (%) of White for White's centipawns."""
    cp = np.clip(cp, -MATE_CLIP_CP, MATE_CLIP_CP)
    return 50.0 + 50.0 * (2.0 / (1.0 + np.exp(-0.00368208 * cp)) - 1.0)


def instance_losses(games: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(mean win-% loss per move, rank-group index) of both players of every fully evaluated
    game; one vectorised pass over all moves."""
    evals = games["evals_cp"].combine_chunks()
    counts = np.diff(evals.offsets.to_numpy())
    flat = evals.values
    game_of_move = np.repeat(np.arange(len(counts)), counts)
    missing = np.bincount(game_of_move, weights=np.asarray(flat.is_null()), minlength=len(counts))
    full = (counts >= 2) & (missing == 0)
    cp = flat.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)
    ply = np.arange(len(cp)) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
    after = win_percent(cp)
    before = np.where(ply == 0, win_percent(np.array(START_CP)), np.r_[0.0, after[:-1]])
    white_moves = ply % 2 == 0
    loss = np.maximum(np.where(white_moves, before - after, after - before), 0.0)  # mover's view
    keep = full[game_of_move]
    instance = 2 * game_of_move + (~white_moves)  # (game, colour)
    sums = np.bincount(instance[keep], weights=loss[keep], minlength=2 * len(counts))
    moves = np.bincount(instance[keep], minlength=2 * len(counts))
    groups = {g: i for i, g in enumerate(RANK_GROUPS["chess"])}
    colour_group = np.stack(
        [
            [groups.get(g, -1) for g in games[f"{c}_rank_group"].to_pylist()]
            for c in ("white", "black")
        ],
        axis=1,
    ).reshape(-1)  # (2 × games,) in instance order
    used = moves > 0
    return sums[used] / moves[used], colour_group[used]


def main() -> None:
    labels = tuple(RANK_GROUPS["chess"])
    for split in ("testing", "candidating"):
        games = read_split("chess", split)
        losses, groups = instance_losses(games)
        means, counts = group_means(losses, groups, len(labels))
        sems = group_sems(losses, groups, len(labels))
        gaps = ["", *(f"{z:+.1f}" for z in -adjacent_gap_z(means, sems))]
        print(f"\n{split}/: {games.num_rows} games, {int(counts.sum())} fully evaluated instances")
        print(
            "| band | instances | mean win-% loss per move | s.e. | lower than the band below, s.e. |"
        )
        print("|---|---|---|---|---|")
        for i, label in enumerate(labels):
            print(f"| {label} | {counts[i]} | {means[i]:.3f} | {sems[i]:.3f} | {gaps[i]} |")


if __name__ == "__main__":
    main()
