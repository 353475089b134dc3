"""The ``kibitz`` command line.

Each command lives in its own module of ``pipeline/cli`` exposing ``register(subparsers)``; this
file only assembles them, so options are parsed in one place per command. Run ``kibitz --help``.

A user error (a :class:`~pipeline.core.errors.KibitzError`, a missing or unreadable file, or a
``SystemExit`` with a message) is printed here, once for every command, as one line
``kibitz COMMAND: message`` on stderr with exit status 1; ``kibitz -v COMMAND`` adds its
traceback. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback

from pipeline.cli import (
    aggregate,
    audit,
    estimate,
    extract,
    ingest,
    models,
    ratings,
    report,
    run,
    serve,
    train,
)
from pipeline.core.errors import KibitzError

# Errors a user can fix by changing the command, its inputs or its settings (not bugs).
USER_ERRORS = (
    KibitzError,
    FileNotFoundError,
    PermissionError,
    NotADirectoryError,
    IsADirectoryError,
)

# One module per top-level command, in the order of the data flow (files → models).
COMMANDS = (
    run, ingest, extract, models, ratings, aggregate, train, report, estimate, audit, serve
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kibitz",
        description="Estimate the strength of chess and Go players from their moves.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging; tracebacks of user errors"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status, or ``SystemExit("kibitz COMMAND: …")`` on a user error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        cause = getattr(exc, "cause", None)  # a Ray task's error: the worker's exception
        shown = cause if isinstance(cause, BaseException) else exc
        raise SystemExit(_user_error(args, str(shown) or type(shown).__name__)) from exc
    except SystemExit as exc:
        if not isinstance(exc.code, str):  # argparse's exit 2, an explicit status
            raise
        raise SystemExit(_user_error(args, exc.code)) from exc


def _user_error(args: argparse.Namespace, message: str) -> str:
    """The one line ``kibitz COMMAND: message``; the traceback first with ``-v``.

    It leaves as ``SystemExit(line)``: Python prints the line on stderr and exits with 1; a
    message that already starts with ``kibitz `` keeps its own prefix.
    """
    if args.verbose:
        traceback.print_exc()
    first = message.strip().splitlines()[0] if message.strip() else message
    return first if first.startswith("kibitz ") else f"kibitz {args.command}: {first}"


if __name__ == "__main__":
    sys.exit(main())
