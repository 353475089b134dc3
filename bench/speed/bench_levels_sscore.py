"""What the levels s-score costs in chess extraction: its head on the imitation nets' outputs
against running ``kibitz-sscore-chess-levels`` as a strength net (a second pass of its nets).

    python bench/speed/bench_levels_sscore.py [--games-per-band 1] [--repeats 3]

On the first games of every band of the Lichess candidating split, times the net step
(``ChessNetStep``, the work of the extraction's net actor) of three configs, medians of
``--repeats`` rounds (the configs take turns) after a warm-up:

- ``imitation``: the preset's nine Maia-1 nets, no strength net;
- ``head``: the same plus ``kibitz-sscore-chess-levels``, whose levels are those nets, so only
  its head runs, on their statistics (``pipeline/extract/levels_head.py``);
- ``strength net``: Maia-1100 alone plus ``kibitz-sscore-chess-levels``, whose levels are then
  not all extracted, so it runs its nine nets itself as any strength net; its job's own
  seconds (the bank's per-job timer) added to ``imitation`` are what the preset would cost with
  the model run as a strength net (the bank runs its jobs one after another).

Prints seconds and positions/s, the ratio of the baseline to ``head``, and the largest
difference between the two paths' s-scores (the same numbers, float32).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from pipeline.core import settings
from pipeline.extract.chess import ChessNetStep, ChessWork, encode_chess
from pipeline.extract.config import config_from_dict
from pipeline.ingest.pgn import plan_chunks, read_chunk
from pipeline.nets.sscore_levels import MAIA_LEVELS
from pipeline.train.sscore_batches import CHESS_RANK_GROUPS

MODEL = "kibitz-sscore-chess-levels"


def first_games(per_band: int) -> pa.Table:
    split = settings.data_dir() / "chess" / "lichess-2024-02-blitz" / "candidating"
    files = [split / f"{band}.pgn.zst" for band in CHESS_RANK_GROUPS]
    chunks = [plan_chunks([f], games_per_chunk=per_band)[0] for f in files]
    return pa.concat_tables([read_chunk(c).games for c in chunks])


def config(imitation: list[str], strength: list[str]):
    return config_from_dict({
        "game": "chess",
        "imitation_nets": imitation,
        "strength_nets": strength,
        "expected_loss": {"net": imitation[0]},
    })  # fmt: skip


def timed(
    steps: dict[str, ChessNetStep], work: ChessWork, repeats: int
) -> tuple[dict[str, float], dict[str, float], dict[str, dict]]:
    """Per step: median seconds of ``step(work)`` and of the strength net job in it, over
    ``repeats`` rounds after one warm-up each, and the s-scores. The steps take turns within
    each round, so a drift of the machine's speed hits them alike."""
    sscore = {name: step(work).sscore for name, step in steps.items()}
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    job: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            before = step.bank.timer.per_net_s.get(MODEL, 0.0)
            t0 = time.perf_counter()
            step(work)
            seconds[name].append(time.perf_counter() - t0)
            job[name].append(step.bank.timer.per_net_s.get(MODEL, 0.0) - before)
    median = statistics.median
    return (
        {k: median(v) for k, v in seconds.items()},
        {k: median(v) for k, v in job.items()},
        sscore,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games-per-band", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = encode_chess(first_games(args.games_per_band))
    n = len(work.positions)
    steps = {
        "imitation": ChessNetStep(config(list(MAIA_LEVELS), [])),
        "head": ChessNetStep(config(list(MAIA_LEVELS), [MODEL])),
        "strength net": ChessNetStep(config(["maia-1100"], [MODEL])),
    }
    assert list(steps["head"].levels) == [MODEL] and not steps["strength net"].levels
    seconds, job, sscore = timed(steps, work, args.repeats)
    baseline = seconds["imitation"] + job["strength net"]
    print(f"{n} positions ({args.games_per_band} games x {len(CHESS_RANK_GROUPS)} bands), "
          f"medians of {args.repeats}")  # fmt: skip
    rows = [
        ("imitation (9 Maia-1 nets)", seconds["imitation"]),
        ("imitation + levels head", seconds["head"]),
        ("levels as a strength net (its job)", job["strength net"]),
        ("imitation + strength net (baseline)", baseline),
    ]
    for name, s in rows:
        print(f"  {name:38s} {s:7.2f} s  {n / s:8.1f} positions/s")
    print(f"levels s-score's extra time: head {seconds['head'] - seconds['imitation']:+.2f} s, "
          f"strength net {job['strength net']:.2f} s")  # fmt: skip
    print(f"preset with the levels s-score: baseline / head = {baseline / seconds['head']:.2f}x")
    diff = np.abs(sscore["head"][MODEL] - sscore["strength net"][MODEL]).max()
    print(f"largest |s-score difference| between the paths: {diff:.2e}")


if __name__ == "__main__":
    main()
