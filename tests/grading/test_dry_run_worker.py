"""The dry-run job in a real Celery worker process: inputs reach it only through the database,
the broker and Django storage (as on another host), never through this process's memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from grading.models import DryRun
from grading.models import ModelEndpoint
from tests.support.users import make_user
from tests.support.openai_server import OpenAIServer
from tests.support.workers import test_database_url

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
RUBRIC = {"schema": "gymwright.rubric/v1", "checks": [
    {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
    {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "Explains why the answer is 42."},
    {"id": "report", "kind": "file_content", "points": 1, "path": "out/report.md", "contains": "revenue"}]}


def test_a_worker_process_grades_a_dry_run_from_storage(client, settings, django_user_model,
                                                        django_capture_on_commit_callbacks, monkeypatch):
    from grading.tasks import dry_run_grade

    author = make_user(django_user_model, "ada", "author")
    client.force_login(author)
    queue = f"test-dry-run-{uuid.uuid4().hex[:8]}"  # only this worker takes this test's message
    with OpenAIServer(default='{"met": true, "explanation": "Shows 6 x 7."}') as server:
        ModelEndpoint.objects.create(name="judge", role="judge", base_url=server.base_url, model="test-judge",
                                     api_key_env="GYMWRIGHT_TEST_JUDGE_KEY", is_default=True)
        monkeypatch.setenv("GYMWRIGHT_TEST_JUDGE_KEY", "test-key")
        with django_capture_on_commit_callbacks(execute=False):
            response = client.post("/grading/dry-run/", {
                "rubric": json.dumps(RUBRIC), "answer": "42 (6 x 7)",
                "files": [SimpleUploadedFile("report.md", b"revenue is up")], "paths": ["out/report.md"]})
        assert response.status_code == 200
        dry_run = DryRun.objects.get()

        env = {**os.environ, "DATABASE_URL": test_database_url(), "MEDIA_ROOT": str(settings.MEDIA_ROOT),
               "GYMWRIGHT_JUDGE_CACHE_DIR": str(settings.JUDGE_CACHE_DIR), "GYMWRIGHT_TEST_JUDGE_KEY": "test-key",
               "CELERY_TASK_ALWAYS_EAGER": "0"}
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "gymwright", "worker", "-Q", queue, "--pool", "solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            dry_run_grade.apply_async((dry_run.pk,), queue=queue)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                dry_run.refresh_from_db()
                if dry_run.is_finished:
                    break
                assert worker.poll() is None, worker.stdout.read().decode(errors="replace")
                time.sleep(0.3)
        finally:
            worker.terminate()
            try:
                output = worker.communicate(timeout=20)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                worker.kill()
                output = worker.communicate()[0].decode(errors="replace")

    assert dry_run.status == "done", f"{dry_run.status} {dry_run.error}\n{output}"
    grade = dry_run.grade
    assert (grade.earned, grade.max, grade.reward, grade.complete) == (6, 6, 1.0, True)
    assert grade.check_results.get(check_id="report").status == "scored"  # the file came through storage
    assert server.calls == 1
