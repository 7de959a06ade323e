"""The previews API: start, read, cancel; errors in the single envelope."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from sandbox import services, worker


def previews_url(version):
    return f"/api/tasks/{version.task.slug}/versions/{version.number}/previews/"


def test_start_a_preview_and_read_it_back(api, version):
    response = api.post(previews_url(version), {"policy": "nop", "n": 2}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["policy"] == "nop" and body["n"] == 2 and body["status"] == "queued"
    assert [r["status"] for r in body["rollouts"]] == ["queued", "queued"] and body["progress"]["total"] == 2
    detail = api.get(f"/api/previews/{body['id']}/").json()
    assert detail["id"] == body["id"] and detail["task"] == version.task.slug and detail["version"] == version.number
    listing = api.get(previews_url(version)).json()
    assert [run["id"] for run in listing["results"]] == [body["id"]]


@pytest.mark.parametrize(
    "payload, pointer",
    [
        ({"policy": "nop", "n": 0}, "/n"),
        ({"policy": "nop", "n": 65}, "/n"),
        ({"policy": "nop"}, "/n"),
        ({"policy": "teleport", "n": 1}, "/policy"),
        ({"n": 1}, "/policy"),
    ],
)
def test_bad_input_answers_in_the_error_envelope_with_a_pointer(api, version, payload, pointer):
    response = api.post(previews_url(version), payload, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] and pointer in [d["pointer"] for d in error["details"]]


def test_a_rollout_answers_with_trajectory_and_grade(sandbox_dir, api, version, author, monkeypatch):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    run_in_sandbox, graded = worker._run_in_sandbox, []
    monkeypatch.setattr(  # a spy: the engine's own grade document, as the real rollout returned it
        worker, "_run_in_sandbox", lambda **kw: graded.append(run_in_sandbox(**kw)) or graded[-1]
    )
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"  # a real bubblewrap rollout
    body = api.get(f"/api/rollouts/{rollout.pk}/").json()
    assert body["status"] == "done" and body["reward"] == 1.0 and body["passed"] is True
    assert body["trajectory"][2]["tool_calls"][0]["name"] == "bash" and body["answer"] == "42"
    assert body["grade"]["schema"] == "gymwright.grade/v1" and body["grade_id"] is not None
    assert body["grade"] == graded[0].grade.to_document()  # the engine's document, exactly (one stored copy)
    assert [c["check_id"] for c in body["checks"]] == ["says_42", "report_exists"]
    # One builder of check rows: the rollout's checks are the stored grade's check results, row for row.
    grade = api.get(f"/api/grades/{body['grade_id']}/").json()
    assert grade["check_results"] == body["checks"] and all(row["id"] for row in body["checks"])
    summary = api.get(f"/api/previews/{preview_run.pk}/").json()
    assert summary["status"] == "done" and summary["summary"]["pass_rate"] == 1.0


def test_a_rollout_cancelled_after_it_was_graded_keeps_its_grade(sandbox_dir, api, version, author, monkeypatch):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    run_in_sandbox, graded = worker._run_in_sandbox, []

    def cancelled_while_grading(**kwargs):  # fault injection: the cancel lands after the real rollout was graded
        result = run_in_sandbox(**kwargs)
        graded.append(result.grade.to_document())
        result.error, result.error_kind = "cancelled while grading", "cancelled"
        return result

    monkeypatch.setattr(worker, "_run_in_sandbox", cancelled_while_grading)
    worker.rollout_execute(rollout_id=rollout.pk)
    body = api.get(f"/api/rollouts/{rollout.pk}/").json()
    assert body["status"] == "cancelled" and body["grade"] == graded[0] and graded[0]["passed"] is True
    assert [c["check_id"] for c in body["checks"]] == ["says_42", "report_exists"]


def test_cancel_through_the_api(api, version, author):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="nop", n=3)
    body = api.post(f"/api/previews/{preview_run.pk}/cancel/").json()
    assert body["status"] == "cancelled" and body["cancel_requested"] is True
    assert body["progress"]["counts"]["cancelled"] == 3


def test_previews_are_hidden_from_users_without_a_role_and_from_anonymous_callers(version, author, nobody):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="nop", n=1)
    client = APIClient()
    assert client.get(f"/api/previews/{preview_run.pk}/").status_code in (401, 403)
    client.force_authenticate(nobody)
    for url in (f"/api/previews/{preview_run.pk}/", f"/api/rollouts/{preview_run.rollouts.get().pk}/"):
        response = client.get(url)
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert client.post(previews_url(version), {"policy": "nop", "n": 1}, format="json").status_code == 404
    assert client.post(f"/api/previews/{preview_run.pk}/cancel/").status_code == 404
