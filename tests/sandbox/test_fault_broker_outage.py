"""Fault: the broker (a redis-server of the test's own) is down when a preview and a pack build start.

A real worker runs; the broker is killed; the API saves both and answers 202 with `waiting_for_broker`, never a
500. The broker comes back, empty. The worker reconnects and its broker check (GYMWRIGHT_BROKER_CHECK_S) sends
the jobs that waited: the preview runs each rollout once and the build publishes the version it was started
as. The recovery is asserted by its mechanism, the check's own log line naming the rows it sent, with the
backstop (GYMWRIGHT_ROLLOUT_REQUEUE_AFTER_S) and the stale reaper far out of reach.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from packs.models import PackVersion
from sandbox.models import PreviewRun, Rollout
from tests.packs.conftest import make_approved
from tests.sandbox.factories import make_task
from tests.support.users import make_user
from tests.support.workers import producer_on, start_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]


@pytest.mark.timeout(90 + 240 + 60)
def test_work_started_while_the_broker_is_down_is_sent_by_the_broker_check_when_it_returns(
    request, transactional_db, django_user_model, own_redis, monkeypatch, tmp_path
):
    author = make_user(django_user_model, "ada", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    lab = make_user(django_user_model, "lena", "lab")
    task = make_task(author=author, slug="oracle-42")
    make_approved(author=author, reviewer=reviewer, slug="packed-00")
    workers = start_workers(request, own_redis.url, tmp_path, stale_after_s=600, requeue_after_s=3600)
    with producer_on(own_redis.url, monkeypatch):
        workers.start(
            name="outage",
            concurrency=1,
            env={"GYMWRIGHT_BROKER_CHECK_S": "2", "GYMWRIGHT_PACK_BUILD_STALE_AFTER_S": "3600"},
        )
        own_redis.kill()

        authors, labs = APIClient(), APIClient()
        authors.force_authenticate(author)
        labs.force_authenticate(lab)
        started = authors.post(
            f"/api/tasks/{task.slug}/versions/1/previews/", {"policy": "oracle", "n": 3}, format="json"
        )
        assert started.status_code == 202, started.content
        assert started.json()["waiting_for_broker"] is True
        assert labs.post("/api/packs/", {"slug": "outage"}, format="json").status_code == 201
        build = labs.post("/api/packs/outage/versions/", {}, format="json")
        assert build.status_code == 202 and build.json()["waiting_for_broker"] is True, build.content
        assert build.json()["version"] == "1.0.0"

        own_redis.start()  # empty: nothing was ever sent, nothing survived
        preview_id = started.json()["id"]
        wait_for(
            lambda: PreviewRun.objects.filter(pk=preview_id, status__in=PreviewRun.FINISHED).exists(),
            timeout=240,
            what="the preview to run once the broker is back",
            workers=workers,
        )
        wait_for(
            lambda: PackVersion.objects.filter(pack__slug="outage").exclude(status="building").exists(),
            timeout=60,
            what="the build to finish once the broker is back",
            workers=workers,
        )

    rollouts = list(Rollout.objects.filter(preview_run_id=preview_id))
    assert [(r.status, r.passed, r.attempts) for r in rollouts] == [("done", True, 1)] * 3, workers.logs()
    [pack_version] = PackVersion.objects.filter(pack__slug="outage")
    assert (pack_version.status, pack_version.version) == ("ready", "1.0.0"), pack_version.failure_reason
    logs = workers.logs(tail=200000)
    sent = sorted(r.pk for r in rollouts)
    assert f"'rollouts': {sent}" in logs and f"'pack builds': [{pack_version.pk}]" in logs, logs
    assert "by the broker check" in logs
