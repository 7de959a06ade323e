"""`python -m sandbox.runtime` as labs and CI call it: a subprocess, JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer, tool_call
from tests.support.services import require_bwrap

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"


def cli(*args, env=None, input=None):
    return subprocess.run(
        [sys.executable, "-m", "sandbox.runtime", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
        input=input,
    )


@pytest.fixture
def bwrap():
    require_bwrap()


def test_exec_prints_a_json_result(bwrap):
    proc = cli("exec", "--backend", "bubblewrap", "--", "echo out; echo err >&2; exit 5")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data == {
        **data,
        "exit_code": 5,
        "stdout": "out\n",
        "stderr": "err\n",
        "truncated": False,
        "stdout_truncated": False,
        "stderr_truncated": False,
        "timed_out": False,
        "oom_killed": False,
    }
    assert isinstance(data["duration_ms"], int)


def test_exec_honours_timeout_memory_and_workspace(bwrap, tmp_path):
    (tmp_path / "in.txt").write_text("from the host\n")
    proc = cli("exec", "--timeout", "1", "--memory-mb", "64", "--workspace", str(tmp_path), "--", "cat", "in.txt")
    assert json.loads(proc.stdout)["stdout"] == "from the host\n"
    slow = json.loads(cli("exec", "--timeout", "1", "--", "sleep 30").stdout)
    assert slow["timed_out"] and slow["exit_code"] is None
    oom = json.loads(cli("exec", "--memory-mb", "32", "--", "head -c 200000000 /dev/zero | tail").stdout)
    assert oom["oom_killed"] and oom["exit_code"] == 137


def test_exec_on_docker(docker_client, busybox_image):
    proc = cli("exec", "--backend", "docker", "--image", busybox_image, "--", "echo", "hi there")
    data = json.loads(proc.stdout)
    assert data["exit_code"] == 0 and data["stdout"] == "hi there\n"


def test_exec_reports_a_sandbox_failure_with_exit_3(docker_client):
    proc = cli("exec", "--backend", "docker", "--image", "", "--", "true")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["permanent"] is True


def test_rollout_with_the_oracle_prints_trajectory_and_grade(bwrap):
    proc = cli(
        "rollout",
        "--task",
        str(FIXTURES / "count_lines.task.json"),
        "--policy",
        "oracle",
        "--files",
        str(FIXTURES / "files" / "count-lines"),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["grade"]["schema"] == "gymwright.grade/v1" and data["grade"]["reward"] == 1.0
    assert data["answer"] == "3" and data["trajectory"][0]["role"] == "system"


def test_rollout_with_nop_and_probe_fail(bwrap):
    for policy in ("nop", "probe:Thought process:"):
        data = json.loads(cli("rollout", "--task", str(FIXTURES / "capital.task.json"), "--policy", policy).stdout)
        assert data["grade"]["passed"] is False


def test_rollout_with_a_model(bwrap):
    with OpenAIServer([{"tool_calls": [tool_call("submit", {"answer": "Paris"})]}]) as server:
        proc = cli(
            "rollout",
            "--task",
            str(FIXTURES / "capital.task.json"),
            "--policy",
            "model",
            "--base-url",
            server.base_url,
            "--model",
            "m1",
            env={"OPENAI_API_KEY": "x"},
        )
        data = json.loads(proc.stdout)
        assert data["grade"]["passed"] and data["usage"]["total_tokens"] >= 0
        assert server.requests[0]["model"] == "m1"


def test_rollout_refuses_task_files_with_the_wrong_hash(bwrap, tmp_path):
    (tmp_path / "data.txt").write_text("tampered\n")
    proc = cli(
        "rollout", "--task", str(FIXTURES / "count_lines.task.json"), "--policy", "nop", "--files", str(tmp_path)
    )
    assert proc.returncode != 0 and "sha256" in proc.stderr


def test_reap_prints_what_it_removed(docker_client):
    proc = cli("reap")
    assert proc.returncode == 0 and "removed" in json.loads(proc.stdout)


def test_the_oracle_on_a_task_without_a_solution_is_refused_as_the_web_refuses_it(bwrap, tmp_path):
    """It ran and scored 0 (a preview refuses it: "no reference solution"), which read as a broken task."""
    task = json.loads((FIXTURES / "capital.task.json").read_text())
    task["solution"] = {"script": None, "answer": None}
    (tmp_path / "task.json").write_text(json.dumps(task))
    proc = cli("rollout", "--task", str(tmp_path / "task.json"), "--policy", "oracle")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "this task has no reference solution (script or answer), so the oracle policy has nothing to run" in (
        proc.stderr
    )


def test_bubblewrap_says_a_dockerfile_needs_the_docker_backend(bwrap, tmp_path):
    """bubblewrap builds no image: a task whose environment is a Dockerfile runs on the host's system there, and
    the CLI says so in the words the task page and the preview form use (the rollout still runs)."""
    task = json.loads((FIXTURES / "capital.task.json").read_text())
    task["environment"] = {**task.get("environment", {}), "dockerfile": "FROM busybox\nWORKDIR /app\n"}
    (tmp_path / "task.json").write_text(json.dumps(task))
    proc = cli("rollout", "--task", str(tmp_path / "task.json"), "--policy", "oracle")
    assert proc.returncode == 0, proc.stderr
    assert "note: this task needs the docker backend (its Dockerfile builds the environment)" in proc.stderr
    assert json.loads(proc.stdout)["grade"]["reward"] == 1.0
