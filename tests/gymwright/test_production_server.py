"""The production server: gunicorn with DEBUG off serves a working, styled site by itself.

Issue: every /static/ URL answered 404 under gunicorn with DEBUG off. This starts the real
`make serve` pieces (collectstatic, then gunicorn with gymwright.gunicorn_conf) against the
test database and fetches a page and each stylesheet and script it links.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.users import make_user
from tests.support.workers import test_database_url

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-gunicorn-1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def gunicorn_server(transactional_db, tmp_path):
    port = _free_port()
    env = {**os.environ, "DEBUG": "false", "DATABASE_URL": test_database_url(),
           "STATIC_ROOT": str(tmp_path / "static"), "GUNICORN_BIND": f"127.0.0.1:{port}",
           "WEB_CONCURRENCY": "2", "GUNICORN_ACCESS_LOG": str(tmp_path / "access.log")}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                   cwd=ROOT, env=env, check=True, timeout=120)
    gunicorn = Path(sys.executable).with_name("gunicorn")
    log = open(tmp_path / "gunicorn.log", "wb")
    proc = subprocess.Popen([str(gunicorn), "--config", "python:gymwright.gunicorn_conf"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/accounts/login/", timeout=2)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "gunicorn.log").read_text())
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_gunicorn_with_debug_off_serves_hashed_cached_static_files(gunicorn_server, django_user_model):
    make_user(django_user_model, "gina", "author", password=PASSWORD)
    with httpx.Client(base_url=gunicorn_server, timeout=10) as client:
        login = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        r = client.post("/accounts/login/", data={"username": "gina", "password": PASSWORD,
                                                  "csrfmiddlewaretoken": token},
                        headers={"Referer": f"{gunicorn_server}/accounts/login/"})
        assert r.status_code == 302, r.text[:500]
        page = client.get("/tasks/new/")
        assert page.status_code == 200
        assets = re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text)
        assert any(a.endswith(".css") for a in assets) and any(a.endswith(".js") for a in assets), assets
        for asset in assets:
            # Content-hashed names (name.<12 hex>.ext) that can be cached for a year.
            assert re.search(r"\.[0-9a-f]{12}\.(css|js|svg|png|ico|woff2?)$", asset), asset
            r = client.get(asset, headers={"Accept-Encoding": "gzip"})
            assert r.status_code == 200, asset
            assert "max-age=315360000" in r.headers.get("cache-control", ""), (asset, r.headers)
            assert r.content, asset
        # A static URL that does not exist is a plain 404, not a page.
        assert client.get("/static/nope.css").status_code == 404
