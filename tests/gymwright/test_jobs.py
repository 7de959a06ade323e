"""gymwright.jobs against a real Redis broker of the test's own: a send the broker refuses leaves its rows waiting
and raises nothing; the broker check sends waiting jobs, and tells a broker that lost its messages by its canary."""

from __future__ import annotations

import json

import pytest

from gymwright import jobs
from tests.support.openai_server import unused_port
from tests.support.workers import producer_on

pytestmark = [pytest.mark.redis]


@pytest.fixture
def resends(monkeypatch):
    """The broker check's resenders replaced by one that records the `lost_before` it is called with."""
    calls = []
    monkeypatch.setattr(jobs, "_resenders", {"recorded": lambda lost_before: calls.append(lost_before) or []})
    return calls


def test_a_job_the_broker_does_not_take_leaves_its_rows_waiting_and_raises_nothing(monkeypatch):
    from sandbox.tasks import rollout_run

    waiting = []
    with producer_on(f"redis://127.0.0.1:{unused_port()}/0", monkeypatch):  # nothing listens there
        unsent = jobs.send(jobs.Job(rollout_run), [11, 12, 13], on_unsent=waiting.append)
    # the first refusal stops the round (each send waits through the publish retries): all three wait, once
    assert unsent == [11, 12, 13] and waiting == [[11, 12, 13]]


def test_the_broker_check_finds_a_broker_that_lost_its_messages_by_its_canary(own_redis, monkeypatch, resends):
    with producer_on(own_redis.url, monkeypatch):
        first = jobs.broker_check()
        assert first.lost  # a new broker holds no canary: it cannot be told from one that lost its queue
        assert own_redis.keys() > 0  # the canary now waits in its queue
        assert not jobs.broker_check().lost  # the canary is still there: nothing was lost
        assert resends[1] is None  # only the rows waiting for the broker are sent again

        own_redis.kill()
        with pytest.raises(jobs.broker_errors()):
            jobs.broker_check()
        assert jobs.broker_check_quietly() is None  # a worker's timer logs it and tries again at the next tick

        own_redis.start()  # no persistence: the canary is gone with every job message
        after_restart = jobs.broker_check()
        assert after_restart.lost and resends[-1] is not None  # every queued row sent before now goes again
        assert not jobs.broker_check().lost
    assert len(resends) == 4


def test_a_dataset_check_goes_to_its_own_queue_and_a_preview_to_the_default(own_redis, monkeypatch):
    """A health check holds a worker for hours: its job waits in the datasets queue (a worker of its own takes it,
    `make run` starts one), never in the queue previews and builds are taken from. Sent as the product sends them,
    into a real Redis, and read back from the broker's own lists."""
    import redis
    from django.conf import settings

    from packs.services.health import _job as dataset_job
    from sandbox.tasks import rollout_run

    with producer_on(own_redis.url, monkeypatch):
        assert jobs.send(dataset_job(), [7], on_unsent=pytest.fail) == []
        assert jobs.send(jobs.Job(rollout_run), [8], on_unsent=pytest.fail) == []
    broker = redis.Redis.from_url(own_redis.url)
    queued = {
        queue: [json.loads(message)["headers"]["task"] for message in broker.lrange(queue, 0, -1)]
        for queue in (settings.DATASET_CHECK_QUEUE, "celery")
    }
    assert settings.DATASET_CHECK_QUEUE == "datasets"
    assert queued == {"datasets": ["packs.dataset_check_run"], "celery": ["sandbox.rollout_run"]}, queued
