"""The one interface every sandbox backend implements.

A `Backend` starts sandboxes; a `Sandbox` is one isolated place where a
rollout's commands run, with a writable workspace at `/workspace`, a writable
`/tmp`, and read-only environment files under `/env`. It implements the
`grading.engine.sandbox.CheckSandbox` protocol (so command and python checks run
in the very sandbox the agent used), plus `list_files`, `snapshot` and `stop`.
"""

from __future__ import annotations

import abc
import os
import posixpath
import shlex
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..results import ExecResult
from ..scripts import script_command
from ..spec import SandboxError, SandboxSpec

WORKSPACE = "/workspace"
TMP = "/tmp"
ENV_DIR = "/env"
# Writable for the checks only, after the episode (`Sandbox.open_verifier_paths`): where Harbor's
# verifier finds its tests and writes its reward (/tests/test.sh, /logs/verifier/reward.txt).
VERIFIER_PATHS = ("/logs", "/tests")
MAX_READ_BYTES = 64 * 1024 * 1024
INTERRUPT_POLL_S = 0.5
FULL_MARGIN = 1024 * 1024
CANCELLED_NOTE = "\n[gymwright] cancelled: the command was killed because the rollout was cancelled\n"


@dataclass(frozen=True)
class HostLimits:
    """What the worker spends on one sandbox's files (operator settings, not the author's).

    `snapshot_max_bytes` bounds the APPARENT size of the files a snapshot copies
    (a sparse file counts its full length; it is copied keeping its holes),
    `snapshot_max_files` the number of files and directories, `io_timeout_s` the
    time of one host-side file operation (read_file, write_file, list_files,
    snapshot). What a snapshot leaves out is listed in `Sandbox.snapshot_left_out`.
    """

    snapshot_max_bytes: int = 256 * 1024 * 1024
    snapshot_max_files: int = 10_000
    io_timeout_s: float = 30.0

    def __post_init__(self):
        for name in ("snapshot_max_bytes", "snapshot_max_files", "io_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number, not {value!r}")


class SnapshotBudget:
    """Admits files into a snapshot in walk order until a limit is reached; the
    rest is recorded as left out, with the reason and the apparent size."""

    def __init__(self, limits: HostLimits):
        self.limits = limits
        self.bytes_left = limits.snapshot_max_bytes
        self.files_left = limits.snapshot_max_files
        self.deadline = time.monotonic() + limits.io_timeout_s
        self.left_out: list[dict] = []

    def admit(self, path: str, size: int) -> bool:
        reason = None
        if time.monotonic() > self.deadline:
            reason = f"the snapshot took longer than {self.limits.io_timeout_s:g} s"
        elif self.files_left <= 0:
            reason = f"more than {self.limits.snapshot_max_files} files"
        elif size > self.bytes_left:
            reason = (
                f"snapshot size limit: {size} bytes (apparent size) with "
                f"{max(self.bytes_left, 0)} of {self.limits.snapshot_max_bytes} bytes left"
            )
        if reason is not None:
            self.left_out.append({"path": path, "size": size, "reason": reason})
            return False
        self.files_left -= 1
        self.bytes_left -= size
        return True


def shell_command(command: str | Sequence[str]) -> list[str]:
    """A string is a shell command line (`/bin/sh -c`); a list is an argv, run as is."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    argv = [str(part) for part in command]
    if not argv:
        raise ValueError("empty command")
    return argv


def split_path(path: str, *, writable: bool) -> tuple[str, str]:
    """Map a sandbox path to (root, relative path), refusing escapes.

    Relative paths are under the workspace; absolute ones must be under
    /workspace or /tmp (and, for reading, /env). Returns ("/workspace", "a/b").
    """
    if not path or "\x00" in path:
        raise SandboxError(f"invalid path {path!r}", permanent=True)
    full = path if path.startswith("/") else posixpath.join(WORKSPACE, path)
    full = posixpath.normpath(full)
    roots = (WORKSPACE, TMP) if writable else (WORKSPACE, TMP, ENV_DIR)
    for root in roots:
        if full == root or full.startswith(root + "/"):
            rel = full[len(root) :].lstrip("/")
            if not rel:
                raise SandboxError(f"{path!r} is a directory, not a file", permanent=True)
            return root, rel
    where = " or ".join(roots)
    raise SandboxError(f"path {path!r} is outside {where}", permanent=True)


class Sandbox(abc.ABC):
    """One running sandbox. Use as a context manager, or call `stop()`.

    Thread-safety: calls from several threads are serialised per sandbox
    (the harness and the grader call in order anyway); `stop()` may be called
    from any thread and is idempotent.
    """

    workspace_path: str = WORKSPACE
    #: True when a write past the /workspace or /tmp cap fails outright; False
    #: when the cap is watched and the exec killed after the fact.
    workspace_cap_hard: bool = False

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        #: Polled (every INTERRUPT_POLL_S at most) while a command runs; when it
        #: returns True the command is killed and its result says "cancelled".
        self.interrupt: Callable[[], bool] | None = None
        self._next_interrupt_check = 0.0
        #: Set when /workspace or /tmp hit its size cap: why the episode must stop.
        self.limit_hit: str | None = None
        #: Files the last `snapshot()` did not copy: [{"path", "size", "reason"}].
        self.snapshot_left_out: list[dict] = []
        self.id = uuid.uuid4().hex[:12]
        self.started_at = time.time()
        self.stopped = False

    # -- the CheckSandbox protocol ---------------------------------------
    @abc.abstractmethod
    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run a command in the sandbox (cwd /workspace) and wait for it.

        A string runs under `/bin/sh -c`. `timeout_s` (default
        `spec.exec_timeout_s`) kills the whole process tree of the command;
        the result then has `timed_out=True` and `exit_code=None`. stdout and
        stderr are each kept up to `spec.output_cap` bytes (the rest is read
        and discarded, `*_truncated=True`). Raises `SandboxError` only when the
        sandbox itself fails, never for a failing command.
        """

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Write a file (relative to the workspace, or absolute under /workspace or /tmp),
        creating parent directories."""

    @abc.abstractmethod
    def read_file(self, path: str, *, max_bytes: int = MAX_READ_BYTES, follow_links: bool = True) -> bytes:
        """Read a file (relative to the workspace, or absolute under /workspace, /tmp, /env).
        Raises `FileNotFoundError` when it does not exist, a permanent `SandboxError` when it is not
        a regular file, is larger than `max_bytes` or, with `follow_links=False` (what the grader
        reads back from the agent's reach), is a link or is reached through one."""

    # -- more ------------------------------------------------------------
    @abc.abstractmethod
    def list_files(self) -> list[str]:
        """Regular files in the workspace, as sorted paths relative to it."""

    @abc.abstractmethod
    def snapshot(self, dest: Path) -> Path:
        """Copy the workspace's regular files and directories into `dest` (created).

        Symlinks are not followed or copied: a sandbox must not make the
        worker read its own files through a link. Bounded by the backend's
        `HostLimits` (apparent size, file count, time); sparse files keep their
        holes; what is left out is listed in `snapshot_left_out`.
        """

    @abc.abstractmethod
    def stop(self) -> None:
        """Kill everything in the sandbox and free its resources. Idempotent."""

    # -- between the episode and the checks ----------------------------------
    @abc.abstractmethod
    def end_processes(self) -> None:
        """Kill every process the episode left running (background servers,
        daemons that escaped their exec's process group), so that nothing the
        agent started can touch the workspace while the checks run. The
        sandbox stays usable: later execs start fresh."""

    @abc.abstractmethod
    def restore_files(self, files: Mapping[str, bytes]) -> dict[str, str]:
        """Put exactly these bytes at these workspace paths, whatever is there
        now: a file, a link, a directory (removed with its contents), or a
        parent directory replaced by a link or a file (made a real directory
        again); and beside each restored `x.py`, nothing Python would import as `x` instead (an extension
        module `x.*.so`, a package folder's `x/__init__.*`, a link `x`: safe_files.remove_module_shadows).
        Call after `end_processes()`, so nothing races the writes.
        Returns, per path, what was found there first: "file", "missing",
        "link", "dir" or "other"."""

    def open_verifier_paths(self) -> None:  # noqa: B027 - optional for a backend
        """Make /logs and /tests (VERIFIER_PATHS) empty directories the checks can write. Call after
        `end_processes()`: during the episode they do not exist (bubblewrap) or belong to root
        (docker), so nothing the agent did can be in them when the checks run."""

    def add_env_files(self, env_files: Mapping[str, bytes]) -> None:
        """Add files under /env (read-only to the sandbox) after the start:
        the environment's grader files, once the episode is over."""
        self.backend._install_env_files(self, dict(env_files))  # type: ignore[attr-defined]

    def _interrupted(self) -> bool:
        if self.interrupt is None:
            return False
        now = time.monotonic()
        if now < self._next_interrupt_check:
            return False
        self._next_interrupt_check = now + INTERRUPT_POLL_S
        try:
            return bool(self.interrupt())
        except Exception:  # noqa: BLE001 - a failing probe must not kill the command
            return False

    def _record_full(self, free: dict[str, int]) -> str | None:
        """`free`: bytes still free in /workspace and /tmp. A cap counts as hit when
        less than FULL_MARGIN (or 1/16 of a small cap) is left: the write that
        reached it failed. Files unlinked but still open count, as the file system counts them."""
        caps = {WORKSPACE: self.spec.workspace_mb, TMP: self.spec.tmp_mb}
        for where, left in free.items():
            cap = caps[where] * 1024 * 1024
            if left < min(FULL_MARGIN, cap // 16):
                self.limit_hit = (
                    f"{where} is full: it reached its size cap of {caps[where]} MB "
                    f"(files still open after being deleted count too)"
                )
                return self.limit_hit
        return None

    def write_files(self, files: Mapping[str, bytes]) -> None:
        for path, data in files.items():
            self.write_file(path, data)

    def run_setup(self) -> None:
        """Run the environment's setup script once; a failure is permanent."""
        if not self.spec.setup:
            return
        # As written: its #! line, else bash (else sh), as a Harbor task's scripts run.
        result = self.exec(script_command(self.spec.setup, name="setup"), timeout_s=self.spec.setup_timeout_s)
        if result.exit_code != 0:
            why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
            tail = (result.stderr or result.stdout)[-2000:]
            raise SandboxError(f"setup script {why}: {tail}", permanent=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}{' stopped' if self.stopped else ''}>"


class Backend(abc.ABC):
    """Starts sandboxes. `name` is what `get_backend()` and the CLI call it."""

    name: str = ""
    limits: HostLimits = HostLimits()

    @abc.abstractmethod
    def _create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start an empty sandbox."""

    def start(
        self,
        spec: SandboxSpec,
        *,
        files: Mapping[str, bytes] | None = None,
        env_files: Mapping[str, bytes] | None = None,
    ) -> Sandbox:
        """Start a sandbox for `spec`: task `files` go into the workspace,
        `env_files` (the environment's tools, data, checks module) under /env
        read-only; then the setup script runs once. On any failure the
        sandbox is stopped before the error propagates."""
        sandbox = self._create(spec)
        try:
            self._install_env_files(sandbox, dict(env_files or {}))
            if files:
                sandbox.write_files(dict(files))
            sandbox.run_setup()
        except BaseException:
            sandbox.stop()
            raise
        return sandbox

    def _install_env_files(self, sandbox: Sandbox, env_files: dict[str, bytes]) -> None:
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional for a backend
        """Release the backend's own resources (clients). Sandboxes stay independent."""


def quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (owners of sandboxes, for reaping)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
