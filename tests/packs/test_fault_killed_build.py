"""Fault: a worker is SIGKILLed mid-build. Its scratch folder (pack-scratch/pack-N-…) belongs to no running build,
and the next worker to start on that host removes it, while the version is still building (it is failed later by
the stale reaper, and its number is free again)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from packs import services
from packs.models import PackVersion
from tests.packs.conftest import make_approved
from tests.support.users import make_user
from tests.support.workers import CELERY, start_workers

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _wait(condition, *, timeout: float, what: str, workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}\n{workers.logs()}")


@pytest.mark.timeout(90 + 90 + 60 + 60)
def test_a_build_killed_midway_leaves_no_scratch_behind_once_a_worker_starts(
    request, transactional_db, django_user_model, celery_producer, redis_db, tmp_path
):
    author = make_user(django_user_model, "alice", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    lab = make_user(django_user_model, "lena", "lab")
    for index in range(3):
        make_approved(author=author, reviewer=reviewer, slug=f"task-{index:02d}")
    scratch, held = tmp_path / "pack-scratch", tmp_path / "held"
    env = {"GYMWRIGHT_PACK_SCRATCH_DIR": str(scratch), "GYMWRIGHT_TEST_BUILD_HELD": str(held)}
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=300)
    builder = workers.start(
        name="builder",
        env=env,
        command=[
            str(CELERY),
            "-A",
            "gymwright",
            "worker",
            "-P",
            "prefork",
            "-c",
            "1",
            "--loglevel=INFO",
            "-n",
            "builder@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--include",
            "tests.support.build_gate",
        ],
    )

    pack = services.pack_create(slug="killed", user=lab)
    pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection())
    _wait(held.exists, timeout=90, what="the build to hold after its first task", workers=workers)
    [folder] = list(scratch.glob(f"pack-{pack_version.pk}-*"))
    assert (folder / "owner.json").is_file() and any((folder / "tree").iterdir())  # mid-build, files written

    workers.kill(builder)  # SIGKILL, the whole process group
    assert folder.exists()
    pack_version.refresh_from_db()
    assert pack_version.status == PackVersion.Status.BUILDING  # nobody has noticed yet

    workers.start(name="restarted", env={"GYMWRIGHT_PACK_SCRATCH_DIR": str(scratch)})  # its start-up reap
    _wait(lambda: not folder.exists(), timeout=60, what="the killed build's scratch folder to go", workers=workers)
    assert f"removed the scratch folders of pack builds no process runs any more: ['{folder.name}']" in workers.logs()

    # The stale reaper fails it later; it published nothing, so its number is proposed again.
    later = timezone.now() + timedelta(seconds=301)
    assert services.pack_versions_reap_stale(stale_after_s=300, now=later) == [pack_version.pk]
    assert services.pack_version_plan(pack=pack, user=lab, selection=services.Selection()).version == "1.0.0"
    assert not list(Path(scratch).glob("pack-*"))
