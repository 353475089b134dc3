"""Stream the members of a 7z archive (plain ``.7z`` or multi-volume ``.7z.001``) one by one.

The Fox dump ships as solid 7z archives: thousands of small SGFs compressed as one LZMA2
stream, split into ``.7z.001``, ``.7z.002``… volumes. Extracting to disk first would write
millions of files; instead the members are decompressed in archive order straight into
memory and handed over one at a time, so memory stays at one member (plus the decoder).

py7zr reads the archive headers; decompression walks each folder (a solid block) with its
decoder and checks every member's CRC. A member whose CRC does not match is reported as a
``CorruptMemberError`` and the stream goes on (the decoder is still in step). When the decoder
itself fails, nothing after that point in the same solid block can be recovered: the failing
member and every later member of the block are reported with the error, members of other
blocks are still read. A member range (``first``, ``stop``) lets a chunk read part of an
archive; the block prefix before ``first`` is decompressed and discarded, which is why chunks
of a solid archive should be large.

Used by ``pipeline.ingest.sgf``; run ``python -m pytest tests/test_ingest_go.py -k 7z``.
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import multivolumefile
import py7zr
import py7zr.exceptions

from pipeline.core.errors import KibitzError

_MULTI_VOLUME_SUFFIX = ".001"


class CorruptArchiveError(KibitzError, ValueError):
    """An archive whose headers cannot be read (nothing in it can be listed)."""


class CorruptMemberError(ValueError):
    """One member that cannot be decompressed or whose CRC does not match."""


@dataclass(frozen=True)
class ArchiveMember:
    """A regular file inside the archive, in archive order (``index`` counts files only)."""

    index: int
    name: str  # archive-relative path with forward slashes, e.g. "9k/1571194973010001560.sgf"
    size: int


def is_7z_path(path: Path) -> bool:
    """True for ``x.7z`` and for the first volume ``x.7z.001`` of a split archive."""
    name = path.name.lower()
    return name.endswith(".7z") or name.endswith(".7z" + _MULTI_VOLUME_SUFFIX)


@contextmanager
def _open_archive(path: Path) -> Iterator[tuple[py7zr.SevenZipFile, BinaryIO]]:
    """Open a plain or multi-volume archive; header problems become ``CorruptArchiveError``."""
    if path.name.lower().endswith(_MULTI_VOLUME_SUFFIX):
        fp: BinaryIO = multivolumefile.open(path.with_suffix(""), mode="rb")
    else:
        fp = open(path, "rb")  # noqa: SIM115 - closed in the finally below
    try:
        try:
            archive = py7zr.SevenZipFile(fp, mode="r")
        except (py7zr.exceptions.ArchiveError, lzma.LZMAError, EOFError, OSError, KeyError) as exc:
            raise CorruptArchiveError(
                f"cannot read 7z archive {str(path)!r}: {type(exc).__name__}: {exc}"
            ) from exc
        yield archive, fp
    finally:
        fp.close()


def _file_entries(archive: py7zr.SevenZipFile) -> list:
    return [f for f in archive.files if not f.is_directory]


def list_members(path: Path) -> list[ArchiveMember]:
    """Regular files of the archive in archive (decompression) order."""
    with _open_archive(path) as (archive, _):
        return [
            ArchiveMember(i, f.filename.replace("\\", "/"), int(f.uncompressed or 0))
            for i, f in enumerate(_file_entries(archive))
        ]


def iter_members(
    path: Path, first: int = 0, stop: int | None = None
) -> Iterator[tuple[ArchiveMember, bytes | CorruptMemberError]]:
    """Yield ``(member, content)`` for members ``first``…``stop - 1``; content is the error when
    the member cannot be read (see the module docstring for what a decoder failure costs)."""
    with _open_archive(path) as (archive, fp):
        entries = _file_entries(archive)
        stop = len(entries) if stop is None else min(stop, len(entries))
        index_of = {f.id: i for i, f in enumerate(entries)}
        for i in range(first, stop):  # empty files have no data stream (and no folder)
            if entries[i].emptystream:
                yield ArchiveMember(i, entries[i].filename.replace("\\", "/"), 0), b""
        header = archive.header
        if getattr(header, "main_streams", None) is None:
            return
        positions = header.main_streams.packinfo.packpositions
        for folder_no, folder in enumerate(header.main_streams.unpackinfo.folders):
            files = [f for f in folder.files if f.id in index_of]
            wanted = [f for f in files if first <= index_of[f.id] < stop]
            if not wanted:
                continue
            last = index_of[wanted[-1].id]
            fp.seek(archive.afterheader + positions[folder_no])
            decoder = None
            failure: CorruptMemberError | None = None
            for f in files:
                i = index_of[f.id]
                if i > last:
                    break
                member = ArchiveMember(i, f.filename.replace("\\", "/"), int(f.uncompressed or 0))
                if failure is None:
                    try:
                        if decoder is None:
                            decoder = folder.get_decompressor(f.compressed, reset=True)
                        content = _read_member(fp, decoder, f)
                    except (
                        lzma.LZMAError,
                        py7zr.exceptions.ArchiveError,
                        EOFError,
                        OSError,
                    ) as exc:
                        failure = CorruptMemberError(
                            f"7z archive {str(path)!r}: member {member.name!r} cannot be "
                            f"decompressed ({type(exc).__name__}: {exc}); the rest of its solid "
                            "block is unreadable"
                        )
                if i < first:
                    continue
                if failure is not None:
                    yield member, failure
                elif f.crc32 is not None and zlib.crc32(content) != f.crc32:
                    yield (
                        member,
                        CorruptMemberError(
                            f"7z archive {str(path)!r}: member {member.name!r} fails its CRC check "
                            f"(crc32 {zlib.crc32(content):08x}, archive says {f.crc32:08x})"
                        ),
                    )
                else:
                    yield member, content


def _read_member(fp: BinaryIO, decoder, entry) -> bytes:
    """Decompress exactly one member's bytes from the folder stream."""
    remaining = int(entry.uncompressed or 0)
    out = bytearray()
    while remaining > 0:
        before = fp.tell()
        piece = decoder.decompress(fp, remaining)
        if piece:
            out += piece
            remaining -= len(piece)
        elif fp.tell() == before:
            raise EOFError(f"archive data ends {remaining} bytes before the end of the member")
    return bytes(out)
