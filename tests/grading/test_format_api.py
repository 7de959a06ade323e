import json

import pytest
from rest_framework.test import APIClient

from grading.engine import json_schema

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["rubric", "task", "grade"])
def test_the_schema_is_the_engines_and_public(name, client):
    response = client.get(f"/api/schema/{name}.json")  # anonymous

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/schema+json")
    assert json.loads(response.content) == json_schema(name)
    assert "ETag" in response and "public" in response["Cache-Control"]


def test_an_unchanged_schema_answers_not_modified(client):
    etag = client.get("/api/schema/rubric.json")["ETag"]

    assert client.get("/api/schema/rubric.json", HTTP_IF_NONE_MATCH=etag).status_code == 304


def test_a_schema_is_public_even_with_a_bad_token(client):
    response = client.get("/api/schema/grade.json", HTTP_AUTHORIZATION="Token not-a-real-token")

    assert response.status_code == 200


def test_an_unknown_schema_is_a_404_in_the_error_envelope(client):
    response = client.get("/api/schema/nonsense.json")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_validate_needs_a_login():
    response = APIClient().post("/api/rubrics/validate/", {"rubric": {}}, format="json")

    assert response.status_code in (401, 403)
    assert "error" in response.json()


def _api(user):
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_validate_accepts_a_good_rubric(author):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "says_42", "kind": "string_match", "points": 1, "expected": "42"}],
    }

    response = _api(author).post("/api/rubrics/validate/", {"rubric": rubric}, format="json")

    assert response.status_code == 200
    assert response.json() == {"valid": True, "issues": [], "warnings": []}


def test_validate_reports_semantic_problems_with_pointers(author):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "twice", "kind": "string_match", "points": 1, "expected": "a"},
            {"id": "twice", "kind": "regex", "points": 1, "pattern": "(unclosed"},
            {"id": "extra", "kind": "string_match", "points": 1, "expected": "b", "colour": "red"},
        ],
    }

    response = _api(author).post("/api/rubrics/validate/", {"rubric": rubric}, format="json")

    body = response.json()
    assert response.status_code == 200 and body["valid"] is False
    pointers = {issue["pointer"] for issue in body["issues"]}
    assert "/checks/1/id" in pointers  # duplicate id: a rule JSON Schema cannot express
    assert "/checks/1/pattern" in pointers
    assert any(p.startswith("/checks/2") for p in pointers)
    assert all(issue["message"] for issue in body["issues"])


def test_validate_reports_json_text_that_does_not_parse(author):
    response = _api(author).post("/api/rubrics/validate/", {"rubric": '{"schema": '}, format="json")

    body = response.json()
    assert body["valid"] is False
    assert body["issues"][0]["pointer"] == "" and "JSON" in body["issues"][0]["message"]


def test_validate_without_a_rubric_is_a_400_in_the_envelope(author):
    response = _api(author).post("/api/rubrics/validate/", {}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["pointer"] == "/rubric"


def test_validate_answers_lint_warnings_with_pointers_and_refuses_checks_that_cannot_fail(author):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "tests_pass", "kind": "command", "points": 10, "run": "python3 -m unittest test_calc"}],
    }
    files = [{"path": "calc.py"}, {"path": "test_calc.py", "role": "workspace"}]

    body = _api(author).post("/api/rubrics/validate/", {"rubric": rubric, "files": files}, format="json").json()
    assert body["valid"] is True and body["issues"] == []
    warnings = {w["pointer"]: w["message"] for w in body["warnings"]}
    # The agent may edit a workspace test file; and a command that runs a test runner trusts its exit code,
    # which the agent's code controls: the `tests` kind is pointed to.
    assert sorted(warnings) == ["/checks/0/kind", "/checks/0/run"]
    assert "test_calc.py" in warnings["/checks/0/run"] and "tests" in warnings["/checks/0/kind"]

    files[1]["role"] = "protected"
    body = _api(author).post("/api/rubrics/validate/", {"rubric": rubric, "files": files}, format="json").json()
    assert [w["pointer"] for w in body["warnings"]] == ["/checks/0/kind"]

    empty = {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "a", "kind": "string_match", "points": 1, "expected": ""}],
    }
    body = _api(author).post("/api/rubrics/validate/", {"rubric": empty}, format="json").json()
    assert body["valid"] is False and [i["pointer"] for i in body["issues"]] == ["/checks/0/expected"]


@pytest.mark.django_db
def test_the_check_kinds_page_is_generated_from_the_schema_with_the_engines_examples(client, django_user_model):
    from grading.engine.kind_examples import EXAMPLES
    from tests.support.users import make_user

    client.force_login(make_user(django_user_model, "ada", "author"))
    html = client.get("/grading/kinds/").content.decode()
    for kind in EXAMPLES:
        assert f'id="kind-{kind}"' in html
    assert "reads the first number, 456692" in html and "<code>extract</code>" in html  # a field row
    assert "Canberra (population 456692) was founded in 1913." in html
