"""The task editor in a real browser: rubric editor, live validation, saving, history and diff."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from authoring.models import Task
from tests.e2e.conftest import TIMEOUT_MS, wait_for_editor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

SCREENSHOT = "/tmp/gymwright-rubric-editor.png"


def card(page, pointer: str):
    return page.locator(f'#rubric-structured .re-card[data-pointer="{pointer}"]')


def field(page, pointer: str):
    """The structured-view field whose errors arrive at `pointer` (e.g. /checks/1/pattern)."""
    return page.locator(f'#rubric-structured .re-field[data-pointer="{pointer}"]')


def rubric_json(page) -> dict:
    return json.loads(page.input_value("#rubric-json"))


def add_check(page, kind: str, list_pointer: str = "/checks") -> None:
    container = page.locator(f'#rubric-structured [data-pointer="{list_pointer}"]')
    container.locator(":scope > .re-add select").select_option(kind)
    container.locator(":scope > .re-add button").click()


def open_new_task_form(page, live_server) -> None:
    page.get_by_role("link", name="New task").click()
    page.wait_for_url(f"{live_server.url}/tasks/new/")
    wait_for_editor(page)


def test_author_builds_a_two_check_rubric_fixes_an_error_and_compares_versions(logged_in, live_server, environment):
    page = logged_in
    open_new_task_form(page, live_server)
    page.fill("#id_slug", "count-to-three")
    page.fill("#id_title", "Count to three")
    page.fill("#id_prompt", "Count from **one** to three and give the last number.")

    # The starter check, through the structured form.
    first = card(page, "/checks/0")
    first.locator("[data-key=id] input").fill("says_three")
    first.locator("[data-key=expected] input").fill("3")
    first.locator("[data-key=points] input").fill("2")

    # A second check through the structured form, first with two mistakes in it.
    add_check(page, "regex")
    second = card(page, "/checks/1")
    expect(second).to_be_visible()
    second.locator("[data-key=id] input").fill("Bad Id")
    second.locator("[data-key=pattern] input").fill("(")

    # The schema error (Ajv, in the browser) at the id field of the second card ...
    id_error = field(page, "/checks/1/id").locator(".field-error")
    expect(id_error).to_have_text(re.compile(r'"Bad Id" is not a check id'))
    # ... and the engine's error (POST /api/rubrics/validate/) at its pattern field.
    pattern_error = field(page, "/checks/1/pattern").locator(".field-error")
    expect(pattern_error).to_have_text(re.compile("regular expression does not compile"))
    expect(second).to_have_class(re.compile(r"\bhas-error\b"))
    expect(field(page, "/checks/1/pattern")).to_have_class(re.compile(r"\bhas-error\b"))
    expect(first).not_to_have_class(re.compile(r"\bhas-error\b"))
    expect(first.locator(".field-error")).to_have_count(0)
    # Both are in the summary list with their pointers, and counted in the status line.
    expect(
        page.locator("#rubric-errors li", has_text="/checks/1/pattern: regular expression does not compile")
    ).to_have_count(1)
    expect(page.locator("#rubric-errors li", has_text="/checks/1/id:")).to_have_count(1)
    expect(page.locator("#rubric-status")).to_have_text(re.compile(r"2 errors"))

    # The JSON that will be submitted follows the structured form keystroke by keystroke.
    assert rubric_json(page)["checks"][1] == {"id": "Bad Id", "kind": "regex", "points": 1, "pattern": "("}

    page.screenshot(path=SCREENSHOT.replace(".png", "-errors.png"), full_page=True)

    # From the JSON tab, an error in the list leads to its field.
    page.click("button[data-view=raw]")
    page.locator("#rubric-errors li", has_text="/checks/1/pattern").click()
    expect(page.locator("#rubric-structured")).to_be_visible()
    expect(field(page, "/checks/1/pattern").locator("input")).to_be_focused()
    expect(field(page, "/checks/1/pattern").locator("input")).to_have_attribute("aria-invalid", "true")

    # Fix both.
    second.locator("[data-key=id] input").fill("has_digits")
    second.locator("[data-key=pattern] input").fill(r"\d+")
    expect(page.locator("#rubric-status")).to_have_text("Valid · 2 checks · 3 points")
    expect(page.locator("#rubric-errors li")).to_have_count(0)
    expect(page.locator("#rubric-structured .field-error")).to_have_count(0)
    assert [c["id"] for c in rubric_json(page)["checks"]] == ["says_three", "has_digits"]

    page.screenshot(path=SCREENSHOT, full_page=True)

    page.get_by_role("button", name="Create task").click()
    page.wait_for_url(f"{live_server.url}/tasks/count-to-three/")
    expect(page.locator(".messages")).to_contain_text("Created count-to-three v1")
    task = Task.objects.get(slug="count-to-three")
    rubric_v1 = task.latest_version.spec["rubric"]
    assert [c["id"] for c in rubric_v1["checks"]] == ["says_three", "has_digits"]
    assert rubric_v1["checks"][1]["pattern"] == r"\d+"

    # Edit: the editor opens on v1's rubric; change the regex check's points and save v2.
    page.goto(f"{live_server.url}/tasks/count-to-three/edit/")
    wait_for_editor(page)
    expect(page.locator("#rubric-status")).to_have_text("Valid · 2 checks · 3 points")
    card(page, "/checks/1").locator("[data-key=points] input").fill("4")
    page.fill("#id_message", "digits matter more")
    expect(page.locator("#rubric-status")).to_have_text("Valid · 2 checks · 6 points")
    page.get_by_role("button", name="Save new version").click()
    page.wait_for_url(f"{live_server.url}/tasks/count-to-three/")
    expect(page.locator(".messages")).to_contain_text("Saved count-to-three v2")

    page.goto(f"{live_server.url}/tasks/count-to-three/versions/")
    rows = page.locator("tr.version-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("digits matter more")

    page.goto(f"{live_server.url}/tasks/count-to-three/diff/?a=1&b=2")
    changed = page.locator("tr.check-diff-changed")
    expect(changed).to_have_count(1)
    expect(changed).to_contain_text("has_digits")
    expect(changed).to_contain_text("points")
    expect(page.locator("tr.check-diff-changed", has_text="says_three")).to_have_count(0)


def test_server_errors_of_a_rejected_save_are_attached_to_their_check_and_field(logged_in, live_server, environment):
    page = logged_in
    # Without the live semantic check, only the server's re-rendered errors can mark the field.
    page.route("**/api/rubrics/validate/", lambda route: route.abort())
    open_new_task_form(page, live_server)
    page.fill("#id_slug", "dupes")
    page.fill("#id_title", "Duplicate ids")
    page.fill("#id_prompt", "Say 42.")
    page.click("button[data-view=raw]")
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "same", "kind": "string_match", "points": 1, "expected": "42"},
            {"id": "same", "kind": "regex", "points": 1, "pattern": "4"},
        ],
    }
    page.fill("#rubric-json", json.dumps(rubric, indent=2))
    with page.expect_navigation():
        page.get_by_role("button", name="Create task").click()  # never blocked by the editor
    wait_for_editor(page)
    assert not Task.objects.filter(slug="dupes").exists()
    server_error = page.locator("#rubric-errors li.server-error")
    expect(server_error).to_have_count(1)
    expect(server_error).to_have_text(re.compile(r"^/rubric/checks/1/id: duplicate check id 'same'"))
    expect(field(page, "/checks/1/id").locator(".field-error")).to_have_text(re.compile("duplicate check id 'same'"))
    expect(card(page, "/checks/1")).to_have_class(re.compile(r"\bhas-error\b"))
    expect(card(page, "/checks/0")).not_to_have_class(re.compile(r"\bhas-error\b"))
    expect(page.locator("#rubric-status")).to_have_text("1 error")
    # Everything typed is still there.
    assert page.input_value("#id_title") == "Duplicate ids"
    assert rubric_json(page) == rubric

    # Renaming the check clears the stale server error.
    card(page, "/checks/1").locator("[data-key=id] input").fill("other")
    expect(page.locator("#rubric-errors li")).to_have_count(0)
    # (the validate endpoint is blocked here: the status says the server did not check it)
    expect(page.locator("#rubric-status")).to_have_text(
        "Valid · 2 checks · 2 points (the server did not check it: a save will)"
    )


def test_json_and_structured_views_stay_in_sync(logged_in, live_server, environment):
    page = logged_in
    open_new_task_form(page, live_server)

    # JSON → structured, including a group with a nested child and an unknown key.
    rubric = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.5,
        "checks": [
            {
                "id": "core",
                "kind": "group",
                "points": 3,
                "aggregate": "any",
                "checks": [{"id": "a", "kind": "string_match", "points": 1, "expected": "42", "colour": "red"}],
            },
            {"id": "judge_it", "kind": "llm_judge", "points": 2, "criterion": "Is polite."},
        ],
    }
    page.click("button[data-view=raw]")
    page.fill("#rubric-json", json.dumps(rubric, indent=2))
    page.click("button[data-view=structured]")
    expect(card(page, "/checks/0/checks/0").locator("[data-key=expected] input")).to_have_value("42")
    expect(field(page, "/checks/0/aggregate").locator("select")).to_have_value("any")
    expect(field(page, "/checks/1/criterion").locator("textarea")).to_have_value("Is polite.")
    # The unknown key is pointed at where it is.
    expect(field(page, "/checks/0/checks/0/colour").locator(".field-error")).to_have_text(
        re.compile("unknown key 'colour'")
    )
    expect(page.locator("#rubric-errors li", has_text="/checks/0/checks/0/colour:")).to_have_count(1)

    # Structured → JSON: change a kind (common keys stay), reorder, remove.
    card(page, "/checks/1").locator("select.re-kind").select_option("string_match")
    check = rubric_json(page)["checks"][1]
    assert check["id"] == "judge_it" and check["points"] == 2 and check["kind"] == "string_match"
    assert "criterion" not in check
    # A string_match needs something to look for (an empty 'expected' is refused at the field).
    expected = field(page, "/checks/1/expected")
    expect(expected.locator(".field-error")).to_contain_text("'expected' is empty")
    expected.locator("input").fill("please")
    card(page, "/checks/1").locator(".re-move-up").click()
    assert [c["id"] for c in rubric_json(page)["checks"]] == ["judge_it", "core"]
    card(page, "/checks/1/checks/0").locator("[data-pointer='/checks/1/checks/0/colour'] button").click()
    assert "colour" not in rubric_json(page)["checks"][1]["checks"][0]

    # Broken JSON: the error says where, the structured view keeps the last good rubric, read-only.
    page.click("button[data-view=raw]")
    text = page.input_value("#rubric-json")
    page.fill("#rubric-json", text.replace('"pass_threshold": 0.5,', '"pass_threshold": 0.5', 1))
    expect(page.locator("#rubric-status")).to_have_text(re.compile(r"JSON syntax error at line 4, column \d+"))
    page.click("button[data-view=structured]")
    expect(page.locator("#rubric-structured .re-banner")).to_contain_text("syntax error (line 4")
    expect(card(page, "/checks/0").locator("[data-key=id] input")).to_have_value("judge_it")
    expect(card(page, "/checks/0").locator("[data-key=id] input")).to_be_disabled()
    assert page.input_value("#rubric-json") != text  # nothing the author typed was overwritten

    page.click("button[data-view=raw]")
    page.fill("#rubric-json", text)
    expect(page.locator("#rubric-status")).to_have_text("Valid · 3 checks · 5 points")
    expect(card(page, "/checks/0").locator("[data-key=id] input")).to_be_enabled()
    expect(page.locator("#rubric-structured .re-banner")).to_be_hidden()


def test_markdown_preview_updates_live_and_drops_scripts(logged_in, live_server, environment):
    page = logged_in
    open_new_task_form(page, live_server)
    page.fill(
        "#id_prompt",
        '# Heading\n\nSome **bold** text.\n\n<script>window.pwned = 1</script>\n<img src=x onerror="window.pwned=2">',
    )
    preview = page.locator("#prompt-preview")
    expect(preview.locator("h1")).to_have_text("Heading")
    expect(preview.locator("strong")).to_have_text("bold")
    expect(preview.locator("script")).to_have_count(0)
    assert "onerror" not in preview.inner_html()
    assert page.evaluate("window.pwned") is None

    page.fill("#id_prompt", "## Changed")
    expect(preview.locator("h2")).to_have_text("Changed")
    expect(preview.locator("h1")).to_have_count(0)


def test_a_rubric_that_does_not_parse_comes_back_in_the_json_tab_with_its_position(logged_in, live_server, environment):
    page = logged_in
    open_new_task_form(page, live_server)
    page.fill("#id_slug", "broken")
    page.fill("#id_title", "Broken rubric")
    page.fill("#id_prompt", "Anything.")
    page.click("button[data-view=raw]")
    page.fill("#rubric-json", '{"schema": "gymwright.rubric/v1",\n "checks": [}')
    expect(page.locator("#rubric-status")).to_have_text("JSON syntax error at line 2, column 13")
    with page.expect_navigation():
        page.get_by_role("button", name="Create task").click()
    wait_for_editor(page)

    expect(page.locator("#rubric-errors li.server-error")).to_contain_text("The rubric is not valid JSON")
    expect(page.locator("#rubric-raw")).to_be_visible()
    expect(page.locator("#rubric-structured")).to_be_hidden()
    expect(page.locator("#rubric-status")).to_have_text("JSON syntax error at line 2, column 13")
    assert page.input_value("#rubric-json") == '{"schema": "gymwright.rubric/v1",\n "checks": [}'
