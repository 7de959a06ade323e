"""The editor's validation and the server agree (real headless Chromium): the status never says "Valid" for a
rubric a save refuses — one without a check that can earn a reward, a regex that does not compile in Python —
and a refused save opens with a summary at the top that links to each error."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from authoring.models import Task
from tests.e2e.conftest import TIMEOUT_MS, wait_for_editor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

# Every text the status line takes, recorded as it changes (no sampling, no timing).
STATUS_RECORDER = """
window.__statuses = [];
document.addEventListener("DOMContentLoaded", () => {
  const status = document.getElementById("rubric-status");
  if (!status) return;
  new MutationObserver(() => window.__statuses.push(status.textContent)).observe(
    status, { childList: true, characterData: true, subtree: true });
});
"""
REFUSED = [
    ({"schema": "gymwright.rubric/v1", "checks": []}, "/checks", "no check with positive points"),
    (
        {"schema": "gymwright.rubric/v1", "checks": [{"id": "open", "kind": "regex", "points": 1, "pattern": "("}]},
        "/checks/0/pattern",
        "regular expression does not compile",
    ),
    (
        {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "n", "kind": "number", "points": 1, "expected": 3, "extract": "(?P<x"}],
        },
        "/checks/0/extract",
        "regular expression does not compile",
    ),
]


def test_the_status_never_says_valid_for_a_rubric_the_server_refuses(logged_in, live_server, environment):
    page = logged_in
    page.context.add_init_script(STATUS_RECORDER)
    page.goto(f"{live_server.url}/tasks/new/")
    wait_for_editor(page)
    page.click("button[data-view=raw]")
    expect(page.locator("#rubric-status")).to_have_text("Valid · 1 check · 1 point")  # the starter, checked
    for rubric, pointer, words in REFUSED:
        page.evaluate("window.__statuses = []")
        page.fill("#rubric-json", json.dumps(rubric, indent=2))
        issue = page.locator(f'#rubric-errors li[data-pointer="{pointer}"]')
        expect(issue).to_contain_text(words)
        expect(page.locator("#rubric-status")).to_have_text("1 error")
        shown = page.evaluate("window.__statuses")
        assert not [text for text in shown if text.startswith("Valid")], (rubric, shown)
        # and the server refuses it on save, as the editor said
    page.fill("#rubric-json", json.dumps({"schema": "gymwright.rubric/v1", "checks": [REFUSED[1][0]["checks"][0]]}))
    page.fill("#id_slug", "refused")
    page.fill("#id_title", "Refused")
    page.fill("#id_prompt", "Say 42.")
    with page.expect_navigation():
        page.get_by_role("button", name="Create task").click()
    assert not Task.objects.filter(slug="refused").exists()
    expect(page.locator("#error-summary")).to_contain_text("regular expression does not compile")

    # A rubric the server takes: "Valid" comes only once the server has said so.
    wait_for_editor(page)
    page.click("button[data-view=raw]")
    expect(page.locator("#rubric-status")).to_have_text("1 error")
    page.evaluate("window.__statuses = []")
    good = {"schema": "gymwright.rubric/v1", "checks": [{"id": "open", "kind": "regex", "points": 1, "pattern": "(4)"}]}
    page.fill("#rubric-json", json.dumps(good, indent=2))
    expect(page.locator("#rubric-status")).to_have_text("Valid · 1 check · 1 point")
    shown = page.evaluate("window.__statuses")
    assert "Checking…" in shown and shown[-1] == "Valid · 1 check · 1 point", shown


def test_a_refused_save_opens_with_a_summary_linking_to_each_error(logged_in, live_server, environment):
    page = logged_in
    page.goto(f"{live_server.url}/tasks/new/")
    wait_for_editor(page)
    page.fill("#id_slug", "Not A Slug")
    page.fill("#id_prompt", "Say 42.")
    page.fill("#examples-json", "[{")
    with page.expect_navigation():
        page.get_by_role("button", name="Create task").click()
    summary = page.locator("#error-summary")
    expect(summary).to_be_focused()
    expect(summary).to_contain_text("The task was not created: 3 fields to fix.")
    for name in ("slug", "title", "examples"):
        expect(summary.locator(f'a[data-field="{name}"]')).to_have_attribute("href", f"#field-{name}")
    # Everything is said in one round: the example answers' error beside the others.
    expect(summary.locator("li")).to_have_count(3)
    summary.locator('a[data-field="title"]').click()
    expect(page.locator("#id_title")).to_be_focused()
    box = page.locator("#error-summary").bounding_box()
    assert box is not None and box["y"] < page.locator("#task-form").bounding_box()["y"]  # above the form
