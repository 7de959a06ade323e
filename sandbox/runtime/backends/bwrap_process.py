"""The processes behind a bubblewrap exec: started directly, or forked by the
sandbox's spawner shell. Both expose the same small surface to the exec loop."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

from .cgroups import CgroupSet


class SpawnerGone(Exception):
    pass


class Child:
    link = None  # an egress.EgressLink to close when the exec ends
    in_fd: int | None
    out_fd: int
    err_fd: int
    status_fd: int

    def close_stdin(self) -> None:
        if self.in_fd is not None:
            try:
                os.close(self.in_fd)
            except OSError:
                pass
            self.in_fd = None


class PopenChild(Child):
    """A bwrap started directly (it joins the cgroups itself)."""

    def __init__(self, proc: subprocess.Popen, status_fd: int, cgroups: CgroupSet, keep: frozenset[int] = frozenset()):
        self.proc, self.cgroups, self.keep = proc, cgroups, keep
        self.in_fd = proc.stdin.fileno() if proc.stdin else None
        self.out_fd, self.err_fd, self.status_fd = proc.stdout.fileno(), proc.stderr.fileno(), status_fd

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        # The bwrap we started leads its own process group; its in-namespace
        # init gets SIGKILL through --die-with-parent, which ends the whole pid
        # namespace. The cgroup sweep catches anything else.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.cgroups.kill_all(timeout_s=1.0)

    def close_stdin(self) -> None:
        if self.in_fd is not None and self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.in_fd = None

    def finish(self) -> int | None:
        # The pipes close a moment before bwrap exits: give it that moment.
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        os.close(self.status_fd)
        _none_left(self.cgroups, self.keep)
        return self.proc.returncode


class SpawnedChild(Child):
    """A bwrap forked by the sandbox's spawner shell."""

    def __init__(self, spawner: subprocess.Popen, pid: int, in_fd, out_fd, err_fd, status_fd, cgroups: CgroupSet):
        self.spawner, self.pid, self.cgroups, self.killed = spawner, pid, cgroups, False
        self.in_fd, self.out_fd, self.err_fd, self.status_fd = in_fd, out_fd, err_fd, status_fd

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        # The pid is bwrap's outer process (setpriv execs it); killing it makes
        # the kernel kill its in-namespace init (--die-with-parent) and with it
        # every process of the exec.
        self.killed = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def finish(self) -> int | None:
        if self.killed:
            # Wait until the killed processes are gone from the pids cgroup
            # (only the spawner left), or the next exec's fork may still fail.
            deadline = time.monotonic() + 3.0
            while len(self.cgroups.pids()) > 1 and time.monotonic() < deadline:
                time.sleep(0.005)
        self.close_stdin()
        for fd in (self.out_fd, self.err_fd, self.status_fd):
            os.close(fd)
        try:
            line = read_line(self.spawner.stdout, 5.0)
        except SpawnerGone:
            self.kill()
            return None
        _none_left(self.cgroups, frozenset({self.spawner.pid}))
        try:
            return int(line.split()[1]) if line.startswith(b"X ") else None
        except (IndexError, ValueError):
            return None


def _none_left(cgroups: CgroupSet, keep: frozenset[int]) -> None:
    """An exec returns once every process it started is gone. Its pid namespace ends with its command (bwrap's
    init dies and the kernel kills the rest before bwrap's exit is seen), so this finds none; should one remain
    in the sandbox's cgroup all the same (a `setsid` child of a kernel that did not), it is killed here, never
    left to run into the next exec or the checks. One read of cgroup.procs when none is left."""
    cgroups.kill_all(timeout_s=3.0, keep=keep)


def read_line(stream, timeout_s: float) -> bytes:
    """One line from a pipe, waiting at most `timeout_s` (the spawner's replies are tiny)."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout_s
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise SpawnerGone("no reply from the spawner")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1)
        if not chunk:
            raise SpawnerGone("the spawner exited")
        data += chunk
    return data


def parse_status(data: bytes) -> tuple[bool, int | None]:
    child_started, exit_code = False, None
    for line in data.decode(errors="replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "child-pid" in item:
            child_started = True
        if "exit-code" in item:
            exit_code = int(item["exit-code"])
    return child_started, exit_code
