"""RabbitMQ as the broker beside Redis: a real worker on RabbitMQ runs a preview end to end.

The test makes a virtual host of its own (`rabbitmqctl add_vhost`), so its messages cannot
reach, or be taken by, anyone else's workers, and deletes it afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from sandbox import services
from sandbox.models import PreviewRun
from tests.sandbox.factories import make_task
from tests.support.services import missing
from tests.support.users import make_user
from tests.support.workers import producer_on, start_workers, wait_for

pytestmark = [pytest.mark.rabbitmq, pytest.mark.bubblewrap, pytest.mark.slow]

RABBITMQ = os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672")


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def rabbitmq_vhost():
    if not shutil.which("rabbitmqctl"):
        missing("RabbitMQ", "apt-get install rabbitmq-server (the tests make their own vhost with rabbitmqctl)")
    vhost = f"gw-test-{uuid.uuid4().hex[:10]}"
    made = _rabbitmqctl("add_vhost", vhost)
    if made.returncode != 0:
        missing("RabbitMQ", f"rabbitmqctl add_vhost failed: {made.stderr.strip()}")
    try:
        granted = _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        assert granted.returncode == 0, granted.stderr
        yield vhost
    finally:
        _rabbitmqctl("delete_vhost", vhost)


def test_a_worker_on_rabbitmq_runs_a_preview(
    request, transactional_db, django_user_model, rabbitmq_vhost, monkeypatch, tmp_path
):
    broker_url = f"{RABBITMQ}/{rabbitmq_vhost}"
    author = make_user(django_user_model, "ada", "author")
    task = make_task(author=author)
    with producer_on(broker_url, monkeypatch):
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=3)
        # The jobs wait in RabbitMQ, in this vhost's queue, until a worker comes.
        queues = _rabbitmqctl("list_queues", "-p", rabbitmq_vhost, "name", "messages", "--quiet")
        assert "celery\t3" in queues.stdout, queues.stdout + queues.stderr
        workers = start_workers(request, broker_url, tmp_path, stale_after_s=60)
        workers.start(name="on-rabbitmq")
        wait_for(
            lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists(),
            timeout=180,
            what="the preview on RabbitMQ to finish",
            workers=workers,
        )
    rollouts = list(preview_run.rollouts.all())
    assert [(r.status, r.passed, r.attempts) for r in rollouts] == [("done", True, 1)] * 3, workers.logs()
    assert all(r.worker.startswith("on-rabbitmq@") for r in rollouts)
    assert "amqp://guest:**@127.0.0.1:5672/" + rabbitmq_vhost in workers.logs()
    queues = _rabbitmqctl("list_queues", "-p", rabbitmq_vhost, "name", "messages", "--quiet")
    assert "celery\t0" in queues.stdout, queues.stdout  # every job acknowledged
