"""Example answers on the pages and in the API: the editor saves them, the task page shows expected
vs got, the diff view names the changed verdicts, the API reads and writes them."""

from __future__ import annotations

import copy
import json
import re

import pytest
from rest_framework.test import APIClient

from authoring.models import TaskVersion
from grading.models import ExampleRun
from tests.grading.test_example_answers import EXAMPLES, RUBRIC, content, environment, task  # noqa: F401
from tests.support.users import make_user

pytestmark = pytest.mark.django_db


def form_data(version: int, **overrides) -> dict:
    data = {
        "title": "Six times seven",
        "prompt": "What is 6 x 7?",
        "rubric": json.dumps(RUBRIC),
        "solution_script": "",
        "solution_answer": "42",
        "tags": "",
        "metadata": "{}",
        "examples": json.dumps(EXAMPLES),
        "message": "",
        "base_version": str(version),
    }
    data.update(overrides)
    return data


def test_the_task_page_shows_each_example_expected_and_got(client, task):
    client.force_login(task.owner)
    body = client.get(f"/tasks/{task.slug}/").content.decode()
    assert 'id="example-answers"' in body and "(2 of 2 as expected)" in body
    assert 'data-example="right with report" data-status="as_expected"' in body
    assert "pass, reward 1–1" in body  # expected, with its range


def test_the_editor_keeps_examples_and_a_broken_one_shows_changed_on_the_page_and_in_the_diff(client, task):
    client.force_login(task.owner)
    edit = client.get(f"/tasks/{task.slug}/edit/").content.decode()
    assert "right with report" in edit  # the examples are in the editor's field
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][0]["expected"] = "forty-two"
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(1, rubric=json.dumps(rubric)))
    assert response.status_code == 302
    body = client.get(f"/tasks/{task.slug}/").content.decode()
    assert 'data-example="right with report" data-status="unexpected" data-changed="1"' in body
    assert "changed: was “as expected” on v1" in body and "expected pass, got fail" in body
    diff = client.get(f"/tasks/{task.slug}/diff/?a=1&b=2").content.decode()
    assert "1 example answer changed verdict" in diff
    assert '<tr data-example="right with report" data-changed="1" class="changed">' in diff


def test_a_bad_example_is_a_field_error_with_its_pointer_and_nothing_is_saved(client, task):
    client.force_login(task.owner)
    bad = copy.deepcopy(EXAMPLES)
    bad[1]["files"] = [{"path": "../../etc/passwd", "content": "x"}]
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(1, examples=json.dumps(bad)))
    assert response.status_code == 400
    body = response.content.decode()
    assert "/examples/1/files/0/path" in body and "contains &#x27;..&#x27;" in body
    assert TaskVersion.objects.filter(task=task).count() == 1
    assert "../../etc/passwd" in body  # what was typed is kept in the field
    not_a_list = client.post(f"/tasks/{task.slug}/edit/", form_data(1, examples='{"name": "x"}'))
    assert not_a_list.status_code == 400 and "Example answers must be a JSON list" in not_a_list.content.decode()


def test_grade_again_regrades_for_editors_only(client, task, django_user_model):
    version = task.latest_version
    first = ExampleRun.objects.get(task_version=version).pk
    client.force_login(task.owner)
    response = client.post(f"/grading/tasks/{task.slug}/versions/1/examples/run/")
    assert response.status_code == 302 and response["Location"].endswith("#examples")
    assert ExampleRun.objects.get(task_version=version).pk != first
    lab = make_user(django_user_model, "lab", "lab")
    client.force_login(lab)
    client.post(f"/grading/tasks/{task.slug}/versions/1/examples/run/")
    assert ExampleRun.objects.get(task_version=version).status == "done"


def test_the_api_writes_examples_and_reads_their_verdicts(task):
    api = APIClient()
    api.force_authenticate(task.owner)
    version = api.get(f"/api/tasks/{task.slug}/versions/1/").json()
    assert version["spec"]["examples"][0]["name"] == "right with report"
    changed = copy.deepcopy(EXAMPLES)
    changed[1]["expect"] = "pass"  # "It is 41." will not pass
    response = api.post(
        f"/api/tasks/{task.slug}/versions/", {**content(examples=changed), "base_version": 1}, format="json"
    )
    assert response.status_code == 201, response.content
    results = api.get(f"/api/tasks/{task.slug}/versions/2/examples/").json()
    assert results["status"] == "done" and results["as_expected"] == 1
    wrong = {item["name"]: item for item in results["examples"]}["wrong number"]
    assert wrong["status"] == "unexpected" and wrong["got"] == "fail" and wrong["grade"]["reward"] == 0.0
    bad = api.post(
        f"/api/tasks/{task.slug}/versions/",
        {**content(examples=[{"name": "x", "answer": "y", "expect": "maybe"}]), "base_version": 2},
        format="json",
    )
    assert bad.status_code == 400
    assert {
        "pointer": "/examples/0/expect",
        "message": "'maybe' is not allowed here; expected 'pass' or 'fail'",
    } in bad.json()["error"]["details"]
    rerun = api.post(f"/api/tasks/{task.slug}/versions/2/examples/run/")
    assert rerun.status_code == 202 and rerun.json()["total"] == 2


def test_a_lab_member_sees_what_changed_since_the_approved_version_before_not_a_draft(client, task, admin, lab):
    """v2 (approved) and v4 (a draft) break an example, v5 (approved) mends it: its author reads 'was … on v4',
    a lab member, who cannot open v4, 'was … on v2'; with no approved version before, nothing changed."""
    from authoring import services as authoring_services
    from review.services import versions_approve_on_import
    from tests.grading.test_example_answers import content

    broken = copy.deepcopy(RUBRIC)
    broken["checks"][0]["expected"] = "forty-two"
    for number in range(2, 6):
        version, _ = authoring_services.task_version_create(
            task=task,
            author=task.owner,
            base_version=number - 1,
            content=content(title=f"v{number}", rubric=broken if number in (2, 4) else RUBRIC),
        )
        if number in (2, 5):
            versions_approve_on_import(versions=[version], admin=admin)

    def changed(user, number, page=None):
        client.force_login(user)
        body = client.get(page or f"/grading/tasks/{task.slug}/versions/{number}/examples/").content.decode()
        return re.findall(r"changed: was “([^”]+)” on v(\d+)", body)

    assert changed(task.owner, 5) == changed(task.owner, 5, page=f"/tasks/{task.slug}/") == [("not as expected", "4")]
    assert changed(lab, 5) == changed(lab, 5, page=f"/tasks/{task.slug}/") == [("not as expected", "2")]
    assert changed(task.owner, 2) == [("as expected", "1")]
    assert changed(lab, 2) == []  # v1, a draft, is not compared with: nothing said about it
