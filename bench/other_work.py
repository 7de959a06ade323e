"""The cores that work other than a benchmark's own kept busy while it ran.

The load average cannot tell a benchmark's own load from other work: bench_load.py's 20 clients and 4 workers hold
it near 4–5 on 2 cores by themselves. So run_all.py reads every process's CPU time from /proc twice a second and
counts what processes outside the benchmark used: not the benchmark's own (descendants of the process given) and
not the services it drives (PostgreSQL, Redis, RabbitMQ, the Docker engine and its containers), whose work on a
quiet machine is the benchmark's. A process born and ended between two readings is not seen (at most half a
second of its work): the figure is a lower bound of other work, and a quiet machine is one where it stays under
OTHERS_QUIET.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
# comm names (the kernel's 15 characters) of the services benchmarks drive, and of the parents of their containers.
SERVICES = ("postgres", "redis-server", "beam.smp", "epmd", "erl_child_setup", "dockerd", "containerd")
CONTAINER_PARENTS = ("containerd-shim", "containerd-shi")
# A benchmark's figures are quiet when the 1-minute load average was at most QUIET_LOAD before it and other work
# stayed under OTHERS_QUIET cores while it ran (the load during a run is its own: bench_load.py holds it near 4–5).
QUIET_LOAD = 2.0
OTHERS_QUIET = 0.25
INTERVAL_S = 0.5


def proc_stat(pid: int | str) -> tuple[str, list[bytes]] | None:
    """(comm, the fields after it) of /proc/<pid>/stat, None once the process is gone. The fields count from the
    state: [1] the parent pid, [11] + [12] user + system ticks, [13] + [14] those of the children it reaped,
    [19] the start time in ticks since boot."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # comm is in parentheses and may hold spaces or parentheses: the fields after it follow the last ")".
    head, _, rest = raw.rpartition(b")")
    return head.partition(b"(")[2].decode(errors="replace"), rest.split()


def cpu_ticks(pids) -> dict[int, int]:
    """pid -> user + system ticks so far, of those of `pids` still running."""
    found = {}
    for pid in pids:
        stat = proc_stat(pid)
        if stat is not None:
            found[pid] = int(stat[1][11]) + int(stat[1][12])
    return found


def _processes() -> dict[int, tuple[int, str, int, int]]:
    """pid -> (parent pid, comm, user + system ticks, start time in ticks since boot), for every process now."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = proc_stat(entry.name)
        if stat is None:  # ended meanwhile
            continue
        comm, fields = stat
        found[int(entry.name)] = (int(fields[1]), comm, int(fields[11]) + int(fields[12]), int(fields[19]))
    return found


def _ours(pid: int, processes: dict, root: int, memo: dict) -> bool:
    """`pid` is `root`'s descendant, a service, or a process under a container's shim."""
    chain = []
    while pid not in memo:
        if pid == root:
            memo[pid] = True
            break
        info = processes.get(pid)
        if info is None or pid <= 1:
            memo[pid] = False
            break
        if info[1] in SERVICES or info[1].startswith(CONTAINER_PARENTS):
            memo[pid] = True
            break
        chain.append(pid)
        pid = info[0]
    verdict = memo[pid]
    for seen in chain:
        memo[seen] = verdict
    return verdict


class OtherWork:
    """`with OtherWork(root) as other:` … `other.cores`: the mean cores other processes kept busy over the block."""

    def __init__(self, root: int | None = None):
        self.root = root if root is not None else os.getpid()
        self.seconds = 0.0
        self.cores = 0.0
        self.peak_load = os.getloadavg()[0]  # the 1-minute load average, highest reading (own work included)
        self._last: dict[int, int] = {}
        self.by_pid: dict[int, float] = {}  # seconds of each other process seen (what `seconds` sums)
        self.names: dict[int, str] = {}  # their comm names
        # Every process once seen as the run's own, by (pid, start time): one whose parent ends first (a sandbox's
        # bwrap outliving its spawner) is reparented out of the run's tree, and would otherwise be counted as other
        # work, its whole life's CPU at once (bench_env.py's 746 bwraps: 10.8 s of "other work").
        self._own: set[tuple[int, int]] = set()
        self._stop = threading.Event()

    def _read(self, first: bool = False) -> None:
        processes = _processes()
        memo: dict[int, bool] = {}
        ticks = 0
        last = {}
        for pid, (_, comm, cpu, start) in processes.items():
            if (pid, start) in self._own:
                continue
            if _ours(pid, processes, self.root, memo):
                self._own.add((pid, start))
                continue
            last[pid] = cpu
            # One seen before: its work since; one born since the last reading: all of its work (it began inside).
            used = max(cpu - self._last[pid] if pid in self._last else (0 if first else cpu), 0)
            if used:
                self.by_pid[pid] = self.by_pid.get(pid, 0.0) + used / CLK_TCK
                self.names[pid] = comm
                ticks += used
        self._last = last
        self.seconds += ticks / CLK_TCK
        self.peak_load = max(self.peak_load, os.getloadavg()[0])

    def __enter__(self):
        import time

        self._began = time.monotonic()
        self._read(first=True)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self._read()

    def __exit__(self, *exc) -> None:
        import time

        self._stop.set()
        self._thread.join()
        self._read()
        self.cores = self.seconds / max(time.monotonic() - self._began, 1e-9)

    def heaviest(self, count: int = 3) -> str:
        """The names of the other processes that worked most, as "name ×processes: seconds", heaviest first: who
        to look for when a run is marked not quiet (a kernel thread, another session's test suite, many short
        processes of one program)."""
        by_name: dict[str, list[float]] = {}
        for pid, seconds in self.by_pid.items():
            by_name.setdefault(self.names.get(pid, "?"), []).append(seconds)
        top = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:count]
        return ", ".join(
            f"{name} ×{len(times)}: {sum(times):.1f} s" if len(times) > 1 else f"{name}: {sum(times):.1f} s"
            for name, times in top
            if sum(times) >= 0.05
        )


def machine_reference_ms(rounds: int = 5) -> float:
    """CPU milliseconds of a fixed pure-Python workload (JSON, sorting, hashing: the kind of work the app's requests
    do), the best of `rounds`. The same code takes longer on a slower machine or a slower boot of this one, which the
    load average cannot tell: a figure from another day compares with today's through the reference of its run."""
    rows = [{"id": i, "slug": f"task-{i:05d}", "score": i / 7, "tags": ["a", "b"]} for i in range(20_000)]
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time()
        text = json.dumps(rows)
        parsed = json.loads(text)
        parsed.sort(key=lambda row: (-row["score"], row["slug"]))
        hashlib.sha256(text.encode() * 8).hexdigest()
        best = min(best, time.process_time() - began)
    return best * 1000
