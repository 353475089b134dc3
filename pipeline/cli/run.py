"""``kibitz run``: the main job on the embedded default, end to end, in one command.

    kibitz run                          # 4 games of every band / rank group, chess and Go
    kibitz run --games-per-group 0      # the whole candidating splits (long on a laptop CPU)
    kibitz run --game chess --out /tmp/kibitz

It runs, in order, exactly the commands a user would type — so every stage keeps its own
options, summary and resume behaviour:

1. a sample of the real candidating splits in ``$KIBITZ_DATA_DIR`` (the first N games of each
   chess band file and of each Fox rank-group file) is written to ``OUT/sample/``;
2. ``kibitz ingest chess|go`` with the Kuboki et al. 2025 presets → ``OUT/games``;
3. ``kibitz extract chess|go`` (Maia-1100…1900 + Stockfish; KataGo) → ``OUT/features-GAME``;
4. ``kibitz aggregate`` → ``OUT/aggregates-GAME`` (Parquet);
5. ``kibitz ratings fit --system elo`` → ``OUT/ratings-GAME``, tracked in ``OUT/mlflow.db``
   (one MLflow store for both games: ``mlflow ui --backend-store-uri sqlite:///OUT/mlflow.db``;
   ``MLFLOW_TRACKING_URI`` overrides).

Re-running resumes: finished chunks are not redone. ``OUT/kibitz.duckdb`` is the catalog of it all:
views ``chess_games``, ``go_features``, ``chess_player_features`` … over the tables
(pipeline/core/catalog.py), so ``duckdb OUT/kibitz.duckdb`` needs no paths.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.cli import aggregate, extract, ingest, ratings
from pipeline.core import settings
from pipeline.core.catalog import CATALOG_FILE, refresh_catalog
from pipeline.kinds import game_kind

log = logging.getLogger(__name__)

# 4 games of each of the 8 chess bands and 11 Fox rank groups: 32 + 44 games, every group with
# 8 player-instances in the aggregates, a few minutes end to end on a 2-core CPU.
DEFAULT_GAMES_PER_GROUP = 4
STAGE_COMMANDS = (ingest, extract, aggregate, ratings)  # the commands `kibitz run` types


def _stage(argv: list[str]) -> None:
    """``kibitz ARGV`` in this process, parsed by that command's own parser.

    A user error propagates: ``kibitz run`` prints it as its own one line (``pipeline/cli/main.py``)
    after the logged ``kibitz ARGV`` that names the stage.
    """
    parser = argparse.ArgumentParser(prog="kibitz")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in STAGE_COMMANDS:
        module.register(commands)
    args = parser.parse_args(argv)
    log.info("kibitz %s", " ".join(argv))
    code = int(args.func(args) or 0)
    if code:
        raise SystemExit(f"stage 'kibitz {' '.join(argv)}' failed with exit code {code}")


def _run(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    data = settings.data_dir()
    games_dir = settings.games_dir(out)
    common = ["--no-progress"] if args.no_progress else []
    # One MLflow store for the whole run: OUT is this run's home (OUT/mlflow.db).
    tracking = ["--tracking-uri", settings.tracking_uri(home=out)]
    for game in args.game:
        kind = game_kind(game)
        split = data / kind.candidating
        if not split.is_dir():
            raise SystemExit(f"the real data is missing: {str(split)!r} (set KIBITZ_DATA_DIR)")
        sample = out / "sample" / split.parent.name  # e.g. "fox-selected": readers use the name
        files = kind.sample(split, sample, args.games_per_group)
        features = settings.features_dir(game, out)
        aggregates = settings.aggregates_dir(game, out)
        _stage(["ingest", game, *map(str, files), "--out", str(games_dir), *common])
        _stage(["extract", game, "--games", str(games_dir), "--out", str(features), *common])
        _stage(["aggregate", "--features", str(features), "--out", str(aggregates)])
        _stage(
            [
                "ratings",
                "fit",
                "--games",
                str(games_dir),
                "--game",
                game,
                "--system",
                "elo",
                "--out",
                str(out / f"ratings-{game}"),
                *tracking,
            ]
        )
    views = refresh_catalog(out)
    print(f"done: outputs in {out}; {len(views)} views in {out / CATALOG_FILE} (open with DuckDB)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="the main job on the embedded default: ingest → extract → aggregate → ratings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--game",
        choices=["chess", "go"],
        action="append",
        help="run one game kind (repeatable; default both)",
    )
    parser.add_argument(
        "--games-per-group",
        type=int,
        default=DEFAULT_GAMES_PER_GROUP,
        help="games per chess band / Go rank group from the candidating split"
        " (0 = all; default %(default)s)",
    )
    parser.add_argument(
        "--out",
        default=str(settings.home_dir()),
        help="output folder, with the MLflow store mlflow.db (default: $KIBITZ_HOME)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=_run_with_defaults)


def _run_with_defaults(args: argparse.Namespace) -> int:
    args.game = args.game or ["chess", "go"]
    return _run(args)
