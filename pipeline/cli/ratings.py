"""Outcome-based ratings (Elo, Glicko-2, TrueSkill, TTT), their tuning and skill depth.

The ``kibitz ratings`` command; every run is tracked in MLflow.

    kibitz ratings fit   --games DIR --system elo --k 40,20,10 --thresholds 30,60 --out DIR
    kibitz ratings tune  --games DIR --system elo --train-frac 0.8 [--grid grid.yaml]
    kibitz ratings depth --games DIR

Without ``--tracking-uri`` runs go to ``$MLFLOW_TRACKING_URI``, else the project's embedded
store ``$KIBITZ_HOME/mlflow.db`` (``pipeline.core.settings.tracking_uri``).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core import settings
from pipeline.core.errors import KibitzError

if TYPE_CHECKING:
    import pyarrow as pa

    from pipeline.ratings.data import RatedGames
    from pipeline.ratings.systems import SystemRun

logger = logging.getLogger(__name__)

EXPERIMENT = "kibitz-ratings"
# Keep in sync with pipeline.ratings.systems.SYSTEM_NAMES (not imported: `kibitz --help` stays
# fast without numba, scipy and MLflow; test_ratings_tune checks the two agree).
SYSTEM_NAMES = ("elo", "glicko2", "trueskill", "ttt")
TOP_PLAYERS_PLOTTED = 8
TOP_PLAYERS_LOGGED = 100

# CLI option (dest) → config field, per system; one option may mean a field in several systems.
_OPTION_FIELDS: dict[str, dict[str, str]] = {
    "elo": {"k": "k", "thresholds": "thresholds", "scale": "scale", "initial": "initial"},
    "glicko2": {
        "tau": "tau",
        "initial": "initial_rating",
        "initial_rd": "initial_rd",
        "initial_vol": "initial_vol",
        "period_days": "period_days",
    },
    "trueskill": {
        "mu": "mu",
        "sigma": "sigma",
        "beta": "beta",
        "tau": "tau",
        "draw_probability": "draw_probability",
    },
    "ttt": {
        "mu": "mu",
        "sigma": "sigma",
        "beta": "beta",
        "gamma": "gamma",
        "draw_probability": "p_draw",
        "step_days": "step_days",
        "epsilon": "epsilon",
        "iterations": "iterations",
    },
}


class RatingsOptionError(KibitzError, ValueError):
    """A command-line option that does not apply to the chosen rating system."""


def _floats(n: int):
    def parse(text: str) -> tuple[float, ...]:
        parts = text.split(",")
        if len(parts) != n:
            raise argparse.ArgumentTypeError(f"expected {n} comma-separated numbers, got {text!r}")
        try:
            return tuple(float(p) for p in parts)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not numbers: {text!r}") from None

    return parse


def _ints(n: int):
    def parse(text: str) -> tuple[int, ...]:
        values = _floats(n)(text)
        if any(v != int(v) for v in values):
            raise argparse.ArgumentTypeError(f"expected whole numbers, got {text!r}")
        return tuple(int(v) for v in values)

    return parse


def _add_common(parser: argparse.ArgumentParser, *, out_required: bool) -> None:
    parser.add_argument("--games", type=Path, required=True, help="games table folder")
    parser.add_argument("--game", help="only this game (chess|go) when the table has several")
    parser.add_argument("--source", help="only this source (lichess|fox|…)")
    parser.add_argument(
        "--out",
        type=Path,
        required=out_required,
        default=None,
        help="output folder"
        + ("" if out_required else " (default $KIBITZ_HOME/ratings-<command>)"),
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///$KIBITZ_HOME/mlflow.db)",
    )
    parser.add_argument("--experiment", default=EXPERIMENT, help="MLflow experiment name")


def _add_system_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", choices=SYSTEM_NAMES, required=True)
    g = parser.add_argument_group("system options (defaults: each system's config dataclass)")
    g.add_argument("--k", type=_floats(3), help="elo: Ka,Kb,Kc (Ka >= Kb >= Kc > 0)")
    g.add_argument("--thresholds", type=_ints(2), help="elo: nc1,nc2 game counts where K steps")
    g.add_argument("--scale", type=float, help="elo: D (400)")
    g.add_argument("--initial", type=float, help="elo/glicko2: initial rating (1500)")
    g.add_argument("--tau", type=float, help="glicko2: volatility τ; trueskill: dynamics τ")
    g.add_argument("--initial-rd", type=float, help="glicko2: initial RD (350)")
    g.add_argument("--initial-vol", type=float, help="glicko2: initial volatility (0.06)")
    g.add_argument("--period-days", type=int, help="glicko2: rating period in days (1)")
    g.add_argument("--mu", type=float, help="trueskill/ttt: prior mean")
    g.add_argument("--sigma", type=float, help="trueskill/ttt: prior σ")
    g.add_argument("--beta", type=float, help="trueskill/ttt: performance noise β")
    g.add_argument("--gamma", type=float, help="ttt: skill drift γ per time step")
    g.add_argument(
        "--draw-probability", type=float, help="trueskill/ttt: draw probability (ttt: observed)"
    )
    g.add_argument("--step-days", type=int, help="ttt: days per time step (1)")
    g.add_argument("--epsilon", type=float, help="ttt: convergence threshold (1e-6)")
    g.add_argument("--iterations", type=int, help="ttt: most backward/forward sweeps (30)")


def system_params(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields given on the command line for ``args.system``."""
    fields = _OPTION_FIELDS[args.system]
    given = {
        dest: getattr(args, dest)
        for dests in _OPTION_FIELDS.values()
        for dest in dests
        if getattr(args, dest, None) is not None
    }
    wrong = sorted(set(given) - set(fields))
    if wrong:
        options = ", ".join("--" + w.replace("_", "-") for w in wrong)
        raise RatingsOptionError(f"{options} do(es) not apply to --system {args.system}")
    return {fields[dest]: value for dest, value in given.items()}


def _load(args: argparse.Namespace) -> RatedGames:
    from pipeline.ratings.data import load_games

    games = load_games(args.games, game=args.game, source=args.source)
    logger.info(
        "%d games, %d players from %s (left out: %s)",
        games.n_games,
        games.n_players,
        args.games,
        games.excluded or "none",
    )
    return games


def _out_dir(args: argparse.Namespace, command: str) -> Path:
    out = args.out if args.out is not None else settings.home_dir() / f"ratings-{command}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _tracking_uri(args: argparse.Namespace) -> str:
    return settings.tracking_uri(args.tracking_uri)


def _write_table(table: pa.Table, path: Path) -> None:
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    pq.write_table(table, path)
    if path.suffix == ".parquet" and table.num_rows <= 100_000:
        pa_csv.write_csv(table, path.with_suffix(".csv"))


def _history_figure(games: RatedGames, run: SystemRun, system: str):
    """Rating before each game of the best-rated players with the most games (the top plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    column = next(iter(run.final))
    final = run.final[column]
    played = np.bincount(np.concatenate([games.white, games.black]), minlength=games.n_players)
    regulars = np.flatnonzero(played >= max(2, int(np.percentile(played, 90))))
    top = regulars[np.argsort(-final[regulars])][:TOP_PLAYERS_PLOTTED]
    fig, ax = plt.subplots(figsize=(9, 5))
    dates = games.dates()
    for p in top:
        as_white = np.flatnonzero(games.white == p)
        as_black = np.flatnonzero(games.black == p)
        idx = np.concatenate([as_white, as_black])
        value = np.concatenate([run.white_before[as_white], run.black_before[as_black]])
        order = np.argsort(idx, kind="stable")
        ax.plot(
            dates[idx[order]], value[order], marker=".", linewidth=1, label=str(games.players[p])
        )
    ax.set_title(f"{system}: rating before each game, top {len(top)} players by final {column}")
    ax.set_xlabel("date")
    ax.set_ylabel(column)
    if len(top):  # no player with ≥ 2 games: an empty plot, and no legend to draw
        ax.legend(fontsize="small", loc="best")
    fig.autofmt_xdate()
    return fig


def cmd_fit(args: argparse.Namespace) -> int:
    from pipeline.core import tracking
    from pipeline.ratings.data import final_table, history_table
    from pipeline.ratings.systems import config_params, get_system, make_config

    params = system_params(args)
    config = make_config(args.system, params)
    games = _load(args)
    out = _out_dir(args, "fit")
    started = time.perf_counter()
    run = get_system(args.system).run(games, config)
    seconds = time.perf_counter() - started
    history = history_table(games, run.history)
    final = final_table(games, run.final)
    _write_table(history, out / "history.parquet")
    _write_table(final, out / "final.parquet")
    resolved = {"system": args.system, **config_params(config)}
    (out / "config.json").write_text(json.dumps(resolved, indent=2, default=str) + "\n")
    uri = _tracking_uri(args)
    with tracking.tracked_run(
        args.experiment,
        run_name=f"fit-{args.system}",
        tracking_uri=uri,
        params={**resolved, "games_dir": str(args.games)},
        tags={"kibitz.command": "ratings fit"},
    ) as active:
        tracking.log_metrics(
            {
                "games": games.n_games,
                "players": games.n_players,
                "seconds": seconds,
                "games_per_s": games.n_games / seconds if seconds > 0 else float("nan"),
                **{f"left_out.{k.replace(' ', '_')}": v for k, v in games.excluded.items()},
                **run.metrics,
            }
        )
        tracking.log_table(final.slice(0, TOP_PLAYERS_LOGGED), "top_players")
        tracking.log_file(out / "config.json")
        tracking.log_figure(_history_figure(games, run, args.system), "rating_history_top_players")
        run_id = active.info.run_id
    print(f"{args.system}: {games.n_games} games, {games.n_players} players in {seconds:.2f} s")
    print(f"wrote {out / 'history.parquet'} and {out / 'final.parquet'}")
    print(f"MLflow run {run_id} at {uri}")
    print(final.slice(0, 10).to_pandas().to_string(index=False))
    return 0


def _f1_figure(result):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    f1 = [s.metrics["f1"] for s in result.scores]
    acc = [s.metrics["accuracy"] for s in result.scores]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(f1)), 4))
    positions = np.arange(len(f1))
    ax.plot(positions, f1, marker="o", label="F1")
    ax.plot(positions, acc, marker="s", label="accuracy")
    ax.axvline(result.best, color="grey", linestyle=":", label="chosen")
    ax.set_xticks(positions)
    ax.set_xticklabels([str(i) for i in positions])
    ax.set_xlabel("configuration (see tune_table)")
    ax.set_ylabel("test period score")
    ax.set_title(f"{result.system}: test-period F1 across the grid")
    ax.legend()
    return fig


def cmd_tune(args: argparse.Namespace) -> int:
    from pipeline.core import tracking
    from pipeline.ratings.tune import load_grid, split_games, tune

    if system_params(args):
        raise RatingsOptionError("tune takes parameters from --grid, not from system options")
    games = _load(args)
    out = _out_dir(args, "tune")
    grid = load_grid(args.grid) if args.grid is not None else None
    train_frac = None
    if args.train_until is None:
        train_frac = 0.8 if args.train_frac is None else args.train_frac
    split = split_games(games, train_until=args.train_until, train_frac=train_frac)
    started = time.perf_counter()
    result = tune(args.system, games, split, grid)
    seconds = time.perf_counter() - started
    table = result.table()
    best = result.scores[result.best]
    report = result.report()
    _write_table(table, out / "tune_table.parquet")
    _write_table(best.bins, out / "chosen_bins.parquet")
    (out / "report.txt").write_text(report + "\n")
    uri = _tracking_uri(args)
    with tracking.tracked_run(
        args.experiment,
        run_name=f"tune-{args.system}",
        tracking_uri=uri,
        params={
            "system": args.system,
            "split": split.description,
            "configurations": len(result.scores),
            "grid": str(args.grid) if args.grid else "default",
            "games_dir": str(args.games),
        },
        tags={"kibitz.command": "ratings tune"},
    ) as parent:
        for i, score in enumerate(result.scores):
            with tracking.tracked_run(
                args.experiment,
                run_name=f"config-{i}",
                tracking_uri=uri,
                params={"config": i, **score.params},
                parent_run_id=parent.info.run_id,
            ):
                tracking.log_metrics(
                    {**score.metrics, "intercept": score.fit.intercept, "slope": score.fit.slope}
                )
                tracking.log_table(score.bins, "bins")
        tracking.log_metrics(
            {
                **{f"chosen_{k}": v for k, v in best.metrics.items()},
                "chosen_config": result.best,
                "intercept": best.fit.intercept,
                "intercept_se": best.fit.intercept_se,
                "slope": best.fit.slope,
                "slope_se": best.fit.slope_se,
                "slope_z": best.fit.slope_z,
                "slope_p": best.fit.slope_p,
                "seconds": seconds,
            }
        )
        tracking.log_table(table, "tune_table")
        tracking.log_table(best.bins, "chosen_bins")
        tracking.log_file(out / "report.txt")
        tracking.log_figure(_f1_figure(result), "f1_across_grid")
        run_id = parent.info.run_id
    print(report)
    print(f"MLflow parent run {run_id} at {uri}; tables in {out}")
    return 0


def cmd_depth(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow as pa

    from pipeline.core import tracking
    from pipeline.ratings.skill_depth import fit_model, load_depth_grid, skill_trace

    grid = load_depth_grid(args.games, game=args.game, source=args.source)
    out = _out_dir(args, "depth")
    fits = [fit_model(grid, 1)]
    if grid.games.size >= 3:
        fits.append(fit_model(grid, 2))
    chosen = fits[-1]
    trace = skill_trace(grid, chosen)
    fits_table = pa.Table.from_pylist(
        [{"model": f.model, "M": f.m, "r": f.r, "beta": f.beta, "rmse": f.rmse} for f in fits]
    )
    grid_table = grid.table()
    for name, table in (
        ("depth_grid", grid_table),
        ("depth_fits", fits_table),
        ("skill_trace", trace),
    ):
        _write_table(table, out / f"{name}.parquet")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        trace["y_log2_base_budget"].to_numpy(),
        trace["observed_net_score"].to_numpy(),
        "o",
        label="observed (adjacent levels)",
    )
    ax.plot(
        trace["y_log2_base_budget"].to_numpy(),
        trace["model_net_score"].to_numpy(),
        "-",
        label=f"model {chosen.model}",
    )
    ax.set_xlabel("log2 budget of the weaker level above the lowest")
    ax.set_ylabel("net score S = 2p − 1 of the stronger level")
    ax.set_title("Skill Trace")
    ax.legend()
    uri = _tracking_uri(args)
    with tracking.tracked_run(
        args.experiment,
        run_name="skill-depth",
        tracking_uri=uri,
        params={
            "games_dir": str(args.games),
            "levels": len(grid.levels),
            "pairs": int(grid.games.size),
        },
        tags={"kibitz.command": "ratings depth"},
    ):
        for f in fits:
            tracking.log_metrics(
                {
                    f"model{f.model}_M": f.m,
                    f"model{f.model}_r": f.r,
                    f"model{f.model}_beta": f.beta,
                    f"model{f.model}_rmse": f.rmse,
                }
            )
        tracking.log_table(grid_table, "depth_grid")
        tracking.log_table(fits_table, "depth_fits")
        tracking.log_table(trace, "skill_trace")
        tracking.log_figure(fig, "skill_trace")
    print(f"levels: {', '.join(grid.levels)} ({int(grid.games.sum())} cross-level games)")
    print(fits_table.to_pandas().to_string(index=False))
    print("Skill Trace:")
    print(trace.to_pandas().to_string(index=False))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ratings",
        help="outcome-based ratings (Elo, Glicko-2, TrueSkill, TTT), tuning and skill depth",
        description=__doc__.splitlines()[0],
    )
    commands = parser.add_subparsers(dest="ratings_command", metavar="SUBCOMMAND", required=True)

    fit = commands.add_parser(
        "fit", help="replay games and write rating histories and final ratings"
    )
    _add_common(fit, out_required=True)
    _add_system_options(fit)
    fit.set_defaults(func=cmd_fit)

    tune = commands.add_parser("tune", help="choose a rating system's parameters by test-period F1")
    _add_common(tune, out_required=False)
    _add_system_options(tune)
    tune.add_argument("--grid", type=Path, help="YAML grid (default: the system's default grid)")
    when = tune.add_mutually_exclusive_group()
    when.add_argument("--train-until", help="last training date YYYY-MM-DD")
    when.add_argument(
        "--train-frac", type=float, help="training share of games in time order (0.8)"
    )
    tune.set_defaults(func=cmd_tune)

    depth = commands.add_parser(
        "depth", help="skill depth (M, r, β) from games between rank groups"
    )
    _add_common(depth, out_required=False)
    depth.set_defaults(func=cmd_depth)
