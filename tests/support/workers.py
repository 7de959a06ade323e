"""Real Celery workers for tests: separate processes on a real broker, pointed at the test database.

One set of helpers for every test that needs a worker (previews, pack builds, faults, two hosts):
`Workers` starts and kills `celery -A gymwright worker` processes, each in its own process group
and with the settings a worker host would have; `PrivateRedis` gives one test an empty database of
a redis-server this test session started itself (never the shared server: its databases are people's,
`make bench`'s and other test runs'); `producer_on` points this process's Celery app (which enqueues
after commit) at a broker. The fixtures `redis_db` and `celery_producer` are registered in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.services import missing, require_bwrap

ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")


class PrivateRedis:
    """A database of a redis-server this test session started (`own_redis_server`), emptied before the
    test and after it. Flushing it touches nobody else's keys: the server is ours alone."""

    def __init__(self, url: str):
        import redis

        self.url, self.client = url, redis.Redis.from_url(url)
        self.purge()

    def purge(self) -> None:
        self.client.flushdb()

    def release(self) -> None:
        self.purge()
        self.client.close()


def test_database_url() -> str:
    """The URL of the test database pytest-django created (not the development one)."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if "postgresql" in db["ENGINE"]:
        auth = quote(db.get("USER") or "", safe="")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"], safe="")
        host = db.get("HOST") or "localhost"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgres://{auth}{'@' if auth else ''}{host}{port}/{quote(db['NAME'], safe='')}"
    missing(f"a worker URL for the database engine {db['ENGINE']}", "use PostgreSQL or SQLite")


test_database_url.__test__ = False  # a helper, not a test


def solo_worker_until(queue: str, finished, *, timeout: float) -> str:
    """Run one `--pool solo` worker on `queue` (this test's own), pointed at the test database, media and
    judge cache, until `finished()` is true or `timeout` seconds pass; stop it and return its output.
    For jobs that need no sandbox (dry runs, example answers); `Workers` starts sandbox hosts."""
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "GYMWRIGHT_JUDGE_CACHE_DIR": str(settings.JUDGE_CACHE_DIR),
        "CELERY_TASK_ALWAYS_EAGER": "0",
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gymwright",
            "worker",
            "-Q",
            queue,
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not finished():
            assert worker.poll() is None, worker.stdout.read().decode(errors="replace")
            time.sleep(0.3)
    finally:
        worker.terminate()
        try:
            output = worker.communicate(timeout=20)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            worker.kill()
            output = worker.communicate()[0].decode(errors="replace")
    return output


class Workers:
    """Starts and kills real Celery worker processes, each in its own process group.

    Every worker gets the test database, `broker_url`, bubblewrap sandboxes under a private
    directory and the shared MEDIA_ROOT (blob storage); `start(env=...)` overrides any of it,
    e.g. a host's own GYMWRIGHT_DATA_DIR and GYMWRIGHT_SANDBOX_DIR.
    """

    def __init__(self, *, broker_url: str, log_dir: Path, stale_after_s: int, requeue_after_s: int = 900):
        from django.conf import settings

        self.broker_url, self.log_dir, self.stale_after_s = broker_url, log_dir, stale_after_s
        self.requeue_after_s = requeue_after_s
        self.media_root = str(settings.MEDIA_ROOT)
        self.sandbox_dir = Path(tempfile.mkdtemp(prefix="gw-worker-sandboxes-"))
        self.sandbox_dir.chmod(0o755)  # the sandbox user (nobody) must traverse it
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def environment(self, **overrides: str) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gymwright.settings",
            "DATABASE_URL": test_database_url(),
            "CELERY_BROKER_URL": self.broker_url,
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "GYMWRIGHT_SANDBOX_BACKEND": "bubblewrap",
            "GYMWRIGHT_SANDBOX_DIR": str(self.sandbox_dir),
            "GYMWRIGHT_ROLLOUT_STALE_AFTER_S": str(self.stale_after_s),
            "GYMWRIGHT_ROLLOUT_REQUEUE_AFTER_S": str(self.requeue_after_s),
            "MEDIA_ROOT": self.media_root,
            "OPENAI_BASE_URL": "",
            "PYTHONUNBUFFERED": "1",
            **overrides,
        }

    def start(
        self,
        *,
        name: str | None = None,
        concurrency: int = 2,
        env: dict[str, str] | None = None,
        queues: str | None = None,
        command: list[str] | None = None,
    ) -> subprocess.Popen:
        """Start a worker named `name@<host>` and wait until it is ready to take jobs.

        `command`: the worker's command line as given (a README's, run from the repository's root), whose node
        name must be `name@%h`; otherwise the tests' own, which also logs at INFO and talks less to its peers."""
        name = name or f"gwtest-{uuid.uuid4().hex[:8]}"
        log_path = self.log_dir / f"{name}.log"
        log = open(log_path, "wb")
        own = command is None
        if own:
            command = [
                str(CELERY),
                "-A",
                "gymwright",
                "worker",
                "-P",
                "prefork",
                "-c",
                str(concurrency),
                "--loglevel=INFO",
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
            if queues:
                command += ["-Q", queues]
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.environment(**(env or {})),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.processes.append((process, log_path))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            # " ready." is logged at INFO; a worker that logs less answers a ping once it consumes.
            if b" ready." in log_path.read_bytes() or (
                not own and self._answers_ping(f"{name}@{socket.gethostname()}")
            ):
                return process
            if process.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"the Celery worker did not start:\n{self.logs()}")

    def _answers_ping(self, node: str) -> bool:
        from gymwright.celery import app

        with app.connection_for_write(self.broker_url) as connection:
            return bool(app.control.ping(destination=[node], timeout=0.5, connection=connection))

    def kill(self, process: subprocess.Popen, sig=signal.SIGKILL) -> None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def stop_all(self) -> None:
        for process, _ in self.processes:
            if process.poll() is None:
                self.kill(process, signal.SIGTERM)
        for process, _ in self.processes:  # whatever the workers left in their groups
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.sandbox_dir, ignore_errors=True)

    def logs(self, tail: int = 6000) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_bytes()[-tail:].decode(errors='replace')}"
            for _, path in self.processes
            if path.exists()
        )


def start_workers(
    request, broker_url: str, tmp_path: Path, *, stale_after_s: int, requeue_after_s: int = 900
) -> Workers:
    """A `Workers` on `broker_url` (needs bubblewrap), stopped when the test ends."""
    require_bwrap()
    workers = Workers(
        broker_url=broker_url, log_dir=tmp_path, stale_after_s=stale_after_s, requeue_after_s=requeue_after_s
    )
    request.addfinalizer(workers.stop_all)
    return workers


def wait_for(condition, *, timeout: float, what: str, workers: Workers):
    """Poll `condition` until it is truthy; fail with every rollout's state and the workers' logs."""
    from sandbox.models import Rollout

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    states = list(Rollout.objects.values("id", "status", "attempts", "worker", "error", "progress"))
    pytest.fail(f"timed out after {timeout} s waiting for {what}; rollouts: {states}\n{workers.logs()}")


def processes_with(marker: str) -> list[str]:
    """The command lines of this machine's processes that contain `marker` (e.g. in a sandbox)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(f"{proc.name}: {cmdline[:200]}")
    return found


@contextlib.contextmanager
def producer_on(broker_url: str, monkeypatch, *, transport_options: dict | None = None):
    """Point this process's Celery app at `broker_url` for the duration.

    Celery reads CELERY_BROKER_URL from the environment before its own configuration (CI
    sets it), so the variable is replaced too; and other tests may have left the app eager."""
    from kombu import pools

    from gymwright.celery import app

    def forget_connections():
        # kombu keeps producer pools per connection in a process-wide registry.
        pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    monkeypatch.setenv("CELERY_BROKER_URL", broker_url)
    monkeypatch.delenv("CELERY_BROKER_WRITE_URL", raising=False)
    saved = (app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager)
    app.conf.broker_url = broker_url
    app.conf.broker_transport_options = transport_options or {}
    app.conf.task_always_eager = False
    forget_connections()
    try:
        yield app
    finally:
        app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager = saved
        forget_connections()


@pytest.fixture(scope="session")
def own_redis_server(tmp_path_factory):
    """A redis-server of this test process's own (each xdist worker has one), started the first time a test
    needs a private Redis and stopped at the end of the session."""
    from tests.support.faults import OwnRedis  # faults imports this module

    server = OwnRedis(tmp_path_factory.mktemp("own-redis"))
    server.start()
    yield server
    server.kill()


@pytest.fixture
def redis_db(own_redis_server):
    private = PrivateRedis(own_redis_server.url)
    yield private
    private.release()


@pytest.fixture
def celery_producer(redis_db, monkeypatch):
    """This process's Celery app, enqueueing on the test's private Redis database."""
    with producer_on(redis_db.url, monkeypatch) as app:
        yield app
