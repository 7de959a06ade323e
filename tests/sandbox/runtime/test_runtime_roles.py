"""File roles at run time, on both backends: protected files are put back byte for byte
before the checks (whatever the agent did to them), grader files are never visible
during the episode, and nothing the agent started still runs when the checks do."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from authoring.demo import demo_task_document
from sandbox.runtime import make_policy, run_rollout
from sandbox.runtime.policies import Turn, _assistant, _call, _stdout_of_last_tool

TESTS = b"import unittest\n\nclass T(unittest.TestCase):\n    def test_it(self):\n        self.assertEqual(1, 2)\n"


class ScriptPolicy:
    """A scripted agent: runs these shell commands one per turn, then submits the last output."""

    name = "script"

    def __init__(self, *commands: str):
        self.commands = commands

    def next_turn(self, messages, tools, *, timeout_s=None) -> Turn:
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        if turns < len(self.commands):
            return Turn(_assistant(_call("bash", {"command": self.commands[turns]})))
        return Turn(_assistant(_call("submit", {"answer": _stdout_of_last_tool(messages)})))


SKIP_TRICK = (
    "sed -i 's/^class FizzBuzzTest/@unittest.skip(\"later\")\\nclass FizzBuzzTest/' test_fizzbuzz.py"
    " && grep -c skip test_fizzbuzz.py"
)


def _without_roles(task: dict) -> dict:
    """The demo task as it was first written: its tests a workspace file, run by a command."""
    task = copy.deepcopy(task)
    for ref in task["files"]:
        ref.pop("role", None)
    task["rubric"]["checks"][0] = {
        "id": "tests_pass",
        "kind": "command",
        "points": 10,
        "required": True,
        "run": "python3 -m unittest -q test_fizzbuzz",
        "expect_exit": 0,
        "timeout_s": 60,
    }
    return task


def test_the_demo_coding_task_protects_its_tests_and_the_oracle_still_passes(python_backend):
    task, files = demo_task_document("fizzbuzz-implementation")
    assert {f["path"]: f.get("role") for f in task["files"]}["test_fizzbuzz.py"] == "protected"
    result = run_rollout(task, policy=make_policy("oracle", task=task), backend=python_backend, files=files)
    assert result.error is None, result.error
    assert result.grade.passed and result.grade.reward == 1.0, result.grade
    assert [s.model_dump() for s in result.grade.protected_files] == [
        {"path": "test_fizzbuzz.py", "state": "unchanged"}
    ]


def test_the_skip_trick_earns_nothing_once_the_tests_are_protected(python_backend):
    task, files = demo_task_document("fizzbuzz-implementation")
    # Without the role the old hole is there: skipped tests "pass".
    vulnerable = run_rollout(_without_roles(task), policy=ScriptPolicy(SKIP_TRICK), backend=python_backend, files=files)
    assert vulnerable.error is None, vulnerable.error
    assert {c.id: c.score for c in vulnerable.grade.checks}["tests_pass"] == 1.0
    assert vulnerable.grade.reward > 0.1

    result = run_rollout(task, policy=ScriptPolicy(SKIP_TRICK), backend=python_backend, files=files)
    assert result.error is None, result.error
    assert result.answer.strip() == "1"  # the agent did skip the tests in its episode
    assert b"@unittest.skip" in result.workspace_files["test_fizzbuzz.py"]  # and the viewer shows it
    assert result.grade.reward == 0 and {c.id: c.score for c in result.grade.checks}["tests_pass"] == 0.0
    assert [s.model_dump() for s in result.grade.protected_files] == [{"path": "test_fizzbuzz.py", "state": "modified"}]


TAMPERING = {
    "deleted": "rm tests/test_it.py",
    "a link": "rm tests/test_it.py && ln -s /etc/passwd tests/test_it.py",
    "a directory": "rm tests/test_it.py && mkdir -p tests/test_it.py/deep && echo x > tests/test_it.py/deep/f "
    "&& chmod 500 tests/test_it.py/deep tests/test_it.py",
    "a linked parent": "mkdir -p /tmp/fake && echo 'pass' > /tmp/fake/test_it.py && rm -rf tests "
    "&& ln -s /tmp/fake tests",
    "a file for a parent": "rm -rf tests && echo no > tests",
    "other bytes, read-only": "echo 'assert True' > tests/test_it.py && chmod 000 tests/test_it.py && chmod 500 tests",
}
EXPECTED = {
    "deleted": "missing",
    "a link": "link",
    "a directory": "dir",
    "a linked parent": "missing",
    "a file for a parent": "missing",
    "other bytes, read-only": "file",
}


@pytest.mark.parametrize("how", list(TAMPERING))
def test_a_protected_file_is_restored_byte_for_byte(backend, spec, how):
    with backend.start(spec, files={"tests/test_it.py": TESTS, "main.py": b"x = 1\n"}) as box:
        done = box.exec(TAMPERING[how])
        assert done.exit_code == 0, done.stderr
        box.end_processes()
        found = box.restore_files({"tests/test_it.py": TESTS})
        assert found == {"tests/test_it.py": EXPECTED[how]}
        assert box.read_file("tests/test_it.py") == TESTS
        real = box.exec(
            "[ -d tests ] && [ ! -L tests ] && [ -f tests/test_it.py ] && [ ! -L tests/test_it.py ]"
            " && cat tests/test_it.py"
        )
        assert real.exit_code == 0 and real.stdout.encode() == TESTS
        assert box.read_file("main.py") == b"x = 1\n"  # workspace files are left as the agent left them


def test_nothing_the_agent_left_running_survives_into_grading(backend, spec):
    # A detached writer in its own session, which a process-group kill misses.
    loop = "while :; do echo hacked > tests/test_it.py 2>/dev/null; sleep 0.05; done"
    with backend.start(spec, files={"tests/test_it.py": TESTS}) as box:
        started = box.exec(f"setsid sh -c '{loop}' </dev/null >/dev/null 2>&1 & sleep 0.3; echo started")
        assert started.exit_code == 0 and "started" in started.stdout
        box.end_processes()
        box.restore_files({"tests/test_it.py": TESTS})
        waited = box.exec("sleep 0.5; cat tests/test_it.py")
        assert waited.stdout.encode() == TESTS
        assert box.exec("echo still usable").stdout == "still usable\n"


def _grader_task(with_roles: bool) -> tuple[dict, dict[str, bytes], dict[str, bytes]]:
    verify = b'# GRADER-ONLY-7f3a\ntest "$(cat answer.txt)" = 42\n'
    env_secret = b"GRADER-ENV-91c2\n"
    task = {
        "schema": "gymwright.task/v1",
        "id": "hidden-grader",
        "prompt": "Write 42 into answer.txt.",
        "environment": {
            "files": [
                {
                    "path": "expected.txt",
                    "sha256": hashlib.sha256(env_secret).hexdigest(),
                    **({"role": "grader"} if with_roles else {}),
                }
            ],
            "limits": {"max_steps": 5},
        },
        "files": [
            {
                "path": "grading/verify.sh",
                "sha256": hashlib.sha256(verify).hexdigest(),
                **({"role": "grader"} if with_roles else {}),
            }
        ],
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "verified", "kind": "command", "points": 1, "run": "sh grading/verify.sh"},
                {"id": "env_file_there", "kind": "command", "points": 1, "run": "grep -q GRADER-ENV /env/expected.txt"},
            ],
        },
    }
    return task, {"grading/verify.sh": verify}, {"expected.txt": env_secret}


def test_grader_files_are_invisible_during_the_episode_and_there_for_the_checks(backend):
    # Everything but the system's own trees, and a content search of the writable places.
    search = (
        "echo 42 > answer.txt; grep -rh -e GRADER-ONL[Y] -e GRADER-EN[V] /workspace /tmp /env 2>/dev/null; "
        "find / \\( -path /proc -o -path /sys -o -path /usr -o -path /dev \\) -prune -o -type f -print "
        "2>/dev/null; true"
    )
    task, files, env_files = _grader_task(with_roles=True)
    result = run_rollout(task, policy=ScriptPolicy(search), backend=backend, files=files, env_files=env_files)
    assert result.error is None, result.error
    episode = _tool_output(result)
    assert "answer.txt" in episode  # the listing did run
    assert "verify.sh" not in episode and "expected.txt" not in episode and "GRADER-" not in episode
    assert "grading/verify.sh" not in result.workspace_files
    assert result.grade.reward == 1.0, result.grade  # the checks found both

    # The same search finds them when they are plain workspace / environment files.
    task, files, env_files = _grader_task(with_roles=False)
    plain = run_rollout(task, policy=ScriptPolicy(search), backend=backend, files=files, env_files=env_files)
    assert "verify.sh" in _tool_output(plain) and "expected.txt" in _tool_output(plain)
    assert "GRADER-ONLY" in _tool_output(plain)


def _tool_output(result) -> str:
    return json.dumps([m.get("content") for m in result.trajectory if m.get("role") == "tool"])
