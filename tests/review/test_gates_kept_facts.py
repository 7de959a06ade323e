"""The gates read a finished rollout's grade document (how far an incomplete grade's reward could move, the checks
that rewarded a hack probe) once per process: the task page evaluates the gates on every view, and reading and
walking 64 incomplete grades' documents cost half of its CPU (bench/bench_page_cpu.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from grading import services as grading_services
from grading.engine import grade as engine_grade
from review import gate_evidence as review_gates
from sandbox.models import Rollout
from tests.review.conftest import finished_preview

pytestmark = pytest.mark.django_db

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 1, "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains it."},
    ],
}


def test_an_incomplete_grades_facts_are_read_once_per_process_and_decide_as_before(task, author):
    version = task.latest_version
    run = finished_preview(version, author, "oracle", [0.0, 0.0, 0.0])
    for rollout in run.rollouts.all():  # graded without a judge: the judge check is unscored
        stored = grading_services.grade_record(
            grade=engine_grade(RUBRIC, answer="nothing"), task_version=version, source="rollout", rollout_id=rollout.pk
        )
        Rollout.objects.filter(pk=rollout.pk).update(grade=stored)

    first = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}
    assert first["oracle"].status == "not_run" and "incomplete" in first["oracle"].message
    assert set(review_gates._grade_facts_kept) == set(run.rollouts.values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        again = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}
    assert again == first
    assert not [query["sql"] for query in queries.captured_queries if '"document"' in query["sql"]]
    review_gates._grade_facts_kept.clear()  # a new process reads them again, and decides the same
    with CaptureQueriesContext(connection) as queries:
        assert {result.gate: result for result in review_gates.gates_evaluate(task_version=version)} == first
    assert [query["sql"] for query in queries.captured_queries if '"document"' in query["sql"]]
