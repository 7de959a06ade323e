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
# What tarfile writes is handed to gzip in pieces of this size (`_GzipSink`).
WRITE_BUFFER = 1 << 20


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
        with gzip.GzipFile(filename="", mode="wb", compresslevel=COMPRESSLEVEL, fileobj=hashing, mtime=0) as gz:
            sink = _GzipSink(gz)
            buffered = io.BufferedWriter(sink, WRITE_BUFFER)
            try:
                with tarfile.open(fileobj=buffered, mode="w", format=tarfile.GNU_FORMAT) as tar:
                    for entry in entries:
                        _add(tar, top, entry)
                buffered.flush()
            finally:
                sink.gz = None  # after an error (a cancel), what is still buffered goes with the archive
    finally:
        if own:
            handle.close()
    return hashing.digest.hexdigest(), hashing.size


def _add(tar: tarfile.TarFile, top: str, entry: Entry) -> None:
    info = _TarInfo(f"{top}/{entry.path}")
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
    # TarFile keeps every TarInfo it wrote (for reading back, which a "w" archive never does): 110,000 of
    # them for 10,000 tasks, each a cyclic-GC-tracked object the collector walks again and again.
    tar.members.clear()


class _TarInfo(tarfile.TarInfo):
    """A TarInfo made for one entry and never used again, so that `TarFile.addfile`'s defensive
    `copy.copy` of it (through `__reduce_ex__`, 7.6 % of a 10,000-task build: py-spy) can be the object itself;
    its header is written by tarfile as before."""

    __slots__ = ()

    def __copy__(self):
        return self


class _GzipSink(io.RawIOBase):
    """The gzip stream behind an `io.BufferedWriter`: tarfile writes each entry's header, data and padding
    separately (about 230,000 writes for 10,000 tasks), and each `GzipFile.write` is Python work of its own (a CRC,
    a compress call, a write to the file below even when deflate had nothing to give: 19 % of the build).
    Deflate's output does not depend on how its input is cut, so the bytes are the same."""

    def __init__(self, gz: gzip.GzipFile):
        self.gz: gzip.GzipFile | None = gz
        self.position = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def write(self, data) -> int:
        if self.gz is None:
            return memoryview(data).nbytes
        written = self.gz.write(data)
        self.position += written
        return written


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
