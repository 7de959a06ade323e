"""The production web server for tests: what `make serve` starts (collectstatic, then gunicorn with
gymwright.gunicorn_conf, DEBUG off) on the test database, and a sign-in through its login form."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.workers import test_database_url

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    def __init__(self, base: str, proc: subprocess.Popen, log: Path, access_log: Path):
        self.base, self.proc, self.log, self.access_log = base, proc, log, access_log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def booted_workers(self) -> set[int]:
        return {int(pid) for pid in re.findall(r"Booting worker with pid: (\d+)", self.log_text())}


@contextmanager
def gunicorn_serving(tmp: Path, *, workers: int = 2, env: dict | None = None) -> Iterator[Gunicorn]:
    """gunicorn as `make serve` runs it, in `tmp` (static files, logs), answering once every worker has
    booted. `env` adds to (or, with None values, removes from) the server's environment."""
    port = free_port()
    server_env = {
        **os.environ,
        "DEBUG": "false",
        "DATABASE_URL": test_database_url(),
        "STATIC_ROOT": str(tmp / "static"),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": str(workers),
        "GUNICORN_ACCESS_LOG": str(tmp / "access.log"),
    }
    for key, value in (env or {}).items():
        if value is None:
            server_env.pop(key, None)
        else:
            server_env[key] = value
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=server_env,
        check=True,
        timeout=120,
    )
    log_path = tmp / "gunicorn.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "--config", "python:gymwright.gunicorn_conf"],
        cwd=ROOT,
        env=server_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Gunicorn(f"http://127.0.0.1:{port}", proc, log_path, tmp / "access.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{server.base}/accounts/login/", timeout=2)
                if len(server.booted_workers()) >= workers:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(server.log_text())
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def sign_in(client: httpx.Client, *, username: str, password: str) -> None:
    """Sign in through the login form, as a person does; the client keeps the session cookie."""
    login = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    response = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": str(client.base_url).rstrip("/") + "/accounts/login/"},
    )
    assert response.status_code == 302, response.text[:500]
