"""Fault: PostgreSQL drops a worker's connections (pg_terminate_backend on the test database's
backends only); the worker recovers without a restart.

The worker runs with production's database settings (DB_CONN_MAX_AGE 60 with health checks,
settings.py): it keeps its connections between jobs and through a rollout, so a drop leaves
them dead. Between jobs, the health check replaces them; during a rollout, the worker
reconnects and stores the result: the rollout is not lost, nor run twice.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from sandbox import services
from sandbox.models import PreviewRun
from tests.sandbox.factories import make_task
from tests.support.faults import DropWhenQuerying, database_backends_terminate
from tests.support.services import require_postgres
from tests.support.users import make_user
from tests.support.workers import processes_with, start_workers, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]


def _finished(preview_run):
    return lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists()


@pytest.mark.timeout(90 + 4 * 120 + 90)  # the worker's start, then the four waits below
def test_a_worker_whose_connections_are_dropped_runs_its_next_jobs(
    request, transactional_db, django_user_model, redis_db, celery_producer, tmp_path
):
    require_postgres("terminating backends needs PostgreSQL")
    author = make_user(django_user_model, "ada", "author")
    quick = make_task(author=author).latest_version
    marker = f"gwmark{uuid.uuid4().hex[:10]}"
    slow = make_task(
        author=author,
        slug="slow-oracle",
        script=f"sleep 3 && echo 42 > answer.txt # {marker}",
        limits={"timeout_s": 120},
    ).latest_version
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=600)
    workers.start(name="db-fault", env={"DB_CONN_MAX_AGE": "60"})

    first = services.preview_run_create(task_version=quick, user=author, policy="oracle", n=2)
    wait_for(_finished(first), timeout=120, what="the first preview", workers=workers)

    # Between jobs: every connection of the worker (its pool and its reaper) dies.
    assert database_backends_terminate()
    connection.close()  # ours died too
    after_idle = services.preview_run_create(task_version=quick, user=author, policy="oracle", n=2)
    wait_for(_finished(after_idle), timeout=120, what="a preview after the drop", workers=workers)

    # During a rollout: the solution is sleeping in its sandbox when the connections die.
    during = services.preview_run_create(task_version=slow, user=author, policy="oracle", n=1)
    wait_for(
        lambda: processes_with(marker), timeout=120, what="the slow solution to run in its sandbox", workers=workers
    )
    assert database_backends_terminate()
    connection.close()
    # The stale window is 10 minutes: finishing within the wait means the worker itself recovered.
    wait_for(_finished(during), timeout=120, what="the rollout that lost its connection to finish", workers=workers)

    for preview_run in (first, after_idle, during):
        rollouts = list(preview_run.rollouts.all())
        assert [(r.status, r.passed, r.attempts) for r in rollouts] == [("done", True, 1)] * len(rollouts), (
            [(r.status, r.error) for r in rollouts],
            workers.logs(),
        )
    assert "the database connection was lost; reconnecting" in workers.logs()


def test_a_rollout_whose_connection_drops_before_its_sandbox_starts_is_queued_again(transactional_db, author, enqueued):
    from authoring.services import blob_store
    from sandbox import worker

    require_postgres("terminating backends needs PostgreSQL")
    blob = blob_store(data=b"6\n7\n")
    task = make_task(author=author, slug="with-files", files=[{"path": "numbers.txt", "sha256": blob.sha256}])
    preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    drop = DropWhenQuerying("authoring_blob")  # reading the task's files, before any sandbox
    with connection.execute_wrapper(drop):
        assert worker.rollout_execute(rollout_id=rollout.pk) == "requeued"
    assert drop.terminated
    rollout.refresh_from_db()
    assert (rollout.status, rollout.attempts) == ("queued", 1)
    assert rollout.progress["note"].startswith("retrying after: OperationalError")
    assert [rollout_id for rollout_id, _ in enqueued][-1] == rollout.pk  # its job sent again
