"""Fault: the broker (Redis) restarts mid-preview and loses every message.

The test runs a redis-server of its own on a free port (no persistence: a restart loses the
queue), never the shared one. A worker takes the first rollout; Redis is killed and started
again empty, so the job messages of the rollouts still queued are gone. The worker reconnects,
and its broker check (every GYMWRIGHT_BROKER_CHECK_S) finds its canary gone and re-sends the job
of every QUEUED rollout: the preview finishes, nothing stays "queued". The backstop
(GYMWRIGHT_ROLLOUT_REQUEUE_AFTER_S) is set far out of reach: the recovery is the canary's.
"""

from __future__ import annotations

import re

import pytest

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task
from tests.support.users import make_user
from tests.support.workers import producer_on, start_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]


@pytest.mark.timeout(90 + 90 + 240 + 120)  # the worker's start, then the waits below, and two Redis starts
def test_a_preview_survives_a_redis_restart_that_loses_its_queue(
    request, transactional_db, django_user_model, own_redis, monkeypatch, tmp_path
):
    author = make_user(django_user_model, "ada", "author")
    task = make_task(
        author=author, slug="slow-oracle", script="sleep 2 && echo 42 > answer.txt", limits={"timeout_s": 120}
    )
    workers = start_workers(request, own_redis.url, tmp_path, stale_after_s=30, requeue_after_s=3600)
    with producer_on(own_redis.url, monkeypatch):
        workers.start(name="redis-fault", concurrency=1, env={"GYMWRIGHT_BROKER_CHECK_S": "2"})
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=4)
        wait_for(
            lambda: preview_run.rollouts.filter(status=Rollout.Status.RUNNING).exists(),
            timeout=90,
            what="the first rollout to start",
            workers=workers,
        )
        assert preview_run.rollouts.filter(status=Rollout.Status.QUEUED).count() >= 2
        assert own_redis.keys() > 0  # the queued rollouts' messages
        before = own_redis.run_id()
        own_redis.kill()
        own_redis.start()  # a new server without persistence: the queued rollouts' messages are gone
        # (not `keys() == 0`: the worker reconnects at once and may have written its own keys already)
        assert own_redis.run_id() != before

        wait_for(
            lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists(),
            timeout=240,
            what="the preview to finish after the broker lost its queue",
            workers=workers,
        )
    rollouts = list(preview_run.rollouts.all())
    assert [(r.status, r.passed) for r in rollouts] == [("done", True)] * 4, (
        [(r.status, r.error) for r in rollouts],
        workers.logs(),
    )
    assert all(r.attempts == 1 for r in rollouts)  # re-sent, not re-run: each claimed once
    logs = workers.logs(tail=200000)
    # the queued rollouts were sent again by the check that found the canary gone
    assert any(
        re.search(r"'rollouts': \[\d", line)
        for line in logs.splitlines()
        if "by the broker check (the canary was gone)" in line
    ), logs
    assert not Rollout.objects.filter(status=Rollout.Status.QUEUED).exists()
    preview_run.refresh_from_db()
    assert preview_run.status == "done" and preview_run.summary["pass_rate"] == 1.0
