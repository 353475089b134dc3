"""Open plain, zstd- and bzip2-compressed game files as one streamed sequence of bytes.

Lichess ships its monthly dumps as ``.pgn.zst`` files of ~30 GB compressed (~200 GB of text),
so nothing here ever holds a whole file in memory: :func:`iter_blocks` yields decompressed
blocks of bounded size. The format is sniffed from the first bytes (magic numbers), not from
the file name, so a mislabelled file is still read correctly.

A stream that ends inside a zstd frame (a partial download) or whose compressed bytes are
damaged does not end silently: after yielding every byte that could be decoded, the iterator
raises :class:`TruncatedStreamError` / :class:`CorruptStreamError` naming the file, so the
caller can keep the games before the cut and report the rest.

Try it::

    python -c "from pipeline.ingest.compressed_streams import iter_blocks; \\
        print(sum(map(len, iter_blocks('../shared/data/chess/lichess-2024-02-blitz/testing/1000-1200.pgn.zst'))))"
"""

from __future__ import annotations

import bz2
from collections.abc import Iterator
from pathlib import Path

import zstandard

from pipeline.core.errors import KibitzError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BZIP2_MAGIC = b"BZh"

# Compressed bytes read per step; decompressed blocks are a few times larger (Lichess ~7x).
READ_SIZE = 1 << 20


class CorruptStreamError(KibitzError, ValueError):
    """The compressed bytes of a file cannot be decoded."""


class TruncatedStreamError(CorruptStreamError):
    """A compressed file ends before its last frame / stream is complete."""


def sniff_compression(path: str | Path) -> str:
    """Return ``"zstd"``, ``"bzip2"`` or ``"plain"`` from the file's first bytes."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head.startswith(BZIP2_MAGIC):
        return "bzip2"
    return "plain"


def _plain_blocks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while block := handle.read(READ_SIZE):
            yield block


def _zstd_blocks(path: Path) -> Iterator[bytes]:
    """Decode every zstd frame in turn (a file may hold several concatenated frames)."""
    with open(path, "rb") as handle:
        decoder = zstandard.ZstdDecompressor().decompressobj()
        inside_frame = False  # True once a frame has started and until it ends
        consumed = 0
        while compressed := handle.read(READ_SIZE):
            consumed += len(compressed)
            while compressed:
                try:
                    block = decoder.decompress(compressed)
                except zstandard.ZstdError as error:
                    raise CorruptStreamError(
                        f"{str(path)!r}: zstd data corrupt before compressed byte {consumed}: "
                        f"{error}"
                    ) from error
                inside_frame = True
                if block:
                    yield block
                if decoder.eof:
                    compressed = decoder.unused_data
                    decoder = zstandard.ZstdDecompressor().decompressobj()
                    inside_frame = False
                else:
                    compressed = b""
        if inside_frame:
            raise TruncatedStreamError(
                f"{str(path)!r}: zstd stream ends inside a frame after {consumed} compressed "
                "bytes (file truncated?)"
            )


def _bz2_blocks(path: Path) -> Iterator[bytes]:
    with bz2.open(path, "rb") as handle:
        while True:
            try:
                block = handle.read(READ_SIZE)
            except EOFError as error:
                raise TruncatedStreamError(
                    f"{str(path)!r}: bzip2 stream ends before its end marker (file truncated?)"
                ) from error
            except OSError as error:
                raise CorruptStreamError(f"{str(path)!r}: bzip2 data corrupt: {error}") from error
            if not block:
                return
            yield block


def iter_blocks(path: str | Path) -> Iterator[bytes]:
    """Yield the decompressed bytes of ``path`` in blocks of bounded size.

    Raises :class:`TruncatedStreamError` or :class:`CorruptStreamError` (naming the file) after
    the last decodable block when the compressed stream is damaged.
    """
    path = Path(path)
    kind = sniff_compression(path)
    if kind == "zstd":
        return _zstd_blocks(path)
    if kind == "bzip2":
        return _bz2_blocks(path)
    return _plain_blocks(path)
