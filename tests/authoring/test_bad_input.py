"""Bad input to the authoring forms and API: a clear 4xx that says what and where, never a 500."""

import json

import pytest
from django.http import Http404

from authoring import selectors
from authoring.diff import task_version_diff
from authoring.models import Environment, Task, TaskVersion
from tests.authoring.conftest import RUBRIC

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000


def form_data(version=1, **overrides):
    data = {
        "title": "Answer the question",
        "prompt": "What is *six* times seven?",
        "rubric": json.dumps(RUBRIC),
        "solution_script": "",
        "solution_answer": "42",
        "tags": "maths",
        "metadata": "{}",
        "message": "",
        "base_version": str(version),
    }
    data.update(overrides)
    return data


@pytest.fixture
def browser(client, author):
    client.raise_request_exception = False
    client.force_login(author)
    return client


@pytest.mark.parametrize(
    "rubric",
    [
        "1",
        '"a string"',
        "1.5",
        "true",
        "[]",
        '{"checks": 7}',
        json.dumps({"schema": "gymwright.rubric/v1", "checks": [{"id": ["x"]}]}),
    ],
)
def test_a_stale_save_with_a_rubric_that_is_not_an_object_shows_the_conflict_page(browser, author, task, rubric):
    # Someone else saved v2; the user's form still says v1 and carries a nonsense rubric.
    assert browser.post(f"/tasks/{task.slug}/edit/", form_data(title="Theirs")).status_code == 302

    response = browser.post(f"/tasks/{task.slug}/edit/", form_data(version=1, rubric=rubric))

    assert response.status_code == 409
    assert response.context["form"].data["rubric"] == rubric  # what the user typed is kept
    assert TaskVersion.objects.filter(task=task).count() == 2


def test_the_diff_of_a_rubric_that_is_not_an_object_shows_it_as_a_rubric_level_change():
    diff = task_version_diff({"rubric": RUBRIC, "title": "a"}, {"rubric": 5, "title": ["not", "text"]})

    assert {"key": "(rubric)", "a": "null", "b": "5"} in diff["rubric_changes"]
    assert diff["summary"]["removed"] == len(RUBRIC["checks"])
    assert diff["fields"][0].changed


@pytest.mark.parametrize("field", ["rubric", "metadata"])
def test_json_nested_too_deeply_in_the_task_form_is_a_field_error(browser, task, field):
    response = browser.post(f"/tasks/{task.slug}/edit/", form_data(**{field: DEEP}))

    assert response.status_code == 400
    assert "nested too deeply" in " ".join(response.context["form"].errors[field])
    assert TaskVersion.objects.filter(task=task).count() == 1


def test_json_nested_too_deeply_in_the_new_task_form_is_a_field_error(browser, environment):
    data = form_data(slug="deep", environment=environment.slug, rubric=DEEP)
    data.pop("base_version")

    response = browser.post("/tasks/new/", data)

    assert response.status_code == 400
    assert "nested too deeply" in " ".join(response.context["form"].errors["rubric"])


@pytest.mark.parametrize(
    "metadata, expected",
    [
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": Infinity}', "Infinity is not a JSON number"),
        ('{"a": 1e999}', "the number 1e999 is too large"),
        ('{"a": %s}' % ("9" * 5000), "4300"),
    ],
)
def test_numbers_json_cannot_store_in_metadata_are_a_field_error(browser, task, metadata, expected):
    response = browser.post(f"/tasks/{task.slug}/edit/", form_data(metadata=metadata))

    assert response.status_code == 400
    errors = " ".join(response.context["form"].errors["metadata"])
    assert "Metadata is not valid JSON" in errors and expected in errors
    assert TaskVersion.objects.filter(task=task).count() == 1


def test_a_non_finite_number_in_the_environment_custom_tools_is_a_field_error(browser, environment):
    data = {
        "name": "Shell",
        "network": "none",
        "cpus": "1",
        "memory_mb": "1024",
        "timeout_s": "600",
        "max_steps": "30",
        "tools": ["bash"],
        "custom_tools": '[{"name": "t", "x": NaN}]',
        "base_version": "1",
    }

    response = browser.post(f"/environments/{environment.slug}/edit/", data)

    assert response.status_code == 400
    assert "NaN is not a JSON number" in " ".join(response.context["form"].errors["custom_tools"])
    assert environment.versions.count() == 1


@pytest.mark.parametrize("url", ["/api/tasks/", "/api/environments/", "/api/tasks/six-times-seven/versions/"])
def test_an_api_body_nested_too_deeply_is_a_parse_error_in_the_envelope(api, task, url):
    api.raise_request_exception = False

    response = api.post(url, DEEP, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert "nested too deeply" in response.json()["error"]["message"]


# --------------------------------------------------------------------------- NUL characters
# PostgreSQL stores neither NUL in text nor \u0000 in jsonb; the save used to fail with a 500 there.


def _rubric_with_nul():
    return {**RUBRIC, "checks": [{**RUBRIC["checks"][0], "expected": "4\u00002"}, RUBRIC["checks"][1]]}


def test_the_api_refuses_a_nul_in_the_rubric_with_its_pointer(api, task):
    response = api.post(
        f"/api/tasks/{task.slug}/versions/",
        {"title": "T", "prompt": "p", "rubric": _rubric_with_nul(), "base_version": 1},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["details"] == [
        {"pointer": "/rubric/checks/0/expected", "message": "contains a NUL character (\\u0000)"}
    ]
    assert TaskVersion.objects.filter(task=task).count() == 1


def test_the_api_refuses_a_nul_in_a_metadata_key_when_creating_a_task(api, environment):
    response = api.post(
        "/api/tasks/",
        {
            "slug": "nul",
            "environment": environment.slug,
            "title": "T",
            "prompt": "p",
            "rubric": RUBRIC,
            "metadata": {"ok": 1, "bad\u0000key": 2},
        },
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["pointer"] == "/metadata/bad\u0000key"
    assert not Task.objects.filter(slug="nul").exists()


@pytest.mark.parametrize(
    "url, body",
    [
        ("/api/environments/shell/versions/", {"spec": {"setup": "echo \u0000"}, "base_version": 1}),
        ("/api/environments/", {"slug": "nul-env", "spec": {"setup": "echo \u0000"}}),
    ],
)
def test_the_api_refuses_a_nul_in_an_environment_spec(api, environment, url, body):
    response = api.post(url, body, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["pointer"] == "/setup"
    assert environment.versions.count() == 1 and not Environment.objects.filter(slug="nul-env").exists()


def test_the_task_form_puts_an_escaped_nul_in_metadata_on_the_metadata_field(browser, task):
    response = browser.post(f"/tasks/{task.slug}/edit/", form_data(metadata='{"note": "a\\u0000b"}'))

    assert response.status_code == 400
    assert "/metadata/note: contains a NUL character" in " ".join(response.context["form"].errors["metadata"])
    assert TaskVersion.objects.filter(task=task).count() == 1


def test_a_task_list_filter_with_a_nul_finds_nothing(browser, api, task):
    assert browser.get("/?q=six%00").context["page"].paginator.count == 0
    assert browser.get("/?environment=%00&tag=%00&author=%00&status=%00").status_code == 200
    response = api.get("/api/tasks/?tag=%00")
    assert response.status_code == 200 and response.json()["count"] == 0


def test_a_slug_with_a_nul_is_not_found(author, task):
    with pytest.raises(Http404):
        selectors.task_get_for_user(slug="six\x00", user=author)
    with pytest.raises(Http404):
        selectors.environment_get_for_user(slug="shell\x00", user=author)


# --------------------------------------------------------------------------- unpaired surrogates
# JSON may escape a lone surrogate ("\ud800"): it decodes to a str that cannot be written as UTF-8, and
# hashing the version failed with a UnicodeEncodeError (a 500).


def test_the_api_refuses_an_unpaired_surrogate_in_a_prompt_with_its_pointer(api, task):
    import json

    body = '{"title": "T", "prompt": "bad \\ud800 here", "base_version": 1, "rubric": %s}' % json.dumps(RUBRIC)
    response = api.post(f"/api/tasks/{task.slug}/versions/", data=body, content_type="application/json")

    assert response.status_code == 400, response.content
    # DRF's CharField refuses it before the service's own check (which catches it in JSON fields: below)
    assert response.json()["error"]["details"] == [
        {"pointer": "/prompt", "message": "Surrogate characters are not allowed: U+D800."}
    ]
    assert TaskVersion.objects.filter(task=task).count() == 1


def test_the_api_refuses_an_unpaired_surrogate_in_the_rubric_with_its_pointer(api, task):
    import json

    rubric = json.dumps(RUBRIC).replace(
        '"id": "%s"' % RUBRIC["checks"][0]["id"], '"id": "%s", "title": "bad \\udfff"' % RUBRIC["checks"][0]["id"], 1
    )
    body = '{"title": "T", "prompt": "p", "base_version": 1, "rubric": %s}' % rubric
    response = api.post(f"/api/tasks/{task.slug}/versions/", data=body, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"] == [
        {"pointer": "/rubric/checks/0/title", "message": "contains an unpaired surrogate (\\ud800-\\udfff)"}
    ]
    assert TaskVersion.objects.filter(task=task).count() == 1
