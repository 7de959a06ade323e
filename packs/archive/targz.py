"""The pack's .tar.gz: a hand-made tar writer and deflate stream that the renderer process (renderer.py) and
the build join into one gzip member."""

from __future__ import annotations

import hashlib
import io
import struct
import tarfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from .info import FIXED_MTIME

if TYPE_CHECKING:
    from .renderer import Spool

# The share of the progress bar for writing the tasks; the rest is compressing the archive.
WRITE_SHARE = 0.8


def path_key(relative: str) -> list[str]:
    return relative.split("/")


# The level is not part of the format (the manifest's digests are over the unpacked files), but
# level 1 does not pay here: measured side by side on 3,000 tasks the whole build took 1.7–2.3 s
# of CPU at level 1 against 2.0 s at level 6 (the archive is mostly tar headers, zero padding and
# repeated text, which deflate matches quickly at any level), for an archive 41 % larger.
COMPRESSLEVEL = 6
COPY_CHUNK = 1 << 20


def write_tar(*, root: Path, top: str, out, spool: Spool, total: int, progress) -> tuple[str, int]:
    """The reproducible .tar.gz: entries in path order (component by component; the task folders,
    spooled in that order, last), fixed mtimes, uid/gid 0, no names, gzip without timestamp or
    file name. One gzip member whose deflate stream is three pieces compressed apart: the top files
    (here), the spooled task folders (by the renderer), the end of the tar. Returns (sha256, size)."""
    own = not hasattr(out, "write")
    handle = open(out, "wb") if own else out
    hashing = _HashingWriter(handle)
    try:
        hashing.write(_GZIP_HEADER)
        head = DeflateSink(hashing)
        tar = TarWriter(head)
        names = sorted((path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()), key=path_key)
        for relative in names:
            tar.add_bytes(f"{top}/{relative}", (root / relative).read_bytes(), executable=False)
        tar.flush()
        head.close(final=False)
        compressed = spool.path.stat().st_size
        copied = 0
        with open(spool.path, "rb") as spooled:
            while chunk := spooled.read(COPY_CHUNK):
                hashing.write(chunk)
                copied += len(chunk)
                if progress is not None:
                    progress(int(total * WRITE_SHARE + total * (1 - WRITE_SHARE) * copied / max(1, compressed)))
        tail = DeflateSink(hashing)
        tail.write(tar_end(tar.offset + spool.size))
        tail.close(final=True)
        crc = crc32_combine(crc32_combine(head.crc, spool.crc, spool.size), tail.crc, tail.size)
        hashing.write(struct.pack("<II", crc, (head.size + spool.size + tail.size) & 0xFFFFFFFF))
    finally:
        if own:
            handle.close()
    return hashing.digest.hexdigest(), hashing.size


# What gzip.GzipFile(filename="", mtime=0) writes at level 6: deflate, no flags, no timestamp, no
# extra flags, OS unknown.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


class DeflateSink:
    """Raw deflate to a binary handle, with the CRC-32 and length of what went in. Pieces compressed
    apart (the last one closed final, the others with a sync flush) are one valid deflate stream
    when joined, as pigz joins its pieces; `crc32_combine` gives the whole one's CRC-32."""

    def __init__(self, handle):
        self.handle = handle
        self.compressor = zlib.compressobj(COMPRESSLEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY)
        self.crc = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.handle.write(self.compressor.compress(data))

    def close(self, *, final: bool) -> None:
        self.handle.write(self.compressor.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH))


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _gf2_square(matrix: list[int]) -> list[int]:
    return [_gf2_times(matrix, matrix[row]) for row in range(32)]


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc1 = crc32(A), crc2 = crc32(B) and len(B): zlib's crc32_combine
    (not in Python's zlib module), squaring the operator that appends a zero bit."""
    if length2 <= 0:
        return crc1
    operator = [0xEDB88320] + [1 << row for row in range(31)]  # appends one zero bit to a CRC's message
    operator = _gf2_square(_gf2_square(_gf2_square(operator)))  # one zero byte
    while length2:  # B's length in bytes, bit by bit: the operator for 1, 2, 4, ... bytes
        if length2 & 1:
            crc1 = _gf2_times(operator, crc1)
        length2 >>= 1
        if length2:
            operator = _gf2_square(operator)
    return crc1 ^ crc2


_NAME_MAX = 100  # longer names and link targets take tarfile's GNU long-name blocks
_ZERO_ID = b"0000000\0"
_MTIME_FIELD = b"%011o\0" % FIXED_MTIME


def tar_header(arcname: str, *, size: int, mode: int, typeflag: bytes, linkname: str = "") -> bytes:
    """The GNU-format header `tarfile` writes for an entry with our fixed metadata (mtime, uid/gid 0,
    no user names), byte for byte, without a TarInfo, its copy and its field-by-field packing: the
    fields that never change per mode and type are joined and summed once (110,000 entries a pack)."""
    name = arcname.encode("utf-8", "surrogateescape")
    link = linkname.encode("utf-8", "surrogateescape")
    if len(name) > _NAME_MAX or len(link) > _NAME_MAX or size >= 8**11:
        info = tar_info(arcname)
        info.mode, info.size, info.type, info.linkname = mode, size, typeflag, linkname
        return info.tobuf(tarfile.GNU_FORMAT, tarfile.ENCODING, "surrogateescape")
    fixed = _HEADER_FIXED.get((mode, typeflag))
    if fixed is None:
        ids = b"%07o\0" % (mode & 0o7777) + _ZERO_ID + _ZERO_ID
        # the checksum counts its own field as eight spaces
        fixed = _HEADER_FIXED[(mode, typeflag)] = (ids, sum(ids + _MTIME_FIELD + b"        " + typeflag + _GNU_TAIL))
    size_field = b"%011o\0" % size
    checksum = fixed[1] + sum(name) + sum(size_field) + sum(link)
    return b"".join(
        (
            name.ljust(100, b"\0"),
            fixed[0],
            size_field,
            _MTIME_FIELD,
            b"%06o\0 " % checksum,
            typeflag,
            link.ljust(100, b"\0"),
            _GNU_TAIL,
        )
    )


_GNU_TAIL = tarfile.GNU_MAGIC + bytes(247)
_HEADER_FIXED: dict[tuple[int, bytes], tuple[bytes, int]] = {}


def tar_info(arcname: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname)
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class TarWriter:
    """Tar entries (regular files and hard links) to a binary handle, in large writes; `close`
    ends the archive as `tarfile` does (two zero blocks, then zeros to a 10240-byte record)."""

    def __init__(self, handle):
        self.handle = handle
        self.offset = 0
        self.parts: list[bytes] = []
        self.pending = 0

    def _put(self, data: bytes) -> None:
        self.parts.append(data)
        self.pending += len(data)
        self.offset += len(data)
        if self.pending >= COPY_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.handle.write(b"".join(self.parts))
            self.parts, self.pending = [], 0

    def add_bytes(self, arcname: str, data: bytes, *, executable: bool) -> None:
        self._put(tar_header(arcname, size=len(data), mode=0o755 if executable else 0o644, typeflag=tarfile.REGTYPE))
        self._put(data)
        remainder = len(data) % tarfile.BLOCKSIZE
        if remainder:
            self._put(bytes(tarfile.BLOCKSIZE - remainder))

    def add_link(self, arcname: str, target: str, *, executable: bool) -> None:
        # extractors chmod the shared inode with the link's mode
        self._put(
            tar_header(arcname, size=0, mode=0o755 if executable else 0o644, typeflag=tarfile.LNKTYPE, linkname=target)
        )

    def close(self) -> None:
        self._put(tar_end(self.offset))
        self.flush()


def tar_end(offset: int) -> bytes:
    """What `tarfile` ends an archive of `offset` bytes with: two zero blocks, then zeros to a
    10240-byte record."""
    end = tarfile.BLOCKSIZE * 2
    return bytes(end + (-(offset + end)) % tarfile.RECORDSIZE)


class _HashingWriter(io.RawIOBase):
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
