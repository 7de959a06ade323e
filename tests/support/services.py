"""Real services for tests: skip with a how-to where one is missing, fail in CI.

CI sets GYMWRIGHT_REQUIRE_SERVICES=1, which turns every such skip into a failure,
so a missing service can never hide a gap.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REQUIRED = os.environ.get("GYMWRIGHT_REQUIRE_SERVICES") == "1"


def missing(what: str, how: str) -> None:
    message = f"{what} is not available here ({how})"
    if REQUIRED:
        pytest.fail(f"{message}; GYMWRIGHT_REQUIRE_SERVICES=1 makes this a failure")
    pytest.skip(message)


def require_bwrap() -> str:
    path = shutil.which("bwrap")
    if not path:
        missing("bubblewrap", "apt-get install bubblewrap")
    from sandbox.runtime.backends.bubblewrap import root_entry_args

    # The probe binds what a sandbox binds (/usr and its links). A recursive bind of "/" took in every
    # other test's sandbox tmpfs, and one unmounted between bwrap's bind and its read-only remount
    # failed the probe (EINVAL, CI 2026-11-27) on a host where bubblewrap works.
    argv = [path, "--ro-bind", "/usr", "/usr", *root_entry_args(), "--unshare-all", "/usr/bin/true"]
    probe = subprocess.run(argv, capture_output=True)
    if probe.returncode != 0:
        missing("bubblewrap namespaces", probe.stderr.decode(errors="replace").strip())
    return path


def require_docker():
    try:
        import docker

        docker.from_env(timeout=10).ping()  # fail fast when there is no engine at all
        # The tests' client waits as long as the product's does: on a busy host with the vfs driver
        # a container create can take longer than 10 s, which is slowness, not a missing engine.
        return docker.from_env(timeout=120)
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        missing("a Docker engine", f"apt-get install docker.io and start dockerd: {exc}")


def require_postgres(why: str = "the test needs PostgreSQL") -> None:
    """The test database is PostgreSQL's (terminated backends, row locks, query plans...)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        missing("PostgreSQL", f"{why}; set DATABASE_URL=postgres://... (the test database is {connection.vendor}'s)")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        missing(f"root ({what})", "run the tests as root, as CI does")


def require_playwright():
    """Playwright's sync API (the browser tests drive Chromium with it)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        missing("the Python package playwright", f"pip install -e '.[test]': {exc}")
    return sync_playwright


def pytest_runtest_setup(item) -> None:
    """A test marked `postgres` needs PostgreSQL: on another database it skips with the how-to (fails in CI),
    where the marker alone was a label and such a test ran, and passed, on SQLite.
    (tests/conftest.py imports this hook.)"""
    if item.get_closest_marker("postgres"):
        require_postgres(f"{item.nodeid} is marked postgres")


def require_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    missing("headless Chromium", "apt-get install chromium")


@pytest.fixture
def sandbox_dir(settings):
    """A fresh SANDBOX_WORK_DIR for bubblewrap sandboxes (the backend the web app's tests run on)."""
    require_bwrap()
    path = Path(tempfile.mkdtemp(prefix="gw-test-sandboxes-"))
    path.chmod(0o755)  # reachable by the sandbox user
    settings.SANDBOX_WORK_DIR = path
    settings.SANDBOX_BACKEND = "bubblewrap"
    yield path
    shutil.rmtree(path, ignore_errors=True)
