"""The agent loop against a real OpenAI-protocol server (tests/support/openai_server.py).

The harness does not depend on the backend, so these run on bubblewrap; the
rollout tests run oracle and nop on both backends.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.runtime import ModelConfig, SandboxSpec, get_backend, make_policy, mcp_tool_definitions, run_rollout
from tests.support.openai_server import OpenAIServer, Reply, tool_call
from tests.support.services import require_bwrap

FIXTURES = Path(__file__).parent / "fixtures"


def load_task(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.task.json").read_text())


def count_lines_files() -> dict[str, bytes]:
    return {"data.txt": (FIXTURES / "files" / "count-lines" / "data.txt").read_bytes()}


@pytest.fixture
def bwrap_backend():
    require_bwrap()
    return get_backend("bubblewrap")


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


def model_policy(server, **kwargs):
    return make_policy(
        "model",
        model_config=ModelConfig(base_url=server.base_url, model="policy-test", api_key="k", max_retries=0, **kwargs),
    )


def rollout(task, server, backend, **kwargs):
    return run_rollout(task, policy=model_policy(server), backend=backend, files=count_lines_files(), **kwargs)


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_model_uses_tools_and_submits(server, bwrap_backend):
    server.queue(
        {
            "content": "Let me look.",
            "tool_calls": [tool_call("bash", {"command": "wc -l < data.txt > count.txt; cat count.txt"})],
        },
        {
            "tool_calls": [
                tool_call("read_file", {"path": "count.txt"}),
                tool_call("write_file", {"path": "notes/n.md", "content": "three"}),
            ]
        },
        {"tool_calls": [tool_call("list_files", {})]},
        {"tool_calls": [tool_call("submit", {"answer": "3"})]},
    )
    result = rollout(load_task("count_lines"), server, bwrap_backend)
    assert result.error is None and result.stop_reason == "submitted"
    assert result.answer == "3" and result.steps == 4
    assert result.grade.reward == 1.0 and result.grade.passed
    assert result.workspace_files["notes/n.md"] == b"three"
    # What the model saw: tool definitions, and each result as a tool message.
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "bash",
        "read_file",
        "write_file",
        "list_files",
        "submit",
        "echo_args",
    ]
    assert first["messages"][1] == {"role": "user", "content": load_task("count_lines")["prompt"]}
    assert "exit code: 0" in tool_messages(server.requests[1])[0]["content"]
    assert tool_messages(server.requests[2])[1]["content"].strip() == "3"
    assert "count.txt\ndata.txt\nnotes/n.md" in tool_messages(server.requests[3])[-1]["content"]
    # The trajectory records every message, call and output, with usage.
    roles = [item["role"] for item in result.trajectory]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    call = result.trajectory[3]
    assert call["name"] == "bash" and json.loads(call["arguments"])["command"].startswith("wc -l")
    assert call["exec"]["exit_code"] == 0 and call["duration_ms"] >= 0
    assert result.trajectory[2]["content"] == "Let me look."
    assert result.usage["total_tokens"] > 0
    assert result.usage["total_tokens"] == sum(
        (i.get("usage") or {}).get("total_tokens", 0) for i in result.trajectory if i["role"] == "assistant"
    )


def test_malformed_arguments_and_unknown_tools_are_fed_back_as_errors(server, bwrap_backend):
    server.queue(
        {"tool_calls": [tool_call("bash", '{"command": "echo hi"')]},
        {"tool_calls": [tool_call("launch_rockets", {"n": 1})]},
        {"tool_calls": [tool_call("bash", {"cmd": "oops"})]},
        {"tool_calls": [tool_call("submit", {"answer": "gave up"})]},
    )
    result = rollout(load_task("count_lines"), server, bwrap_backend)
    assert result.error is None and result.answer == "gave up"
    bad_json, unknown, missing = (tool_messages(server.requests[i])[-1]["content"] for i in (1, 2, 3))
    assert "not valid JSON" in bad_json
    assert "unknown tool 'launch_rockets'" in unknown and "bash" in unknown
    assert "needs command" in missing
    errors = [i for i in result.trajectory if i["role"] == "tool"][:3]
    assert all(item["is_error"] for item in errors)
    assert errors[0]["arguments"] == '{"command": "echo hi"'


def test_a_custom_tool_gets_its_arguments_on_stdin(server, bwrap_backend):
    server.queue(
        {"tool_calls": [tool_call("echo_args", {"text": "ping"})]},
        {"tool_calls": [tool_call("submit", {"answer": ""})]},
    )
    result = rollout(load_task("count_lines"), server, bwrap_backend)
    assert json.loads(tool_messages(server.requests[1])[0]["content"]) == {"text": "ping"}
    assert result.error is None


def test_a_model_api_error_ends_the_rollout_with_the_reason(server, bwrap_backend):
    server.queue({"tool_calls": [tool_call("bash", {"command": "true"})]}, Reply(status=500))
    result = rollout(load_task("count_lines"), server, bwrap_backend)
    assert result.error_kind == "model" and result.retryable
    assert "500" in result.error
    assert result.grade is None and result.stop_reason == "error"
    assert result.steps == 1


def test_an_unreachable_model_is_a_retryable_model_error(bwrap_backend):
    from tests.support.openai_server import unused_port

    policy = make_policy(
        "model", model_config=ModelConfig(base_url=f"http://127.0.0.1:{unused_port()}/v1", model="m", max_retries=0)
    )
    result = run_rollout(load_task("capital"), policy=policy, backend=bwrap_backend)
    assert result.error_kind == "model" and result.retryable and "connect" in result.error


def test_a_model_that_never_submits_stops_at_max_steps_and_is_graded(server, bwrap_backend):
    server.default = {"tool_calls": [tool_call("bash", {"command": "echo again"})]}
    task = load_task("count_lines")
    task["environment"]["limits"]["max_steps"] = 3
    result = rollout(task, server, bwrap_backend)
    assert result.error is None and result.stop_reason == "max_steps"
    assert result.steps == 3 and server.calls == 3
    assert result.answer == "" and result.grade is not None and result.grade.reward == 0


def test_an_answer_without_tool_calls_is_the_final_answer(server, bwrap_backend):
    server.queue("It is Paris.")
    result = run_rollout(load_task("capital"), policy=model_policy(server), backend=bwrap_backend)
    assert result.stop_reason == "final_answer" and result.answer == "It is Paris."
    assert result.grade.passed


def test_the_time_limit_ends_the_episode(server, bwrap_backend):
    server.delay = 0.6
    server.default = {"tool_calls": [tool_call("bash", {"command": "sleep 5"})]}
    task = load_task("count_lines")
    task["environment"]["limits"]["timeout_s"] = 1
    result = rollout(task, server, bwrap_backend)
    assert result.stop_reason == "timeout" and result.error is None
    # "sleep 5" can only time out if it was given the episode's time left (under 1 s), not the 120 s of a
    # command: the limit ended the command as well as the turns.
    bash = [i for i in result.trajectory if i["role"] == "tool"]
    assert bash and all(step["exec"]["timed_out"] and step["exec"]["exit_code"] is None for step in bash)
    assert result.grade is not None  # and the episode was graded


def test_events_are_reported_and_cancel_is_honoured(server, bwrap_backend):
    server.default = {"tool_calls": [tool_call("bash", {"command": "true"})]}
    events = []
    result = rollout(
        load_task("count_lines"),
        server,
        bwrap_backend,
        on_event=events.append,
        should_cancel=lambda: len([e for e in events if e["type"] == "step"]) >= 2,
    )
    assert result.error_kind == "cancelled" and result.steps == 2
    assert [e["type"] for e in events] == ["started", "step", "step", "done"]


def test_events_cover_a_whole_rollout_and_a_broken_callback_does_not_matter(bwrap_backend):
    events = []

    def on_event(event):
        events.append(event)
        raise RuntimeError("observer bug")

    result = run_rollout(
        load_task("capital"), policy=make_policy("probe:Paris"), backend=bwrap_backend, on_event=on_event
    )
    assert result.grade.passed
    assert [e["type"] for e in events] == ["started", "step", "grading", "done"]
    assert events[-1]["reward"] == 1.0


def test_tool_output_is_capped_in_the_messages(server, bwrap_backend):
    server.queue(
        {"tool_calls": [tool_call("bash", {"command": "head -c 200000 /dev/zero | tr '\\0' z"})]},
        {"tool_calls": [tool_call("submit", {"answer": ""})]},
    )
    result = rollout(
        load_task("count_lines"), server, bwrap_backend, spec=SandboxSpec(output_cap=1000, timeout_s=60, max_steps=4)
    )
    content = tool_messages(server.requests[1])[0]["content"]
    assert len(content) < 1200 and "truncated" in content
    assert result.trajectory[3]["exec"]["stdout_truncated"]


def test_the_model_policy_reads_its_endpoint_from_the_environment(server, monkeypatch, bwrap_backend):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("GYMWRIGHT_POLICY_MODEL", "env-model")
    server.queue({"tool_calls": [tool_call("submit", {"answer": "Paris"})]})
    result = run_rollout(load_task("capital"), policy=make_policy("model"), backend=bwrap_backend)
    assert result.grade.passed and server.requests[0]["model"] == "env-model"


def test_tools_are_exported_for_openai_and_mcp():
    tools = mcp_tool_definitions()
    assert [t["name"] for t in tools] == ["bash", "read_file", "write_file", "list_files", "submit"]
    assert all(set(t) == {"name", "description", "inputSchema"} for t in tools)
    assert tools[0]["inputSchema"]["required"] == ["command"]
    spec = SandboxSpec(
        tools=("bash",),
        custom_tools=({"name": "q", "description": "d", "parameters": {"type": "object"}, "command": "cat"},),
    )
    assert [t["name"] for t in mcp_tool_definitions(spec)] == ["bash", "submit", "q"]


def test_unknown_policies_are_refused():
    with pytest.raises(ValueError):
        make_policy("random")
    with pytest.raises(ValueError):
        make_policy("oracle", task={"solution": None})
