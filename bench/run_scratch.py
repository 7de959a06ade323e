"""What a benchmark run makes for itself, named for this run alone and removed when it ends: a PostgreSQL database,
folders, a Redis server. Two runs side by side (or a run beside the test suite) never share, reuse or drop each
other's.

`make bench` (bench/run_all.py) sets GYMWRIGHT_BENCH_RUN once, so the scripts of one run can share a seed on
purpose (bench_load.py seeds the database bench_page_cpu.py measures on, `--db NAME`), and drops it at the end.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

RUN_ENV = "GYMWRIGHT_BENCH_RUN"
RUN = os.environ.get(RUN_ENV) or f"{os.getpid()}{secrets.token_hex(3)}"
PREFIX = "gymwright-bench"


def folder(purpose: str) -> Path:
    """A new folder of this process's own, removed when the process ends."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{purpose}-{RUN}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def database_name(base_url: str, purpose: str) -> str:
    """`<DATABASE_URL's name>_<purpose>_<run>`: a database no other run names (PostgreSQL keeps 63 bytes)."""
    name = f"{urlparse(base_url).path.lstrip('/') or 'gymwright'}_{purpose}_{RUN}"
    if len(name) > 63:
        raise SystemExit(f"database name {name!r} is longer than PostgreSQL's 63 bytes: shorten DATABASE_URL's")
    return name


def drop_database(admin, name: str) -> None:
    """Drop a database this run made (`admin`: an autocommit psycopg connection to the server's `postgres`)."""
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    """End a server or worker a benchmark started: SIGTERM, then SIGKILL if it has not exited within `timeout`, so a
    hung one never outlives the run (or keeps its port, its database connections)."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def redis_server():
    """A redis-server of this run's own on a free port (no persistence), its URL; stopped and removed at the end.
    A benchmark that empties its broker empties only this one."""
    binary = shutil.which("redis-server")
    if not binary:
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    work = folder("redis")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(work)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        else:
            raise SystemExit(f"redis-server did not start on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(process, timeout=10)
