"""``kibitz estimate``: estimate one player's rank group from a few of their games.

    kibitz estimate chess games.pgn --player DrNykterstein
    kibitz estimate go a.sgf b.sgf --player 0a1b2c --json
    kibitz estimate chess games.pgn --player DrNykterstein --model kibitz-out/meta-chess

Reads the files, keeps the player's games, extracts their features with the nets the
meta-models were trained on, aggregates them, applies the meta-model whose n is nearest to the
number of games and prints the estimated rank group with its ±1 band, the games and moves
used, and that model's own accuracy at that n; writes a PNG report (prior profile and loss by
move number against every rank group) into ``--work``. Besides the group: the strength on the
data's scale (chess rating, Go numeric rank) with conformal 80 % and 95 % intervals, and the
games at which the model's measured ±1 accuracy reaches ``--confidence``; ``--progressive``
prints (and draws) the estimate after each game. The meta-models are the shipped default
``kibitz-meta-GAME`` (``kibitz models list``) unless ``--model`` names a registry entry or a
``kibitz train meta`` output folder.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict
from pathlib import Path


def cmd_estimate(args: argparse.Namespace) -> int:
    from pipeline.jobs.estimate import run_estimate
    from pipeline.meta.registered import resolve_meta_models

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="kibitz-estimate-"))
    models = resolve_meta_models(args.model, args.game)
    estimate = run_estimate(
        args.game,
        args.files,
        args.player,
        models,
        work,
        config_path=Path(args.config) if args.config else None,
        nodes=args.nodes,
        feature_set=args.feature_set,
        progressive=args.progressive,
        confidence=args.confidence,
    )
    print(json.dumps(asdict(estimate), indent=1) if args.json else estimate.to_text())
    return 0


def _share(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {text!r}")
    return value


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
        "--model",
        help="meta-models: a registry name or a `kibitz train meta` output folder"
        " (default: the shipped kibitz-meta-GAME)",
    )
    parser.add_argument(
        "--work", help="folder for the features, aggregates and report (default: a temp folder)"
    )
    parser.add_argument(
        "--config", help="extraction config (default: the training features' config)"
    )
    parser.add_argument("--nodes", type=int, help="override Stockfish's node limit")
    parser.add_argument(
        "--feature-set",
        help="meta-model feature set (default: full_dcloss_clock, else full_dcloss, else full;"
        " games without a clock: the first that reads none)",
    )
    parser.add_argument(
        "--progressive",
        action="store_true",
        help="also the estimate after each game, in the files' order (printed, in --json and"
        " drawn in the report)",
    )
    parser.add_argument(
        "--confidence",
        type=_share,
        default=0.9,
        help="the ±1-group accuracy the games-needed figure aims at (default 0.9)",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    parser.set_defaults(func=cmd_estimate)
