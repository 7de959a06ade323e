"""Two worker hosts, set up as the README's "Growing past one machine" says, step by step.

Each "host" is a real Celery worker process with its own node name (`-n`), its own
GYMWRIGHT_DATA_DIR (secret-key file, judge cache, scratch) and its own sandbox directory;
the two share nothing but what the README lists: the database (DATABASE_URL, migrated
once: pytest-django's test database), the broker (CELERY_BROKER_URL, a private Redis
database) and blob storage (MEDIA_ROOT), plus the same SECRET_KEY. The task reads a
workspace file from blob storage, so a host that could not reach the blobs would fail it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task
from tests.support.users import make_user
from tests.support.workers import start_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]

N = 32
RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "mode": "contains", "expected": "42"},
        {"id": "file_says_42", "kind": "file_content", "points": 1, "path": "answer.txt", "contains": "42"},
    ],
}


def _host(root: Path, name: str) -> dict[str, str]:
    """What README step 4 sets on one worker host besides the shared settings: its own local folders."""
    data_dir = root / name / "data"
    return {"GYMWRIGHT_DATA_DIR": str(data_dir), "GYMWRIGHT_SANDBOX_DIR": str(data_dir / "sandboxes"),
            "SECRET_KEY": "the-same-secret-key-on-every-host"}


def _outcome(preview_run: PreviewRun) -> list[tuple]:
    """What a user reads of each rollout, without timings."""
    rows = []
    for rollout in preview_run.rollouts.order_by("index"):
        checks = [(c["id"], c["status"], c.get("score"), c.get("awarded"))
                  for c in (rollout.grade.document if rollout.grade_id else {}).get("checks", [])]
        rows.append((rollout.index, rollout.status, rollout.reward, rollout.passed, rollout.answer, rollout.error,
                     tuple(checks)))
    return rows


def test_two_worker_hosts_share_a_preview_and_give_the_results_of_one(request, transactional_db, django_user_model,
                                                                     redis_db, celery_producer, tmp_path):
    from authoring.services import blob_store
    from grading.models import Grade

    author = make_user(django_user_model, "ada", "author")
    blob = blob_store(data=b"6\n7\n")
    task = make_task(author=author, slug="from-blobs", rubric=RUBRIC,
                     script='echo $(( $(head -n1 numbers.txt) * $(tail -n1 numbers.txt) )) > answer.txt',
                     files=[{"path": "numbers.txt", "sha256": blob.sha256}])
    version = task.latest_version
    root = Path(tempfile.mkdtemp(prefix="gw-hosts-"))
    root.chmod(0o711)  # the sandbox user passes through to each host's sandbox folder
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)

    # One host alone: the reference results.
    workers.start(name="host-a", env=_host(root, "host-a"))
    alone = services.preview_run_create(task_version=version, user=author, policy="oracle", n=N)
    wait_for(lambda: PreviewRun.objects.filter(pk=alone.pk, status__in=PreviewRun.FINISHED).exists(),
             timeout=600, what="the one-host preview to finish", workers=workers)

    # A second host joins; the same preview again is shared between them.
    workers.start(name="host-b", env=_host(root, "host-b"))
    shared = services.preview_run_create(task_version=version, user=author, policy="oracle", n=N)
    wait_for(lambda: PreviewRun.objects.filter(pk=shared.pk, status__in=PreviewRun.FINISHED).exists(),
             timeout=600, what="the two-host preview to finish", workers=workers)

    alone.refresh_from_db(), shared.refresh_from_db()
    assert _outcome(shared) == _outcome(alone), workers.logs()
    assert all(row[1:4] == ("done", 1.0, True) for row in _outcome(shared)), workers.logs()
    assert shared.status == "done" and shared.summary == alone.summary

    # Every rollout ran exactly once: one claim, one stored grade.
    rollouts = list(shared.rollouts.all())
    assert [r.attempts for r in rollouts] == [1] * N, workers.logs()
    grades = Grade.objects.filter(rollout_id__in=[r.pk for r in rollouts])
    assert sorted(grades.values_list("rollout_id", flat=True)) == sorted(r.pk for r in rollouts)

    # Both hosts took work (the worker field is "<node name>@<host>:<pid>").
    by_host = {}
    for rollout in rollouts:
        by_host.setdefault(rollout.worker.split("@", 1)[0], []).append(rollout.index)
    assert set(by_host) == {"host-a", "host-b"}, (by_host, workers.logs())
    assert not Rollout.objects.filter(status__in=[Rollout.Status.QUEUED, *Rollout.ACTIVE]).exists()
    # Each host ran its sandboxes in its own folder.
    assert (root / "host-a" / "data" / "sandboxes").is_dir() and (root / "host-b" / "data" / "sandboxes").is_dir()
