"""A preview started while the job broker is down: saved, answered 202 with its id and `waiting_for_broker` (the page
says so), never a 500; its jobs are sent by the broker check once the broker answers (a Redis of the test's own)."""

from __future__ import annotations

import pytest

from gymwright import jobs
from sandbox.models import Rollout
from tests.support.faults import OwnRedis

pytestmark = [pytest.mark.redis]


def previews_url(version):
    return f"/api/tasks/{version.task.slug}/versions/{version.number}/previews/"


def test_a_preview_started_while_the_broker_is_down_waits_for_it_then_is_sent(
    transactional_db, api, client, author, version, broker_down
):
    # committed for real: the jobs are sent as the preview's transaction commits, before the API answers
    response = api.post(previews_url(version), {"policy": "oracle", "n": 3}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["id"] and body["status"] == "queued" and body["waiting_for_broker"] is True
    assert body["progress"]["waiting_for_broker"] == 3
    assert api.get(f"/api/previews/{body['id']}/").json()["waiting_for_broker"] is True
    client.force_login(author)
    page = client.get(f"/previews/{body['id']}/").content.decode()
    assert "3 rollouts waiting for the job broker" in page and "do not start it again" in page

    # While the broker is still down, the check raises the broker's error and every rollout keeps waiting.
    with pytest.raises(jobs.broker_errors()):
        jobs.broker_check()
    assert Rollout.objects.filter(preview_run_id=body["id"], enqueued_at__isnull=True).count() == 3

    broker_down.start()
    check = jobs.broker_check()
    assert sorted(check.resent["rollouts"]) == sorted(r["id"] for r in body["rollouts"])
    assert broker_down.keys() and _queued_messages(broker_down) == 3  # the three jobs, in the queue workers read
    after = api.get(f"/api/previews/{body['id']}/").json()
    assert after["waiting_for_broker"] is False and after["progress"]["waiting_for_broker"] == 0
    assert "waiting for the job broker" not in client.get(f"/previews/{body['id']}/").content.decode()
    assert jobs.broker_check().resent["rollouts"] == []  # sent once: the next check sends nothing


def test_a_preview_started_while_the_broker_is_up_answers_201_and_sends_its_jobs(
    transactional_db, api, version, broker_down
):
    broker_down.start()
    response = api.post(previews_url(version), {"policy": "oracle", "n": 2}, format="json")
    assert response.status_code == 201 and response.json()["waiting_for_broker"] is False
    assert _queued_messages(broker_down) == 2


def _queued_messages(server: OwnRedis) -> int:
    import redis

    return redis.Redis.from_url(server.url).llen("celery")
