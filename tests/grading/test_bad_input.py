"""Bad input to the grading endpoints: a clear 4xx that says what and where, never a 500."""

import pytest
from rest_framework.test import APIClient

from tests.grading.conftest import make_user

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture
def author(django_user_model):
    return make_user(django_user_model, "ada", "author")


@pytest.fixture
def browser(client, author):
    client.raise_request_exception = False
    client.force_login(author)
    return client


@pytest.mark.parametrize("rubric, expected", [
    (DEEP, "nested too deeply"),
    ('{"schema": "gymwright.rubric/v1", "checks": [%s]}' % ("9" * 5000), "not valid JSON"),
])
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
    assert response.json() == {"valid": False, "issues": [{"pointer": "", "message": "nested too deeply"}]}
