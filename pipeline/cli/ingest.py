"""``kibitz ingest``: read Lichess PGN or Fox SGF dumps into the selected games table.

- ``kibitz ingest chess SOURCE... [--out DIR] [--preset NAME | --rules FILE]`` reads ``.pgn``,
  ``.pgn.zst`` (streamed), ``.pgn.bz2`` and folders of them;
- ``kibitz ingest go SOURCE... [...]`` reads SGF files, collections, folders and ``.7z``
  archives (``.7z.001`` multi-volume) through ``pipeline.ingest.sgf``.

Common options: ``--games-per-chunk N`` (work unit and resume granularity), ``--force`` (redo
from scratch), ``--address ADDR`` (join a Ray cluster), ``--num-cpus N`` (embedded Ray).
The default output is ``$KIBITZ_HOME/games``; the default rules are the game's Kuboki et al.
2025 preset (``--preset all`` keeps every readable game). Exit status 1 when a chunk failed,
or when no input held a single readable game (all quarantined, or none at all): then, after
the summary, one line ``kibitz ingest: no readable game in 'FILE' (N quarantined: …)``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline.core import settings
from pipeline.core.errors import KibitzError
from pipeline.ingest.selection import PRESET_NAMES, load_preset, load_rules
from pipeline.ingest.work import (
    QUARANTINE_TABLE,
    IngestConfig,
    format_summary,
    resolve_sources,
)
from pipeline.jobs.ingest import run_ingest

logger = logging.getLogger(__name__)

DEFAULT_PRESETS = {"chess": "chess-kuboki2025", "go": "go-kuboki2025"}
DEFAULT_GAMES_PER_CHUNK = {"chess": 20_000, "go": 20_000}


class NoReadableGameError(KibitzError, ValueError):
    """Inputs of which not one game could be read (every game quarantined, or none found)."""


def check_readable(summary: dict) -> None:
    """Raise :class:`NoReadableGameError` when the run's inputs held no readable game."""
    if summary["games_read"] - summary["quarantined"] > 0:
        return
    files = ", ".join(repr(f) for f in summary["per_file"] or summary["sources"])
    reasons = ", ".join(f"{k}: {v}" for k, v in summary["quarantine_reasons"].items())
    quarantine = Path(summary["out_dir"]) / QUARANTINE_TABLE
    detail = f"; {reasons}; see {quarantine}" if reasons else ""
    raise NoReadableGameError(
        f"no readable game in {files} ({summary['quarantined']} quarantined{detail})"
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    rules = (
        load_rules(args.rules)
        if args.rules
        else load_preset(args.preset or DEFAULT_PRESETS[args.game])
    )
    config = IngestConfig(
        game=args.game,
        sources=resolve_sources(args.sources),
        out_dir=Path(args.out) if args.out else settings.games_dir(),
        rules=rules,
        games_per_chunk=args.games_per_chunk or DEFAULT_GAMES_PER_CHUNK[args.game],
        force=args.force,
        address=args.address,
        num_cpus=args.num_cpus,
        show_progress=not args.no_progress,
    )
    summary = run_ingest(config)
    print(format_summary(summary))
    print(f"  summary: {config.out_dir / '_summary.json'}")
    if summary["chunks"]["failed"]:
        return 1
    check_readable(summary)
    return 0


def _add_game_parser(subparsers: argparse._SubParsersAction, game: str, what: str) -> None:
    parser = subparsers.add_parser(game, help=what, description=what)
    parser.add_argument("sources", nargs="+", metavar="SOURCE", help="files or folders")
    parser.add_argument("--out", help="output folder (default: $KIBITZ_HOME/games)")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        help=f"built-in selection rules (default: {DEFAULT_PRESETS[game]})",
    )
    chosen.add_argument("--rules", help="your own selection rules YAML (see docs/guide/ingest.md)")
    parser.add_argument(
        "--games-per-chunk",
        type=int,
        help=f"games per task and per resume unit (default: {DEFAULT_GAMES_PER_CHUNK[game]:,})",
    )
    parser.add_argument("--force", action="store_true", help="delete earlier output and redo all")
    parser.add_argument("--address", help="Ray cluster address to join (default: embedded Ray)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of the embedded Ray (default: all)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=cmd_ingest, game=game)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="read Lichess PGN / Fox SGF dumps into the selected, partitioned games table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    games = parser.add_subparsers(dest="game", metavar="GAME", required=True)
    _add_game_parser(games, "chess", "read Lichess PGN (.pgn, .pgn.zst, .pgn.bz2, folders)")
    _add_game_parser(games, "go", "read Fox SGF (files, collections, folders, .7z, .7z.001)")
