"""Every /api/ answer that is an error is the JSON envelope, even when no API view ran."""

import json

import pytest
from rest_framework.test import APIClient

from gymwright import error_views
from tests.support.users import make_user


@pytest.fixture
def api(db, django_user_model, settings):
    settings.DEBUG = False
    client = APIClient()
    client.force_authenticate(make_user(django_user_model, "alice", "author"))
    return client


def _envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    error = json.loads(response.content)["error"]
    assert error["code"] == code and error["message"] and error["details"] == []
    return error


@pytest.mark.parametrize("path", ["/api/nope/", "/api/tasks/nope/deeper/", "/api/v2/"])
def test_an_unknown_api_path_answers_the_json_envelope(api, path):
    error = _envelope(api.get(path), 404, "not_found")
    assert path in error["message"] and "/api/docs/" in error["message"]


def test_an_unknown_api_path_answers_json_to_anonymous_callers_too(client, db, settings):
    settings.DEBUG = False
    _envelope(client.get("/api/nope/"), 404, "not_found")


def test_a_wrong_method_answers_the_json_envelope(api):
    response = api.delete("/api/tasks/")
    _envelope(response, 405, "method_not_allowed")
    assert "GET" in response["Allow"]


def test_a_bad_host_under_api_answers_the_json_envelope(api):
    _envelope(api.get("/api/tasks/", HTTP_HOST="evil.example"), 400, "bad_request")


@pytest.mark.parametrize("path", ["/api/imports/bulk/", "/api/tasks/"])
def test_a_body_over_the_cap_is_a_413_envelope_naming_the_cap(api, settings, path):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"tasks": [{"id": "big", "prompt": "p" * 5000, "answer": "a"}]})
    error = _envelope(api.post(path, body, content_type="application/json"), 413, "request_too_large")
    assert "larger than the limit" in error["message"] and "DATA_UPLOAD_MAX_MEMORY_SIZE" in error["message"]


def test_an_unhandled_error_under_api_answers_the_json_envelope(api, monkeypatch):
    from authoring import selectors

    def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(selectors, "environment_list", broken)
    api.raise_request_exception = False  # as in production: the handler answers, the test client does not raise
    error = _envelope(api.get("/api/environments/"), 500, "server_error")
    assert "a bug" not in error["message"]


def test_a_403_from_django_under_api_answers_the_json_envelope(rf):
    _envelope(error_views.permission_denied(rf.get("/api/tasks/"), Exception("x")), 403, "permission_denied")


def test_outside_api_the_site_pages_still_answer(client, db, settings, django_user_model):
    settings.DEBUG = False
    client.force_login(make_user(django_user_model, "alice", "author"))
    response = client.get("/no/such/page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
    assert client.get("/tasks/", HTTP_HOST="evil.example").status_code == 400


def test_unknown_fields_are_refused_with_bounded_pointers(api):
    """A body of many huge unknown keys is refused at their pointers, a bounded list of bounded names."""
    body = {f"{'k' * 5000}{index}": 1 for index in range(1000)}
    body["name"] = "x"
    response = api.post("/api/environments/", body, format="json")
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "invalid"
    assert 1 <= len(error["details"]) <= 20 and all(len(detail["pointer"]) <= 101 for detail in error["details"])
    assert len(response.content) < 20_000
