"""Fault injection with real parts: terminate the test database's backends, run a service of
the test's own (Redis, a Docker engine) that the test may kill. Never the shared services."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.openai_server import unused_port
from tests.support.services import missing
from tests.support.workers import test_database_url


def database_backends_terminate() -> list[int]:
    """pg_terminate_backend on every other connection to the TEST database (never another
    database's), from a connection of our own; waits until they are gone. Their pids."""
    import psycopg

    url = test_database_url()
    if not url.startswith("postgres"):
        pytest.skip("terminating backends needs PostgreSQL")
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as killer:
        pids = [row[0] for row in killer.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]
        for pid in pids:
            killer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            alive = killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]).fetchone()[0]
            if not alive:
                return pids
            time.sleep(0.05)
    pytest.fail(f"backends {pids} outlived pg_terminate_backend")


class OwnRedis:
    """A redis-server of the test's own: its own port and folder, no RDB or AOF persistence."""

    def __init__(self, folder: Path):
        self.binary = shutil.which("redis-server")
        if not self.binary:
            missing("redis-server", "apt-get install redis-server")
        self.folder, self.port, self.process = folder, unused_port(), None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url, socket_connect_timeout=1).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        pytest.fail(f"our redis-server on port {self.port} did not start")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def keys(self) -> int:
        import redis

        return redis.Redis.from_url(self.url).dbsize()
