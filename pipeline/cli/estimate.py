"""``kibitz estimate``: estimate one player's rank group from a few of their games.

    kibitz estimate chess games.pgn --player DrNykterstein --model kibitz-out/meta-chess
    kibitz estimate go a.sgf b.sgf --player 0a1b2c --model kibitz-out/meta-go --json

Reads the files, keeps the player's games, extracts their features with the nets the
meta-models were trained on, aggregates them, applies the meta-model whose n is nearest to the
number of games and prints the estimated rank group with its ±1 band; writes a PNG report
(prior profile and loss by move number against every rank group) into ``--work``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from pipeline.core import settings


def cmd_estimate(args: argparse.Namespace) -> int:
    from pipeline.jobs.estimate import run_estimate
    from pipeline.meta.train import load_meta_models

    model_dir = Path(args.model) if args.model else settings.meta_dir(args.game)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="kibitz-estimate-"))
    models = load_meta_models(model_dir)
    estimate = run_estimate(
        args.game,
        args.files,
        args.player,
        models,
        work,
        config_path=Path(args.config) if args.config else None,
        nodes=args.nodes,
        feature_set=args.feature_set,
    )
    print(json.dumps(asdict(estimate), indent=1) if args.json else estimate.to_text())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "estimate",
        help="estimate a player's rank group from a few of their games (ingest → … → meta-model)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", choices=["chess", "go"])
    parser.add_argument("files", nargs="+", metavar="FILE", help="PGN / SGF files or folders")
    parser.add_argument("--player", required=True, help="the player's name as in the files")
    parser.add_argument(
        "--model", help="output folder of `kibitz train meta` (default: $KIBITZ_HOME/meta-GAME)"
    )
    parser.add_argument(
        "--work", help="folder for the features, aggregates and report (default: a temp folder)"
    )
    parser.add_argument(
        "--config", help="extraction config (default: the training features' config)"
    )
    parser.add_argument("--nodes", type=int, help="override Stockfish's node limit")
    parser.add_argument(
        "--feature-set", help="meta-model feature set (default: full_dcloss, else full)"
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    parser.set_defaults(func=cmd_estimate)
