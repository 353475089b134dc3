"""Tables and plots of meta-model results, shaped like Kuboki et al. (2025).

- :func:`accuracy_table`: Table 2 (rank-group sampling) or Tables 6/7 (player-specific): one row
  per method (feature set or the Chen baseline), one column pair per n: accuracy and
  accuracy ±1, in per cent.
- :func:`markdown_table`: the same as Markdown, for the terminal and docs.
- :func:`confusion_figure`, :func:`calibration_figure`, :func:`accuracy_figure`: PNGs drawn with
  matplotlib's object API (``Figure``, Agg canvas; no pyplot state, no display).

Run: ``python -m pipeline.meta.report OUT_OF_TRAIN_META`` prints the tables of a finished run.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from matplotlib.figure import Figure

from pipeline.meta.model import Evaluation

RESULTS_FILE = "tables/results.parquet"
SAMPLING_TITLES = {
    "rank_group": "rank-group sampling (Table 2)",
    "player": "player-specific sampling (Tables 6/7)",
}


def _methods_in_order(methods: Sequence[str]) -> list[str]:
    """Feature sets in the order they first appear, baselines last."""
    seen = list(dict.fromkeys(methods))
    return [m for m in seen if not m.startswith("chen_")] + [
        m for m in seen if m.startswith("chen_")
    ]


def accuracy_table(results: pa.Table, sampling: str) -> pa.Table:
    """Wide table: method, then ``acc_n<k>`` and ``acc_pm1_n<k>`` (per cent) for every n."""
    rows = results.filter(pc.equal(results["sampling"], sampling))
    ns = sorted(set(rows["n"].to_pylist()))
    lookup = {(r["method"], r["n"]): (r["accuracy"], r["accuracy_pm1"]) for r in rows.to_pylist()}
    methods = _methods_in_order(rows["method"].to_pylist())
    columns: dict[str, list] = {"method": methods}
    for n in ns:
        columns[f"acc_n{n}"] = [100 * lookup.get((m, n), (np.nan, np.nan))[0] for m in methods]
        columns[f"acc_pm1_n{n}"] = [100 * lookup.get((m, n), (np.nan, np.nan))[1] for m in methods]
    return pa.table(columns)


def markdown_table(results: pa.Table, sampling: str) -> str:
    """``| method | n=1 | n=5 | …`` with cells ``acc (±1 acc)`` in per cent."""
    table = accuracy_table(results, sampling)
    ns = [int(c[len("acc_n") :]) for c in table.column_names if c.startswith("acc_n")]
    lines = [
        f"{SAMPLING_TITLES.get(sampling, sampling)}: accuracy % (accuracy ±1 %)",
        "| method | " + " | ".join(f"n={n}" for n in ns) + " |",
        "|---|" + "---|" * len(ns),
    ]
    for row in table.to_pylist():
        cells = []
        for n in ns:
            acc, pm1 = row[f"acc_n{n}"], row[f"acc_pm1_n{n}"]
            cells.append("–" if acc != acc else f"{acc:.1f} ({pm1:.1f})")
        lines.append(f"| {row['method']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def confusion_counts_figure(counts: np.ndarray, group_names: Sequence[str], title: str) -> Figure:
    """Row-normalised confusion matrix (true group × predicted group), cells labelled with counts."""
    with np.errstate(invalid="ignore"):
        share = counts / counts.sum(axis=1, keepdims=True)
    g = len(group_names)
    fig = Figure(figsize=(1.0 + 0.55 * g, 0.8 + 0.5 * g))
    ax = fig.subplots()
    ax.imshow(np.nan_to_num(share), cmap="Blues", vmin=0, vmax=1)
    for i in range(g):
        for j in range(g):
            if counts[i, j]:
                colour = "white" if share[i, j] > 0.5 else "black"
                ax.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=7, color=colour)
    ax.set_xticks(range(g), group_names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(g), group_names, fontsize=7)
    ax.set_xlabel("predicted rank group")
    ax.set_ylabel("true rank group")
    diagonal = np.trace(counts) / max(counts.sum(), 1)
    ax.set_title(f"{title}\naccuracy {100 * diagonal:.1f} %", fontsize=8)
    return fig


def confusion_figure(evaluation: Evaluation, group_names: Sequence[str]) -> Figure:
    """The confusion matrix of one evaluation."""
    return confusion_counts_figure(
        evaluation.confusion(),
        group_names,
        f"{evaluation.method}, n={evaluation.n}, {evaluation.sampling}",
    )


def confusion_table(evaluations: Sequence[Evaluation]) -> pa.Table:
    """Long table of non-zero confusion cells: method, sampling, n, true_index, predicted_index, count."""
    columns: dict[str, list] = {
        k: [] for k in ("method", "sampling", "n", "true_index", "predicted_index", "count")
    }
    for e in evaluations:
        counts = e.confusion()
        for i, j in zip(*np.nonzero(counts), strict=True):
            for key, value in zip(
                columns, (e.method, e.sampling, e.n, int(i), int(j), int(counts[i, j])), strict=True
            ):
                columns[key].append(value)
    return pa.table(columns)


def calibration_figure(evaluation: Evaluation, group_names: Sequence[str]) -> Figure:
    """Mean ± std of the continuous prediction per true group against the ideal diagonal."""
    g = len(group_names)
    fig = Figure(figsize=(4.2, 3.6))
    ax = fig.subplots()
    present = [i for i in range(g) if np.any(evaluation.label == i)]
    means = [float(np.mean(evaluation.raw[evaluation.label == i])) for i in present]
    stds = [float(np.std(evaluation.raw[evaluation.label == i])) for i in present]
    ax.plot([0, g - 1], [0, g - 1], color="grey", lw=1, ls="--", label="ideal")
    ax.errorbar(present, means, yerr=stds, fmt="o-", ms=3, capsize=2, label="prediction mean ± std")
    ax.set_xticks(range(g), group_names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(g), group_names, fontsize=7)
    ax.set_xlabel("true rank group")
    ax.set_ylabel("predicted (before rounding)")
    ax.set_title(f"{evaluation.method}, n={evaluation.n}, {evaluation.sampling}", fontsize=8)
    ax.legend(fontsize=7)
    return fig


def accuracy_figure(results: pa.Table, sampling: str) -> Figure:
    """Accuracy (solid) and accuracy ±1 (dotted) against n, one colour per method."""
    table = accuracy_table(results, sampling)
    ns = [int(c[len("acc_n") :]) for c in table.column_names if c.startswith("acc_n")]
    fig = Figure(figsize=(5, 3.6))
    ax = fig.subplots()
    for k, row in enumerate(table.to_pylist()):
        colour = f"C{k % 10}"
        ax.plot(ns, [row[f"acc_n{n}"] for n in ns], "o-", color=colour, ms=3, label=row["method"])
        ax.plot(ns, [row[f"acc_pm1_n{n}"] for n in ns], ":", color=colour)
    ax.set_xlabel("instances per sample (n)")
    ax.set_ylabel("accuracy % (dotted: ±1)")
    ax.set_ylim(0, 100)
    ax.set_title(SAMPLING_TITLES.get(sampling, sampling), fontsize=9)
    ax.legend(fontsize=7)
    return fig


def load_results(train_out: Path) -> pa.Table:
    """The long results table a ``kibitz train meta`` run saved."""
    return pq.read_table(Path(train_out) / RESULTS_FILE)


if __name__ == "__main__":
    results = load_results(Path(sys.argv[1]))
    for name in SAMPLING_TITLES:
        print(markdown_table(results, name), end="\n\n")
