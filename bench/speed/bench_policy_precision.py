"""What ``kibitz train policy go --precision bf16`` buys on this machine: the shipped
``kibitz-go-policy`` (KataGo g170's trunk with the rank head) on real Fox positions, float32
against bfloat16 autocast (``pipeline/train/device.py``), in the same run::

    python bench/speed/bench_policy_precision.py [--batch-size 128] [--repeats 5] [--threads 2]

Prints, as medians over ``--repeats`` timings after a warm-up:
- a training step (forward at the movers' ranks, loss, backward, AdamW) in positions/s;
- a distillation teacher's forward (no gradient) over 1, 2 and 8 board symmetries;
- what a ``--teacher-symmetries N`` step then runs, 1 / (1 / step + 1 / teacher);
- how far bfloat16 moves the numbers: the step's loss (relative), the teacher's distribution at
  the mover's rank (mean KL from float32's, nats) and its top move (share that agree).

bfloat16 runs natively on GPUs and on CPUs with AVX-512 BF16 or AMX (this project's AMD EPYC
has ``avx512_bf16``); elsewhere oneDNN emulates it and it is slower than float32.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from bench_chess_nets import median_seconds
from train_real_games import go_games

from pipeline.go_game import spec as go_spec
from pipeline.nets.legal_softmax import legal_mask, masked_log_softmax
from pipeline.nets.loading import load_net
from pipeline.train.device import step_autocast
from pipeline.train.go_policy import policy_loss, position_ranks
from pipeline.train.sscore_batches import build_pool

POLICY = "kibitz-go-policy"
SYMMETRIES = (1, 2, 8)
CPU = torch.device("cpu")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pool = build_pool(go_games(4), "go", positions_per_instance=8, seed=0)
    ranks = position_ranks(pool)
    rows = np.flatnonzero(ranks >= 0)[: args.batch_size]
    print(f"{POLICY}, batch {len(rows)} of {len(pool)} real Fox positions, {args.threads} threads")

    student = load_net(POLICY).train()
    teacher = load_net(POLICY).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(student.parameters(), lr=0.0)  # lr 0: every timing the same net
    spatial = torch.from_numpy(pool.planes[rows]).float()
    global_ = torch.from_numpy(pool.global_[rows])
    at = torch.from_numpy(ranks[rows])
    mask = legal_mask(pool.legal_offsets, pool.legal_index, rows, go_spec.POLICY_SIZE)

    def step(precision: str) -> float:
        with step_autocast(CPU, precision):
            loss, _ = policy_loss(student, pool, rows, ranks[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    @torch.inference_mode()
    def teach(precision: str, n: int) -> torch.Tensor:
        teacher.config = replace(teacher.config, symmetries=n)
        with step_autocast(CPU, precision):
            logits = teacher.mover_logits(teacher.features(spatial, global_), at).float()
        return masked_log_softmax(logits, mask)

    rates: dict[tuple[str, str], float] = {}
    for precision in ("fp32", "bf16"):
        rates["step", precision] = len(rows) / median_seconds(
            partial(step, precision), args.repeats
        )
        for n in SYMMETRIES:
            seconds = median_seconds(partial(teach, precision, n), args.repeats)
            rates[f"teacher {n}", precision] = len(rows) / seconds
    print("\n| positions/s | fp32 | bf16 | bf16 / fp32 |\n|---|---|---|---|")
    for what in ["step", *(f"teacher {n}" for n in SYMMETRIES)]:
        a, b = rates[what, "fp32"], rates[what, "bf16"]
        print(f"| {what} | {a:,.1f} | {b:,.1f} | {b / a:.2f} |")
    for n in SYMMETRIES[1:]:
        a, b = (1 / (1 / rates["step", p] + 1 / rates[f"teacher {n}", p]) for p in ("fp32", "bf16"))
        print(f"| step with a {n}-symmetry teacher | {a:,.1f} | {b:,.1f} | {b / a:.2f} |")

    student.eval()
    with torch.no_grad():
        fp32, _ = policy_loss(student, pool, rows, ranks[rows])
        with step_autocast(CPU, "bf16"):
            bf16, _ = policy_loss(student, pool, rows, ranks[rows])
    print(f"\nloss: fp32 {fp32.item():.5f}, bf16 {bf16.item():.5f}, "
          f"relative change {abs(bf16.item() / fp32.item() - 1):.2e}")  # fmt: skip
    for n in SYMMETRIES:
        p, q = teach("fp32", n), teach("bf16", n)
        legal = mask.bool()
        kl = (p.exp() * (p - q)).where(legal, 0).sum(dim=1).mean().item()
        top = (p.argmax(dim=1) == q.argmax(dim=1)).float().mean().item()
        print(f"teacher over {n} symmetries: KL(fp32 || bf16) {kl:.2e} nats, "
              f"top move agrees {top:.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
