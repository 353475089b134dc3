"""Does an engine's judgement of the moves separate the top chess bands? Mean win-% loss per move
by rank band, from the Lichess server's own ``%eval`` annotations of the data.

    python bench/accuracy/chess_eval_loss_by_band.py

Every Kibitz s-score net and head trained on these games leaves 2400-2600 level with 2200-2400 on
held-out games (docs/research/log-nets.md). This asks whether the moves carry the difference at all: about
13 % of the games were analysed on Lichess (Stockfish, deep), and their ``%eval`` after each move
gives each move's loss in win probability, with Lichess's own conversion
``win% = 50 + 50 · (2 / (1 + exp(−0.00368208 · cp)) − 1)`` (mates clipped to ±1000 cp; the
position before the first move counts as +20 cp for White). An instance (one player's moves in
one game) scores its mean loss; only games evaluated after every move count. Both held-out
sets of ``bench/accuracy/sscore_held_out.py``'s data are read (testing/ and candidating/, all games: no
net is trained here). Analysed games are those a player asked Lichess to analyse, a selection that
differs by band (2400-2600 has 3–4 times the share of the others), so the figures describe
those games, not the whole band.

``--stockfish NODES`` asks the question of every game instead: it searches every position of the
held-out sets of ``bench/accuracy/sscore_held_out.py`` (the testing files' evaluation split and the whole
``candidating/`` split, 144,254 positions: about 10 min on two cores at 1,500 nodes) with Kibitz's
own evaluator (``pipeline/nets/stockfish.py``, one engine per core) and gives each instance the
mean of the ``loss`` column ``kibitz extract`` writes, ``v_before − v_after`` in logits of the
mover's expected score. That is the whole band, at the depth the chess preset searches, and it
says how far apart the top bands' moves are in a set of this size for an engine: the ceiling of
what any s-score can show there.
"""

from __future__ import annotations

import argparse
import os
from multiprocessing import Pool

import chess
import numpy as np
import pyarrow as pa
from sscore_held_out import held_out_sets, read_split

from pipeline.nets.stockfish import StockfishEvaluator, StockfishSettings, win_rate_to_v
from pipeline.train.sscore_batches import RANK_GROUPS
from pipeline.train.sscore_eval import adjacent_gap_z, group_means, group_sems

START_CP = 20  # the initial position, White's view
MATE_CLIP_CP = 1000


def win_percent(cp: np.ndarray) -> np.ndarray:
    """Lichess's win probability (%) of White for White's centipawns."""
    cp = np.clip(cp, -MATE_CLIP_CP, MATE_CLIP_CP)
    return 50.0 + 50.0 * (2.0 / (1.0 + np.exp(-0.00368208 * cp)) - 1.0)


def instance_mean_losses(
    games: pa.Table, loss: np.ndarray, keep: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(mean loss per move, rank-group index) of every (game, colour) instance with a kept move.
    ``loss`` and ``keep`` are flat over ``counts[g]`` moves of each game g in order, from the
    first; one vectorised pass."""
    game_of_move = np.repeat(np.arange(len(counts)), counts)
    ply = np.arange(len(loss)) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
    instance = 2 * game_of_move + ply % 2  # (game, colour): White's moves are the even plies
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


def annotated_losses(games: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(win-% loss of every annotated move, whether its game was evaluated after every move,
    annotated moves per game) from the ``%eval`` annotations (empty for games not analysed)."""
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
    return loss, full[game_of_move], counts


_ENGINE: StockfishEvaluator | None = None  # one per worker process


def _start_engine(nodes: int) -> None:
    global _ENGINE
    _ENGINE = StockfishEvaluator(StockfishSettings(nodes=nodes))


def _game_values(moves: list[str]) -> np.ndarray:
    """v of the side to move at every position of one game, the final one included."""
    board = chess.Board()
    fens = [board.fen()]
    for move in moves:
        board.push_uci(move)
        fens.append(board.fen())
    return win_rate_to_v(_ENGINE.evaluate(fens))


def game_values(games: pa.Table, nodes: int, engines: int) -> list[np.ndarray]:
    """Per game, (plies + 1,) v of the side to move at every position, from Stockfish at
    ``nodes`` nodes; ``engines`` processes search in parallel."""
    with Pool(engines, initializer=_start_engine, initargs=(nodes,)) as pool:
        return pool.map(_game_values, games["moves"].to_pylist(), chunksize=4)


def engine_losses(
    games: pa.Table, nodes: int, engines: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(``kibitz extract``'s loss ``v_before − v_after`` of every move, all True, moves per game)
    from ``game_values``. The mover's ``v_after`` is minus the next position's v, so a move's
    loss is ``v[k] + v[k + 1]``."""
    values = game_values(games, nodes, engines)
    loss = np.concatenate([v[:-1] + v[1:] for v in values]).astype(np.float64)
    counts = np.array([len(v) - 1 for v in values])
    return loss, np.ones(len(loss), dtype=bool), counts


def print_table(title: str, losses: np.ndarray, groups: np.ndarray, unit: str) -> None:
    """One set's per-band means, standard errors and gaps to the band below."""
    labels = tuple(RANK_GROUPS["chess"])
    means, counts = group_means(losses, groups, len(labels))
    sems = group_sems(losses, groups, len(labels))
    gaps = ["", *(f"{z:+.1f}" for z in -adjacent_gap_z(means, sems))]
    print(f"\n{title}: {int(counts.sum())} instances")
    print(f"| band | instances | mean {unit} per move | s.e. | lower than the band below, s.e. |")
    print("|---|---|---|---|---|")
    for i, label in enumerate(labels):
        print(f"| {label} | {counts[i]} | {means[i]:.3f} | {sems[i]:.3f} | {gaps[i]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--stockfish",
        type=int,
        metavar="NODES",
        default=None,
        help="search every position of the held-out sets at NODES nodes",
    )
    parser.add_argument("--engines", type=int, default=os.cpu_count() or 1,
                        help="Stockfish processes (default: one per core)")  # fmt: skip
    args = parser.parse_args()
    if args.stockfish is None:
        for split in ("testing", "candidating"):
            games = read_split("chess", split)
            losses, groups = instance_mean_losses(games, *annotated_losses(games))
            print_table(
                f"{split}/, {games.num_rows} games, fully evaluated", losses, groups, "win-% loss"
            )
        return
    pooled_losses, pooled_groups = [], []
    for name, games in held_out_sets("chess").items():
        losses, groups = instance_mean_losses(
            games, *engine_losses(games, args.stockfish, args.engines)
        )
        print_table(f"{name}, Stockfish {args.stockfish} nodes", losses, groups, "loss")
        pooled_losses.append(losses)
        pooled_groups.append(groups)
    print_table("both pooled", np.concatenate(pooled_losses), np.concatenate(pooled_groups), "loss")


if __name__ == "__main__":
    main()
