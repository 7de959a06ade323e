"""The whole preview flow through a real Celery worker on Redis, with bubblewrap sandboxes.

The worker is a separate process (`celery -A gymwright worker -P prefork -c 2`)
pointed at the very database pytest-django created for this test, and at a
Redis database of its own (picked and purged per test run), so stale messages
from other runs cannot reach it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task, make_user
from tests.support.services import require_bwrap, require_redis

pytestmark = [pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")
LOCK_KEY = "gymwright-test:owner"


# -- a Redis database of our own -------------------------------------------------------------------


class PrivateRedis:
    """Claims a Redis database (14 down to 1; 0 and 15 are left to people and other tests) with an
    owner key, purges it, and gives it back purged."""

    def __init__(self, base_url: str):
        import redis

        self.token = uuid.uuid4().hex
        parts = urlsplit(base_url)
        for db in range(14, 0, -1):
            url = urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))
            client = redis.Redis.from_url(url)
            if client.set(LOCK_KEY, self.token, nx=True, ex=1800):
                self.url, self.client = url, client
                self.purge()
                return
        pytest.skip("every Redis database 1-14 is in use by other test runs")

    def purge(self) -> None:
        for key in self.client.scan_iter(count=1000):
            if key != LOCK_KEY.encode():
                self.client.delete(key)

    def release(self) -> None:
        self.purge()
        if self.client.get(LOCK_KEY) == self.token.encode():
            self.client.delete(LOCK_KEY)


def _database_url() -> str:
    """The URL of the test database pytest-django created (not the development one)."""
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
    pytest.skip(f"no worker URL for database engine {db['ENGINE']}")


class Workers:
    """Starts and kills real Celery worker processes, each in its own process group."""

    def __init__(self, *, broker_url: str, log_dir: Path, stale_after_s: int, requeue_after_s: int = 900):
        self.broker_url, self.log_dir, self.stale_after_s = broker_url, log_dir, stale_after_s
        self.requeue_after_s = requeue_after_s
        self.sandbox_dir = Path(tempfile.mkdtemp(prefix="gw-worker-sandboxes-"))
        self.sandbox_dir.chmod(0o755)  # the sandbox user (nobody) must traverse it
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self) -> subprocess.Popen:
        name = f"gwtest-{uuid.uuid4().hex[:8]}"
        log_path = self.log_dir / f"{name}.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gymwright.settings",
            "DATABASE_URL": _database_url(),
            "CELERY_BROKER_URL": self.broker_url,
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "GYMWRIGHT_SANDBOX_BACKEND": "bubblewrap",
            "GYMWRIGHT_SANDBOX_DIR": str(self.sandbox_dir),
            "GYMWRIGHT_ROLLOUT_STALE_AFTER_S": str(self.stale_after_s),
            "GYMWRIGHT_ROLLOUT_REQUEUE_AFTER_S": str(self.requeue_after_s),
            "MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "OPENAI_BASE_URL": "",
            "PYTHONUNBUFFERED": "1",
        }
        log = open(log_path, "wb")
        process = subprocess.Popen(
            [str(CELERY), "-A", "gymwright", "worker", "-P", "prefork", "-c", "2", "--loglevel=INFO",
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.processes.append((process, log_path))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if b" ready." in log_path.read_bytes():
                return process
            if process.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"the Celery worker did not start:\n{self.logs()}")

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
        return "\n".join(f"--- {path.name}\n{path.read_bytes()[-tail:].decode(errors='replace')}"
                         for _, path in self.processes if path.exists())


@pytest.fixture
def redis_db():
    require_redis()
    private = PrivateRedis(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    yield private
    private.release()


@pytest.fixture
def celery_producer(redis_db, monkeypatch):
    """Point this process's Celery app (which enqueues after commit) at the private Redis database.

    Celery reads CELERY_BROKER_URL from the environment before its own configuration (CI
    sets it), so the variable is replaced too; and other tests may have left the app eager."""
    from kombu import pools

    from gymwright.celery import app

    def forget_connections():
        # kombu keeps producer pools per connection in a process-wide registry.
        pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    monkeypatch.setenv("CELERY_BROKER_URL", redis_db.url)
    monkeypatch.delenv("CELERY_BROKER_WRITE_URL", raising=False)
    saved = (app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager)
    app.conf.broker_url = redis_db.url
    app.conf.broker_transport_options = {}
    app.conf.task_always_eager = False
    forget_connections()
    yield app
    app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager = saved
    forget_connections()


def _workers(request, redis_db, tmp_path, stale_after_s, requeue_after_s=900):
    require_bwrap()
    workers = Workers(broker_url=redis_db.url, log_dir=tmp_path, stale_after_s=stale_after_s,
                      requeue_after_s=requeue_after_s)
    request.addfinalizer(workers.stop_all)
    return workers


def wait_for(condition, *, timeout: float, what: str, workers: Workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    states = list(Rollout.objects.values("id", "status", "attempts", "error", "progress"))
    pytest.fail(f"timed out after {timeout} s waiting for {what}; rollouts: {states}\n{workers.logs()}")


@pytest.fixture
def people(transactional_db, django_user_model):
    return make_user(django_user_model, "ada", "author")


def test_oracle_passes_and_nop_fails_through_a_real_worker(request, people, redis_db, celery_producer, tmp_path):
    workers = _workers(request, redis_db, tmp_path, stale_after_s=60)
    task = make_task(author=people)
    version = task.latest_version
    workers.start()
    oracle = services.preview_run_create(task_version=version, user=people, policy="oracle", n=2)
    nop = services.preview_run_create(task_version=version, user=people, policy="nop", n=2)

    def finished():
        return PreviewRun.objects.filter(pk__in=[oracle.pk, nop.pk], status__in=PreviewRun.FINISHED).count() == 2

    wait_for(finished, timeout=180, what="both previews to finish", workers=workers)
    oracle.refresh_from_db(), nop.refresh_from_db()
    oracle_rollouts = list(oracle.rollouts.select_related("grade"))
    assert [(r.status, r.reward, r.passed) for r in oracle_rollouts] == [("done", 1.0, True)] * 2, workers.logs()
    assert all(r.grade is not None and r.grade.check_results.count() == 2 for r in oracle_rollouts)
    assert all(r.worker.startswith("gwtest-") and r.attempts == 1 for r in oracle_rollouts)
    assert any(f["path"] == "answer.txt" for f in oracle_rollouts[0].workspace_files)
    assert oracle.status == "done" and oracle.summary["pass_rate"] == 1.0 and oracle.summary["verdict"]["ok"]
    nop_rollouts = list(nop.rollouts.all())
    assert [(r.status, r.passed) for r in nop_rollouts] == [("done", False)] * 2, workers.logs()
    assert all(r.reward < 0.7 for r in nop_rollouts)
    assert nop.status == "done" and nop.summary["pass_rate"] == 0.0 and nop.summary["verdict"]["ok"]


def _processes_with(marker: str) -> list[str]:
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


def test_a_rollout_whose_worker_is_killed_is_reaped_and_none_stays_running(request, people, redis_db,
                                                                          celery_producer, tmp_path):
    stale_after_s = 4
    workers = _workers(request, redis_db, tmp_path, stale_after_s=stale_after_s)
    marker = f"gwmark{uuid.uuid4().hex[:10]}"
    task = make_task(author=people, slug="slow-oracle",
                     script=f"sleep 6 && echo 42 > answer.txt # {marker}", limits={"timeout_s": 120})
    first = workers.start()
    preview_run = services.preview_run_create(task_version=task.latest_version, user=people, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()

    def sleeping():
        rollout.refresh_from_db()
        return rollout.status == Rollout.Status.RUNNING and _processes_with(marker)

    wait_for(sleeping, timeout=90, what="the solution to be running in its sandbox", workers=workers)
    first_worker = rollout.worker
    workers.kill(first)  # SIGKILL to the whole worker: no goodbye, no ack, no failure hook

    # The sandbox dies with its worker: nothing of it is left running.
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == [], "the killed worker's sandbox process outlived it"
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.RUNNING  # nobody has noticed yet

    # A new worker reaps it (the heartbeat stopped): re-queued once, then run to the end.
    workers.start()
    wait_for(lambda: Rollout.objects.filter(pk=rollout.pk, status__in=Rollout.TERMINAL).exists(),
             timeout=120, what="the stale rollout to be reaped and finished", workers=workers)
    rollout.refresh_from_db()
    assert rollout.attempts == 2 and rollout.worker != first_worker, workers.logs()
    assert rollout.status == Rollout.Status.DONE and rollout.passed is True, (rollout.error, workers.logs())
    assert not Rollout.objects.filter(status__in=Rollout.ACTIVE).exists()
    preview_run.refresh_from_db()
    assert preview_run.status == "done"


def test_rollouts_whose_messages_were_flushed_from_redis_still_run(request, people, redis_db, celery_producer,
                                                                   tmp_path):
    """Redis lost the queue (restarted without persistence, flushed): nothing stays queued forever;
    the reaper re-sends the job of every QUEUED rollout nobody claimed in time."""
    workers = _workers(request, redis_db, tmp_path, stale_after_s=60, requeue_after_s=3)
    task = make_task(author=people)
    preview_run = services.preview_run_create(task_version=task.latest_version, user=people, policy="oracle", n=3)
    assert redis_db.client.dbsize() > 1, "the preview's job messages never reached Redis"
    redis_db.purge()  # every message is gone; only the rows say there is work
    assert redis_db.client.dbsize() == 1
    workers.start()
    wait_for(lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists(),
             timeout=120, what="the preview whose messages were lost to finish", workers=workers)
    rollouts = list(preview_run.rollouts.all())
    assert [(r.status, r.passed, r.attempts) for r in rollouts] == [("done", True, 1)] * 3, workers.logs()
    assert "re-sent the job messages" in workers.logs()
