"""BF16 against FP32 on this CPU: each Go net's positions/s through Kibitz's evaluator, then the
Go extraction of real Fox games in process (encode, nets, assembly: what ``kibitz estimate``
runs, and each Ray chunk of ``kibitz extract``) at both, with how far the features move.

bfloat16 pays only where the CPU multiplies it natively, with AVX-512 BF16 (``avx512_bf16``:
AMD Zen 4 on, this project's AMD EPYC among them) or AMX (``amx_bf16``: Intel Xeon of the 4th
generation on); elsewhere oneDNN emulates it and it is slower than FP32. The second command
measures that case on the same machine by capping oneDNN's instruction set::

    python bench/speed/bench_cpu_precision.py [--games 8] [--repeats 3] [--threads 1] [--config C]
    ONEDNN_MAX_CPU_ISA=AVX2 python bench/speed/bench_cpu_precision.py --games 0   # a CPU without either
    python bench/speed/bench_cpu_precision.py --compiled bf16 --batch-size 256   # eager against compiled

``--compiled P`` compares, in the extraction part, eager nets against compiled ones
(``kibitz extract --compile``) at precision P instead of FP32 against BF16.

Per net: median positions/s over ``--repeats`` calls of one batch (after a warm-up) on KataGo's
input tensors for real Fox positions (``../shared/reference``), and the ratio. Extraction: the
first ``--games`` games of each Fox testing group file with ``--config`` (default: the Go
preset), FP32 then BF16, positions/s and, per feature column, the mean and largest absolute
difference beside the column's standard deviation.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
import torch
from bench_go_net import median_rate

from pipeline.core import settings
from pipeline.estimate.in_process import extract_in_process
from pipeline.extract.config import load_config, preset
from pipeline.ingest import sgf
from pipeline.nets.evaluator import make_evaluator, runs_natively
from pipeline.nets.loading import load_net
from pipeline.train.sscore_batches import GO_RANK_GROUPS

INPUTS = "katago-g170-inputs.npz"
BATCH = 256
TESTING = "go/fox-selected/testing"
# Columns that do not come from the nets (identities, ranks, clocks): left out of the comparison.
NOT_FROM_NETS = ("ply", "move_number", "rating", "rank_num", "num_legal", "clock_s")


def reference_inputs(names: tuple[str, ...], batch: int) -> dict[str, np.ndarray]:
    """KataGo's input tensors of real positions tiled to ``batch``; a played move (the pass) for
    nets that score one."""
    data = np.load(settings.reference_dir() / INPUTS)
    reps = -(-batch // len(data["ids"]))
    arrays = {
        "spatial": np.tile(data["binaryInputNCHW"], (reps, 1, 1, 1))[:batch],
        "global": np.tile(data["globalInputNC"], (reps, 1))[:batch],
        "played": np.eye(362, dtype=np.float32)[np.full(batch, 361)],
    }
    return {name: np.ascontiguousarray(arrays[name], np.float32) for name in names}


def net_rate(model: str, precision: str, repeats: int) -> float:
    """Median positions/s of one ``BATCH`` through ``model`` at ``precision``."""
    evaluate = make_evaluator(load_net(model), precision=precision, max_batch=BATCH)
    return median_rate(evaluate, reference_inputs(evaluate.input_names, BATCH), repeats)


def first_games(per_group: int) -> pa.Table:
    """The first ``per_group`` games of each Fox testing group file (the ingest reader)."""
    root = settings.data_dir() / TESTING
    chunks = [
        sgf.plan_chunks([root / f"{g}.sgf"], games_per_chunk=per_group)[0] for g in GO_RANK_GROUPS
    ]
    return pa.concat_tables(sgf.read_chunk(chunk).games for chunk in chunks)


def compare_features(base: pa.Table, other: pa.Table, label: str) -> None:
    """Per float column from the nets: mean and largest |other − base| beside the base's spread."""
    print(
        f"\n{'column':<32}{'sd (' + label + ')':>16}{'mean |d|':>11}{'mean d':>11}{'max |d|':>10}"
    )
    for name in base.column_names:
        if name in NOT_FROM_NETS or not pa.types.is_floating(base[name].type):
            continue
        a = base[name].to_numpy(zero_copy_only=False).astype(np.float64)
        b = other[name].to_numpy(zero_copy_only=False).astype(np.float64)
        ok = np.isfinite(a) & np.isfinite(b)
        if not ok.any():
            continue
        d = b[ok] - a[ok]
        print(
            f"{name:<32}{a[ok].std():>16.4f}{np.abs(d).mean():>11.5f}{d.mean():>+11.5f}"
            f"{np.abs(d).max():>10.4f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=8, help="games per group file (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--config", help="extraction config YAML (default: the Go preset)")
    parser.add_argument(
        "--compiled", metavar="P", help="extraction: eager against compiled nets at precision P"
    )
    parser.add_argument("--batch-size", type=int, help="extraction batch (default: the config's)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = load_config(args.config) if args.config else preset("go")
    if args.batch_size:
        config.batch_sizes[config.backend] = args.batch_size
    models = dict.fromkeys(
        [n.model for n in config.imitation_nets + config.strength_nets] + [config.value.model]
    )
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), batch {BATCH}; "
        f"this CPU multiplies bf16 natively: {runs_natively('bf16', 'cpu')} "
        "(ONEDNN_MAX_CPU_ISA may cap it)"
    )
    print(f"\n{'net':<32}{'fp32 pos/s':>12}{'bf16 pos/s':>12}{'ratio':>8}")
    for model in models:
        if not set(load_net(model).input_names) <= {"spatial", "global", "played"}:
            continue  # a levels head (legal-move mask too): its nets are the imitation nets
        rates = [net_rate(model, p, args.repeats) for p in ("fp32", "bf16")]
        print(f"{model:<32}{rates[0]:>12,.1f}{rates[1]:>12,.1f}{rates[1] / rates[0]:>8.2f}")
    if not args.games:
        return 0
    games = first_games(args.games)
    p = args.compiled
    runs = [(p, p, False), (f"{p} compiled", p, True)] if p else [
        ("fp32", "fp32", False), ("bf16", "bf16", False)
    ]  # fmt: skip
    tables = []
    for label, precision, compiled in runs:
        config.precision, config.compile = precision, compiled
        if compiled:  # the compile is start-up, as in a long run: time the second pass
            extract_in_process(config.validate(), games.slice(0, 1))
        start = time.perf_counter()
        table, _ = extract_in_process(config.validate(), games)
        seconds = time.perf_counter() - start
        tables.append(table)
        print(
            f"\nextraction {label}: {games.num_rows} games, {table.num_rows:,} "
            f"positions in {seconds:.1f} s: {table.num_rows / seconds:,.1f} positions/s"
        )
    compare_features(*tables, runs[0][0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
