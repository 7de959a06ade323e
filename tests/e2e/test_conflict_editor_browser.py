"""The conflict page's "merge by hand" is the task editor itself (rubric editor, file roles), not raw JSON boxes."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from authoring import services
from tests.e2e.conftest import wait_for_editor
from tests.sandbox.factories import RUBRIC

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def task(author, environment):
    return services.task_create(
        slug="contested",
        environment=environment,
        author=author,
        content={"title": "Contested", "prompt": "Say 42.", "rubric": RUBRIC, "solution": {"answer": "42"}},
    )


def test_the_kept_edit_is_merged_in_the_form_editor_and_saved_as_the_next_version(logged_in, live_server, task):
    page = logged_in
    page.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(page)
    page.fill("#id_title", "Mine")
    # Someone else saves v2 meanwhile.
    services.task_version_create(
        task=task,
        author=task.owner,
        base_version=1,
        content={"title": "Theirs", "prompt": "Say 42, please.", "rubric": RUBRIC, "solution": {"answer": "42"}},
    )
    page.click("#save-button")
    expect(page.locator("#conflict-message")).to_contain_text("the latest is v2")
    wait_for_editor(page)  # the rubric editor, not a raw JSON box
    assert page.input_value("#id_title") == "Mine"  # the kept edit, pre-filled
    assert json.loads(page.input_value("#rubric-json")) == RUBRIC
    expect(page.locator("#save-button")).to_have_text("Save my edit as v3")

    # Merge by hand in the structured editor: take their prompt, change a check's points.
    page.fill("#id_prompt", "Say 42, please.")
    page.locator('#rubric-structured .re-card[data-pointer="/checks/0"] [data-key=points] input').fill("7")
    page.click("#save-button")
    page.wait_for_url(f"{live_server.url}/tasks/{task.slug}/")
    saved = task.versions.get(number=3).spec
    assert saved["title"] == "Mine" and saved["prompt"] == "Say 42, please."
    assert saved["rubric"]["checks"][0]["points"] == 7
