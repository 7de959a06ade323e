import pytest

from grading.models import CheckResult, Grade
from grading.services import grade_from_document, grade_record
from gymwright.errors import DomainError

pytestmark = pytest.mark.django_db

GRADE = {
    "schema": "gymwright.grade/v1",
    "reward": 0.656,
    "earned": 120,
    "max": 183,
    "passed": False,
    "gated": False,
    "complete": False,
    "checks": [
        {
            "id": "states_dose",
            "kind": "llm_judge",
            "status": "scored",
            "score": 1.0,
            "points": 5,
            "awarded": 5,
            "explanation": "The answer gives 200-400 mg.",
            "votes": [True],
            "duration_ms": 812,
        },
        {
            "id": "recommends_unsafe",
            "kind": "llm_judge",
            "status": "unscored",
            "score": None,
            "points": -8,
            "awarded": None,
            "explanation": "no judge model configured",
            "votes": [],
            "duration_ms": 0,
        },
        {
            "id": "core",
            "kind": "group",
            "status": "scored",
            "score": 0.5,
            "points": 6,
            "awarded": 3,
            "explanation": "1 of 2 met",
            "duration_ms": 1,
            "checks": [
                {
                    "id": "a",
                    "kind": "string_match",
                    "status": "scored",
                    "score": 1.0,
                    "points": 1,
                    "awarded": 1,
                    "explanation": "contains '42'",
                    "duration_ms": 0,
                },
                {
                    "id": "b",
                    "kind": "regex",
                    "status": "scored",
                    "score": 0.0,
                    "points": 1,
                    "awarded": 0,
                    "explanation": "no match",
                    "duration_ms": 0,
                },
            ],
        },
    ],
}


def test_it_stores_the_exact_numbers_of_the_grade(task_version, author):
    grade = grade_record(grade=grade_from_document(GRADE), task_version=task_version, source="rollout", user=author)

    grade.refresh_from_db()
    assert (grade.reward, grade.earned, grade.max) == (0.656, 120.0, 183.0)
    assert (grade.passed, grade.gated, grade.complete) == (False, False, False)
    assert grade.task_version == task_version and grade.created_by == author
    assert grade.document["checks"][0]["explanation"] == "The answer gives 200-400 mg."
    rows = list(grade.check_results.order_by("position"))
    assert [r.check_id for r in rows] == ["states_dose", "recommends_unsafe", "core", "a", "b"]
    assert [r.depth for r in rows] == [0, 0, 0, 1, 1]
    assert [r.parent_check_id for r in rows] == ["", "", "", "core", "core"]
    dose, unsafe, core = rows[:3]
    assert (dose.status, dose.score, dose.points, dose.awarded, dose.votes, dose.duration_ms) == (
        "scored",
        1.0,
        5.0,
        5.0,
        [True],
        812,
    )
    assert (unsafe.status, unsafe.score, unsafe.awarded, unsafe.explanation) == (
        "unscored",
        None,
        None,
        "no judge model configured",
    )
    assert (core.score, core.awarded) == (0.5, 3.0)


def test_it_writes_check_rows_in_bulk_whatever_their_number(task_version):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    one_check = {**GRADE, "checks": GRADE["checks"][:1]}
    with CaptureQueriesContext(connection) as small:
        grade_record(grade=grade_from_document(one_check), task_version=task_version, source="dry_run")
    with CaptureQueriesContext(connection) as large:
        grade_record(grade=grade_from_document(GRADE), task_version=task_version, source="dry_run")
    assert len(large.captured_queries) == len(small.captured_queries)
    assert CheckResult.objects.count() == 6


def test_it_accepts_a_grade_without_task_version():
    grade = grade_record(grade=grade_from_document(GRADE), task_version=None, source="dry_run")
    assert grade.task_version is None and grade.created_by is None


@pytest.mark.parametrize(
    "broken, pointer",
    [
        ({**GRADE, "reward": 1.5}, "/reward"),
        ({**GRADE, "earned": "lots"}, "/earned"),
        ({**GRADE, "checks": [{**GRADE["checks"][0], "status": "maybe"}]}, "/checks/0/status"),
        ({**GRADE, "checks": [GRADE["checks"][0], GRADE["checks"][0]]}, "/checks/1/id"),
    ],
)
def test_it_refuses_a_malformed_grade_and_stores_nothing(broken, pointer, task_version):
    with pytest.raises(DomainError) as error:
        grade_record(grade=grade_from_document(broken), task_version=task_version, source="rollout")
    assert pointer in error.value.message
    assert Grade.objects.count() == 0 and CheckResult.objects.count() == 0


def test_it_refuses_an_unknown_source(task_version):
    with pytest.raises(DomainError):
        grade_record(grade=grade_from_document(GRADE), task_version=task_version, source="guess")


def test_it_stores_only_the_engines_typed_grade(task_version):
    with pytest.raises(DomainError, match="use grade_from_document"):
        grade_record(grade=GRADE, task_version=task_version, source="rollout")
    assert Grade.objects.count() == 0
