"""``kibitz audit``: players whose moves do not match their rating.

Platforms look for accounts that play below their rating (sandbagging), above it (boosted or
shared accounts) or simply mislabelled; a check on results alone misses what the moves say.
Here each player's instances (their moves in each game, ``player_instance_features``) are
averaged, the meta-models' strength model estimates the player's strength at the trained n
nearest to their number of games, and the gap to their rated strength (the mean over those
games) is judged against the model's conformal error distribution
(:meth:`pipeline.meta.intervals.SavedStrength.p_value`):

- ``p_value``: the share of calibration samples whose error was at least this gap (to 0.01);
- ``z``: the same as a standard-normal score, signed like the gap (positive: plays stronger
  than rated), so gaps of different n and scales compare on one axis;
- ``flagged``: ``p_value ≤ alpha``. For players exchangeable with the calibration samples an
  unaltered player is flagged at most ``alpha`` of the time; that is the false-positive rate a
  platform sets. Where the model has a player calibration (one player's own n games,
  :meth:`~pipeline.meta.intervals.SavedStrength.calibration`) the p-value comes from it: with
  widths calibrated on samples of n different players, a real player's own consistency flagged
  players with ≥ 15 games at about twice α.

Output: ``audit-<game>/audit.parquet`` (one row per player; the home's DuckDB catalog gets the
view ``<game>_audit``), ``audit.png`` (estimated against rated strength, flagged players
marked) and an MLflow run in experiment ``kibitz-audit-<game>``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from matplotlib.figure import Figure
from scipy.stats import norm

from pipeline.core import settings
from pipeline.core.catalog import refresh_home_of
from pipeline.core.tracking import log_file, log_metrics, tracked_run
from pipeline.meta.aggregate import feature_columns, load_mart
from pipeline.meta.intervals import SavedStrength
from pipeline.meta.model import MetaDataError
from pipeline.meta.train import MetaModels

log = logging.getLogger(__name__)

EXPERIMENT = "kibitz-audit-{game}"
FIGURE_FILE = "audit.png"


@dataclass(frozen=True)
class PlayerMeans:
    """Each player's instances averaged: what the strength model scores."""

    player: np.ndarray  # (P,) object
    games: np.ndarray  # (P,) int64 instances (games) of the player
    features: np.ndarray  # (P, F) mean features, NaN-aware
    rated: np.ndarray  # (P,) mean rated strength (NaN: never rated)


def player_means(instances: pa.Table, columns: list[str], scale: str) -> PlayerMeans:
    """Average ``instances`` per player: one sort and one ``reduceat``, no loop over players."""
    names = pc.fill_null(instances["player"], "").to_numpy(zero_copy_only=False).astype(str)
    order = np.argsort(names, kind="stable")
    names = names[order]
    starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
    matrix = np.column_stack(
        [instances[c].to_numpy(zero_copy_only=False).astype(np.float64)[order] for c in columns]
        + [pc.cast(instances[scale], pa.float64()).to_numpy(zero_copy_only=False)[order]]
    )  # (N, F + 1): the rated strength rides along as the last column
    finite = np.isfinite(matrix)
    sums = np.add.reduceat(np.where(finite, matrix, 0.0), starts, axis=0)
    counts = np.add.reduceat(finite, starts, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    games = np.diff(np.r_[starts, names.size])
    return PlayerMeans(names[starts].astype(object), games, means[:, :-1], means[:, -1])


def audit_players(
    models: MetaModels,
    instances: pa.Table,
    *,
    alpha: float,
    strength: SavedStrength | None = None,
) -> pa.Table:
    """One row per rated player of ``instances``: estimate, gap, p-value, z, flagged.

    ``strength``: the strength model to judge by (default: the models' own); a measurement on
    the model's own player-specific set passes :meth:`SavedStrength.held_out`.
    """
    strength = strength or models.strength()
    if strength is None:
        raise MetaDataError(
            f"meta-models {str(models.root)!r} have no strength model (retrain them with"
            " `kibitz train meta`, which now fits one)"
        )
    if not 0 < alpha < 1:
        raise MetaDataError(f"alpha must be between 0 and 1, got {alpha}")
    game = models.manifest["game"]
    instances = instances.filter(pc.equal(instances["game"], game))
    if instances.num_rows == 0:
        raise MetaDataError(f"no {game} player instances to audit")
    columns = feature_columns(instances.column_names)
    means = player_means(instances, columns, strength.scale)
    rated = np.isfinite(means.rated)
    n_model = np.array([strength.nearest_n(int(k)) for k in means.games])
    estimate = np.full(means.games.size, np.nan)
    p_value = np.ones(means.games.size)
    half = np.full(means.games.size, np.nan)
    level = round(1 - alpha, 2)
    for n in np.unique(n_model):
        rows = np.flatnonzero((n_model == n) & rated)
        if rows.size == 0:
            continue
        estimate[rows] = strength.predict(means.features[rows], columns, int(n))
        p_value[rows] = strength.p_value(estimate[rows] - means.rated[rows], int(n))
        bounds = strength.interval(estimate[rows], int(n), level)
        half[rows] = (bounds[:, 1] - bounds[:, 0]) / 2
    gap = estimate - means.rated
    z = np.sign(gap) * norm.ppf(1 - p_value / 2)
    keep = np.flatnonzero(rated)
    return pa.table(
        {
            "game": pa.array([game] * keep.size, pa.string()),
            "player": pa.array(means.player[keep], pa.string()),
            "games": pa.array(means.games[keep], pa.int32()),
            "n_model": pa.array(n_model[keep], pa.int32()),
            "rated": pa.array(means.rated[keep]),
            "estimate": pa.array(estimate[keep]),
            "gap": pa.array(gap[keep]),
            "p_value": pa.array(p_value[keep]),
            "z": pa.array(z[keep]),
            "interval_low": pa.array((estimate - half)[keep]),
            "interval_high": pa.array((estimate + half)[keep]),
            "flagged": pa.array(p_value[keep] <= alpha + 1e-9),
        }
    ).sort_by([("p_value", "ascending"), ("player", "ascending")])


def audit_held_out_players(models: MetaModels, instances: pa.Table, *, alpha: float) -> pa.Table:
    """:func:`audit_players` where each half of the players (:func:`player_halves
    <pipeline.meta.intervals.player_halves>`) is judged by the player calibration of the other
    half only: the false-positive rate on players the intervals were calibrated on would be
    optimistic, so measurements on a model's own evaluation or player-specific players use this.
    """
    strength = models.strength()
    if strength is None:
        return audit_players(models, instances, alpha=alpha)  # raises the missing-model error
    names = pc.fill_null(instances["player"], "")
    unique = pc.unique(names)
    half = pc.take(pa.array(strength.player_halves(unique.to_pylist())), pc.index_in(names, unique))
    tables = [
        audit_players(
            models, instances.filter(pc.equal(half, h)), alpha=alpha, strength=strength.held_out(h)
        )
        for h in (0, 1)
        if pc.any(pc.equal(half, h)).as_py()
    ]
    return pa.concat_tables(tables).sort_by([("p_value", "ascending"), ("player", "ascending")])


def audit_figure(table: pa.Table, scale: str, alpha: float) -> Figure:
    """Estimated against rated strength, the identity line, flagged players in red."""
    fig = Figure(figsize=(6.2, 5.4))
    ax = fig.subplots()
    rated = table["rated"].to_numpy()
    estimate = table["estimate"].to_numpy()
    flagged = table["flagged"].to_numpy(zero_copy_only=False)
    ax.scatter(rated[~flagged], estimate[~flagged], s=6, alpha=0.4, color="tab:blue",
               label=f"not flagged ({int((~flagged).sum()):,})")  # fmt: skip
    ax.scatter(rated[flagged], estimate[flagged], s=14, color="tab:red",
               label=f"flagged, p ≤ {alpha:g} ({int(flagged.sum()):,})")  # fmt: skip
    if rated.size:
        low, high = float(np.nanmin(rated)), float(np.nanmax(rated))
        ax.plot([low, high], [low, high], color="black", lw=1, label="estimate = rated")
    ax.set_xlabel(f"rated ({scale}, mean over the player's games)")
    ax.set_ylabel(f"estimated from the moves ({scale})")
    ax.set_title("kibitz audit: moves against rating", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def run_audit(
    models: MetaModels,
    aggregates_dir: Path,
    out_dir: Path,
    *,
    alpha: float = 0.01,
    tracking_uri: str | None = None,
) -> dict[str, Any]:
    """Audit every player of an aggregates folder; write the table and figure; track in MLflow."""
    started = time.perf_counter()
    game = models.manifest["game"]
    table = audit_players(
        models, load_mart(aggregates_dir, "player_instance_features"), alpha=alpha
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / settings.AUDIT_FILE
    pq.write_table(table, path)
    figure_path = out_dir / FIGURE_FILE
    scale = models.strength().scale
    audit_figure(table, scale, alpha).savefig(figure_path, dpi=110, bbox_inches="tight")
    flagged = int(pc.sum(table["flagged"]).as_py() or 0)
    summary = {
        "game": game,
        "model": models.manifest.get("name") or str(models.root),
        "aggregates_dir": str(aggregates_dir),
        "alpha": alpha,
        "players": table.num_rows,
        "flagged": flagged,
        "flagged_rate": round(flagged / table.num_rows, 4) if table.num_rows else None,
        "table": str(path),
        "figure": str(figure_path),
    }
    params = {k: summary[k] for k in ("game", "model", "aggregates_dir", "alpha")}
    with tracked_run(
        EXPERIMENT.format(game=game), run_name=f"audit {game}", tracking_uri=tracking_uri,
        params=params,
    ) as run:  # fmt: skip
        log_metrics({"players": table.num_rows, "flagged": flagged,
                     "flagged_rate": summary["flagged_rate"] or 0.0})  # fmt: skip
        log_file(path, artifact_path="audit")
        log_file(figure_path, artifact_path="audit")
        summary["mlflow_run_id"] = run.info.run_id
    catalog = refresh_home_of(out_dir)
    summary["catalog"] = str(catalog) if catalog else None
    summary["seconds"] = round(time.perf_counter() - started, 2)
    return summary
