"""Fault: the Docker engine stops mid-preview, then comes back.

The test starts a second dockerd of its own (own socket, data and exec roots, pid file; vfs,
no iptables, no bridge), builds the small busybox test image into it and points a real worker
at it (DOCKER_HOST). The engine is stopped while a rollout's solution runs in its container:
every rollout of that preview fails with a reason that names the engine, not a traceback.
Once the engine is back, the next preview passes. The shared engine is never touched.
"""

from __future__ import annotations

import pytest

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task
from tests.support.faults import OwnDockerd
from tests.support.images import busybox_image
from tests.support.users import make_user
from tests.support.workers import start_workers, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def own_dockerd():
    engine = OwnDockerd()
    yield engine
    engine.cleanup()


def _finished(preview_run):
    return lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists()


# Its own dockerd starts twice (90 s at most each) and a worker once (90 s); the four waits below are 120 s each
# (the whole test takes about a minute here).
@pytest.mark.timeout(3 * 90 + 4 * 120 + 150)
def test_rollouts_fail_with_the_reason_while_docker_is_down_and_run_once_it_is_back(
    request, transactional_db, django_user_model, redis_db, celery_producer, own_dockerd, settings, tmp_path, client
):
    settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap", "docker"]
    engine = own_dockerd.start()
    image = busybox_image(engine)
    author = make_user(django_user_model, "ada", "author")
    version = make_task(
        author=author, slug="docker-slow", script="sleep 4 && echo 42 > answer.txt", limits={"timeout_s": 120}
    ).latest_version
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=20)  # the worker reaps every 10 s
    workers.start(
        name="docker-fault",
        env={"GYMWRIGHT_SANDBOX_BACKEND": "docker", "DOCKER_HOST": own_dockerd.host, "GYMWRIGHT_SANDBOX_IMAGE": image},
    )

    down = services.preview_run_create(task_version=version, user=author, policy="oracle", n=2, backend="docker")
    wait_for(
        lambda: (
            down.rollouts.filter(status=Rollout.Status.RUNNING).exists()
            and engine.containers.list(sparse=True, filters={"label": "gymwright.sandbox"})
        ),
        timeout=120,
        what="a rollout's container to run on our engine",
        workers=workers,
    )
    own_dockerd.stop()
    wait_for(_finished(down), timeout=120, what="the preview to end while Docker is down", workers=workers)
    rollouts = list(down.rollouts.all())
    assert [r.status for r in rollouts] == ["error", "error"], (
        [(r.status, r.error) for r in rollouts],
        workers.logs(),
        own_dockerd.logs(),
    )
    for rollout in rollouts:
        assert "Docker engine" in rollout.error, rollout.error
        assert own_dockerd.host in rollout.error, rollout.error
        assert "Traceback" not in rollout.error and len(rollout.error) < 1000, rollout.error
        assert rollout.attempts == 2  # retried once (an engine may come back), then failed
    # The preview page says why.
    client.force_login(author)
    page = client.get(f"/previews/rollouts/{rollouts[0].pk}/").content.decode()
    assert "Docker engine" in page

    engine = own_dockerd.start()
    assert image in [tag for found in engine.images.list() for tag in found.tags]  # the engine kept its images
    back = services.preview_run_create(task_version=version, user=author, policy="oracle", n=2, backend="docker")
    wait_for(_finished(back), timeout=120, what="a preview after Docker came back", workers=workers)
    assert [(r.status, r.passed) for r in back.rollouts.all()] == [("done", True)] * 2, (
        [r.error for r in back.rollouts.all()],
        workers.logs(),
    )
    # The containers the engine stopped while their worker could not remove them are reaped
    # (stopped for longer than EXITED_GRACE_S).
    wait_for(
        lambda: engine.containers.list(all=True, sparse=True, filters={"label": "gymwright.sandbox"}) == [],
        timeout=120,
        what="the reaper to remove the containers left while the engine was down",
        workers=workers,
    )
