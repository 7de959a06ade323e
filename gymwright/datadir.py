"""The data directory's permissions: nothing in it is readable by another user, the sandbox's included.

Called from settings on every start (web, worker, manage.py), so a data directory made by an
older version, or by a umask of 022, is tightened the next time anything starts. Only paths
this process's user owns are changed; the sandbox work directory is checked where it is used
(`sandbox_work_dir_check`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# The bubblewrap sandbox drops to a uid of its own before bwrap binds its workspace, so that user must be
# able to pass through (not list, not read) every folder above the sandbox work directory.
TRAVERSE_ONLY_DIR = 0o711


def _owned(path: Path) -> bool:
    try:
        return path.lstat().st_uid == os.geteuid()
    except FileNotFoundError:
        return False


def private_dir(path: Path, mode: int = PRIVATE_DIR) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    if _owned(path) and stat.S_IMODE(path.lstat().st_mode) != mode:
        path.chmod(mode)
    return path


def private_file(path: Path, content: str | None = None) -> Path:
    """Create `path` with mode 0600 (never readable by others, not even for an instant) or tighten it."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    except FileExistsError:
        if _owned(path) and stat.S_IMODE(path.lstat().st_mode) & 0o077:
            path.chmod(PRIVATE_FILE)
        return path
    with os.fdopen(descriptor, "w") as handle:
        if content is not None:
            handle.write(content)
    return path


def data_dir_secure(data_dir: Path, *, sandbox_dir: Path, private_dirs: list[Path], private_files: list[Path]) -> None:
    """Data dir 0700 (0711 when the sandbox work directory is inside it), given folders 0700, files 0600."""
    inside = sandbox_dir.resolve().is_relative_to(data_dir.resolve())
    private_dir(data_dir, TRAVERSE_ONLY_DIR if inside else PRIVATE_DIR)
    for path in private_dirs:
        if path.resolve().is_relative_to(data_dir.resolve()):
            private_dir(path)
    for path in private_files:
        if path.parent.exists():
            private_file(path)


class WorkDirError(Exception):
    pass


def sandbox_work_dir_check(path: Path) -> Path:
    """Create the sandbox work directory (0711) or check it: a real directory, owned by this user,
    not writable by group or others. Anything else could let another user swap a sandbox's files."""
    if not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=TRAVERSE_ONLY_DIR, exist_ok=True)
        path.chmod(TRAVERSE_ONLY_DIR)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise WorkDirError(
            f"the sandbox work directory {path} is not a directory (a symlink?); refused (GYMWRIGHT_SANDBOX_DIR)"
        )
    if info.st_uid != os.geteuid():
        raise WorkDirError(
            f"the sandbox work directory {path} is owned by uid {info.st_uid}, not by this worker's "
            f"user (uid {os.geteuid()}); refused (GYMWRIGHT_SANDBOX_DIR)"
        )
    if info.st_mode & 0o022:
        raise WorkDirError(
            f"the sandbox work directory {path} is writable by other users "
            f"(mode {stat.S_IMODE(info.st_mode):o}); refused: chmod 711 it (GYMWRIGHT_SANDBOX_DIR)"
        )
    return path
