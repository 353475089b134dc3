"""The command line a model was made with, as its card and manifest record it."""

from __future__ import annotations

import shlex
import sys


def command_line() -> str:
    """``kibitz …`` as typed (quoted so that it can be pasted back into a shell)."""
    return "kibitz " + " ".join(shlex.quote(a) for a in sys.argv[1:])
