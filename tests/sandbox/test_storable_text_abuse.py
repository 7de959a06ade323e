"""An agent cannot turn its rollout into an error with text the database refuses (issue 27, hole 1).

Files named with invalid UTF-8, lone surrogates and NULs in its answer, its turns and its tool output: PostgreSQL's
jsonb refuses a lone surrogate or \\u0000, a text column a NUL, UTF-8 a lone surrogate (the next request to the
model too). The rollout is stored with its grade, on both backends, names readable (escaped bytes) and recoverable
(raw_name_b64), and the page and the API show it."""

from __future__ import annotations

import base64
import json

import pytest

from grading import engine
from grading.models import ModelEndpoint
from grading.services import grade_record
from sandbox import services, worker
from tests.sandbox.factories import make_task
from tests.support.openai_server import OpenAIServer, tool_call

BAD = "\ud800 lone \udcff escaped \x00 nul"
SHOWN = "\\ud800 lone \\udcff escaped \\u0000 nul"  # how it is stored and shown
COMMAND = (
    "printf x > \"$(printf 'a\\377b')\"; mkdir -p \"$(printf 'd\\376')\"; "
    "{ head -c 9000 /dev/zero | tr '\\000' y; printf '\\000z'; } > \"$(printf 'd\\376')/f\"; "
    "printf 'out \\377 \\000 end'; echo 42 > answer.txt"
)


def agent(body):
    tool_turns = sum(1 for message in body["messages"] if message["role"] == "tool")
    if tool_turns == 0:
        return {"content": f"writing {BAD}", "tool_calls": [tool_call("bash", {"command": COMMAND})]}
    if tool_turns == 1:  # a command, a file and its name holding lone surrogates: told, not a crash
        return {
            "content": None,
            "tool_calls": [
                tool_call("bash", {"command": f"echo '{BAD}'"}),
                tool_call("bash", {"command": "echo '\x00'"}),
                tool_call("write_file", {"path": f"w{BAD}", "content": BAD}),
                tool_call("read_file", {"path": "r\udcff"}),
            ],
        }
    return {"content": BAD, "tool_calls": [tool_call("submit", {"answer": f"42 {BAD}"})]}


@pytest.fixture(params=["bubblewrap", "docker"])
def backend_name(request, settings, sandbox_dir):
    if request.param == "docker":
        from tests.support.images import busybox_image
        from tests.support.services import require_docker

        settings.SANDBOX_IMAGE = busybox_image(require_docker())
        settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap", "docker"]
    return request.param


def test_a_rollout_with_unstorable_names_and_text_is_stored_readably(backend_name, author, client, api):
    task = make_task(author=author, slug="odd-names")
    with OpenAIServer() as server:
        server.handler = agent
        ModelEndpoint.objects.create(
            name="agent", role="policy", base_url=server.base_url, model="policy-model", api_key_env=""
        )
        preview_run = services.preview_run_create(
            task_version=task.latest_version, user=author, policy="model", n=1, backend=backend_name
        )
        rollout = preview_run.rollouts.get()
        assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    # graded as any rollout: the odd text neither errs the rollout nor leaves its grade behind
    assert rollout.status == "done" and rollout.reward == 1.0 and rollout.grade is not None, rollout.error
    assert rollout.answer == f"42 {SHOWN}"
    files = {entry["path"]: entry for entry in rollout.workspace_files}
    assert files["a\\xffb"]["content"] == "x"
    assert base64.b64decode(files["a\\xffb"]["raw_name_b64"]) == b"a\xffb"
    assert base64.b64decode(files["d\\xfe/f"]["raw_name_b64"]) == b"d\xfe/f"
    assert files["d\\xfe/f"]["content"] == "y" * 9000 + "\\u0000z"  # a NUL past the first 8 KB: text still
    assert "raw_name_b64" not in files["answer.txt"] and not any("left_out" in entry for entry in files.values())
    steps = rollout.trajectory
    assert steps[2]["content"] == f"writing {SHOWN}"
    outputs = [step["content"] for step in steps if step["role"] == "tool"]
    assert "out \ufffd \\u0000 end" in outputs[0]
    assert outputs[1].startswith("error: the arguments of bash hold a lone surrogate"), outputs[1]
    assert outputs[2].startswith("error: the command holds a NUL character"), outputs[2]
    assert outputs[3].startswith("error: the arguments of write_file hold a lone surrogate"), outputs[3]
    assert outputs[4].startswith("error: the arguments of read_file hold a lone surrogate"), outputs[4]
    stored = json.dumps([rollout.trajectory, rollout.workspace_files, rollout.answer, rollout.grade.document])
    assert "\\u0000" not in stored.replace("\\\\u0000", "") and "\\ud800" not in stored.replace("\\\\ud800", "")

    client.force_login(author)
    page = client.get(f"/previews/rollouts/{rollout.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "a\\xffb" in html and "(name not UTF-8)" in html and f"42 {SHOWN}" in html
    detail = api.get(f"/api/rollouts/{rollout.pk}/")
    assert detail.status_code == 200
    body = detail.json()
    assert body["answer"] == f"42 {SHOWN}"
    assert {entry["path"] for entry in body["workspace_files"]} >= {"a\\xffb", "d\\xfe/f", "answer.txt"}


def test_a_grade_whose_explanations_quote_unstorable_text_is_recorded(version):
    grade = engine.grade(
        engine.parse_rubric(
            {
                "schema": "gymwright.rubric/v1",
                "pass_threshold": 0.5,
                "checks": [{"id": "exact", "kind": "string_match", "points": 1, "mode": "equals", "expected": "42"}],
            }
        ),
        answer=f"41 {BAD}",
    )
    check = grade.checks[0].model_copy(update={"explanation": f"the answer was {BAD}"})
    grade = grade.model_copy(update={"checks": [check]})
    stored = grade_record(grade=grade, task_version=version, source="rollout")
    stored.refresh_from_db()
    row = stored.check_results.get()
    assert row.explanation == f"the answer was {SHOWN}"
    assert stored.document["checks"][0]["explanation"] == f"the answer was {SHOWN}"
