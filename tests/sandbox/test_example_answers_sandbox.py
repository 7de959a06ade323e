"""Example answers of a coding task are graded in the sandbox (issue 26: they stayed "incomplete" forever,
so the examples gate never ran and Submit stayed disabled): a real Celery worker grades each example as a
rollout would, with the example's files in the workspace, protected files restored and the task's `tests`
check run by Gymwright's runner; the stored verdicts then open the examples gate and the task is submitted.
A run counts against its requester's cap of rollouts in flight."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from authoring import services as authoring_services
from authoring.demo import DEMO_TASKS, FIZZBUZZ_SOLUTION, demo_file_refs
from authoring.models import Environment
from grading import selectors as grading_selectors
from grading.models import ExampleRun
from review import gate_evidence as review_gates
from review import services as review_services
from tests.review.conftest import pass_gates
from tests.support.users import make_user
from tests.support.workers import start_workers, wait_for

SOLUTION = FIZZBUZZ_SOLUTION.split("<<'PY'\n", 1)[1].rsplit("PY\n", 1)[0]
EXAMPLES = [
    {
        "name": "the solution",
        "answer": "done",
        "expect": "pass",
        "reward": {"min": 1},
        "files": [{"path": "fizzbuzz.py", "content": SOLUTION}],
    },
    {"name": "the stub as given", "answer": "done", "expect": "fail", "reward": {"max": 0}},
    # the protected tests are put back before the checks: emptying them earns nothing
    {
        "name": "emptied tests",
        "answer": "done",
        "expect": "fail",
        "reward": {"max": 0},
        "files": [
            {"path": "test_fizzbuzz.py", "content": "import unittest\n"},
            {"path": "fizzbuzz.py", "content": "def fizzbuzz(n):\n    return '%'\n"},
        ],
    },
]


def coding_task_with_examples(author, slug="fizzbuzz-examples"):
    call_command("load_demo", owner=author.username)
    demo = next(d for d in DEMO_TASKS if d["slug"] == "fizzbuzz-implementation")
    content = {**demo["content"], "files": demo_file_refs(demo), "tags": demo["tags"], "examples": EXAMPLES}
    return authoring_services.task_create(
        slug=slug, environment=Environment.objects.get(slug="demo-shell"), author=author, content=content
    )


@pytest.fixture
def people(transactional_db, django_user_model):
    return make_user(django_user_model, "ada", "author")


@pytest.mark.redis
@pytest.mark.bubblewrap
@pytest.mark.slow
@pytest.mark.timeout(90 + 300 + 60)
def test_a_coding_tasks_examples_are_graded_in_the_sandbox_by_a_worker_and_it_can_be_submitted(
    request, people, redis_db, celery_producer, tmp_path
):
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
    workers.start()
    task = coding_task_with_examples(people)
    version = task.latest_version
    run = ExampleRun.objects.get(task_version=version)
    assert run.needs_sandbox and run.requested_by == people and run.total == 3

    def graded():
        run.refresh_from_db()
        return run.is_finished

    wait_for(graded, timeout=300, what="the example answers to be graded in the sandbox", workers=workers)
    assert run.status == ExampleRun.Status.DONE, (run.error, workers.logs())
    verdicts = {verdict.name: verdict for verdict in grading_selectors.example_verdicts(task_version=version)}
    assert {name: verdict.status for name, verdict in verdicts.items()} == dict.fromkeys(verdicts, "as_expected"), {
        name: verdict.message for name, verdict in verdicts.items()
    }
    assert verdicts["the solution"].reward == 1.0 and verdicts["emptied tests"].reward == 0
    emptied = next(result["grade"] for result in run.results if result["name"] == "emptied tests")
    assert emptied["protected_files"] == [{"path": "test_fizzbuzz.py", "state": "modified"}]
    tests_check = next(check for check in emptied["checks"] if check["id"] == "tests_pass")
    assert tests_check["status"] == "scored" and tests_check["score"] == 0

    pass_gates(version, people)
    gates = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}
    assert gates["examples"].status == "pass" and gates["examples"].message == "all 3 grade as expected"
    assert all(result.ok for result in gates.values()), {name: r.message for name, r in gates.items() if not r.ok}
    assert review_services.task_submit(task=task, user=people).override_reason == ""


def test_a_sandbox_run_of_examples_over_the_requesters_cap_fails_saying_so(
    people, settings, django_capture_on_commit_callbacks
):
    settings.PREVIEW_MAX_ROLLOUTS_IN_FLIGHT = 2
    with django_capture_on_commit_callbacks(execute=False) as queued:
        task = coding_task_with_examples(people)
    run = ExampleRun.objects.get(task_version=task.latest_version)
    assert run.status == ExampleRun.Status.ERROR and run.error.startswith("Not graded: You have 0 rollouts queued")
    assert "the limit is 2 per user" in run.error
    assert not any("example_answers_grade" in repr(callback) for callback in queued)
    gates = {result.gate: result for result in review_gates.gates_evaluate(task_version=task.latest_version)}
    assert gates["examples"].status == "fail" and "Not graded" in gates["examples"].message


# -- sent like rollouts, reaped like rollouts ------------------------------------------------------------------


def _example_jobs_queued(server) -> list[int]:
    import base64
    import json

    import redis

    ids = []
    for raw in redis.Redis.from_url(server.url).lrange("celery", 0, -1):
        message = json.loads(raw)
        if message["headers"]["task"] == "sandbox.example_answers_grade":
            args = json.loads(base64.b64decode(message["body"]))[0]
            ids.append(args[0])
    return ids


@pytest.mark.redis
def test_a_sandbox_example_run_saved_while_the_broker_is_down_waits_for_it_then_is_sent(people, broker_down):
    # The version is saved (never an error for the author); its sandbox run of examples waits for the broker ...
    from gymwright import jobs

    task = coding_task_with_examples(people)
    run = ExampleRun.objects.get(task_version=task.latest_version)
    assert run.needs_sandbox and run.status == ExampleRun.Status.QUEUED and run.enqueued_at is None
    with pytest.raises(jobs.broker_errors()):
        jobs.broker_check()
    # ... and the broker check sends it, with its time limits, once the broker answers; once.
    broker_down.start()
    check = jobs.broker_check()
    assert check.resent["sandbox example runs"] == [run.pk]
    assert _example_jobs_queued(broker_down) == [run.pk]
    run.refresh_from_db()
    assert run.enqueued_at is not None
    assert jobs.broker_check().resent["sandbox example runs"] == []
    assert _example_jobs_queued(broker_down) == [run.pk]


@pytest.mark.redis
def test_a_sandbox_example_run_is_sent_as_its_version_commits(people, broker_down):
    broker_down.start()
    task = coding_task_with_examples(people)
    run = ExampleRun.objects.get(task_version=task.latest_version)
    assert run.enqueued_at is not None and _example_jobs_queued(broker_down) == [run.pk]


@pytest.mark.redis
def test_a_stuck_sandbox_example_run_is_reaped_with_the_rollouts(people, broker_down, settings):
    # A run a worker claimed and then died on (no result, RUNNING forever) held its requester's rollouts in
    # flight until someone opened its page; the rollout reaper on every worker's timer now fails it, saying so.
    from datetime import timedelta

    from django.utils import timezone

    from sandbox import services as sandbox_services
    from sandbox.services import rollouts_in_flight_check

    broker_down.start()
    settings.PREVIEW_MAX_ROLLOUTS_IN_FLIGHT = 3
    task = coding_task_with_examples(people)
    run = ExampleRun.objects.get(task_version=task.latest_version)
    ExampleRun.objects.filter(pk=run.pk).update(status=ExampleRun.Status.RUNNING, started_at=timezone.now())
    assert sandbox_services.rollouts_reap_stale()["example_runs"] == {"resent": [], "failed": []}  # not stale yet
    with pytest.raises(Exception, match="the limit is 3 per user"):
        rollouts_in_flight_check(user=people, n=1)
    later = timezone.now() + timedelta(days=1)
    assert sandbox_services.rollouts_reap_stale(now=later)["example_runs"]["failed"] == [run.pk]
    run.refresh_from_db()
    assert run.status == ExampleRun.Status.ERROR and "the worker stopped" in run.error
    rollouts_in_flight_check(user=people, n=3)  # its rollouts are no longer in flight


@pytest.mark.redis
def test_a_queued_sandbox_example_run_whose_message_was_lost_is_sent_again_by_the_reaper(people, broker_down):
    from datetime import timedelta

    import redis
    from django.utils import timezone

    from sandbox import services as sandbox_services

    broker_down.start()
    task = coding_task_with_examples(people)
    run = ExampleRun.objects.get(task_version=task.latest_version)
    redis.Redis.from_url(broker_down.url).delete("celery")  # the broker lost it (flushed, restarted bare)
    assert sandbox_services.rollouts_reap_stale()["example_runs"]["resent"] == []  # only slow, so far
    later = timezone.now() + timedelta(hours=1)
    assert sandbox_services.rollouts_reap_stale(now=later)["example_runs"]["resent"] == [run.pk]
    assert _example_jobs_queued(broker_down) == [run.pk]
