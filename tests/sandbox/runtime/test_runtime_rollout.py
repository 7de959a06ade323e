"""Whole rollouts with the built-in policies, on both backends: the oracle
passes, nop and probes fail, and nothing is left running."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.runtime import make_policy, run_rollout
from tests.sandbox.runtime.conftest import sandbox_is_gone

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.task.json").read_text())


FILES = {"data.txt": (FIXTURES / "files" / "count-lines" / "data.txt").read_bytes()}


def test_the_oracle_passes_with_command_and_python_checks_in_the_sandbox(python_backend):
    task = load("count_lines")
    result = run_rollout(task, policy=make_policy("oracle", task=task), backend=python_backend, files=FILES)
    assert result.error is None, result.error
    grade = result.grade
    assert grade.complete and grade.passed and grade.reward == 1.0, grade
    assert {c.id: c.status for c in grade.checks}["python_agrees"] == "scored"
    assert result.answer == "3"
    assert result.workspace_files["count.txt"] == b"3\n"
    assert result.trajectory[3]["name"] == "bash"


def test_nop_and_a_probe_fail(python_backend):
    task = load("count_lines")
    nop = run_rollout(task, policy=make_policy("nop"), backend=python_backend, files=FILES)
    assert nop.error is None and nop.answer == "" and nop.grade.reward == 0 and nop.grade.gated
    probe = run_rollout(task, policy=make_policy("probe:3"), backend=python_backend, files=FILES)
    assert probe.answer == "3" and probe.grade.reward == 0 and not probe.grade.passed


def test_an_answer_only_oracle_submits_the_solution_answer(backend):
    task = load("capital")
    result = run_rollout(task, policy=make_policy("oracle", task=task), backend=backend)
    assert result.answer == "Paris" and result.grade.passed and result.steps == 1


def test_a_sandbox_that_cannot_start_is_a_sandbox_error(backend):
    task = load("capital")
    task["environment"]["setup"] = "exit 9"
    result = run_rollout(task, policy=make_policy("nop"), backend=backend)
    assert result.error_kind == "sandbox" and not result.retryable and "setup" in result.error


def test_a_grader_failure_is_reported_and_the_sandbox_is_still_stopped(monkeypatch):
    import grading.engine
    from sandbox.runtime import get_backend
    from tests.support.services import require_bwrap

    require_bwrap()
    backend = get_backend("bubblewrap")

    def broken_grade(*args, **kwargs):
        raise RuntimeError("grader bug")

    monkeypatch.setattr(grading.engine, "grade", broken_grade)
    events = []
    result = run_rollout(load("capital"), policy=make_policy("probe:Paris"), backend=backend, on_event=events.append)
    assert result.error_kind == "grading" and "grader bug" in result.error and not result.retryable
    assert result.answer == "Paris" and result.trajectory
    sandbox_id = events[0]["sandbox"]
    assert not any(sandbox_id in p.name for p in backend.work_dir.iterdir())


class ScriptedPolicy:
    """Runs the given bash commands one per turn, then submits."""

    name = "scripted"

    def __init__(self, *commands: str):
        self.commands = list(commands)

    def next_turn(self, messages, tools, *, timeout_s=None):
        from sandbox.runtime.policies import Turn

        if self.commands:
            call = {
                "id": f"call_{len(self.commands)}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": self.commands.pop(0)})},
            }
        else:
            call = {
                "id": "call_submit",
                "type": "function",
                "function": {"name": "submit", "arguments": json.dumps({"answer": "done"})},
            }
        return Turn(message={"role": "assistant", "content": None, "tool_calls": [call]})


def test_a_rollout_that_fills_its_workspace_is_stopped_reported_and_graded(backend):
    task = load("capital")
    task["environment"]["limits"] = {"workspace_mb": 8, "tmp_mb": 8}
    policy = ScriptedPolicy("head -c 20000000 /dev/zero > big.bin", "echo second > second.txt")
    result = run_rollout(task, policy=policy, backend=backend)
    assert result.error is None and result.stop_reason == "workspace_full", result.error
    assert result.grade is not None and not result.grade.passed
    note = result.trajectory[-1]
    assert note["role"] == "system" and "/workspace is full" in note["content"]
    assert "second.txt" not in result.workspace_files  # nothing ran after the cap was hit


def test_cancelling_kills_a_running_command_and_removes_the_sandbox(backend):
    import time

    task = load("capital")
    events, first_poll = [], []

    def should_cancel():
        # The user presses Cancel two seconds into the episode, while the command runs.
        first_poll.append(time.monotonic())
        return time.monotonic() - first_poll[0] > 2

    result = run_rollout(
        task,
        policy=ScriptedPolicy("sleep 600; echo finished"),
        backend=backend,
        on_event=events.append,
        should_cancel=should_cancel,
    )
    assert result.error_kind == "cancelled" and result.grade is None
    tool = next(step for step in result.trajectory if step.get("role") == "tool")
    assert "cancelled" in tool["content"] and not tool["exec"]["timed_out"] and tool["exec"]["exit_code"] is None
    sandbox_id = next(e["sandbox"] for e in events if e["type"] == "started")
    assert sandbox_is_gone(backend, sandbox_id)


def test_the_captured_workspace_stops_at_its_caps_and_says_so(tmp_path):
    from sandbox.runtime.rollout import MAX_CAPTURED_FILE, MAX_CAPTURED_TOTAL, _capture

    assert (MAX_CAPTURED_FILE, MAX_CAPTURED_TOTAL) == (1 << 20, 8 << 20)  # the figures this test is written for
    (tmp_path / "a-small.txt").write_bytes(b"kept")
    (tmp_path / "b-too-big.bin").write_bytes(b"x" * (MAX_CAPTURED_FILE + 1))
    for n in range(9):  # nine files at the per-file cap: the ninth would pass the total
        (tmp_path / f"c-{n}.bin").write_bytes(bytes([n]) * MAX_CAPTURED_FILE)
    (tmp_path / "d-last.txt").write_bytes(b"fits after the skipped one")
    (tmp_path / "e-link").symlink_to(tmp_path / "a-small.txt")
    files, truncated = _capture(tmp_path)
    assert truncated
    assert "b-too-big.bin" not in files and "c-7.bin" not in files and "c-8.bin" not in files
    assert [f"c-{n}.bin" for n in range(7)] == sorted(name for name in files if name.startswith("c-"))
    assert files["a-small.txt"] == b"kept" and files["d-last.txt"] == b"fits after the skipped one"
    assert "e-link" not in files
    assert sum(len(data) for data in files.values()) <= MAX_CAPTURED_TOTAL
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "f.txt").write_bytes(b"x" * MAX_CAPTURED_FILE)
    assert _capture(tmp_path / "small") == ({"f.txt": b"x" * MAX_CAPTURED_FILE}, False)  # at the cap: kept
    (tmp_path / "full").mkdir()
    for n in range(8):  # exactly the total cap ...
        (tmp_path / "full" / f"{n}.bin").write_bytes(b"x" * MAX_CAPTURED_FILE)
    assert _capture(tmp_path / "full")[1] is False
    (tmp_path / "full" / "z.txt").write_bytes(b"!")  # ... and one byte past it
    files, truncated = _capture(tmp_path / "full")
    assert truncated and "z.txt" not in files and len(files) == 8


def test_a_rollout_reports_a_workspace_too_large_to_capture():
    from sandbox.runtime import get_backend
    from tests.support.services import require_bwrap

    require_bwrap()
    task = load("capital")
    task["environment"]["limits"] = {"workspace_mb": 32, "tmp_mb": 8}
    policy = ScriptedPolicy("for n in 0 1 2 3 4 5 6 7 8; do head -c 1048576 /dev/zero > big-$n.bin; done")
    result = run_rollout(task, policy=policy, backend=get_backend("bubblewrap"))
    assert result.error is None, result.error
    assert result.workspace_truncated and result.to_dict()["workspace_truncated"] is True
    assert sorted(result.workspace_files) == [f"big-{n}.bin" for n in range(8)]
    small = run_rollout(task, policy=ScriptedPolicy("echo hi > small.txt"), backend=get_backend("bubblewrap"))
    assert not small.workspace_truncated and small.workspace_files == {"small.txt": b"hi\n"}
