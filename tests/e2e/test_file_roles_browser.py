"""File roles in the task editor, in a real browser: a role per attached file, and the rubric
lint's warning about tests the agent can change, live, gone once the tests are protected."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from authoring import services
from authoring.models import Task
from tests.e2e.conftest import TIMEOUT_MS, wait_for_editor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [{"id": "tests_pass", "kind": "command", "points": 10, "run": "python3 -m unittest test_calc"}],
}


def test_an_author_protects_the_tests_and_the_lint_warning_goes_away(logged_in, live_server, environment, author):
    tests = services.blob_store(data=b"import unittest\n")
    services.task_create(
        slug="calc",
        environment=environment,
        author=author,
        content={
            "title": "Calc",
            "prompt": "Implement add.",
            "rubric": RUBRIC,
            "files": [{"path": "test_calc.py", "sha256": tests.sha256}],
        },
    )
    page = logged_in
    page.goto(f"{live_server.url}/tasks/calc/edit/")
    wait_for_editor(page)
    warning = page.locator('#rubric-errors li.re-issue-warning[data-pointer="/checks/0/run"]')
    expect(warning).to_contain_text("test_calc.py")
    expect(page.locator("#rubric-status")).to_contain_text("Valid")  # a warning is not an error

    page.select_option('select[data-file-path="test_calc.py"]', "protected")
    expect(warning).to_have_count(0)
    page.fill("#id_message", "protect the tests")
    page.click("#save-button")
    page.wait_for_url(f"{live_server.url}/tasks/calc/")
    spec = Task.objects.get(slug="calc").latest_version.spec
    assert spec["files"] == [{"path": "test_calc.py", "sha256": tests.sha256, "role": "protected"}]


def test_the_new_task_form_protects_the_tests_of_v1_and_the_task_page_shows_the_roles(
    logged_in, live_server, environment, author
):
    page = logged_in
    page.goto(f"{live_server.url}/tasks/new/")
    wait_for_editor(page)
    page.fill("#id_slug", "calc")
    page.fill("#id_title", "Calc")
    page.fill("#id_prompt", "Implement add.")
    page.click("button[data-view=raw]")
    page.fill("#rubric-json", json.dumps(RUBRIC, indent=2))
    page.set_input_files(
        "#task-form input[name=files]",
        [
            {"name": "test_calc.py", "mimeType": "text/x-python", "buffer": b"import unittest\n"},
            {"name": "expected.csv", "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"},
            {"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# notes\n"},
        ],
    )
    # A role per chosen file, tests protected from the start; the lint already counts them as protected.
    expect(page.locator('#upload-roles select[data-file-path="test_calc.py"]')).to_have_value("protected")
    expect(page.locator('#upload-roles select[data-file-path="notes.md"]')).to_have_value("workspace")
    page.select_option('#upload-roles select[data-file-path="expected.csv"]', "grader")
    expect(page.locator('#rubric-errors li.re-issue-warning[data-pointer="/checks/0/run"]')).to_have_count(0)
    with page.expect_navigation():
        page.get_by_role("button", name="Create task").click()
    expect(page.locator(".messages")).to_contain_text("Created calc v1")

    version = Task.objects.get(slug="calc").latest_version
    assert version.number == 1
    roles = {entry["path"]: entry.get("role") for entry in version.spec["files"]}
    assert roles == {"test_calc.py": "protected", "expected.csv": "grader", "notes.md": None}
    for path, role in (("test_calc.py", "protected"), ("expected.csv", "grader"), ("notes.md", "workspace")):
        expect(page.locator(f'li:has(a code:text-is("{path}")) [data-role]')).to_have_text(role)
