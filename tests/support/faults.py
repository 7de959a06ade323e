"""Fault injection with real parts: terminate the test database's backends, run a service of
the test's own (Redis, a Docker engine) that the test may kill. Never the shared services."""

from __future__ import annotations

import os
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
        missing("PostgreSQL", "terminating backends needs it; set DATABASE_URL=postgres://...")
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as killer:
        pids = [
            row[0]
            for row in killer.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ]
        for pid in pids:
            killer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            alive = killer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]).fetchone()[0]
            if not alive:
                return pids
            time.sleep(0.05)
    pytest.fail(f"backends {pids} outlived pg_terminate_backend")


class DropWhenQuerying:
    """An execute wrapper (`connection.execute_wrapper(DropWhenQuerying("authoring_task"))`) that
    terminates the backends just before the first query mentioning `table`: the connection dies
    under the request or job in flight, at a known point."""

    def __init__(self, table: str):
        self.table, self.terminated = table, []

    def __call__(self, execute, sql, params, many, context):
        if not self.terminated and self.table in sql:
            self.terminated = database_backends_terminate()
        return execute(sql, params, many, context)


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
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break  # e.g. the port was taken between unused_port() and now
            try:
                pid = redis.Redis.from_url(self.url, socket_connect_timeout=1).info("server")["process_id"]
            except redis.ConnectionError:
                time.sleep(0.1)
                continue
            # Whatever answers on the port must be the server we started: never flush or kill another.
            if pid != self.process.pid:
                break
            return
        self.kill()
        pytest.fail(f"our redis-server on port {self.port} did not start")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def keys(self) -> int:
        import redis

        return redis.Redis.from_url(self.url).dbsize()

    def run_id(self) -> str:
        """The server's run id: a new one after a restart (started without persistence: empty)."""
        import redis

        return redis.Redis.from_url(self.url).info("server")["run_id"]


class OwnDockerd:
    """A second Docker engine of the test's own (own socket, data root, exec root, pid file; vfs,
    no iptables, no bridge), which the test may stop and start. Never the shared engine."""

    def __init__(self):
        import tempfile

        self.binary = shutil.which("dockerd")
        if not self.binary:
            missing("dockerd", "apt-get install docker.io")
        self.root = Path(tempfile.mkdtemp(prefix="gw-faults-", dir="/tmp"))  # short: unix socket paths
        self.socket = self.root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.process: subprocess.Popen | None = None
        self.log_path = self.root / "dockerd.log"

    def start(self):
        """Start the engine (again) and return a docker client for it, once it answers."""
        import docker

        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--host",
                self.host,
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "docker.pid"),
                "--storage-driver=vfs",
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                client = docker.DockerClient(base_url=self.host, timeout=120)
                client.ping()
                return client
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.25)
        pytest.fail(f"our dockerd did not start:\n{self.logs()}")

    def stop(self) -> None:
        """Stop the engine as an operator would (SIGTERM: it stops its containers and containerd)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self._end_containerd()

    def _end_containerd(self) -> None:
        # The engine's own containerd (its pid file is under our exec root) must not outlive it.
        pidfile = self.root / "exec" / "containerd" / "containerd.pid"
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            return
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if str(self.root).encode() in cmdline:
            os.kill(pid, signal.SIGKILL)

    def cleanup(self) -> None:
        self.stop()
        subprocess.run(["umount", "-R", str(self.root / "exec")], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-tail:].decode(errors="replace")
        except OSError:
            return ""
