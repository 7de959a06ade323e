"""Whole rollouts with the built-in policies, on both backends: the oracle
passes, nop and probes fail, and nothing is left running."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.runtime import make_policy, run_rollout

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
    result = run_rollout(load("capital"), policy=make_policy("probe:Paris"), backend=backend,
                         on_event=events.append)
    assert result.error_kind == "grading" and "grader bug" in result.error and not result.retryable
    assert result.answer == "Paris" and result.trajectory
    sandbox_id = events[0]["sandbox"]
    assert not any(sandbox_id in p.name for p in backend.work_dir.iterdir())
