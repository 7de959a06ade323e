"""The dry-run job in a real Celery worker process: inputs reach it only through the database,
the broker and Django storage (as on another host), never through this process's memory."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from grading.models import DryRun, ModelEndpoint
from tests.support.openai_server import OpenAIServer
from tests.support.users import make_user
from tests.support.workers import solo_worker_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "Explains why the answer is 42."},
        {"id": "report", "kind": "file_content", "points": 1, "path": "out/report.md", "contains": "revenue"},
    ],
}


def test_a_worker_process_grades_a_dry_run_from_storage(
    client, settings, django_user_model, django_capture_on_commit_callbacks, monkeypatch
):
    from grading.tasks import dry_run_grade

    author = make_user(django_user_model, "ada", "author")
    client.force_login(author)
    queue = f"test-dry-run-{uuid.uuid4().hex[:8]}"  # only this worker takes this test's message
    with OpenAIServer(default='{"met": true, "explanation": "Shows 6 x 7."}') as server:
        ModelEndpoint.objects.create(
            name="judge",
            role="judge",
            base_url=server.base_url,
            model="test-judge",
            api_key_env="GYMWRIGHT_TEST_JUDGE_KEY",
            is_default=True,
        )
        monkeypatch.setenv("GYMWRIGHT_TEST_JUDGE_KEY", "test-key")
        with django_capture_on_commit_callbacks(execute=False):
            response = client.post(
                "/grading/dry-run/",
                {
                    "rubric": json.dumps(RUBRIC),
                    "answer": "42 (6 x 7)",
                    "files": [SimpleUploadedFile("report.md", b"revenue is up")],
                    "paths": ["out/report.md"],
                },
            )
        assert response.status_code == 200
        dry_run = DryRun.objects.get()

        dry_run_grade.apply_async((dry_run.pk,), queue=queue)

        def finished() -> bool:
            dry_run.refresh_from_db()
            return dry_run.is_finished

        output = solo_worker_until(queue, finished, timeout=60)

    assert dry_run.status == "done", f"{dry_run.status} {dry_run.error}\n{output}"
    grade = dry_run.grade
    assert (grade.earned, grade.max, grade.reward, grade.complete) == (6, 6, 1.0, True)
    assert grade.check_results.get(check_id="report").status == "scored"  # the file came through storage
    assert server.calls == 1
