"""`make run` (gymwright.devserver) stops everything it started on one SIGTERM or Ctrl-C (SIGINT) to its process
group, as a terminal or `kill -TERM -PGID` sends it: the web server, the Celery worker and the worker's pool, with
no pool process forked again on the way, and promptly.

The devserver runs as `make run` runs it on a fresh clone: its own SQLite database and file-backed broker under a
data directory of its own (shared by the two signals: the second start migrates nothing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

STARTED_S = 180  # migrations, the demo and the worker's pool, on a loaded machine
STOPPED_S = 20  # the devserver's grace for a worker (10 s) and what a loaded machine adds


def _processes() -> dict[int, tuple[int, int, str]]:
    """Every process: pid -> (parent pid, session id, state), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()  # a process names itself as it likes: bytes, not text
            except OSError:
                continue  # it exited meanwhile
            fields = stat[stat.rindex(b")") + 2 :].decode("ascii").split()  # after "pid (comm) "
            found[int(entry.name)] = (int(fields[1]), int(fields[3]), fields[0])
    return found


def _family(root: int) -> dict[int, tuple[int, int, str]]:
    """`root` and its descendants, and every process in any of their sessions (a process whose parent exited is
    adopted by init, but stays in its session)."""
    table = _processes()
    family, grown = {root}, True
    while grown:
        children = {pid for pid, (ppid, _, _) in table.items() if ppid in family} - family
        family |= children
        grown = bool(children)
    sessions = {table[pid][1] for pid in family if pid in table}
    return {pid: row for pid, row in table.items() if (pid in family or row[1] in sessions) and row[2] != "Z"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("devserver-data")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc (Linux)")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_one_signal_to_the_process_group_stops_every_process_it_started(data_dir, tmp_path, signum):
    port = free_port()
    env = {
        **os.environ,
        "GYMWRIGHT_DATA_DIR": str(data_dir),
        "GYMWRIGHT_PORT": str(port),
        "CELERY_WORKER_CONCURRENCY": "2",
        "PYTHONUNBUFFERED": "1",
    }
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "MEDIA_ROOT", "DJANGO_SETTINGS_MODULE"):
        env.pop(key, None)  # as on a fresh clone: SQLite and the broker under the data directory
    log_path = tmp_path / "devserver.log"
    with open(log_path, "wb") as log:
        # In a session of its own, as `make run` in a terminal: its process group is the devserver's pid.
        devserver = subprocess.Popen(
            [sys.executable, "-m", "gymwright.devserver"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    seen: dict[int, tuple[int, int, str]] = {}  # every process of the devserver's, from the signal on
    try:
        deadline = time.monotonic() + STARTED_S
        while True:
            assert devserver.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "did not start:\n" + log_path.read_text(errors="replace")
            family = _family(devserver.pid)
            try:
                served = httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).status_code == 200
            except httpx.HTTPError:
                served = False
            # the devserver, the web server, the worker and its two pool processes, the datasets worker and its one
            if served and log_path.read_bytes().count(b" ready.") >= 2 and len(family) >= 7:
                break
            time.sleep(0.3)
        time.sleep(1)  # the worker settled, as a person would have it before stopping it
        before = _family(devserver.pid)
        signalled = time.monotonic()
        os.killpg(devserver.pid, signum)
        seen.update(before)
        while devserver.poll() is None and time.monotonic() < signalled + STOPPED_S:
            seen.update(_family(devserver.pid))
            time.sleep(0.05)
        stopped_after = time.monotonic() - signalled
        left = {pid: row for pid, row in _processes().items() if pid in seen and row[2] != "Z"}
        output = log_path.read_text(errors="replace")
        assert devserver.returncode == 0, f"still running or failed after {stopped_after:.1f} s:\n{output}"
        assert left == {}, f"left running: {left}\n{output}"
        assert set(seen) == set(before), f"started after the signal: {set(seen) - set(before)}\n{output}"
        assert "did not stop within" not in output, output  # each child stopped by itself, none killed
        print(f"stopped {len(before)} processes in {stopped_after:.1f} s")
    finally:  # whatever a failed run left: each process still in the session it was seen in (not a pid reused)
        seen.update(_family(devserver.pid) if devserver.poll() is None else {})
        for pid, (_, session, state) in _processes().items():
            if pid in seen and seen[pid][1] == session and state != "Z":
                os.kill(pid, signal.SIGKILL)
        devserver.wait(timeout=30)


def test_a_child_that_outlives_the_grace_is_killed_with_all_of_its_group():
    """A worker stuck in a job (here: one that ignores SIGTERM) and what it started in its group (a sandbox)."""
    from gymwright.devserver import stop_children

    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    grandchild = int(stubborn.stdout.readline())
    session = _processes()[grandchild][1]
    stop_children({"worker": stubborn}, grace_s=0.5)
    assert stubborn.returncode == -signal.SIGKILL  # it ignored SIGTERM: killed once the grace was over
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        row = _processes().get(grandchild)
        if row is None or row[1] != session or row[2] == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail("the worker's own child survived it")


def test_a_port_in_use_is_said_before_anything_starts_and_nothing_claims_to_run(tmp_path):
    """`make run` on a port another server holds said it was running, then that the web server had exited."""
    import socket

    env = {**os.environ, "GYMWRIGHT_DATA_DIR": str(tmp_path / "data")}
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"):
        env.pop(key, None)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        env["GYMWRIGHT_PORT"] = str(holder.getsockname()[1])
        done = subprocess.run(
            [sys.executable, "-m", "gymwright.devserver"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1
    assert f"Cannot serve on 127.0.0.1:{env['GYMWRIGHT_PORT']}" in done.stderr and "GYMWRIGHT_PORT=" in done.stderr
    assert "is running" not in done.stdout and not (tmp_path / "data" / "gymwright.sqlite3").exists()  # nothing ran
    env["GYMWRIGHT_PORT"] = "eighty"
    done = subprocess.run(
        [sys.executable, "-m", "gymwright.devserver"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "not a port number" in done.stderr
