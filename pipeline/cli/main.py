"""The ``kibitz`` command line.

Each command lives in its own ``cli_*`` module exposing ``register(subparsers)``; this file only
assembles them, so options are parsed in one place per command. Run ``kibitz --help``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# One module per top-level command, in the order of the data flow (files → models).
COMMAND_MODULES = [
    "pipeline.cli.run",
    "pipeline.cli.ingest",
    "pipeline.cli.extract",
    "pipeline.cli.models",
    "pipeline.cli.ratings",
    "pipeline.cli.aggregate",
    "pipeline.cli.train",
    "pipeline.cli.report",
    "pipeline.cli.estimate",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kibitz",
        description="Estimate the strength of chess and Go players from their moves.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
