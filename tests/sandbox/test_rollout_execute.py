"""A rollout executed in this process through the real runtime (bubblewrap), with the model
policy and the judge talking to a local OpenAI-protocol server."""

from __future__ import annotations

import json

import pytest

from grading.models import ModelEndpoint
from sandbox import services, worker
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import RUBRIC, make_task
from tests.support.openai_server import OpenAIServer, tool_call

pytestmark = [pytest.mark.bubblewrap]

JUDGED_RUBRIC = {
    **RUBRIC,
    "checks": [
        *RUBRIC["checks"],
        {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "The answer is a number."},
    ],
}


def agent_and_judge(server_box: dict):
    """The policy model writes answer.txt, then submits; the judge says met."""

    def handler(body):
        if body["model"] == "judge-model":
            return '{"met": true, "explanation": "42 is a number"}'
        tool_turns = sum(1 for m in body["messages"] if m["role"] == "tool")
        if tool_turns == 0:
            return {
                "content": "Let me write it.",
                "tool_calls": [tool_call("bash", {"command": "echo 42 > answer.txt"})],
            }
        return {"content": None, "tool_calls": [tool_call("submit", {"answer": "six times seven is 42"})]}

    return handler


def test_a_model_preview_runs_the_agent_in_a_sandbox_and_grades_it_with_the_judge(sandbox_dir, author):
    task = make_task(author=author, slug="judged", rubric=JUDGED_RUBRIC)
    with OpenAIServer() as server:
        server.handler = agent_and_judge({})
        ModelEndpoint.objects.create(
            name="agent",
            role="policy",
            base_url=server.base_url,
            model="policy-model",
            api_key_env="",
            default_params={"temperature": 0},
        )
        ModelEndpoint.objects.create(
            name="judge", role="judge", base_url=server.base_url, model="judge-model", api_key_env=""
        )
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="model", n=1)
        rollout = preview_run.rollouts.get()
        assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.status == "done" and rollout.passed is True and rollout.reward == 1.0, rollout.error
    assert rollout.steps == 2 and rollout.answer == "six times seven is 42"
    assert rollout.prompt_tokens > 0 and rollout.completion_tokens > 0
    assert {f["path"]: f["content"] for f in rollout.workspace_files}["answer.txt"] == "42\n"
    rows = {row.check_id: row for row in rollout.grade.check_results.all()}
    assert rows["explains"].status == "scored" and rows["explains"].awarded == 2
    policy_requests = [r for r in server.requests if r["model"] == "policy-model"]
    assert len(policy_requests) == 2 and policy_requests[0]["temperature"] == 0
    assert any(t["function"]["name"] == "bash" for t in policy_requests[0]["tools"])
    calls = [c["name"] for step in rollout.trajectory if step.get("role") == "assistant" for c in step["tool_calls"]]
    assert calls == ["bash", "submit"]


def test_without_a_judge_the_judged_check_is_unscored_and_the_reward_is_its_lower_bound(
    sandbox_dir, author, settings, client
):
    settings.OPENAI_BASE_URL = ""
    task = make_task(author=author, slug="judged", rubric=JUDGED_RUBRIC)
    preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    document = rollout.grade.document
    assert document["complete"] is False and rollout.reward == document["reward"] < 1.0
    assert document["reward_upper"] == 1.0 and rollout.passed is False  # an incomplete grade never passes
    judged = rollout.grade.check_results.get(check_id="explains")
    assert judged.status == "unscored" and "judge" in judged.explanation.lower()
    # the preview page's tiles: no pass, and that it is incomplete
    client.force_login(author)
    page = client.get(f"/previews/{preview_run.pk}/").content.decode()
    assert 'id="preview-incomplete"' in page and "1 incomplete" in page
    progress = client.get(f"/api/previews/{preview_run.pk}/").json()["progress"]
    assert progress["passed"] == 0 and progress["incomplete"] == 1


def test_a_model_api_failure_is_retried_once_then_reported(
    sandbox_dir, author, enqueued, django_capture_on_commit_callbacks
):
    from tests.support.openai_server import Reply

    task = make_task(author=author, slug="flaky-model")
    with OpenAIServer(default=Reply(status=503)) as server:
        ModelEndpoint.objects.create(name="agent", role="policy", base_url=server.base_url, model="m", api_key_env="")
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="model", n=1)
        rollout = preview_run.rollouts.get()
        with django_capture_on_commit_callbacks(execute=True):
            assert worker.rollout_execute(rollout_id=rollout.pk) == "requeued"
        assert [r for r, _ in enqueued] == [rollout.pk]
        assert worker.rollout_execute(rollout_id=rollout.pk) == "error"
    rollout.refresh_from_db()
    assert rollout.status == "error" and "503" in rollout.error and rollout.attempts == 2


def test_a_result_that_cannot_be_stored_ends_the_rollout_as_an_error_saying_why(sandbox_dir, author, monkeypatch):
    """The last resort when storing fails: the rollout is failed with the storage error, never left running."""

    def refuse(**_):
        raise ValueError("the store said no")

    task = make_task(author=author, slug="unstorable")
    preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    monkeypatch.setattr(worker, "_rollout_store", refuse)
    assert worker.rollout_execute(rollout_id=rollout.pk) == "error"
    rollout.refresh_from_db()
    assert rollout.status == "error" and rollout.error.startswith("could not store the result: ")
    assert "the store said no" in rollout.error and rollout.reward is None


def test_a_running_rollout_stops_when_its_preview_is_cancelled(sandbox_dir, author, transactional_db, enqueued):
    from tests.support.openai_server import Reply

    task = make_task(author=author, slug="long-agent")
    state = {}

    def handler(body):
        # The user presses Cancel while the agent is working (another connection: the web request).
        from django.db import connection

        PreviewRun.objects.filter(pk=state["preview_run"]).update(cancel_requested=True)
        connection.close()  # this server thread's own connection
        return Reply(tool_calls=[tool_call("bash", {"command": "echo working"})], delay=0.3)  # a model takes time

    with OpenAIServer(handler=handler) as server:
        ModelEndpoint.objects.create(name="agent", role="policy", base_url=server.base_url, model="m", api_key_env="")
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="model", n=1)
        state["preview_run"] = preview_run.pk
        rollout = preview_run.rollouts.get()
        assert worker.rollout_execute(rollout_id=rollout.pk) == "cancelled"
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.CANCELLED and rollout.steps <= 2 and rollout.grade is None
    assert server.calls <= 2  # it stopped at the next poll, well before max_steps
    preview_run.refresh_from_db()
    assert preview_run.status == "cancelled"


def test_the_reference_solution_files_reach_the_sandbox(sandbox_dir, author):
    from authoring.services import blob_store

    blob = blob_store(data=b"6\n7\n")
    task = make_task(
        author=author,
        slug="with-files",
        script='python3 -c "print(6*7)" > answer.txt && cat numbers.txt',
        files=[{"path": "numbers.txt", "sha256": blob.sha256}],
    )
    preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    files = {f["path"]: f["content"] for f in rollout.workspace_files}
    assert files["numbers.txt"] == "6\n7\n" and rollout.passed, json.dumps(rollout.trajectory)[:2000]


def test_a_worker_reads_a_versions_files_from_storage_once_and_never_an_oversized_one_again(
    author, django_assert_num_queries
):
    """A blob's bytes never change for its sha256: a worker keeps the last ones it read (worker.task_files)."""
    from authoring.services import blob_store

    small, large = blob_store(data=b"6\n7\n"), blob_store(data=b"x" * 300)
    task = make_task(
        author=author,
        slug="files-kept",
        files=[{"path": "numbers.txt", "sha256": small.sha256}, {"path": "big.txt", "sha256": large.sha256}],
    )
    worker._blob_cache.clear()
    original = worker._blob_cache.max_size, worker._blob_cache.max_value
    worker._blob_cache.max_size, worker._blob_cache.max_value = 1000, 250  # a quarter: under the large file's 300
    try:
        files, _ = worker.task_files(task.latest_version)
        assert files == {"numbers.txt": b"6\n7\n", "big.txt": b"x" * 300}
        with django_assert_num_queries(1):  # the large one only
            assert worker.task_files(task.latest_version)[0] == files
        for name in ("a", "b", "c", "d"):  # 4 + 4 x 240 bytes: all kept
            worker._blob_cache_put(name, b"y" * 240)
        assert worker._blob_cache_get(small.sha256) == b"6\n7\n"
        worker._blob_cache_put("e", b"y" * 240)  # past 1000 bytes: the least recently used go
        assert worker._blob_cache_get("a") is None and worker._blob_cache_get("e") is not None
    finally:
        worker._blob_cache.max_size, worker._blob_cache.max_value = original
        worker._blob_cache.clear()


@pytest.mark.docker
def test_a_docker_preview_runs_in_a_container_and_leaves_none_behind(author, settings):
    from tests.support.images import busybox_image
    from tests.support.services import require_docker

    client = require_docker()
    settings.SANDBOX_IMAGE = busybox_image(client)  # the environment names no image: the deployment's default
    settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap", "docker"]
    task = make_task(author=author, slug="in-docker")
    from sandbox.runtime.backends.docker import owner_id

    mine = {"label": f"gymwright.owner={owner_id()}"}  # containers this process starts carry its host:pid
    assert client.containers.list(all=True, filters=mine) == []
    preview_run = services.preview_run_create(
        task_version=task.latest_version, user=author, policy="oracle", n=1, backend="docker"
    )
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.passed is True and rollout.reward == 1.0, rollout.error
    assert client.containers.list(all=True, filters=mine) == []


def test_a_judge_rubric_calls_the_same_models_in_a_dry_run_and_in_a_preview(sandbox_dir, author, settings):
    """One judge client factory: the rubric's judge and a check's own judge endpoint, each with its own
    endpoint's max_tokens, are called the same way whether an author dry-runs or previews."""
    from grading import services as grading_services

    settings.JUDGE_CACHE_DIR = None  # the preview must ask the model again, not read the dry run's verdicts
    rubric = {
        **RUBRIC,
        "judge": {"model": "strict-judge"},
        "checks": [
            *RUBRIC["checks"],
            {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "The answer is a number."},
            {
                "id": "second_opinion",
                "kind": "llm_judge",
                "points": 1,
                "criterion": "The answer is 42.",
                "model": "second-judge",
            },
        ],
    }
    task = make_task(author=author, slug="two-judges", rubric=rubric)
    with OpenAIServer(default='{"met": true, "explanation": "fine"}') as server:
        ModelEndpoint.objects.create(
            name="strict-judge",
            role="judge",
            base_url=server.base_url,
            model="strict-model",
            api_key_env="",
            default_params={"max_tokens": 77},
        )
        ModelEndpoint.objects.create(
            name="second-judge",
            role="judge",
            base_url=server.base_url,
            model="second-model",
            api_key_env="",
            default_params={"max_tokens": 33},
        )

        outcome = grading_services.dry_run_start(
            rubric_text=json.dumps(rubric), answer="42", user=author, task=task, task_version=task.latest_version
        )
        assert outcome.dry_run is not None
        dry_run = grading_services.dry_run_grade(dry_run_id=outcome.dry_run.pk)
        assert dry_run.status == "done", dry_run.error
        dry_run_calls = sorted((r["model"], r.get("max_tokens")) for r in server.requests)
        server.reset()

        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=1)
        rollout = preview_run.rollouts.get()
        assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
        preview_calls = sorted((r["model"], r.get("max_tokens")) for r in server.requests)
    assert dry_run_calls == [("second-model", 33), ("strict-model", 77)]
    assert preview_calls == dry_run_calls
    rollout.refresh_from_db()
    assert rollout.grade.document["complete"] is True and rollout.passed is True


def test_cancel_during_a_long_command_kills_it_and_removes_the_sandbox(sandbox_dir, author, transactional_db, enqueued):
    import threading

    task = make_task(author=author, slug="sleepy-agent")
    state = {}

    def press_cancel():
        from django.db import connection

        PreviewRun.objects.filter(pk=state["preview_run"]).update(cancel_requested=True)
        connection.close()

    def handler(body):
        # The agent starts a command that would run for ten minutes; the user cancels a second later.
        threading.Timer(1.0, press_cancel).start()
        return {"content": None, "tool_calls": [tool_call("bash", {"command": "sleep 600; echo finished"})]}

    with OpenAIServer(handler=handler) as server:
        ModelEndpoint.objects.create(name="agent", role="policy", base_url=server.base_url, model="m", api_key_env="")
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="model", n=1)
        state["preview_run"] = preview_run.pk
        rollout = preview_run.rollouts.get()
        assert worker.rollout_execute(rollout_id=rollout.pk) == "cancelled"
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.CANCELLED and server.calls == 1
    tool = next(step for step in rollout.trajectory if step.get("role") == "tool")
    assert "cancelled" in tool["content"] and "finished" not in tool["content"]
    assert not tool["exec"]["timed_out"] and tool["exec"]["exit_code"] is None
    assert not [entry for entry in sandbox_dir.iterdir() if entry.name.startswith("gw-")]  # the sandbox is gone


def test_files_the_snapshot_left_out_are_listed_on_the_rollout_and_fail_their_checks(
    sandbox_dir, author, settings, client
):
    from django.urls import reverse

    settings.SANDBOX_SNAPSHOT_MAX_MB = 1
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "answer_file", "kind": "file_content", "path": "answer.txt", "points": 1, "contains": "42"},
            {"id": "huge_file", "kind": "file_content", "path": "huge.bin", "points": 1, "contains": "x"},
        ],
    }
    task = make_task(
        author=author,
        slug="sparse-agent",
        rubric=rubric,
        limits={"workspace_mb": 600},
        script="echo 42 > answer.txt && truncate -s 500M huge.bin",
    )
    preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    listing = {entry["path"]: entry for entry in rollout.workspace_files}
    assert listing["answer.txt"]["content"] == "42\n" and not listing["answer.txt"].get("left_out")
    assert listing["huge.bin"]["size"] == 500 * 1024 * 1024 and "snapshot size limit" in listing["huge.bin"]["left_out"]
    checks = {row.check_id: row for row in rollout.grade.check_results.all()}
    assert checks["answer_file"].status == "scored" and checks["answer_file"].awarded == 1
    assert checks["huge_file"].status == "scored" and checks["huge_file"].score == 0.0
    assert "left out" in checks["huge_file"].explanation
    client.force_login(author)
    page = client.get(reverse("sandbox:rollout_detail", args=[rollout.pk])).content.decode()
    assert "Left out of the workspace snapshot: snapshot size limit" in page
