"""The dry-run panel (grading app) in a real browser: grades the unsaved rubric from the editor, polls a judge job.

It lives with the other browser tests so that it shares their one Chromium (a session fixture).
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from authoring import services as authoring_services
from grading.models import ModelEndpoint
from tests.e2e.conftest import TIMEOUT_MS, wait_for_editor
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

SAVED_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [{"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"}],
}


@pytest.fixture
def task(author, environment):
    return authoring_services.task_create(
        slug="answer-42",
        environment=environment,
        author=author,
        content={"title": "Answer 42", "prompt": "What is 6 x 7?", "rubric": SAVED_RUBRIC},
    )


def open_editor_with_rubric(page, live_server, rubric: dict) -> None:
    page.goto(f"{live_server.url}/tasks/answer-42/edit/")
    wait_for_editor(page)
    page.click('#rubric-editor [data-view="raw"]')
    page.fill("#rubric-json", json.dumps(rubric, indent=2))  # unsaved: only in the editor


def test_the_panel_grades_the_unsaved_rubric_in_the_editor(logged_in, live_server, task, settings):
    settings.OPENAI_BASE_URL = ""
    page = logged_in
    open_editor_with_rubric(
        page,
        live_server,
        {
            **SAVED_RUBRIC,
            "checks": SAVED_RUBRIC["checks"]
            + [{"id": "has_unit", "kind": "regex", "points": 2, "pattern": r"\bmeters?\b"}],
        },
    )

    page.fill("#dry-run-answer", "It is 42.")
    page.click("[data-dry-run-submit]")

    result = page.locator("[data-dry-run-result]")
    expect(result.locator("[data-grade-summary]")).to_have_text("3 / 5 points, reward 0.60, not passed")
    expect(result.locator('tr[data-check-id="has_unit"] .badge')).to_have_text("scored")

    page.fill("#rubric-json", '{"schema": "gymwright.rubric/v1", "checks": [{"id": "x", "kind": "regex"}]}')
    page.click("[data-dry-run-submit]")
    expect(result.locator(".dry-run-issues")).to_contain_text("/checks/0")


def test_the_panel_polls_a_judge_job_until_it_is_done(
    logged_in, live_server, task, eager_celery, monkeypatch, tmp_path
):
    monkeypatch.setenv("GYMWRIGHT_TEST_JUDGE_KEY", "test-key")
    page = logged_in
    with OpenAIServer(default='{"met": true, "explanation": "Explains 6 x 7."}') as server:
        ModelEndpoint.objects.create(
            name="judge",
            role="judge",
            base_url=server.base_url,
            model="test-judge",
            api_key_env="GYMWRIGHT_TEST_JUDGE_KEY",
            is_default=True,
        )
        open_editor_with_rubric(
            page,
            live_server,
            {
                **SAVED_RUBRIC,
                "checks": SAVED_RUBRIC["checks"]
                + [
                    {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "Explains why."},
                    {"id": "report", "kind": "file_exists", "points": 1, "path": "out/report.md"},
                ],
            },
        )
        report = tmp_path / "report.md"
        report.write_text("# report\n")
        page.fill("#dry-run-answer", "42, because 6 x 7")
        page.set_input_files("[data-dry-run-files]", str(report))
        page.fill("[data-dry-run-folder]", "out/")
        page.click("[data-dry-run-submit]")

        summary = page.locator("[data-dry-run-result] [data-grade-summary]")
        expect(summary).to_have_text("6 / 6 points, reward 1.00, passed")
        expect(page.locator('[data-dry-run-result] tr[data-check-id="explains"]')).to_contain_text("Explains 6 x 7.")
        assert server.calls == 1


def test_the_panel_is_docked_beside_the_rubric_and_shows_its_shortcut(logged_in, live_server, task):
    page = logged_in  # 1500 px wide
    page.goto(f"{live_server.url}/tasks/answer-42/edit/")
    wait_for_editor(page)
    rubric = page.locator("#rubric-editor").bounding_box()
    panel = page.locator("#dry-run").bounding_box()
    assert panel["x"] >= rubric["x"] + rubric["width"], "the panel is not beside the rubric"
    assert panel["y"] < 400, "the panel is not at the top of the page"
    # Still in view after scrolling to the bottom of a long rubric.
    page.mouse.wheel(0, 3000)
    expect(page.locator("#dry-run-answer")).to_be_in_viewport()
    expect(page.locator("#dry-run .dry-run-shortcut")).to_have_text("or Ctrl+Enter in the answer")
    page.fill("#dry-run-answer", "It is 42.")
    page.press("#dry-run-answer", "Control+Enter")
    expect(page.locator("[data-dry-run-result] [data-grade-summary]")).to_have_text("3 / 3 points, reward 1.00, passed")


def test_at_1280_px_the_panel_is_beside_the_rubric_and_the_prompt_box_is_wide(logged_in, live_server, task):
    page = logged_in
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/tasks/answer-42/edit/")
    wait_for_editor(page)
    rubric = page.locator("#rubric-editor").bounding_box()
    panel = page.locator("#dry-run").bounding_box()
    assert panel["x"] >= rubric["x"] + rubric["width"], "the panel is not beside the rubric"
    assert panel["x"] + panel["width"] <= 1280, "the panel runs off the screen"
    assert panel["y"] < 400, "the panel is not at the top of the page"
    assert page.locator("#id_prompt").bounding_box()["width"] >= 350, "the prompt box is too narrow"
    page.mouse.wheel(0, 3000)
    expect(page.locator("#dry-run-answer")).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # no sideways scroll


def test_the_docked_panel_shows_every_explanation_without_a_sideways_scroll(logged_in, live_server, task, settings):
    settings.OPENAI_BASE_URL = ""
    page = logged_in  # 1500 px wide: docked, 420 px
    open_editor_with_rubric(
        page,
        live_server,
        {
            **SAVED_RUBRIC,
            "checks": SAVED_RUBRIC["checks"]
            + [
                {
                    "id": "has_a_unit_of_length_written_out_in_full",
                    "kind": "regex",
                    "points": 2,
                    "pattern": r"\bmeters?\b",
                }
            ],
        },
    )
    page.fill("#dry-run-answer", "It is 42.")
    page.click("[data-dry-run-submit]")
    result = page.locator("[data-dry-run-result]")
    expect(result.locator("[data-grade-summary]")).to_have_text("3 / 5 points, reward 0.60, not passed")
    panel = page.locator("#dry-run")
    assert page.evaluate("(el) => el.scrollWidth <= el.clientWidth", panel.element_handle()), (
        "the docked panel scrolls sideways"
    )
    box = panel.bounding_box()
    for check_id in ("says_42", "has_a_unit_of_length_written_out_in_full"):
        row = result.locator(f'tr[data-check-id="{check_id}"]')
        explanation = row.locator("td.explanation-cell").bounding_box()
        assert explanation["width"] > 0 and explanation["x"] + explanation["width"] <= box["x"] + box["width"]
        assert row.locator("td.explanation-cell").inner_text().strip(), f"{check_id} has no explanation shown"
    # Each check's line reads "id  status  awarded / points pts", the explanation under it.
    row = result.locator('tr[data-check-id="says_42"]')
    cells = [row.locator(f"td:nth-child({n})") for n in (1, 3, 6, 5, 7)]
    boxes = [cell.bounding_box() for cell in cells]
    assert [round(b["x"]) for b in boxes[:4]] == sorted(round(b["x"]) for b in boxes[:4]), boxes
    assert boxes[4]["y"] >= boxes[0]["y"] + boxes[0]["height"] - 1, "the explanation is not under the check"
    assert (
        page.evaluate(
            "(el) => getComputedStyle(el, '::before').content + getComputedStyle(el, '::after').content",
            cells[3].element_handle(),
        )
        == '"/ "" pts"'
    )
    assert [cell.inner_text().strip() for cell in cells[2:4]] == ["3", "3"]
