"""Who and what ``kibitz serve`` lets in: where it listens, the token, and a post's size and time.

The service answers on 127.0.0.1 unless told otherwise; anywhere else it needs a bearer token
(``KIBITZ_SERVE_TOKEN`` or ``--token-file``, never the command line, which ``ps`` shows).
A post's body is refused before it is read when its ``Content-Length`` says it is too large,
and while it is read once it passes the limit (a chunked upload) or the time allowed (a slow
or endless one): 413 and 408, with at most the limit held in memory.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pipeline.core.errors import KibitzError
from pipeline.serve.records import PostError

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class ListenError(KibitzError, ValueError):
    """Listening beyond this machine without a token."""


@dataclass(frozen=True)
class Limits:
    """What one post may be. Of 40 games of each testing split (bench/speed/bench_serve.py's),
    a Lichess blitz PGN with clocks is 2.5 KB and 75 plies at the median (at most 5.8 KB), a
    Fox SGF 1.5 KB and 217 moves (at most 2.4 KB, 364 moves): the defaults leave a wide
    margin above both."""

    max_body_bytes: int = 256 * 1024
    body_timeout_s: float = 10.0
    max_moves: int = 1_000  # plies; more is refused with 413 before any net sees it


def check_listen(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if host not in LOCAL_HOSTS and not token:
        raise ListenError(
            f"listening on {host!r} needs a bearer token: set KIBITZ_SERVE_TOKEN or --token-file"
            " (without one, the service answers on 127.0.0.1 only)"
        )


def authorized(header: str | None, token: str | None) -> bool:
    """Whether an ``Authorization`` header carries the token (any header when there is none)."""
    if not token:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)


async def read_body(
    content_length: str | None, chunks: AsyncIterator[bytes], limits: Limits
) -> bytes:
    """The whole body, or a :class:`PostError`: 413 past ``max_body_bytes`` (refused at once
    when ``Content-Length`` says so), 408 when it takes longer than ``body_timeout_s``."""
    if content_length is not None:
        if not content_length.isdigit():
            raise PostError(400, f"Content-Length {content_length!r} is not a number")
        if int(content_length) > limits.max_body_bytes:
            raise PostError(413, too_large(int(content_length), limits))

    async def collect() -> bytes:
        parts, size = [], 0
        async for chunk in chunks:
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise PostError(413, too_large(size, limits, at_least=True))
            parts.append(chunk)
        return b"".join(parts)

    try:
        return await asyncio.wait_for(collect(), limits.body_timeout_s)
    except asyncio.TimeoutError:
        raise PostError(
            408, f"the body did not arrive within {limits.body_timeout_s:g} s"
        ) from None


def too_large(size: int, limits: Limits, *, at_least: bool = False) -> str:
    more = "more than " if at_least else ""
    return f"the body is {more}{size:,} bytes; this service takes up to {limits.max_body_bytes:,}"
