"""The rubric copilot through its API, with the scripted model server: drafts, tests, marks, audits."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from authoring import services as authoring_services
from authoring.models import AuditEvent
from grading.models import ModelEndpoint
from tests.support.copilot_model import DEGRADE, DRAFT, JUDGE, PROMPT, REFERENCE, SPLIT, rope_script
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(author):
    environment = authoring_services.environment_create(
        slug="ropes", name="Ropes", author=author, spec={"network": "none"}
    )
    return authoring_services.task_create(
        slug="rope-length",
        environment=environment,
        author=author,
        content={
            "title": "Rope length",
            "prompt": PROMPT,
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "checks": [{"id": "length_42", "kind": "string_match", "points": 1, "expected": "42"}],
            },
            "solution": {"script": None, "answer": REFERENCE},
        },
    )


@pytest.fixture
def script():
    return rope_script()


@pytest.fixture
def model(script, settings, tmp_path, monkeypatch):
    settings.JUDGE_CACHE_DIR = tmp_path / "judge-cache"
    settings.OPENAI_BASE_URL = ""
    monkeypatch.setenv("GYMWRIGHT_TEST_COPILOT_KEY", "test-key")
    with OpenAIServer(handler=script) as server:
        ModelEndpoint.objects.create(
            name="judge",
            role="judge",
            base_url=server.base_url,
            model="copilot-test",
            api_key_env="GYMWRIGHT_TEST_COPILOT_KEY",
            is_default=True,
        )
        yield server


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def draft(user, slug="rope-length", **body):
    return client_for(user).post(f"/api/tasks/{slug}/rubric/draft/", body, format="json")


def by_id(data: dict) -> dict[str, dict]:
    return {item["check"]["id"]: item for item in data["suggestions"]}


def test_it_drafts_checks_tests_each_and_preselects_only_those_that_discriminate(author, task, model, script):
    response = draft(author, rubric={"checks": [{"id": "length_42"}]})
    assert response.status_code == 200, response.content
    data = response.json()
    checks = by_id(data)
    # the existing rubric's id is not reused; the compound criterion is split; schema-invalid and
    # undrafted kinds are refused with their pointer
    assert set(checks) == {"length_42_2", "says_meters", "polite", "shows_work_1", "shows_work_2", "claims_48"}
    assert [item["pointer"] for item in data["refused"]] == ["/checks/5/check/pattern", "/checks/6/check/kind"]
    assert "does not compile" in data["refused"][0]["message"]

    good = checks["length_42_2"]
    assert good["status"] == "ok" and good["preselected"] and good["check"]["points"] == 5
    assert {(r["answer"], r["got"]) for r in good["results"]} == {
        ("reference", "met"),
        ("empty", "not met"),
        ("echo of the prompt", "not met"),
        ("wrong number", "not met"),
        ("missing steps", "met"),
    }
    # a check the echo of the prompt passes is caught
    assert checks["says_meters"]["problems"] == ["passes the echo of the prompt"]
    assert not checks["says_meters"]["preselected"]
    # a judge check met by every answer does not discriminate
    assert "passes the empty answer" in checks["polite"]["problems"]
    assert any(p.startswith("does not discriminate") for p in checks["polite"]["problems"])
    assert not checks["polite"]["preselected"]
    # the split criterion: two checks sharing the points, each tested
    one, two = checks["shows_work_1"], checks["shows_work_2"]
    assert one["check"]["criterion"] == "Shows the multiplication step"
    assert one["split_from"] == "shows_work" and one["check"]["points"] == 2.5
    assert one["preselected"] and two["preselected"]
    # a pitfall is a penalty, charged on the degraded answer that commits it and not on the reference
    pitfall = checks["claims_48"]
    assert pitfall["weight"] == "pitfall" and pitfall["check"]["points"] == -4 and pitfall["preselected"]
    assert script.seen == {DRAFT: 1, SPLIT: 1, DEGRADE: 1, JUDGE: script.seen[JUDGE]}
    assert data["survived"] == 4
    # degraded answers come back as example answers that should fail
    assert [(e["name"], e["expect"]) for e in data["examples"]] == [
        ("copilot: wrong number", "fail"),
        ("copilot: missing steps", "fail"),
    ]
    # nothing saved but the audit entry, which records the model, the prompt sent and the draft
    task.refresh_from_db()
    assert task.latest_version.number == 1
    event = AuditEvent.objects.get(verb="rubric_drafted")
    assert event.actor == author and event.object_id == task.pk
    assert event.data["model"] == "copilot-test"
    assert PROMPT in event.data["messages"][1]["content"]
    assert {item["check"]["id"] for item in event.data["suggestions"]} == set(checks)


def test_a_degraded_answer_that_a_check_should_fail_but_passes_is_caught(author, task, model, script):
    degraded = json.loads(script.replies[DEGRADE])
    degraded["answers"][1]["should_fail"] = ["length_42"]  # "missing steps" still says 42 meters
    script.replies[DEGRADE] = json.dumps(degraded)
    checks = by_id(draft(author).json())
    assert checks["length_42"]["problems"] == ["passes degraded answer 'missing steps' it should fail"]
    assert not checks["length_42"]["preselected"]


@pytest.mark.parametrize(
    "reply, message",
    [
        ("Sure! Here are some checks: length, units.", "holds no JSON object"),
        ('Here: {"checks": []}', "not exactly one JSON object"),
        ('{"checks": [], "checks": []}', "repeats the key"),
        ('{"checks": "' + "x" * 250_000 + '"}', "over the 200,000"),
        ('{"items": []}', 'no "checks" list'),
    ],
    ids=["prose", "object-in-prose", "repeated-key", "huge", "wrong-shape"],
)
def test_an_unusable_draft_is_refused_with_a_clear_message(author, task, model, script, reply, message):
    script.replies[DRAFT] = reply
    response = draft(author)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "draft_unusable"
    assert message in response.json()["error"]["message"]
    assert not AuditEvent.objects.filter(verb="rubric_drafted").exists()


def test_a_draft_of_only_schema_invalid_checks_is_refused_with_each_reason(author, task, model, script):
    script.replies[DRAFT] = json.dumps(
        {
            "checks": [
                {"weight": "essential", "check": {"kind": "regex", "pattern": "(a"}},
                {"weight": "critical", "check": {"kind": "string_match", "expected": "x"}},
                {"weight": "important", "points": "5", "check": {"kind": "string_match", "expected": "x"}},
                {"weight": "important", "check": {"kind": "string_match", "expected": "x", "rm_rf": True}},
                "not a check",
            ]
        }
    )
    response = draft(author)
    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert [d["pointer"] for d in details] == [
        "/checks/0/check/pattern",
        "/checks/1/weight",
        "/checks/2/points",
        "/checks/3/check/rm_rf",
        "/checks/4",
    ]


def test_a_catastrophic_regex_stops_at_its_time_budget(author, task, model, script, settings):
    settings.COPILOT_CHECK_CPU_S = 0.2
    script.replies[DRAFT] = json.dumps(
        {"checks": [{"weight": "essential", "check": {"id": "redos", "kind": "regex", "pattern": "(a+)+$"}}]}
    )
    script.replies[DEGRADE] = json.dumps(
        {"answers": [{"name": "aaa", "answer": "a" * 15_000 + "!", "should_fail": ["redos"]}]}
    )
    response = draft(author)
    assert response.status_code == 200
    check = by_id(response.json())["redos"]
    assert not check["preselected"] and "fails the reference answer" in check["problems"]
    attack = next(r for r in check["results"] if r["answer"] == "aaa")
    assert attack["got"] == "not met" and "time" in attack["explanation"]


def test_checks_that_need_a_sandbox_are_marked_not_faked(author, task, model, script):
    script.replies[DRAFT] = json.dumps(
        {
            "checks": [
                {"weight": "essential", "check": {"id": "runs", "kind": "command", "run": "python solve.py"}},
                {"weight": "essential", "check": {"id": "says_42", "kind": "string_match", "expected": "42"}},
            ]
        }
    )
    checks = by_id(draft(author).json())
    assert checks["runs"]["status"] == "needs_sandbox" and not checks["runs"]["preselected"]
    assert checks["runs"]["problems"] == ["needs a sandbox run: not tested here"]
    assert checks["says_42"]["status"] == "ok"


def test_file_checks_are_tested_against_the_reference_files(author, task, model, script):
    script.replies[DRAFT] = json.dumps(
        {
            "checks": [
                {
                    "weight": "essential",
                    "check": {"id": "report", "kind": "file_content", "path": "out.txt", "contains": "42"},
                }
            ]
        }
    )
    response = draft(author, files=[{"path": "out.txt", "content": "length: 42\n"}])
    check = by_id(response.json())["report"]
    assert check["route"] == "files"
    assert check["results"][0] == {**check["results"][0], "answer": "reference", "got": "met"}
    assert check["status"] == "ok"


def test_with_no_model_configured_it_says_so_and_drafts_nothing(author, task, settings):
    settings.OPENAI_BASE_URL = ""
    response = draft(author)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "model_not_configured"
    assert not AuditEvent.objects.filter(verb="rubric_drafted").exists()


def test_only_the_tasks_editors_may_draft(task, model, script, other_author, reviewer, lab, admin):
    assert draft(other_author).status_code == 403
    assert draft(reviewer).status_code == 403
    assert draft(lab).status_code == 404  # a lab member does not see drafts at all
    assert APIClient().post("/api/tasks/rope-length/rubric/draft/", {}, format="json").status_code in (401, 403)
    assert script.seen == {}  # refused before the model is asked anything
    assert draft(admin).status_code == 200


def test_input_over_its_bounds_is_refused_before_the_model_is_asked(author, task, model, script, settings):
    settings.COPILOT_INPUT_MAX_CHARS = 200
    response = draft(author, reference="x" * 201)
    assert response.status_code == 400
    assert response.json()["error"]["details"] == [{"pointer": "/reference", "message": "201 characters, at most 200"}]
    response = draft(author, files=[{"path": "../etc/passwd", "content": "x"}])
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_path"
    assert script.seen == {}


def test_the_edit_page_offers_the_copilot_to_the_tasks_editor(author, task, client):
    client.force_login(author)
    page = client.get("/tasks/rope-length/edit/").content.decode()
    assert 'data-draft-url="/api/tasks/rope-length/rubric/draft/"' in page
    assert "js/copilot.js" in page
