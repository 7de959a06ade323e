"""Reading files that an agent wrote, on the host, without being fooled by them.

An agent controls every name and every file type in its workspace. The host
side (the grader, the sandboxes' read_file and snapshot) opens such files only
through `open_regular`: no symlink is followed, a FIFO or device cannot block
the open (O_NONBLOCK), and anything that is not a regular file after the open
(fstat, so no swap between a check and the open) is refused. A path under a root is
walked one component at a time (`open_beneath`): a link anywhere in it, not only at
its end, is refused rather than followed. Copies keep
holes (`copy_sparse`, `write_sparse`): a sparse file never turns into its
apparent size on the host disk.
"""

from __future__ import annotations

import errno
import os
import stat

CHUNK = 1024 * 1024
_ZERO_BLOCK = 64 * 1024
_ZEROS = bytes(_ZERO_BLOCK)


class NotRegularFile(OSError):
    """The path exists but is not a regular file (FIFO, socket, device, directory, symlink)."""


def open_regular(path: str | os.PathLike, *, dir_fd: int | None = None) -> int:
    """Open `path` read-only as a raw fd: never through a symlink (last component),
    never blocking, and only if it is a regular file. Raises FileNotFoundError,
    NotRegularFile, or another OSError."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, "is a symbolic link", str(path)) from None
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO nobody writes to on some systems
            raise NotRegularFile(errno.ENXIO, "is not a regular file", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a directory"
                if stat.S_ISDIR(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise NotRegularFile(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _relative_parts(relative: str) -> list[str]:
    parts = [part for part in str(relative).split("/") if part not in ("", ".")]
    if ".." in parts:
        raise NotRegularFile(errno.EINVAL, "leaves the workspace (..)", str(relative))
    return parts


def open_beneath(root: str | os.PathLike, relative: str) -> int:
    """Open `root/relative` as `open_regular` does, walking each directory component with
    O_NOFOLLOW from an fd of the one before: a symbolic link anywhere on the path (a linked
    directory as much as a linked file) raises NotRegularFile, and nothing can swap a
    component for a link between a check and the open. FileNotFoundError when a component is
    missing (or is a file where a directory should be)."""
    parts = _relative_parts(relative)
    if not parts:
        raise NotRegularFile(errno.EISDIR, "is a directory, not a regular file", str(relative))
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                step = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            except OSError as exc:
                walked = "/".join(parts[: index + 1])
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    if stat.S_ISLNK(os.lstat(part, dir_fd=directory).st_mode):
                        raise NotRegularFile(
                            errno.ELOOP, f"is reached through a symbolic link ({walked!r})", str(relative)
                        ) from None
                    raise FileNotFoundError(errno.ENOENT, f"{walked!r} is not a directory", str(relative)) from None
                raise
            os.close(directory)
            directory = step
        return open_regular(parts[-1], dir_fd=directory)
    finally:
        os.close(directory)


def has_link(root: str | os.PathLike, relative: str) -> bool:
    """Whether any component of `root/relative` (the last one included) is a symbolic link,
    or the path leaves `root`. The root itself is the grader's and is not looked at."""
    try:
        parts = _relative_parts(relative)
    except NotRegularFile:
        return True
    current = os.fspath(root)
    for part in parts:
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return True
        except FileNotFoundError:
            return False
    return False


def read_regular(path: str | os.PathLike, *, max_bytes: int, root: str | os.PathLike | None = None) -> bytes:
    """The bytes of a regular file (see `open_regular`); ValueError when larger than `max_bytes`.
    With `root`, `path` is relative to it and no component of it may be a link (`open_beneath`)."""
    fd = open_regular(path) if root is None else open_beneath(root, os.fspath(path))
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > max_bytes:
            raise ValueError(f"larger than {max_bytes} bytes")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    return data


def copy_sparse(src_fd: int, dst_fd: int, *, size: int | None = None) -> int:
    """Copy a regular file's data extents (SEEK_DATA/SEEK_HOLE), leaving holes as holes.
    Copies at most `size` bytes (default: the source's size at the start); the
    destination gets exactly that apparent size. Returns the bytes of data written."""
    size = os.fstat(src_fd).st_size if size is None else size
    written = 0
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src_fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            if exc.errno != errno.EINVAL:
                raise
            start = offset  # no SEEK_DATA here: copy, still skipping zero blocks
        if start >= size:
            break
        try:
            end = min(os.lseek(src_fd, start, os.SEEK_HOLE), size)
        except OSError:
            end = size
        position = start
        while position < end:
            chunk = os.pread(src_fd, min(CHUNK, end - position), position)
            if not chunk:
                end = position
                break
            written += _write_skipping_zeros(dst_fd, chunk, position)
            position += len(chunk)
        offset = max(end, start + 1) if end > start else size
    os.ftruncate(dst_fd, size)
    return written


def write_sparse(dst_fd: int, source, size: int) -> int:
    """Write `size` bytes read from file object `source` to `dst_fd`, seeking over
    blocks of zeros instead of writing them. Returns the bytes actually written."""
    written = 0
    position = 0
    while position < size:
        chunk = source.read(min(CHUNK, size - position))
        if not chunk:
            break
        written += _write_skipping_zeros(dst_fd, chunk, position)
        position += len(chunk)
    os.ftruncate(dst_fd, position)
    return written


def _write_skipping_zeros(fd: int, chunk: bytes, position: int) -> int:
    written = 0
    view = memoryview(chunk)
    for at in range(0, len(view), _ZERO_BLOCK):
        block = view[at : at + _ZERO_BLOCK]
        if block == _ZEROS[: len(block)]:
            continue
        os.pwrite(fd, block, position + at)
        written += len(block)
    return written


# What CPython's path finder imports for `x` instead of an `x.py` in the same folder: a package folder `x/` (its
# `__init__` with any suffix, source, bytecode or extension), or an extension module `x.<tag>.so`. A sourceless
# `x.pyc` comes after the source, and bytecode caches are never read by the checks (NO_BYTECODE_ENV, pyrunner).
SHADOW_PATTERNS = ("/__init__.*", ".*.so", ".so", ".pyd")  # after the module path; `x` as a link too


def module_stems(paths) -> list[str]:
    """The module paths (`a/b/helper` for `a/b/helper.py`) of the Python files among `paths` (relative)."""
    return sorted({rel.strip("/")[:-3] for rel in paths if rel.endswith(".py") and rel.strip("/")[:-3]})


def remove_module_shadows(root: str | os.PathLike, paths) -> list[str]:
    """Remove, under `root`, whatever Python would import instead of one of the `.py` files among `paths` (see
    SHADOW_PATTERNS): a grader's `helper.py` put back into a workspace must be the `helper` a check imports,
    not the agent's `helper.cpython-311-x86_64-linux-gnu.so` or `helper/__init__.py` beside it. A link named
    `helper` is removed itself, never followed. Call before the files are written (a restored file that
    matches is written again after). Returns the relative paths removed. Nothing may run in `root` meanwhile."""
    base = os.fspath(root)
    removed = []
    for stem in module_stems(paths):
        folder, _, name = stem.rpartition("/")
        if folder and has_link(base, folder):
            continue  # place_files makes that folder a real (empty) one
        parent = os.path.join(base, folder) if folder else base
        try:
            entries = os.listdir(parent)
        except OSError:
            continue
        for entry in sorted(entries):
            full = os.path.join(parent, entry)
            if entry == name:
                if os.path.islink(full):
                    _remove_any(full)
                    removed.append(os.path.relpath(full, base))
                elif os.path.isdir(full):
                    for inner in sorted(os.listdir(full)):
                        if inner.startswith("__init__."):
                            _remove_any(os.path.join(full, inner))
                            removed.append(os.path.relpath(os.path.join(full, inner), base))
            elif entry.startswith(name + ".") and entry.endswith((".so", ".pyd")):
                _remove_any(full)
                removed.append(os.path.relpath(full, base))
    return removed


def place_files(root: str | os.PathLike, files, *, on_create=None) -> dict[str, str]:
    """Put exactly these bytes at these relative paths under `root`, whatever an agent left
    there: a file, a symlink, a directory (removed with its contents, whatever its modes), or a
    parent directory replaced by a link or a file (made a real directory again). No link is
    ever followed. `on_create(path)` is called for every file and directory made (e.g. to
    chown it). Returns, per path, what was there before: "file", "missing", "link", "dir" or
    "other". Nothing may run in `root` meanwhile (kill the agent's processes first)."""
    base = os.fspath(root)
    found: dict[str, str] = {}
    for rel, data in files.items():
        parts = [p for p in rel.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise ValueError(f"not a relative path: {rel!r}")
        current = base
        for part in parts[:-1]:
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                if st.st_mode & 0o700 != 0o700:
                    os.chmod(current, stat.S_IMODE(st.st_mode) | 0o700)
                continue
            if st is not None:
                os.unlink(current)
            os.mkdir(current, 0o755)
            if on_create:
                on_create(current)
        target = os.path.join(current, parts[-1])
        found[rel] = _remove_any(target)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if on_create:
            on_create(target)
    return found


def _remove_any(path: str) -> str:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return "file" if stat.S_ISREG(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "other"
    import shutil

    def unlock(func, target, exc_info):
        # The agent may have left directories without write or search permission.
        parent = os.path.dirname(target)
        try:
            os.chmod(parent, 0o700)
            if not os.path.islink(target) and os.path.isdir(target):
                os.chmod(target, 0o700)
            func(target)
        except FileNotFoundError:
            pass

    os.chmod(path, 0o700)
    shutil.rmtree(path, onerror=unlock)
    return "dir"
