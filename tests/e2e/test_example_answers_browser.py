"""Example answers in a real browser: an author saves examples with a new task, sees them graded as
expected, makes a new version whose rubric breaks one, and sees the changed verdict on the task
page and in the diff view."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from grading.models import ExampleRun
from tests.e2e.conftest import TIMEOUT_MS, wait_for_editor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

SCREENSHOT = "/tmp/gymwright-example-answers.png"
EXAMPLES = [
    {"name": "counts to three", "answer": "1, 2, 3", "expect": "pass"},
    {"name": "stops at two", "answer": "1, 2", "expect": "fail"},
]


def example_row(page, name: str):
    return page.locator(f'#example-answers tr.example[data-example="{name}"]')


def test_save_examples_break_one_with_a_new_version_and_see_the_changed_verdict(logged_in, live_server, environment):
    page = logged_in
    page.get_by_role("link", name="New task").click()
    page.wait_for_url(f"{live_server.url}/tasks/new/")
    wait_for_editor(page)
    page.fill("#id_slug", "count-to-three")
    page.fill("#id_title", "Count to three")
    page.fill("#id_prompt", "Count from one to three.")
    starter = page.locator('#rubric-structured .re-card[data-pointer="/checks/0"]')
    starter.locator("[data-key=id] input").fill("says_three")
    starter.locator("[data-key=expected] input").fill("3")
    page.fill("#examples-json", json.dumps(EXAMPLES, indent=2))
    page.get_by_role("button", name="Create task").click()
    page.wait_for_url(f"{live_server.url}/tasks/count-to-three/")

    # v1: both graded at once (no judge checks), both as expected.
    section = page.locator("#example-answers")
    expect(section.locator("h2")).to_contain_text("(2 of 2 as expected)")
    right = example_row(page, "counts to three")
    expect(right).to_have_attribute("data-status", "as_expected")
    expect(right.locator("td").nth(1)).to_have_text("pass")
    expect(right.locator("td").nth(2)).to_have_text("pass")
    expect(right.locator("td").nth(3)).to_have_text("1.00")
    expect(example_row(page, "stops at two")).to_have_attribute("data-status", "as_expected")
    expect(page.locator('#gates tr[data-gate="examples"]')).to_have_attribute("data-status", "pass")

    # v2: the check now wants "three" in words, which breaks the first example.
    page.goto(f"{live_server.url}/tasks/count-to-three/edit/")
    wait_for_editor(page)
    expect(page.locator("#examples-json")).to_have_value(re.compile("counts to three"))
    page.locator('#rubric-structured .re-card[data-pointer="/checks/0"] [data-key=expected] input').fill("three")
    # Keep a dry-run answer as a third example, from the dry-run panel.
    page.fill("#dry-run-answer", "one, two, three")
    page.fill("[data-dry-run-keep-name]", "in words")
    page.select_option("[data-dry-run-keep-expect]", "pass")
    page.click("[data-dry-run-keep-add]")
    expect(page.locator("[data-dry-run-keep-note]")).to_have_text("Added “in words”: saved with the next version.")
    assert json.loads(page.input_value("#examples-json"))[-1] == {
        "name": "in words",
        "answer": "one, two, three",
        "expect": "pass",
    }
    page.fill("#id_message", "the answer in words")
    page.get_by_role("button", name="Save new version").click()
    page.wait_for_url(f"{live_server.url}/tasks/count-to-three/")

    expect(section.locator("h2")).to_contain_text("(2 of 3 as expected)")
    expect(example_row(page, "in words")).to_have_attribute("data-status", "as_expected")
    right = example_row(page, "counts to three")
    expect(right).to_have_attribute("data-status", "unexpected")
    expect(right).to_have_attribute("data-changed", "1")
    expect(right.locator("td").nth(2)).to_have_text("fail")
    expect(right.locator(".example-message")).to_have_text("expected pass, got fail (reward 0.00)")
    expect(right.locator(".example-changed")).to_have_text("changed: was “as expected” on v1")
    expect(example_row(page, "stops at two")).not_to_have_attribute("data-changed", "1")
    gate = page.locator('#gates tr[data-gate="examples"]')
    expect(gate).to_have_attribute("data-status", "fail")
    expect(gate).to_contain_text("counts to three: expected pass, got fail")
    page.set_viewport_size({"width": 1280, "height": 900})
    section.scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOT, full_page=True)

    page.goto(f"{live_server.url}/tasks/count-to-three/diff/?a=1&b=2")
    expect(page.locator("#example-changes")).to_contain_text("1 example answer changed verdict between v1 and v2")
    expect(page.locator("#example-changes")).to_contain_text("1 added in v2.")
    changed = page.locator('#example-changes tr[data-changed="1"]')
    expect(changed).to_have_count(1)
    expect(changed).to_contain_text("counts to three")
    expect(changed).to_contain_text("not as expected")
    assert ExampleRun.objects.filter(task_version__task__slug="count-to-three", status="done").count() == 2
