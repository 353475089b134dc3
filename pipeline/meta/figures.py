"""Paper-style figures of a whole dataset (``kibitz report``) and of one player (``kibitz estimate``).

- prior profile (Kuboki et al. 2025, Fig. 3): for each rank group, the mean over player instances
  of the geometric mean of the played move's prior under each imitation level, with 95 %
  confidence intervals; a player's own profile can be drawn on top;
- loss by move number (Fig. 4): mean loss per move number per rank group with a ±1 std band;
- s-score distribution per rank group (one box per group, per strength net);
- confusion matrices of a ``kibitz train meta`` output.

Data come from the aggregates (``kibitz aggregate``: prior_profile, loss_by_move_number,
player_instance_features, rank_groups); figures are matplotlib ``Figure`` objects rendered with
the Agg canvas (no display needed).

Run: ``kibitz report --aggregates kibitz-out/aggregates-chess --out kibitz-out/report-chess``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pipeline.meta.aggregate import AggregatesNotFoundError, load_mart

CONFUSION_TABLE = "tables/confusion.parquet"  # written by `kibitz train meta`


def group_order(rank_groups: pa.Table, game: str) -> list[str]:
    """Rank groups of ``game``, weakest first."""
    rows = rank_groups.filter(pc.equal(rank_groups["game"], game)).sort_by("group_index")
    return rows["rank_group"].to_pylist()


def net_order(instance_columns: Sequence[str]) -> list[str]:
    """Imitation nets in extraction-config order (the instance table's column order)."""
    return [m.group(1) for c in instance_columns if (m := re.match(r"^prior_(.+)_geomean_all$", c))]


def _group_colours(groups: Sequence[str]) -> dict[str, tuple]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return {g: cmap(i / max(len(groups) - 1, 1)) for i, g in enumerate(groups)}


def prior_profile_figure(profile: pa.Table, groups: Sequence[str], nets: Sequence[str]) -> Figure:
    """Geometric-mean prior per imitation net (x) for each rank group (a line with a 95 % CI)."""
    fig = Figure(figsize=(6.4, 4.0))
    draw_prior_profile(fig.subplots(), profile, groups, nets)
    return fig


def draw_prior_profile(
    ax: Axes,
    profile: pa.Table,
    groups: Sequence[str],
    nets: Sequence[str],
    *,
    player: dict[str, float] | None = None,
    player_label: str = "player",
) -> None:
    """The prior profile on ``ax``; ``player``: one player's profile (net → value) in black."""
    colours = _group_colours(groups)
    rows = {(r["rank_group"], r["net"]): r for r in profile.to_pylist()}
    x = np.arange(len(nets))
    for g in groups:
        mean = np.array(
            [rows.get((g, n), {}).get("geomean_mean", np.nan) for n in nets], dtype=float
        )
        ci = np.array([rows.get((g, n), {}).get("geomean_ci95", np.nan) for n in nets], dtype=float)
        ax.plot(x, mean, "o-", ms=3, lw=1.2, color=colours[g], label=g)
        ax.fill_between(x, mean - ci, mean + ci, color=colours[g], alpha=0.2, lw=0)
    if player is not None:
        ax.plot(
            x,
            [player.get(n, np.nan) for n in nets],
            "s-",
            color="black",
            lw=2.2,
            ms=5,
            label=player_label,
        )
    ax.set_xticks(x, nets, rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("imitation net (skill level)")
    ax.set_ylabel("geometric mean of the played move's prior")
    ax.set_title("prior profile per rank group (mean, 95 % CI)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)


def loss_by_move_figure(by_move: pa.Table, groups: Sequence[str]) -> Figure:
    """Mean loss per move number for each rank group, with a ±1 std band."""
    fig = Figure(figsize=(6.4, 4.0))
    draw_loss_by_move(fig.subplots(), by_move, groups)
    return fig


def draw_loss_by_move(
    ax: Axes,
    by_move: pa.Table,
    groups: Sequence[str],
    *,
    player: pa.Table | None = None,
    player_label: str = "player",
) -> None:
    """Loss by move number on ``ax``; ``player`` (move_number, loss_mean) drawn in black."""
    colours = _group_colours(groups)
    for g in groups:
        rows = by_move.filter(pc.equal(by_move["rank_group"], g)).sort_by("move_number")
        if rows.num_rows == 0:
            continue
        x = rows["move_number"].to_numpy()
        mean = rows["loss_mean"].to_numpy(zero_copy_only=False)
        std = np.nan_to_num(rows["loss_std"].to_numpy(zero_copy_only=False).astype(float))
        ax.plot(x, mean, lw=1.2, color=colours[g], label=g)
        ax.fill_between(x, mean - std, mean + std, color=colours[g], alpha=0.08, lw=0)
    if player is not None and player.num_rows:
        rows = player.sort_by("move_number")
        ax.plot(rows["move_number"].to_numpy(), rows["loss_mean"].to_numpy(zero_copy_only=False),
                color="black", lw=2.0, label=player_label)  # fmt: skip
    ax.set_xlabel("move number (the mover's own moves)")
    ax.set_ylabel("loss (mean ± std)")
    ax.set_title("loss by move number per rank group", fontsize=9)
    ax.legend(fontsize=7, ncol=2)


def draw_progression(
    ax: Axes,
    steps: Sequence[Any],
    groups: Sequence[str],
    *,
    label: Callable[[float], str] = str,
    scale: str | None = None,
) -> None:
    """The estimate after each game on ``ax``: the strength with its 80 % and 95 % intervals
    when the steps carry one (``progressive.Step``), else the rank group."""
    games = np.array([s.games for s in steps])
    if scale is not None and all(s.strength is not None for s in steps):
        point = np.array([s.strength for s in steps])
        for attr, alpha, name in (("interval_95", 0.15, "95 %"), ("interval_80", 0.3, "80 %")):
            bounds = np.array([getattr(s, attr) for s in steps])
            ax.fill_between(games, bounds[:, 0], bounds[:, 1], color="tab:blue", alpha=alpha,
                            lw=0, label=name)  # fmt: skip
        ax.plot(games, point, color="black", marker="o", ms=3, lw=1.5, label="estimate")
        ticks = ax.get_yticks()
        ax.set_yticks(ticks, [label(t) for t in ticks], fontsize=7)
        ax.set_ylabel(scale)
    else:
        ax.plot(games, [s.rank_group_index for s in steps], color="black", marker="o", ms=3)
        ax.set_yticks(range(len(groups)), groups, fontsize=7)
        ax.set_ylabel("rank group")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("games")
    ax.set_title("estimate after each game", fontsize=9)
    ax.legend(fontsize=7)


def sscore_figure(instances: pa.Table, groups: Sequence[str]) -> Figure | None:
    """Box plot of each instance's mean s-score per rank group; None without strength nets."""
    columns = [c for c in instances.column_names if re.match(r"^sscore_.+_mean_all$", c)]
    if not columns:
        return None
    fig = Figure(figsize=(6.4, 2.6 * len(columns)))
    axes = np.atleast_1d(fig.subplots(len(columns), 1))
    group_col = instances["rank_group"].to_pylist()
    for ax, column in zip(axes, columns, strict=True):
        values = instances[column].to_numpy(zero_copy_only=False).astype(float)
        data = [values[[gc == g for gc in group_col]] for g in groups]
        data = [d[np.isfinite(d)] for d in data]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(groups) + 1), groups, rotation=45, ha="right", fontsize=7)
        ax.set_ylabel(column.removesuffix("_mean_all"), fontsize=8)
    axes[0].set_title("s-score of player instances per rank group", fontsize=9)
    return fig


def confusion_figures(train_out: Path, groups: Sequence[str]) -> dict[str, Figure]:
    """One row-normalised confusion matrix per (method, n, sampling) of a train-meta output."""
    from pipeline.meta.report import confusion_counts_figure

    path = Path(train_out) / CONFUSION_TABLE
    if not path.is_file():
        raise AggregatesNotFoundError(
            f"no {CONFUSION_TABLE} in {str(train_out)!r} (a `kibitz train meta` output)"
        )
    table = pq.read_table(path)
    figures = {}
    keys = sorted(
        {
            (r["method"], r["n"], r["sampling"])
            for r in table.select(["method", "n", "sampling"]).to_pylist()
        }
    )
    g = len(groups)
    for method, n, sampling in keys:
        mask = pc.and_(
            pc.and_(pc.equal(table["method"], method), pc.equal(table["n"], n)),
            pc.equal(table["sampling"], sampling),
        )
        rows = table.filter(mask)
        counts = np.zeros((g, g), dtype=np.int64)
        counts[rows["true_index"].to_numpy(), rows["predicted_index"].to_numpy()] = rows[
            "count"
        ].to_numpy()
        figures[f"confusion_{method}_n{n}_{sampling}"] = confusion_counts_figure(
            counts, groups, f"{method}, n={n}, {sampling}"
        )
    return figures


def write_report(
    aggregates_dir: Path, out_dir: Path, *, game: str, train_out: Path | None = None
) -> list[Path]:
    """Draw every figure of ``aggregates_dir`` (and of a train-meta output) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    instances = load_mart(aggregates_dir, "player_instance_features")
    instances = instances.filter(pc.equal(instances["game"], game))
    groups = group_order(load_mart(aggregates_dir, "rank_groups"), game)
    profile = load_mart(aggregates_dir, "prior_profile")
    by_move = load_mart(aggregates_dir, "loss_by_move_number")
    figures: dict[str, Figure | None] = {
        "prior_profile": prior_profile_figure(
            profile.filter(pc.equal(profile["game"], game)),
            groups,
            net_order(instances.column_names),
        ),
        "loss_by_move_number": loss_by_move_figure(
            by_move.filter(pc.equal(by_move["game"], game)), groups
        ),
        "sscore_by_rank_group": sscore_figure(instances, groups),
    }
    if train_out is not None:
        figures |= confusion_figures(train_out, groups)
    written = []
    for name, fig in figures.items():
        if fig is None:
            continue
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        written.append(path)
    return written
