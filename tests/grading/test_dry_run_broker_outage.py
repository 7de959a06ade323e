"""A judged dry run started while the job broker is down (a Redis of the test's own): the panel answers with the
deterministic part and says the judge's checks wait for the broker, never a 500; the broker check sends the job
once the broker answers."""

from __future__ import annotations

import pytest
import redis

from grading.models import DryRun
from gymwright import jobs
from tests.grading.test_dry_run import JUDGED_RUBRIC, judge_server, logged_in, post_dry_run, text_of  # noqa: F401
from tests.support.faults import OwnRedis
from tests.support.workers import producer_on

pytestmark = [pytest.mark.redis]


def test_a_judged_dry_run_started_while_the_broker_is_down_waits_for_it(
    transactional_db, logged_in, judge_server, tmp_path, monkeypatch
):
    server = OwnRedis(tmp_path)
    with producer_on(server.url, monkeypatch):
        response = post_dry_run(logged_in, JUDGED_RUBRIC, "42, because 6 x 7")
        assert response.status_code == 200
        body = text_of(response)
        assert "Waiting for the job broker, which did not answer" in body and "so far" in body  # the rest, shown
        dry_run = DryRun.objects.get()
        assert dry_run.status == "queued" and dry_run.waiting_for_broker
        try:
            server.start()
            assert jobs.broker_check().resent["dry runs"] == [dry_run.pk]
            assert redis.Redis.from_url(server.url).llen("celery") == 1  # its job, where workers read
        finally:
            server.kill()
    dry_run.refresh_from_db()
    assert not dry_run.waiting_for_broker
    polled = text_of(logged_in.get(f"/grading/dry-runs/{dry_run.pk}/", HTTP_HX_REQUEST="true"))
    assert "The judge is grading its checks" in polled and "Waiting for the job broker" not in polled
