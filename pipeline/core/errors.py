"""The one base class of the errors a user can fix: bad input, options, configs or folders.

``kibitz`` prints an error derived from :class:`KibitzError` as one line, ``kibitz COMMAND:
message``, and exits 1; ``kibitz -v`` shows its traceback. Any other exception is a bug and
keeps its traceback. A user-error class derives from ``KibitzError`` and from the built-in that
says what went wrong, so callers that catch the built-in still catch it::

    class RulesError(KibitzError, ValueError):
        \"\"\"A selection-rules file that cannot be used.\"\"\"

``FileNotFoundError`` and ``PermissionError`` are user errors too (``pipeline/cli/main.py``).
"""

from __future__ import annotations


class KibitzError(Exception):
    """An error in what the user gave Kibitz (input, option, config, folder), not a bug."""
