"""The pack's .tar.gz, written with the standard library's tarfile and gzip in one stream: entries in the order
given, fixed mtimes, uid/gid 0, no user names, gzip without a timestamp or file name, so that the same files give
the same bytes."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import tarfile
from collections.abc import Iterable
from pathlib import Path

from .info import FIXED_MTIME

# The level is not part of the format (the manifest's digests are over the unpacked files); level 1 made an
# archive 41 % larger for little time saved (BENCHMARKS.md, "Task packs").
COMPRESSLEVEL = 6


@dataclasses.dataclass
class Entry:
    """One file of the archive, under the pack's folder: its bytes, a file to copy, or a hard link to an
    earlier entry."""

    path: str
    data: bytes | None = None
    source: Path | None = None
    link: str | None = None
    executable: bool = False


def path_key(relative: str) -> tuple[bool, list[str]]:
    """The order of the archive: path by path, component by component, the task folders last."""
    return relative.startswith("tasks/"), relative.split("/")


def write_targz(*, out, top: str, entries: Iterable[Entry]) -> tuple[str, int]:
    """Write `entries` under the folder `top` as a .tar.gz to `out` (a path or a binary file); (sha256, size)."""
    own = not hasattr(out, "write")
    handle = open(out, "wb") if own else out
    hashing = _HashingWriter(handle)
    try:
        with (
            gzip.GzipFile(filename="", mode="wb", compresslevel=COMPRESSLEVEL, fileobj=hashing, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
        ):
            for entry in entries:
                info = tarfile.TarInfo(f"{top}/{entry.path}")
                info.mtime, info.uid, info.gid, info.uname, info.gname = FIXED_MTIME, 0, 0, "", ""
                info.mode = 0o755 if entry.executable else 0o644  # a link's mode: extractors chmod the shared inode
                if entry.link is not None:
                    info.type, info.linkname = tarfile.LNKTYPE, f"{top}/{entry.link}"
                    tar.addfile(info)
                elif entry.source is not None:
                    with open(entry.source, "rb") as source:
                        info.size = source.seek(0, io.SEEK_END)
                        source.seek(0)
                        tar.addfile(info, source)
                else:
                    info.size = len(entry.data)
                    tar.addfile(info, io.BytesIO(entry.data))
    finally:
        if own:
            handle.close()
    return hashing.digest.hexdigest(), hashing.size


class _HashingWriter(io.RawIOBase):
    """A write-only file that passes what it is given on and hashes it."""

    def __init__(self, handle):
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.handle.write(data)
        self.digest.update(data)
        self.size += len(data)
        return len(data)
