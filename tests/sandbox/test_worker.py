"""The whole preview flow through a real Celery worker on Redis, with bubblewrap sandboxes.

The worker is a separate process (`celery -A gymwright worker -P prefork -c 2`)
pointed at the very database pytest-django created for this test, and at a
Redis database of its own (picked and purged per test run), so stale messages
from other runs cannot reach it.
"""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task
from tests.support.users import make_user
from tests.support.workers import processes_with, start_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]


@pytest.fixture
def people(transactional_db, django_user_model):
    return make_user(django_user_model, "ada", "author")


@pytest.mark.timeout(90 + 180 + 90)  # the worker's start, then the wait below
def test_oracle_passes_and_nop_fails_through_a_real_worker(request, people, redis_db, celery_producer, tmp_path):
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
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


def _containers_of(client, owner: str) -> list:
    """The sandbox containers a worker process made (their `gymwright.owner` label is "<host>:<pid>")."""
    return client.containers.list(all=True, sparse=True, filters={"label": f"gymwright.owner={owner}"})


@pytest.mark.timeout(600)  # two workers' start (90 s each at most), the waits below, and docker's slower sandboxes
@pytest.mark.parametrize("backend", ["bubblewrap", "docker"])
def test_a_rollout_whose_worker_is_killed_is_reaped_and_none_stays_running(
    request, people, redis_db, backend, celery_producer, tmp_path, settings
):
    """SIGKILL to a worker mid-rollout: within the stale window (plus a heartbeat and a reaper's period) a new
    worker re-queues the rollout, which runs again to the end; the killed worker's sandbox, its folder
    (bubblewrap) or its container (docker), is removed and nothing of it is left."""
    from sandbox.tasks import reap_interval_s

    stale_after_s = 4
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=stale_after_s)
    # The workers' settings here too, so that reap_interval_s() is their reaper's period.
    settings.ROLLOUT_STALE_AFTER_S, settings.ROLLOUT_REQUEUE_AFTER_S = stale_after_s, workers.requeue_after_s
    env = {}
    client = None
    if backend == "docker":
        from tests.support.images import busybox_image
        from tests.support.services import require_docker

        client = require_docker()
        settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap", "docker"]
        env = {"GYMWRIGHT_SANDBOX_BACKEND": "docker", "GYMWRIGHT_SANDBOX_IMAGE": busybox_image(client)}
    marker = f"gwmark{uuid.uuid4().hex[:10]}"
    task = make_task(
        author=people,
        slug="slow-oracle",
        script=f"sleep 6 && echo 42 > answer.txt # {marker}",
        limits={"timeout_s": 120},
    )
    first = workers.start(env=env)
    preview_run = services.preview_run_create(
        task_version=task.latest_version, user=people, policy="oracle", n=1, backend=backend
    )
    rollout = preview_run.rollouts.get()

    def sleeping():
        rollout.refresh_from_db()
        return rollout.status == Rollout.Status.RUNNING and processes_with(marker)

    wait_for(sleeping, timeout=120, what="the solution to be running in its sandbox", workers=workers)
    first_worker = rollout.worker  # "<node name>@<host>:<pid of the pool process>", the sandbox's owner
    owner = f"{socket.gethostname()}:{first_worker.rsplit(':', 1)[1]}"
    workers.kill(first)  # SIGKILL to the whole worker: no goodbye, no ack, no failure hook

    if backend == "bubblewrap":
        # The sandbox's processes die with their worker; its folder stays until a reaper sees its owner is gone.
        deadline = time.monotonic() + 10
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_with(marker) == [], "the killed worker's sandbox process outlived it"
        assert [path.name for path in workers.sandbox_dir.iterdir() if path.name.startswith("gw-")], (
            "the killed worker's sandbox folder is gone before any reaper ran: nothing left for this test to see"
        )
    else:
        # A container is not the worker's child: it outlives it, until a reaper sees its owner is gone.
        assert len(_containers_of(client, owner)) == 1
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.RUNNING  # nobody has noticed yet

    # A new worker reaps it once its heartbeat (every second) is older than the stale window: re-queued
    # within stale_after_s, a heartbeat, a reaper's period and a busy machine's slack of the new worker's start.
    workers.start(env=env)
    reaped_within = stale_after_s + 1 + reap_interval_s() + 30
    wait_for(
        lambda: Rollout.objects.filter(pk=rollout.pk).exclude(attempts=1, status=Rollout.Status.RUNNING).exists(),
        timeout=reaped_within,
        what="the stale rollout to be reaped",
        workers=workers,
    )
    wait_for(
        lambda: Rollout.objects.filter(pk=rollout.pk, status__in=Rollout.TERMINAL).exists(),
        timeout=180,
        what="the reaped rollout to run again to its end",
        workers=workers,
    )
    rollout.refresh_from_db()
    assert rollout.attempts == 2 and rollout.worker != first_worker, workers.logs()
    assert rollout.status == Rollout.Status.DONE and rollout.passed is True, (rollout.error, workers.logs())
    assert not Rollout.objects.filter(status__in=Rollout.ACTIVE).exists()
    # The run is refreshed after the rollout's row commits (so that two rollouts finishing at once each count the
    # other's): a moment after it, not with it.
    wait_for(
        lambda: PreviewRun.objects.filter(pk=preview_run.pk, status="done").exists(),
        timeout=30,
        what="the run to be done once its rollout is",
        workers=workers,
    )

    # Nothing of either attempt is left: no process, no sandbox folder, no container.
    assert processes_with(marker) == []
    if backend == "bubblewrap":
        wait_for(
            lambda: not any(path.name.startswith("gw-") for path in workers.sandbox_dir.iterdir()),
            timeout=reap_interval_s() + 30,
            what="the killed worker's sandbox folder to be reaped",
            workers=workers,
        )
    else:
        second_owner = f"{socket.gethostname()}:{rollout.worker.rsplit(':', 1)[1]}"
        wait_for(
            lambda: not _containers_of(client, owner) and not _containers_of(client, second_owner),
            timeout=reap_interval_s() + 30,
            what="the killed worker's container to be reaped",
            workers=workers,
        )


def test_rollouts_whose_messages_were_flushed_from_redis_still_run(
    request, people, redis_db, celery_producer, tmp_path
):
    """Redis lost the queue (restarted without persistence, flushed): nothing stays queued forever;
    the reaper re-sends the job of every QUEUED rollout nobody claimed in time."""
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60, requeue_after_s=3)
    task = make_task(author=people)
    preview_run = services.preview_run_create(task_version=task.latest_version, user=people, policy="oracle", n=3)
    assert redis_db.client.dbsize() > 1, "the preview's job messages never reached Redis"
    redis_db.purge()  # every message is gone; only the rows say there is work
    assert redis_db.client.dbsize() == 0
    workers.start()
    wait_for(
        lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists(),
        timeout=120,
        what="the preview whose messages were lost to finish",
        workers=workers,
    )
    rollouts = list(preview_run.rollouts.all())
    assert [(r.status, r.passed, r.attempts) for r in rollouts] == [("done", True, 1)] * 3, workers.logs()
    assert "re-sent the job messages" in workers.logs()
