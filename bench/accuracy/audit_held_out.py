"""`kibitz audit` on held-out players of a shipped meta-model: the false-positive rate and the
share of planted cases caught.

The audit flags a player when the conformal p-value of the gap between their estimated and
rated strength is ≤ α. On players the models never saw (the evaluation split of the shipped
aggregates) the flagged share should stay near α; players of the strongest group relabelled
with the weakest group's lowest rating should be caught::

    python bench/accuracy/audit_held_out.py chess
    python bench/accuracy/audit_held_out.py go --alphas 0.01,0.05
    python bench/accuracy/audit_held_out.py go --player-set

``--player-set`` audits the model's player-specific set instead (``--player-aggregates``: on
Fox, ``by-player`` players with about 20 games each, none of them fitted on), where the
audit's estimate rests on a player's many games, as it would on a real platform.

Where the model has a player calibration (intervals calibrated on one player's own n games),
each half of the players is judged by the other half's calibration only
(:func:`pipeline.meta.audit.audit_held_out_players`), so no player is audited by widths that saw
them. Prints, per α, the held-out players and their flagged share (also by games per player:
intervals calibrated on samples of n different players' games flag a player's own consistent
games too often), then the planted players caught.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.meta.audit import audit_held_out_players
from pipeline.meta.registered import resolve_meta_models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", choices=("chess", "go"))
    parser.add_argument("--model", help="registry name or folder (default: kibitz-meta-GAME)")
    parser.add_argument("--alphas", default="0.01,0.05,0.2")
    parser.add_argument(
        "--player-set", action="store_true", help="audit the player-specific set's players"
    )
    args = parser.parse_args()
    models = resolve_meta_models(args.model, args.game)
    instances = models.player_instances() if args.player_set else models.evaluation_instances()
    alphas = [float(a) for a in args.alphas.split(",")]
    for alpha in alphas:
        table = audit_held_out_players(models, instances, alpha=alpha)
        flagged = table["flagged"].to_numpy(zero_copy_only=False)
        games = table["games"].to_numpy()
        print(
            f"alpha {alpha:g}: {table.num_rows} held-out players, flagged {100 * flagged.mean():.1f} %"
        )
        for low, high in ((1, 4), (5, 14), (15, None)):
            mine = (games >= low) & (games <= (high or games.max()))
            if mine.any():
                span = f"{low}-{high}" if high else f">= {low}"
                print(
                    f"    {span} games: {int(mine.sum())} players, flagged {100 * flagged[mine].mean():.1f} %"
                )
    scale = models.strength().scale
    weakest, strongest = models.group_names[0], models.group_names[-1]
    low = float(pc.min(instances.filter(pc.equal(instances["rank_group"], weakest))[scale]).as_py())
    top = pc.equal(instances["rank_group"], strongest)
    players = pa.array(sorted(set(instances.filter(top)["player"].to_pylist())))
    values = pc.if_else(top, pa.scalar(low), pc.cast(instances[scale], pa.float64()))
    planted = instances.set_column(instances.schema.get_field_index(scale), scale, values)
    for alpha in alphas:
        table = audit_held_out_players(models, planted, alpha=alpha)
        mine = table.filter(pc.is_in(table["player"], players))
        caught = float(np.mean(mine["flagged"].to_numpy(zero_copy_only=False)))
        print(f"alpha {alpha:g}: {mine.num_rows} players of {strongest} relabelled {low:g}"
              f" ({weakest}'s lowest), caught {100 * caught:.1f} %")  # fmt: skip


if __name__ == "__main__":
    main()
