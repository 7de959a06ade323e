"""Abuse suite for the rubric copilot: the model's reply decides the drafted checks (patterns, paths) and the
author decides what the model reads, so every drafted check is graded under the dry run's bounded child
process, never in the web process, and a hostile draft is stopped and reported, never a 500."""

from __future__ import annotations

import json

import pytest

from authoring.models import AuditEvent
from grading.models import ModelEndpoint
from tests.grading.test_copilot import by_id, client_for, draft, model, script, task  # noqa: F401
from tests.support.copilot_model import JUDGE, request_kind
from tests.support.openai_server import Reply

pytestmark = pytest.mark.django_db

CATASTROPHIC = r"(a+)+$"
EVIL = "a" * 5000 + "!"


def hostile_draft(count: int) -> dict:
    checks = [
        {"weight": "essential", "check": {"id": f"evil_{n}", "kind": "regex", "pattern": CATASTROPHIC}}
        for n in range(count)
    ]
    checks.append({"weight": "optional", "check": {"id": "polite", "kind": "llm_judge", "criterion": "Is polite"}})
    return {"checks": checks}


def test_drafted_patterns_are_graded_outside_the_web_process(author, task, model, script, settings, monkeypatch):
    # A spy on the engine's check evaluation in this (the web) process: a child process's calls never reach it.
    from grading.engine import scoring

    evaluated_here, evaluate = [], scoring.evaluate
    monkeypatch.setattr(scoring, "evaluate", lambda *a, **kw: evaluated_here.append(a[0]) or evaluate(*a, **kw))
    settings.COPILOT_CHECK_CPU_S = 0.2
    script.replies["draft"] = json.dumps(hostile_draft(3))
    script.replies["degrade"] = json.dumps({"answers": [{"name": "aaa", "answer": EVIL, "should_fail": ["evil_0"]}]})
    response = draft(author)
    assert response.status_code == 200, response.content
    checks = by_id(response.json())
    for n in range(3):  # each pattern was graded on the attack, and stopped at its budget ...
        attack = next(r for r in checks[f"evil_{n}"]["results"] if r["answer"] == "aaa")
        assert attack["got"] == "not met" and "budget" in attack["explanation"], attack
    # ... in another process: only the judge's checks (and the grader's placeholder) were evaluated here
    assert {check.kind for check in evaluated_here} <= {"llm_judge", "string_match"}
    assert not [check.id for check in evaluated_here if check.kind != "llm_judge" and check.id != "copilot_placeholder"]
    assert checks["polite"]["results"], "the judge check was graded"


def test_a_draft_over_the_dry_runs_cpu_limit_is_stopped_and_reported(author, task, model, script, settings):
    # Each pattern may take longer than the whole child may: the dry run's process limit stops the batch.
    settings.COPILOT_CHECK_CPU_S = 30
    settings.DRY_RUN_CPU_S = 2
    script.replies["draft"] = json.dumps(hostile_draft(2))
    script.replies["degrade"] = json.dumps({"answers": [{"name": "aaa", "answer": EVIL, "should_fail": ["evil_0"]}]})
    response = draft(author)
    assert response.status_code == 200, response.content
    checks = by_id(response.json())
    for n in range(2):
        check = checks[f"evil_{n}"]
        assert check["status"] == "untested" and not check["preselected"], check
        assert "GYMWRIGHT_DRY_RUN_CPU_S" in check["problems"][0], check["problems"]


def test_every_reply_the_copilot_asks_for_has_a_length_bound(author, task, model, script, settings):
    # A model led on by the prompt or reference could write without end: each request bounds the reply, the
    # endpoint's lower max_tokens kept, a higher one cut to the copilot's.
    settings.COPILOT_MAX_TOKENS = 3000
    response = draft(author)
    assert response.status_code == 200, response.content
    asked = [body for body in model.requests if request_kind(body) != JUDGE]
    assert len(asked) == 3  # the draft, one split, the degraded answers
    assert {body.get("max_tokens") for body in asked} == {3000}

    for own, sent in ((1000, 1000), (50_000, 3000)):
        endpoint = ModelEndpoint.objects.get(name="judge")
        endpoint.default_params = {"max_tokens": own}
        endpoint.save()
        model.requests.clear()
        assert draft(author).status_code == 200
        asked = [body for body in model.requests if request_kind(body) != JUDGE]
        assert asked and {body.get("max_tokens") for body in asked} == {sent}, own


def test_a_model_that_never_answers_the_draft_is_given_up_at_the_deadline(author, task, model, script, settings):
    # The draft runs in the web request: past the deadline gunicorn would kill the worker mid-draft.
    settings.COPILOT_TIMEOUT_S = 5
    settings.COPILOT_DEADLINE_S = 1
    script.replies["draft"] = lambda body: Reply(hang=True)
    response = draft(author)
    assert response.status_code == 504, response.content
    error = response.json()["error"]
    assert error["code"] == "copilot_deadline" and "GYMWRIGHT_COPILOT_DEADLINE_S" in error["message"]
    assert not AuditEvent.objects.filter(verb="rubric_drafted").exists()


def test_checks_the_deadline_leaves_no_time_to_test_are_untested_never_passed(author, task, model, script, settings):
    settings.COPILOT_TIMEOUT_S = 5
    settings.COPILOT_DEADLINE_S = 1.5
    script.replies["degrade"] = lambda body: Reply(hang=True)
    response = draft(author)
    assert response.status_code == 200, response.content
    data = response.json()
    assert any("GYMWRIGHT_COPILOT_DEADLINE_S" in warning for warning in data["warnings"]), data["warnings"]
    assert data["suggestions"] and data["survived"] == 0
    for item in data["suggestions"]:
        assert item["status"] in ("untested", "needs_sandbox") and not item["preselected"], item
        assert "GYMWRIGHT_COPILOT_DEADLINE_S" in " ".join(item["problems"]), item


def test_nul_characters_and_lone_surrogates_in_the_models_reply_are_never_a_server_error(author, task, model, script):
    # PostgreSQL's jsonb refuses U+0000 and UTF-8 a lone surrogate: the reply's are escaped where it comes in.
    script.replies["draft"] = json.dumps(
        {
            "checks": [
                {
                    "weight": "essential",
                    "rationale": "nul\u0000",
                    "check": {"id": "n", "kind": "string_match", "expected": "42\u0000\ud800"},
                },
                {"weight": "essential", "check": {"id": "says_42", "kind": "string_match", "expected": "42"}},
            ]
        }
    )
    script.replies["degrade"] = json.dumps(
        {"answers": [{"name": "x\u0000", "flaw": "f\ud800", "answer": "4\u00002", "should_fail": ["says_42"]}]}
    )
    response = draft(author)
    assert response.status_code == 200, response.content
    checks = by_id(response.json())
    assert checks["n"]["check"]["expected"] == "42\\u0000\\ud800" and checks["n"]["rationale"] == "nul\\u0000"
    assert response.json()["examples"][0]["answer"] == "4\\u00002"
    assert AuditEvent.objects.filter(verb="rubric_drafted").count() == 1


@pytest.mark.parametrize("field", ["prompt", "reference"])
def test_a_lone_surrogate_in_the_authors_input_is_refused_with_its_field(author, task, model, script, field):
    # JSON text with the escape (a client library would refuse to encode the character itself)
    body = '{"%s": "Step 1 \\ud800"}' % field
    response = client_for(author).post("/api/tasks/rope-length/rubric/draft/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"][0]["pointer"] == f"/{field}"
    assert script.seen == {}


def test_two_reference_files_that_are_one_path_are_refused_not_merged(author, task, model, script):
    files = [{"path": "out/report.txt", "content": "42"}, {"path": "out/./report.txt", "content": "48"}]
    response = draft(author, files=files)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_path", response.content
    assert "'out/report.txt'" in response.json()["error"]["message"]
    assert script.seen == {}
