"""The rubric copilot in the task editor: accept one suggestion, edit another, keep one degraded answer as an
example answer expected to fail, save a new version."""

from __future__ import annotations

import json

import pytest

from authoring import services
from grading.models import ModelEndpoint
from tests.e2e.conftest import wait_for_editor
from tests.support.copilot_model import DEGRADED_REPLY, PROMPT, REFERENCE, rope_script
from tests.support.openai_server import OpenAIServer


@pytest.fixture
def task(author, environment):
    return services.task_create(
        slug="rope-length",
        environment=environment,
        author=author,
        content={
            "title": "Rope length",
            "prompt": PROMPT,
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "checks": [{"id": "mentions_rope", "kind": "string_match", "points": 1, "expected": "rope"}],
            },
            "solution": {"script": None, "answer": REFERENCE},
        },
    )


def test_the_author_accepts_one_suggestion_edits_another_and_saves(watched, live_server, task, settings, tmp_path):
    settings.JUDGE_CACHE_DIR = tmp_path / "judge-cache"
    settings.OPENAI_BASE_URL = ""
    page = watched
    with OpenAIServer(handler=rope_script()) as server:
        ModelEndpoint.objects.create(
            name="judge", role="judge", base_url=server.base_url, model="copilot-test", is_default=True
        )
        page.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
        wait_for_editor(page)
        page.click("#copilot-draft")
        page.wait_for_selector("#copilot-suggestions li")
        assert "passed their tests" in page.text_content("#copilot-status")
        rows = {
            row.get_attribute("data-check-id"): row
            for row in page.query_selector_all("#copilot-suggestions li.copilot-suggestion")
        }
        assert not rows["says_meters"].query_selector(".copilot-accept").is_checked()  # marked: passes the echo
        # keep only length_42 as drafted, and says_meters edited to something the echo does not pass
        for check_id, row in rows.items():
            box = row.query_selector(".copilot-accept")
            if box.is_checked() != (check_id in ("length_42", "says_meters")):
                box.click()
        edited = {"id": "says_42_meters", "kind": "string_match", "points": 3, "expected": "42 meters"}
        rows["says_meters"].query_selector(".copilot-check").fill(json.dumps(edited))
        page.click("#copilot-add")
        assert "2 checks added" in page.text_content("#copilot-status")
        # the degraded answers the checks were tested on: keep the first as an example answer expected to fail
        examples = page.query_selector_all("#copilot-example-list li.copilot-example")
        assert len(examples) == len(DEGRADED_REPLY["answers"]) >= 2
        for row in examples[1:]:
            row.query_selector(".copilot-example-accept").click()
        page.click("#copilot-add-examples")
        assert "1 answers added" in page.text_content("#copilot-status")
        assert task.versions.count() == 1  # nothing saved before the author saves
        page.click("#save-button")
        page.wait_for_url(f"{live_server.url}/tasks/{task.slug}/")
    version = task.versions.order_by("-number").first()
    assert version.number == 2
    ids = [check["id"] for check in version.spec["rubric"]["checks"]]
    assert ids == ["mentions_rope", "length_42", "says_42_meters"]
    assert version.spec["rubric"]["checks"][2] == edited
    kept = DEGRADED_REPLY["answers"][0]
    saved = [(e["name"], e["answer"], e["expect"]) for e in version.spec["examples"]]
    assert saved == [(f"copilot: {kept['name']}", kept["answer"], "fail")]
