"""Per-sandbox cgroups (v1 hierarchies) for the bubblewrap backend.

Why cgroups and not only rlimits: RLIMIT_AS counts address space, not memory
(and breaks runtimes that reserve big mappings); RLIMIT_NPROC counts every
process of the host user, so it cannot cap one sandbox; and only a cgroup
lets us kill every process of a sandbox, including ones that escaped the
process group. The group is created under the worker's own cgroup so the
worker's limits still hold for everything it starts.

Only cgroup v1 controllers (memory, pids, cpu) mounted under /sys/fs/cgroup
are handled; with cgroup v2 only, or without write access, `create()`
returns a set with no controllers and the backend falls back to rlimits.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path(os.environ.get("GYMWRIGHT_CGROUP_ROOT", "/sys/fs/cgroup"))


def _own_v1_paths() -> dict[str, str]:
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[1]:
            continue
        for controller in parts[1].split(","):
            paths[controller] = parts[2]
    return paths


class CgroupSet:
    """The cgroups of one sandbox, one directory per controller that worked."""

    def __init__(self, dirs: dict[str, Path]):
        self.dirs = dirs

    @classmethod
    def create(cls, name: str, *, memory_bytes: int | None, pids: int | None, cpus: float | None) -> CgroupSet:
        own = _own_v1_paths()
        dirs: dict[str, Path] = {}
        wanted = {"memory": memory_bytes, "pids": pids, "cpu": cpus}
        for controller, value in wanted.items():
            if value is None or controller not in own:
                continue
            mount = CGROUP_ROOT / controller
            if not (mount / "cgroup.procs").exists():
                continue
            path = mount / own[controller].lstrip("/") / name
            try:
                path.mkdir()
                if controller == "memory":
                    (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    # Same cap for memory+swap, or the sandbox just swaps.
                    swap = path / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        swap.write_text(str(memory_bytes))
                elif controller == "pids":
                    # +2: the bubblewrap spawner shell lives in the group too.
                    (path / "pids.max").write_text(str(pids + 2))
                elif controller == "cpu":
                    period = 100_000
                    (path / "cpu.cfs_period_us").write_text(str(period))
                    (path / "cpu.cfs_quota_us").write_text(str(max(1000, int(cpus * period))))
            except OSError as exc:
                log.debug("cgroup %s unavailable: %s", controller, exc)
                _rmdir(path)
                continue
            dirs[controller] = path
        return cls(dirs)

    @property
    def has_memory(self) -> bool:
        return "memory" in self.dirs

    @property
    def has_pids(self) -> bool:
        return "pids" in self.dirs

    def procs_files(self) -> list[str]:
        return [str(path / "cgroup.procs") for path in self.dirs.values()]

    def oom_kills(self) -> int:
        """How many processes the kernel has OOM-killed in this sandbox so far."""
        path = self.dirs.get("memory")
        if path is None:
            return 0
        try:
            for line in (path / "memory.oom_control").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
            # Older kernels lack the counter: failcnt at least says the limit was hit.
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> list[int]:
        for path in self.dirs.values():
            try:
                return [int(p) for p in (path / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                continue
        return []

    def kill_all(self, timeout_s: float = 5.0, *, keep: frozenset[int] = frozenset()) -> None:
        """SIGKILL every process in the sandbox but those in `keep` (the spawner), repeating until none are
        left (a fork bomb can fork between reading the list and the kill)."""
        deadline = time.monotonic() + timeout_s
        pause = 0.001
        while time.monotonic() < deadline:
            pids = [pid for pid in self.pids() if pid not in keep]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def remove(self) -> None:
        self.kill_all()
        for path in self.dirs.values():
            _rmdir(path)
        self.dirs = {}


def _rmdir(path: Path) -> None:
    # A cgroup can be removed only once its last process is reaped; retry briefly.
    for _ in range(250):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    log.warning("could not remove cgroup %s", path)


def remove_dead_owner_cgroups(pid_alive) -> list[str]:
    """Kill and remove every `gymwright-<pid>-<id>` group (under this process's
    own groups and at the hierarchy roots) whose owner pid is not alive.
    Returns the names removed."""
    own = _own_v1_paths()
    removed = []
    for controller in ("memory", "pids", "cpu"):
        if controller not in own:
            continue
        parents = {CGROUP_ROOT / controller / own[controller].lstrip("/"), CGROUP_ROOT / controller}
        for parent in parents:
            try:
                children = [p for p in parent.iterdir() if p.is_dir() and p.name.startswith("gymwright-")]
            except OSError:
                continue
            for path in children:
                parts = path.name.split("-")
                if len(parts) != 3 or not parts[1].isdigit() or pid_alive(int(parts[1])):
                    continue
                CgroupSet({controller: path}).remove()
                removed.append(path.name)
    return removed
