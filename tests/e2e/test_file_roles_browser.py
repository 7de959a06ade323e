"""File roles in the task editor, in a real browser: a role per attached file, and the rubric
lint's warning about tests the agent can change, live, gone once the tests are protected."""

from __future__ import annotations

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
