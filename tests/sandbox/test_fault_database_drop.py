"""Fault: PostgreSQL drops a worker's connections (pg_terminate_backend on the test database's
backends only); the worker recovers without a restart.

The worker runs with production's database settings (DB_CONN_MAX_AGE 60 with health checks,
settings.py): it keeps its connections between jobs and through a rollout, so a drop leaves
them dead. Between jobs, the health check replaces them; during a rollout, the worker
reconnects and stores the result: the rollout is not lost, nor run twice.
"""

from __future__ import annotations

import pytest
from django.db import connection

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task, make_user
from tests.support.faults import database_backends_terminate
from tests.support.workers import start_workers, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]


def _finished(preview_run):
    return lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists()


def test_a_worker_whose_connections_are_dropped_runs_its_next_jobs(request, transactional_db, django_user_model,
                                                                  redis_db, celery_producer, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("terminating backends needs PostgreSQL (DATABASE_URL=postgres://...)")
    author = make_user(django_user_model, "ada", "author")
    quick = make_task(author=author).latest_version
    slow = make_task(author=author, slug="slow-oracle", script="sleep 3 && echo 42 > answer.txt",
                     limits={"timeout_s": 120}).latest_version
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
    wait_for(lambda: during.rollouts.filter(status=Rollout.Status.RUNNING).exists(), timeout=120,
             what="the slow rollout to start", workers=workers)
    assert database_backends_terminate()
    connection.close()
    # The stale window is 10 minutes: finishing within the wait means the worker itself recovered.
    wait_for(_finished(during), timeout=120, what="the rollout that lost its connection to finish", workers=workers)

    for preview_run in (first, after_idle, during):
        rollouts = list(preview_run.rollouts.all())
        assert [(r.status, r.passed, r.attempts) for r in rollouts] == [("done", True, 1)] * len(rollouts), (
            [(r.status, r.error) for r in rollouts], workers.logs())
    assert "the database connection was lost; reconnecting" in workers.logs()
