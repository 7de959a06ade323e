"""A build's scratch folder on this host, who owns it, and removing the ones no running build owns."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
from pathlib import Path

from django.conf import settings

from packs.models import PackVersion

logger = logging.getLogger(__name__)


def scratch_root() -> Path:
    root = Path(settings.PACK_SCRATCH_DIR)
    root.mkdir(parents=True, exist_ok=True)
    return root


# A build's scratch folder: pack-<version id>-<random>, holding owner.json (the host and process building in it).
SCRATCH_NAME = re.compile(r"^pack-(\d+)-")
SCRATCH_OWNER = "owner.json"
SCRATCH_UNOWNED_GRACE_S = 60  # a folder made a moment ago may not have its owner.json yet


def _process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field), or None when there is no
    such process: a pid and its start time name one process, a reused pid is another one. A zombie (a killed
    build's process its dead parent never waited for, until init does) is no process: it builds nothing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # Bytes: the name in parentheses is the process's own choice (/proc/self/comm), not always UTF-8; it may hold
    # ')' and blanks, so the fields are those after its last ')'.
    fields = stat.rpartition(b")")[2].split()
    return None if fields[0] in (b"Z", b"X") else fields[19].decode("ascii")


def scratch_own(scratch: Path) -> None:
    (scratch / SCRATCH_OWNER).write_text(
        json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": _process_start(os.getpid())})
    )


def _scratch_orphaned(folder: Path, *, building: bool, now: float) -> bool:
    """Whether no running build works in `folder`: its version is no longer building, or its owner was a process
    of this host that is gone (a worker killed mid-build). Another host's build is that host's to judge."""
    if not building:
        return True
    try:
        owner = json.loads((folder / SCRATCH_OWNER).read_text())
    except (OSError, ValueError):
        try:
            return now - folder.stat().st_mtime > SCRATCH_UNOWNED_GRACE_S
        except OSError:
            return False
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    return not isinstance(pid, int) or _process_start(pid) != owner.get("started")


def pack_scratch_reap() -> list[str]:
    """Remove this host's build scratch folders that belong to no running build (their worker was killed and the
    build is failed or still waiting for the reaper), from each worker's start and timer; the names removed."""
    root = Path(settings.PACK_SCRATCH_DIR)
    try:
        folders = {
            entry: int(match.group(1))
            for entry in root.iterdir()
            if (match := SCRATCH_NAME.match(entry.name)) and entry.is_dir() and not entry.is_symlink()
        }
    except OSError:  # no scratch folder yet
        return []
    building = set(
        PackVersion.objects.filter(pk__in=set(folders.values()), status=PackVersion.Status.BUILDING).values_list(
            "pk", flat=True
        )
    )
    now, removed = time.time(), []
    for folder, pack_version_id in folders.items():
        if _scratch_orphaned(folder, building=pack_version_id in building, now=now):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    if removed:
        logger.warning("removed the scratch folders of pack builds no process runs any more: %s", removed)
    return removed
