"""Unpacking an uploaded archive into the import's own scratch folder, safely: names checked before anything is
written (no absolute paths, no `..`, valid UTF-8), only regular files and folders written, links and devices
refused, and the bytes counted while streaming so that a gzip bomb stops at the cap."""

from __future__ import annotations

import os
import shutil
import tarfile
import zlib
from pathlib import Path

from django.conf import settings

from packs.importer.records import ImportFailed, ImportTooLarge


def _member_error(name: str, why: str) -> ImportFailed:
    return ImportFailed(f"{name}: {why}; nothing was imported.", details=[{"pointer": "", "message": f"{name}: {why}"}])


def extract_archive(
    path: Path, destination: Path, *, max_bytes: int | None = None, max_members: int | None = None
) -> None:
    """Unpack a .tar.gz into `destination` safely, or raise ImportFailed naming the bad member.

    Every byte written counts toward IMPORT_MAX_BYTES. A hard link to a file written before is made with
    os.link (no bytes copied: its bytes count when the import reads them, see `_ReadBudget`). In a pack
    archive (a tasks.jsonl at the top, or in its one top folder) only what the import reads is written
    after it: tasks.jsonl and each task's files/ and environment/env/; the Harbor folders beside them (a
    copy of every task's tests, their shared grader hard-linked from one copy) are skipped unread."""
    max_bytes = max_bytes or settings.IMPORT_MAX_BYTES
    max_members = max_members or settings.IMPORT_MAX_MEMBERS
    member_cap = settings.UPLOAD_MAX_BYTES
    destination.mkdir(parents=True, exist_ok=True)
    total = 0
    written: set[str] = set()
    folders: set[Path] = {destination}  # made (or found) as real folders: not asked of the file system again
    pack_top: str | None = None  # "" or "<folder>/": where a pack's tasks.jsonl was written

    def over_cap(name: str) -> ImportFailed:
        return _member_error(
            name, f"the archive unpacks to more than {max_bytes // (1 << 20)} MB (GYMWRIGHT_IMPORT_MAX_MB); stopped"
        )

    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for count, member in enumerate(tar, start=1):
                # Streamed: no member is looked up again, so tarfile need not keep 10^5 of them alive.
                del tar.members[:]
                name = member.name
                if count > max_members:
                    raise _member_error(
                        name, f"the archive has more than {max_members} members (GYMWRIGHT_IMPORT_MAX_MEMBERS)"
                    )
                if any(0xDC80 <= ord(ch) <= 0xDCFF for ch in name):
                    raise _member_error(
                        name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                        "the name is not valid UTF-8",
                    )
                if "\x00" in name or any(ord(ch) < 32 for ch in name):
                    raise _member_error(repr(name), "control characters in the name")
                parts = [part for part in name.split("/") if part not in ("", ".")]
                if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
                    raise _member_error(name, "an absolute path")
                if ".." in parts:
                    raise _member_error(name, "'..' would leave the import folder")
                if not parts:
                    continue
                relative = "/".join(parts)
                if member.issym():
                    raise _member_error(name, f"a symbolic link (to {member.linkname!r}); links are not imported")
                if not (member.isdir() or member.isfile() or member.islnk()):
                    raise _member_error(name, "not a regular file (a device, fifo or socket)")
                if pack_top is not None and not _pack_reads(relative, pack_top):
                    continue  # never read by a pack's import: not written (a link's target is not looked at)
                target = destination.joinpath(*parts)
                if member.isdir():
                    if target not in folders:
                        target.mkdir(parents=True, exist_ok=True)
                        folders.add(target)
                    continue
                if target.parent not in folders:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    folders.add(target.parent)
                if relative in written:
                    # Which of the two is meant cannot be told (tar keeps the last, a reader may show the first).
                    raise _member_error(name, "named twice in the archive")
                # Nothing but a folder of another member can be there now (every file written is in `written`);
                # the file is created exclusively below (never through a link), so one lstat says it.
                if os.path.lexists(target):
                    raise _member_error(name, "collides with another member")
                if member.islnk():
                    link = "/".join(p for p in member.linkname.split("/") if p not in ("", "."))
                    if member.linkname.startswith("/") or ".." in link.split("/") or link not in written:
                        raise _member_error(
                            name, f"a hard link to {member.linkname!r}, outside the archive's own files"
                        )
                    try:
                        os.link(destination / link, target)
                    except OSError:  # too many links to one file on this file system: a counted copy
                        size = (destination / link).stat().st_size
                        if total + size > max_bytes:
                            raise over_cap(name)
                        total += size
                        shutil.copyfile(destination / link, target)
                    written.add(relative)
                    continue
                if member.size > member_cap:
                    raise _member_error(
                        name, f"larger than the {member_cap // (1 << 20)} MB upload limit (GYMWRIGHT_UPLOAD_MAX_MB)"
                    )
                source = tar.extractfile(member) if member.size else None
                with open(target, "xb") as handle:
                    while source is not None and (chunk := source.read(1 << 20)):
                        total += len(chunk)
                        if total > max_bytes:
                            raise over_cap(name)
                        handle.write(chunk)
                written.add(relative)
                if pack_top is None and parts[-1] == "tasks.jsonl" and len(parts) <= 2:
                    pack_top = "/".join(parts[:-1]) + "/" if len(parts) == 2 else ""
    except ImportFailed:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ImportFailed(
            f"{path.name} is not a readable .tar.gz: {exc}; nothing was imported.",
            details=[{"pointer": "", "message": str(exc)}],
        )


def _pack_reads(relative: str, top: str) -> bool:
    """Whether importing a pack whose tasks.jsonl is at `top` reads this member: its tasks' files
    (tasks/<id>/files/..., tasks/<id>/environment/env/...); members outside `top` are written as usual."""
    if not relative.startswith(top):
        return True
    parts = relative[len(top) :].split("/")
    if parts[0] != "tasks" or len(parts) < 3:
        return parts == ["tasks"] or (parts[0] == "tasks" and len(parts) == 2)  # the folders themselves
    return parts[2] == "files" or (parts[2] == "environment" and (len(parts) == 3 or parts[3] == "env"))


class _ReadBudget:
    """The bytes an import reads from its source, hard links and repeated reads included: at most
    IMPORT_MAX_BYTES. The unpacking cap counts bytes written; a hard link writes none, but every path
    the import reads through it is read in full."""

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = max_bytes or settings.IMPORT_MAX_BYTES
        self.total = 0

    def take(self, where: str, size: int) -> None:
        self.total += size
        if self.total > self.max_bytes:
            raise ImportTooLarge(
                f"{where}: the import reads more than {self.max_bytes // (1 << 20)} MB "
                "(GYMWRIGHT_IMPORT_MAX_MB; hard-linked and repeated files count each time); nothing was imported.",
                details=[
                    {"pointer": "", "message": f"{where}: over the {self.max_bytes // (1 << 20)} MB import limit"}
                ],
            )
