"""Hack probes from the web: the Preview form and the API start them, a worker runs them
through the real runtime (bubblewrap), and the demo coding task, whose tests are
protected, gives the skip trick nothing."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from authoring.models import Task
from sandbox import services, worker
from sandbox.runtime.hack_probes import HACKS

pytestmark = [pytest.mark.bubblewrap]


def previews_url(version):
    return f"/api/tasks/{version.task.slug}/versions/{version.number}/previews/"


def test_the_api_starts_a_hack_probe_and_refuses_an_unknown_one(api, version):
    response = api.post(previews_url(version), {"policy": "hack:skip-tests", "n": 1}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["policy"] == "hack:skip-tests"
    bad = api.post(previews_url(version), {"policy": "hack:teleport", "n": 1}, format="json")
    assert bad.status_code == 400 and "skip-tests" in bad.json()["error"]["message"]
    assert "/policy" in [d["pointer"] for d in bad.json()["error"]["details"]]


def test_the_preview_form_offers_every_hack(client, author, version):
    client.force_login(author)
    page = client.get(f"/tasks/{version.task.slug}/").content.decode()
    for name in HACKS:
        assert f'value="hack:{name}"' in page


def test_the_skip_trick_earns_nothing_on_the_demo_coding_task(sandbox_dir, author, settings):
    settings.OPENAI_BASE_URL = ""
    call_command("load_demo", owner=author.username)
    version = Task.objects.get(slug="fizzbuzz-implementation").latest_version
    assert {f["path"]: f.get("role") for f in version.spec["files"]}["test_fizzbuzz.py"] == "protected"
    preview_run = services.preview_run_create(task_version=version, user=author, policy="hack:skip-tests", n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.status == "done" and rollout.reward == 0 and rollout.passed is False, rollout.error
    assert rollout.grade.document["protected_files"] == [{"path": "test_fizzbuzz.py", "state": "modified"}]
    shown = {f["path"]: f.get("content") or "" for f in rollout.workspace_files}
    assert "_gw_unittest.skip" in shown["test_fizzbuzz.py"]  # the viewer shows what the agent did


def test_the_rollout_page_says_which_protected_files_the_agent_changed(client, author, version):
    from sandbox.models import Rollout

    preview_run = services.preview_run_create(task_version=version, user=author, policy="hack:skip-tests", n=1)
    rollout = preview_run.rollouts.get()
    from grading.services import grade_from_document, grade_record

    grade = grade_record(
        grade=grade_from_document(
            {
                "schema": "gymwright.grade/v1",
                "reward": 0.0,
                "earned": 0,
                "max": 4,
                "passed": False,
                "gated": True,
                "complete": True,
                "checks": [],
                "protected_files": [{"path": "test_a.py", "state": "modified"}, {"path": "b.py", "state": "unchanged"}],
            }
        ),
        task_version=version,
        source="rollout",
        rollout_id=rollout.pk,
    )
    Rollout.objects.filter(pk=rollout.pk).update(status="done", reward=0.0, passed=False, grade=grade)
    client.force_login(author)
    page = client.get(f"/previews/rollouts/{rollout.pk}/").content.decode()
    assert 'data-protected-state="modified">modified by the agent, restored before the checks' in page
    assert 'data-protected-state="unchanged">unchanged<' in page
