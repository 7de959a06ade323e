"""Example answers: every new task version grades them through the dry run's path; the task page,
the diff view and the review gate read the results."""

from __future__ import annotations

import copy

import pytest

from authoring import services as authoring_services
from grading import selectors, services
from grading.engine.example_answers import AS_EXPECTED, INCOMPLETE, PENDING, UNEXPECTED
from grading.models import ExampleRun, ModelEndpoint
from gymwright.errors import DomainError
from review import gate_evidence as review_gates
from tests.support.users import make_user

pytestmark = pytest.mark.django_db

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
        {"id": "report", "kind": "file_content", "points": 1, "path": "out/report.md", "contains": "revenue"},
    ],
}
EXAMPLES = [
    {
        "name": "right with report",
        "answer": "It is 42.",
        "expect": "pass",
        "files": [{"path": "out/report.md", "content": "revenue is up"}],
        "reward": {"min": 1},
    },
    {"name": "wrong number", "answer": "It is 41.", "expect": "fail"},
]


def content(**changes) -> dict:
    base = {
        "title": "Six times seven",
        "prompt": "What is 6 x 7?",
        "rubric": copy.deepcopy(RUBRIC),
        "solution": {"script": None, "answer": "42"},
        "examples": copy.deepcopy(EXAMPLES),
    }
    base.update(changes)
    return base


@pytest.fixture
def environment(author):
    return authoring_services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})


@pytest.fixture
def task(author, environment):
    return authoring_services.task_create(
        slug="six-times-seven", environment=environment, author=author, content=content()
    )


def statuses(version) -> dict[str, str]:
    return {verdict.name: verdict.status for verdict in selectors.example_verdicts(task_version=version)}


def test_a_new_version_grades_its_example_answers_at_once(task):
    version = task.latest_version
    assert version.spec["examples"][0]["name"] == "right with report"
    run = ExampleRun.objects.get(task_version=version)
    assert run.status == ExampleRun.Status.DONE and not run.needs_judge
    assert statuses(version) == {"right with report": AS_EXPECTED, "wrong number": AS_EXPECTED}
    assert run.results[0]["reward"] == 1.0 and run.results[0]["grade"]["checks"][1]["score"] == 1.0


def test_a_version_that_breaks_an_example_shows_the_changed_verdict(task, author):
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][0]["expected"] = "forty-two"
    v2, _ = authoring_services.task_version_create(
        task=task, author=author, base_version=1, content=content(rubric=rubric)
    )
    assert statuses(v2) == {"right with report": UNEXPECTED, "wrong number": AS_EXPECTED}
    rows = {row.verdict.name: row for row in selectors.example_rows(task_version=v2)}
    assert rows["right with report"].changed and rows["right with report"].previous.status == AS_EXPECTED
    assert "expected pass, got fail" in rows["right with report"].verdict.message
    assert not rows["wrong number"].changed
    changes = {
        row["name"]: row
        for row in selectors.example_verdict_changes(version_a=task.versions.get(number=1), version_b=v2)
    }
    assert changes["right with report"]["changed"] and not changes["wrong number"]["changed"]


def test_the_review_gate_fails_on_an_example_graded_against_expectation(task, author):
    gate = {g.gate: g for g in review_gates.gates_evaluate(task_version=task.latest_version)}["examples"]
    assert gate.status == "pass" and "all 2 grade as expected" in gate.message
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][0]["expected"] = "forty-two"
    v2, _ = authoring_services.task_version_create(
        task=task, author=author, base_version=1, content=content(rubric=rubric)
    )
    gate = {g.gate: g for g in review_gates.gates_evaluate(task_version=v2)}["examples"]
    assert gate.status == "fail" and gate.blocking and "right with report: expected pass, got fail" in gate.message


def test_a_version_without_examples_gets_no_run_and_a_passing_gate(author, environment):
    task = authoring_services.task_create(
        slug="plain", environment=environment, author=author, content=content(examples=[])
    )
    assert "examples" not in task.latest_version.spec
    assert not ExampleRun.objects.exists()
    gate = {g.gate: g for g in review_gates.gates_evaluate(task_version=task.latest_version)}["examples"]
    assert gate.status == "pass" and gate.message == "no example answers saved"


def test_judge_checks_without_a_judge_make_the_example_incomplete_not_passed(author, environment):
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"].append({"id": "explains", "kind": "llm_judge", "points": 4, "criterion": "Explains 6 x 7."})
    task = authoring_services.task_create(
        slug="judged", environment=environment, author=author, content=content(rubric=rubric)
    )
    verdicts = {v.name: v for v in selectors.example_verdicts(task_version=task.latest_version)}
    assert verdicts["right with report"].status == INCOMPLETE
    assert verdicts["right with report"].message.startswith("incomplete — 4 of 8 points could not be scored")
    gate = {g.gate: g for g in review_gates.gates_evaluate(task_version=task.latest_version)}["examples"]
    assert gate.status == "not_run" and not gate.ok


def test_with_a_judge_configured_the_examples_go_to_a_worker_after_commit(
    author, environment, monkeypatch, django_capture_on_commit_callbacks
):
    from grading import tasks

    sent = []
    monkeypatch.setattr(tasks.example_answers_grade, "apply_async", lambda args, **options: sent.append(args[0]))
    ModelEndpoint.objects.create(
        name="judge", role="judge", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="NO_KEY", is_default=True
    )
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"].append({"id": "explains", "kind": "llm_judge", "points": 4, "criterion": "Explains 6 x 7."})
    with django_capture_on_commit_callbacks(execute=True):
        task = authoring_services.task_create(
            slug="judged", environment=environment, author=author, content=content(rubric=rubric)
        )
    run = ExampleRun.objects.get(task_version=task.latest_version)
    assert sent == [run.pk] and run.needs_judge and run.status == ExampleRun.Status.QUEUED
    assert set(statuses(task.latest_version).values()) == {PENDING}
    assert "being graded (0 of 2 done)" in selectors.example_verdicts(task_version=task.latest_version)[0].message


def test_grading_again_replaces_the_run_and_only_editors_or_reviewers_may_ask(task, django_user_model):
    version = task.latest_version
    first = ExampleRun.objects.get(task_version=version).pk
    run = services.example_answers_run(task_version=version, user=task.owner)
    assert run.pk != first and run.status == ExampleRun.Status.DONE
    stranger = make_user(django_user_model, "lab", "lab")
    with pytest.raises(Exception) as excinfo:
        services.example_answers_run(task_version=version, user=stranger)
    assert "authors and reviewers" in str(excinfo.value)


def test_a_run_that_is_going_cannot_be_started_twice(task):
    version = task.latest_version
    ExampleRun.objects.filter(task_version=version).update(status=ExampleRun.Status.RUNNING)
    with pytest.raises(DomainError) as excinfo:
        services.example_answers_run(task_version=version, user=task.owner)
    assert excinfo.value.code == "already_running"


def test_a_failed_job_shows_its_reason_on_every_example(task):
    version = task.latest_version
    run = ExampleRun.objects.get(task_version=version)
    ExampleRun.objects.filter(pk=run.pk).update(status=ExampleRun.Status.QUEUED)
    services.example_answers_fail(example_run_id=run.pk, error="Grading failed: boom")
    verdicts = selectors.example_verdicts(task_version=version)
    assert {v.status for v in verdicts} == {"error"} and verdicts[0].message == "Grading failed: boom"


def test_a_run_no_worker_finished_is_failed_so_the_page_stops_waiting(task):
    from datetime import timedelta

    from django.utils import timezone

    version = task.latest_version
    run = ExampleRun.objects.get(task_version=version)
    ExampleRun.objects.filter(pk=run.pk).update(
        status=ExampleRun.Status.QUEUED, created_at=timezone.now() - timedelta(hours=2)
    )
    run = services.example_run_fail_if_stale(run=ExampleRun.objects.get(pk=run.pk))
    assert run.status == ExampleRun.Status.ERROR and "no worker took the job" in run.error
    fresh = services.example_answers_run(task_version=version, user=task.owner)
    assert services.example_run_fail_if_stale(run=fresh).status == ExampleRun.Status.DONE


def test_a_grading_failure_is_shown_on_the_examples_and_the_version_is_still_saved(author, environment, monkeypatch):
    from grading.engine import isolated

    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(isolated, "grade_many_in_subprocess", broken)
    task = authoring_services.task_create(
        slug="saved-anyway", environment=environment, author=author, content=content()
    )
    run = ExampleRun.objects.get(task_version=task.latest_version)
    assert run.status == ExampleRun.Status.ERROR and "no space left on device" in run.error
    assert {v.status for v in selectors.example_verdicts(task_version=task.latest_version)} == {"error"}


def test_an_imports_batch_queues_its_examples_for_workers_in_constant_queries(
    author, environment, monkeypatch, django_capture_on_commit_callbacks
):
    """A bulk import does not grade in the request, nor query per version: one INSERT of runs, one message each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from grading import tasks

    sent = []
    monkeypatch.setattr(tasks.example_answers_grade, "apply_async", lambda args, **options: sent.append(args[0]))

    def import_batch(prefix: str, n: int) -> int:
        items = [
            {
                "slug": f"{prefix}-{i}",
                "environment_version": environment.latest_version,
                "content": content(title=f"{prefix} {i}"),
            }
            for i in range(n)
        ]
        with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
            created, rejected = authoring_services.tasks_bulk_create(author=author, items=items)
        assert len(created) == n and rejected == []
        return len(queries)

    import_batch("warm", 1)  # first-use lookups (content types, the judge configuration) happen once
    small, large = import_batch("small", 2), import_batch("large", 8)
    assert large == small
    runs = ExampleRun.objects.filter(task_version__task__slug__startswith="large-")
    assert runs.count() == 8 and all(run.status == ExampleRun.Status.QUEUED and run.total == 2 for run in runs)
    assert sorted(sent[3:]) == sorted(run.pk for run in runs)
