"""Bad input to the grading endpoints: a clear 4xx that says what and where, never a 500."""

import json

import pytest
from rest_framework.test import APIClient

from grading.models import JudgeLabel
from grading.services import grade_from_document, grade_record
from tests.grading.conftest import RUBRIC
from tests.grading.test_grades_and_labels import GRADE
from tests.support.users import make_user

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture
def browser(client, author):
    client.raise_request_exception = False
    client.force_login(author)
    return client


@pytest.mark.parametrize(
    "rubric, expected",
    [
        (DEEP, "nested too deeply"),
        ('{"schema": "gymwright.rubric/v1", "checks": [%s]}' % ("9" * 5000), "not valid JSON"),
    ],
)
def test_a_dry_run_with_an_unreadable_rubric_says_so_in_the_fragment(browser, rubric, expected):
    response = browser.post("/grading/dry-run/", {"rubric": rubric, "answer": "42"})

    assert response.status_code == 400
    error = response.context["error"]
    assert error.code == "invalid_rubric"
    assert error.details[0]["pointer"] == ""
    assert expected in error.message and expected in response.content.decode()


def test_the_rubric_validate_api_answers_a_body_nested_too_deeply_with_a_parse_error(author):
    api = APIClient(raise_request_exception=False)
    api.force_authenticate(author)

    response = api.post("/api/rubrics/validate/", '{"rubric": %s}' % DEEP, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert "nested too deeply" in response.json()["error"]["message"]


def test_the_rubric_validate_api_reports_a_rubric_text_nested_too_deeply_at_the_root(author):
    api = APIClient(raise_request_exception=False)
    api.force_authenticate(author)

    response = api.post("/api/rubrics/validate/", {"rubric": DEEP}, format="json")

    assert response.status_code == 200
    assert response.json() == {
        "valid": False,
        "issues": [{"pointer": "", "message": "nested too deeply"}],
        "warnings": [],
    }


# --------------------------------------------------------------------------- NUL characters
# PostgreSQL stores neither NUL in text nor \u0000 in jsonb; these used to fail with a 500 there.


def test_a_dry_run_answer_with_a_nul_is_refused_at_the_answer(browser):
    response = browser.post("/grading/dry-run/", {"rubric": json.dumps(RUBRIC), "answer": "42\x00 meters"})

    assert response.status_code == 400
    assert response.context["error"].details == [
        {"pointer": "/answer", "message": "contains a NUL character (\\u0000)"}
    ]


def test_a_dry_run_rubric_with_an_escaped_nul_is_refused_at_its_pointer(browser):
    rubric = {**RUBRIC, "checks": [{**RUBRIC["checks"][0], "expected": "4\u00002"}, RUBRIC["checks"][1]]}

    response = browser.post("/grading/dry-run/", {"rubric": json.dumps(rubric), "answer": "42"})

    assert response.status_code == 400
    assert response.context["error"].details[0]["pointer"] == "/checks/0/expected"
    assert "/checks/0/expected" in response.content.decode()


def test_a_dry_run_on_a_task_slug_with_a_nul_is_not_found(browser):
    response = browser.post("/grading/dry-run/", {"rubric": json.dumps(RUBRIC), "answer": "42", "task": "a\x00b"})

    assert response.status_code == 404
    assert response.context["error"].code == "not_found"


@pytest.fixture
def judged_check(task_version, author):
    grade = grade_record(
        grade=grade_from_document(GRADE), task_version=task_version, source="rollout", user=author, rollout_id=7
    )
    return grade.check_results.get(check_id="states_dose")


@pytest.fixture
def reviewing(client, django_user_model):
    client.raise_request_exception = False
    client.force_login(make_user(django_user_model, "rene", "reviewer"))
    return client


def test_a_judge_label_comment_with_a_nul_is_refused_at_the_comment(reviewing, judged_check):
    response = reviewing.post(
        f"/grading/check-results/{judged_check.pk}/label/", {"verdict": "agree", "comment": "fine\x00"}
    )

    assert response.status_code == 400
    assert response.context["error"].details[0]["pointer"] == "/comment"
    assert not JudgeLabel.objects.exists()


def test_a_judge_label_comment_over_the_comment_limit_is_refused_at_the_comment(reviewing, judged_check, settings):
    """A comment on the judge's verdict is a review comment's size at most (a TextField took any size, up to the
    request's cap); the box carries the same limit as its maxlength."""
    settings.REVIEW_COMMENT_MAX_CHARS = 40
    url = f"/grading/check-results/{judged_check.pk}/label/"
    response = reviewing.post(url, {"verdict": "agree", "comment": "x" * 41})

    assert response.status_code == 400
    assert response.context["error"].details == [{"pointer": "/comment", "message": "at most 40 characters"}]
    assert not JudgeLabel.objects.exists()
    response = reviewing.post(url, {"verdict": "agree", "comment": "x" * 40})
    assert response.status_code == 200 and 'maxlength="40"' in response.content.decode()


def test_a_judge_label_score_that_is_not_a_number_says_which_field(reviewing, judged_check):
    response = reviewing.post(f"/grading/check-results/{judged_check.pk}/label/", {"verdict": "score", "score": "lots"})

    assert response.status_code == 400
    assert response.context["error"].details == [{"pointer": "/score", "message": "a number between 0 and 1"}]
    assert "'lots'" in response.context["error"].message


def test_a_judge_label_comment_counts_a_line_end_as_one_character(reviewing, judged_check, settings):
    """As a review comment: a browser sends the box's line ends as CRLF and its maxlength counts each as one, so a
    comment that fit its box is saved, with "\\n" line ends (gymwright.text.comment_text)."""
    settings.REVIEW_COMMENT_MAX_CHARS = 40
    response = reviewing.post(
        f"/grading/check-results/{judged_check.pk}/label/",
        {"verdict": "agree", "comment": "x" * 19 + "\r\n" + "y" * 20},
    )
    assert response.status_code == 200
    assert JudgeLabel.objects.get().comment == "x" * 19 + "\n" + "y" * 20
