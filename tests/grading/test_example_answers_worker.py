"""Judged example answers in a real Celery worker process against the OpenAI-protocol test server:
the version is saved in this process, the worker finds everything through the database and the
broker, grades each example with the judge and stores the verdicts."""

from __future__ import annotations

import copy
import json
import uuid

import pytest

from authoring import services as authoring_services
from grading.models import ExampleRun, ModelEndpoint
from tests.support.openai_server import OpenAIServer
from tests.support.users import make_user
from tests.support.workers import solo_worker_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 8, "criterion": "Explains where the number comes from."},
    ],
}
EXAMPLES = [
    {"name": "explained", "answer": "42, since six sevens make it", "expect": "pass"},
    {"name": "bare", "answer": "42", "expect": "fail", "reward": {"max": 0.3}},
    {"name": "hoped too much", "answer": "42", "expect": "pass"},
]


def _judge(body: dict) -> str:
    text = json.dumps(body.get("messages"))
    met = "six sevens" in text
    return json.dumps({"met": met, "explanation": "explains it" if met else "no explanation"})


def test_a_worker_grades_judged_examples_and_reports_progress_and_verdicts(settings, django_user_model, monkeypatch):
    from grading.tasks import example_answers_grade

    author = make_user(django_user_model, "ada", "author")
    queue = f"test-examples-{uuid.uuid4().hex[:8]}"
    with OpenAIServer(handler=_judge) as server:
        ModelEndpoint.objects.create(
            name="judge",
            role="judge",
            base_url=server.base_url,
            model="test-judge",
            api_key_env="GYMWRIGHT_TEST_JUDGE_KEY",
            is_default=True,
        )
        monkeypatch.setenv("GYMWRIGHT_TEST_JUDGE_KEY", "test-key")
        environment = authoring_services.environment_create(
            slug="shell", name="Shell", author=author, spec={"network": "none"}
        )
        # The job message the save enqueues on commit is sent below, to this test's own queue.
        sent, send = [], example_answers_grade.apply_async
        monkeypatch.setattr(example_answers_grade, "apply_async", lambda args, **options: sent.append(args[0]))
        task = authoring_services.task_create(
            slug="judged",
            environment=environment,
            author=author,
            content={
                "title": "Judged",
                "prompt": "6 x 7, explained",
                "rubric": copy.deepcopy(RUBRIC),
                "examples": copy.deepcopy(EXAMPLES),
            },
        )
        run = ExampleRun.objects.get(task_version=task.latest_version)
        assert run.status == ExampleRun.Status.QUEUED and run.needs_judge and sent == [run.pk]

        send((run.pk,), queue=queue)

        def finished() -> bool:
            run.refresh_from_db()
            return run.is_finished

        output = solo_worker_until(queue, finished, timeout=90)

    assert run.status == ExampleRun.Status.DONE, f"{run.status} {run.error}\n{output}"
    assert run.graded == run.total == 3
    verdicts = {result["name"]: result for result in run.results}
    assert (verdicts["explained"]["status"], verdicts["explained"]["reward"]) == ("as_expected", 1.0)
    assert (verdicts["bare"]["status"], verdicts["bare"]["reward"]) == ("as_expected", 0.2)
    assert verdicts["hoped too much"]["status"] == "unexpected"
    assert verdicts["hoped too much"]["message"] == "expected pass, got fail (reward 0.20)"
    assert verdicts["explained"]["grade"]["checks"][1]["explanation"] == "explains it"
    assert server.calls == 2  # "42" asked once: the judge's verdict cache answers the second
