"""A real Celery worker reaps pack builds whose worker died, from its start-up hook and its own timer."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from packs import services
from packs.models import PackVersion
from tests.packs.conftest import make_approved
from tests.support.users import make_user
from tests.support.workers import start_workers

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_a_worker_fails_a_build_that_no_worker_will_finish(
    request, transactional_db, django_user_model, redis_db, tmp_path
):
    author = make_user(django_user_model, "alice", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    lab = make_user(django_user_model, "lena", "lab")
    make_approved(author=author, reviewer=reviewer, slug="task-00")
    pack = services.pack_create(slug="lost", user=lab)
    # started by a worker that died (its last report old enough to be stale); a job the broker lost before any
    # worker took it is sent again by the broker check instead (tests/sandbox/test_fault_broker_outage.py)
    lost = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    PackVersion.objects.filter(pk=lost.pk).building_update(heartbeat_at=timezone.now() - timedelta(seconds=30))

    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
    workers.start(env={"GYMWRIGHT_PACK_BUILD_STALE_AFTER_S": "10"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lost.refresh_from_db()
        if lost.status != PackVersion.Status.BUILDING:
            break
        time.sleep(0.25)
    assert lost.status == PackVersion.Status.FAILED, workers.logs()
    assert "the build stopped reporting for more than 10 s" in lost.failure_reason

    # and from its timer: a version that goes stale while the worker runs
    later = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    PackVersion.objects.filter(pk=later.pk).building_update(heartbeat_at=timezone.now() - timedelta(seconds=30))
    deadline = time.monotonic() + 60  # the timer fires every 5 s (half the stale period)
    while time.monotonic() < deadline:
        later.refresh_from_db()
        if later.status != PackVersion.Status.BUILDING:
            break
        time.sleep(0.25)
    assert later.status == PackVersion.Status.FAILED, workers.logs()
