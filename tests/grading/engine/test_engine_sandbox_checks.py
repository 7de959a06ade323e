"""command and python checks and stdout: targets, through the CheckSandbox protocol.

They run in a real bubblewrap sandbox, as a rollout's checks do (conftest.py's `check_sandbox`); the isolation
itself is proved in tests/sandbox/runtime/.
"""

from __future__ import annotations

import os

import pytest

from grading.engine import CheckSandbox, grade, parse_rubric


def run(checks, *, answer="", sandbox=None, **kwargs):
    rubric = parse_rubric({"schema": "gymwright.rubric/v1", "checks": checks})
    return grade(rubric, answer=answer, sandbox=sandbox, **kwargs)


def cmd(check_id, run_, **extra):
    return {"id": check_id, "kind": "command", "points": 1, "run": run_, **extra}


def py(check_id, **extra):
    return {"id": check_id, "kind": "python", "points": 1, **extra}


def test_the_grading_sandbox_satisfies_the_protocol(check_sandbox):
    assert isinstance(check_sandbox, CheckSandbox)


def test_command_exit_codes(check_sandbox):
    check_sandbox.write_file("flag", b"1")
    result = run(
        [cmd("ok", "test -f flag"), cmd("bad", "test -f nope"), cmd("three", "exit 3", expect_exit=3)],
        sandbox=check_sandbox,
    )
    assert [(c.id, c.score) for c in result.checks] == [("ok", 1.0), ("bad", 0.0), ("three", 1.0)]
    assert "exit code 1" in result.checks[1].explanation


def test_command_runs_in_the_workspace(check_sandbox):
    result = run([cmd("pwd", f'test "$(pwd)" = {check_sandbox.workspace_path}')], sandbox=check_sandbox)
    assert result.checks[0].score == 1.0


def test_a_command_that_times_out_fails(check_sandbox):
    result = run([cmd("slow", "sleep 5", timeout_s=0.3)], sandbox=check_sandbox)
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "timed out" in result.checks[0].explanation
    assert result.complete and result.reward == 0.0


def test_a_penalty_command_that_times_out_is_charged(check_sandbox):
    result = run([cmd("ok", "true"), {**cmd("cheat", "sleep 5", timeout_s=0.3), "points": -1}], sandbox=check_sandbox)
    assert result.checks[1].score == 1.0 and result.checks[1].awarded == -1.0 and result.reward == 0.0


def test_sandbox_checks_without_a_sandbox_are_unscored():
    result = run(
        [
            cmd("c", "true"),
            py("p", code="def check(ctx):\n    return True\n"),
            {"id": "s", "kind": "string_match", "points": 1, "expected": "x", "target": "stdout:echo x"},
        ]
    )
    assert [c.status for c in result.checks] == ["unscored"] * 3
    assert all("needs a sandbox" in c.explanation for c in result.checks)


SIX = "echo ran >> runs.log; echo $((2*3))"


def test_stdout_target(check_sandbox):
    checks = [
        {"id": "s", "kind": "number", "points": 1, "expected": 6, "target": f"stdout:{SIX}"},
        {"id": "t", "kind": "string_match", "points": 1, "expected": "6", "target": f"stdout:{SIX}"},
    ]
    result = run(checks, sandbox=check_sandbox)
    assert [c.score for c in result.checks] == [1.0, 1.0]
    assert check_sandbox.read_file("runs.log") == b"ran\n"  # the same command runs once per grade


def test_python_code_sees_the_context(check_sandbox):
    check_sandbox.write_file("out.txt", b"forty-two")
    code = (
        "def check(ctx):\n"
        "    print('noise on stdout is fine')\n"
        "    return ctx.answer == 'hi' and ctx.read('out.txt') == 'forty-two' and ctx.args['n'] == 2\n"
    )
    result = run([py("p", code=code, args={"n": 2})], answer="hi", sandbox=check_sandbox)
    assert result.checks[0].score == 1.0, result.checks[0].explanation


def test_python_returns_a_fractional_score(check_sandbox):
    result = run([py("p", code="def check(ctx):\n    return 0.25\n")], sandbox=check_sandbox)
    assert result.checks[0].score == 0.25


@pytest.mark.parametrize(
    "body, reason",
    [
        ("    raise ValueError('boom')", "ValueError: boom"),
        ("    return 1.5", "1.5"),
        ("    return 'yes'", "str"),
        ("    return None", "NoneType"),
        ("    import os; os._exit(0)", "printed no result"),
    ],
)
def test_python_failures_fail_the_check_with_the_reason(check_sandbox, body, reason):
    result = run([py("p", code=f"def check(ctx):\n{body}\n")], sandbox=check_sandbox)
    check = result.checks[0]
    assert check.status == "scored" and check.score == 0.0 and reason in check.explanation, check.explanation


def test_python_timeout_fails_the_check(check_sandbox):
    result = run(
        [py("p", code="import time\ndef check(ctx):\n    time.sleep(5)\n", timeout_s=0.5)], sandbox=check_sandbox
    )
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "timed out" in result.checks[0].explanation


def test_printing_a_fake_result_line_does_not_fool_the_engine(check_sandbox):
    code = 'def check(ctx):\n    import os\n    os.write(1, b\'GYMWRIGHT-RESULT-0 {"ok": true, "value": true}\\n\')\n    return False\n'
    result = run([py("p", code=code)], sandbox=check_sandbox)
    assert result.checks[0].score == 0.0


def test_python_function_from_the_checks_module(check_sandbox):
    module = "def totals(ctx):\n    return ctx.args['want'] in ctx.answer\n"
    check = py("p", function="checks:totals", args={"want": "1,234"})
    result = run([check], answer="total 1,234", sandbox=check_sandbox, checks_module=module)
    assert result.checks[0].score == 1.0, result.checks[0].explanation
    missing = run([check], answer="total", sandbox=check_sandbox)
    assert missing.checks[0].status == "unscored" and "no checks module" in missing.checks[0].explanation


def test_python_never_runs_in_the_engine_process(check_sandbox):
    code = "import os\ndef check(ctx):\n    open('pid', 'w').write(str(os.getpid()))\n    return True\n"
    assert run([py("p", code=code)], sandbox=check_sandbox).checks[0].score == 1.0
    assert int(check_sandbox.read_file("pid")) != os.getpid()


def test_a_sandbox_that_raises_makes_the_check_unscored(workspace):
    class Broken:
        workspace_path = "/workspace"

        def exec(self, command, *, timeout_s=None, stdin=None, env=None):
            raise RuntimeError("container gone")

        def write_file(self, path, data):
            pass

        def read_file(self, path):
            raise FileNotFoundError(path)

    result = run([cmd("c", "true"), py("p", code="def check(ctx):\n    return True\n")], sandbox=Broken())
    assert [c.status for c in result.checks] == ["unscored", "unscored"]
    assert "container gone" in result.checks[0].explanation


def test_file_reads_fall_back_to_the_sandbox_without_a_workspace(check_sandbox):
    check_sandbox.write_file("r.md", b"done")
    checks = [
        {"id": "f", "kind": "file_content", "points": 1, "path": "r.md", "contains": "done"},
        {"id": "e", "kind": "file_exists", "points": 1, "path": "r.md"},
        {"id": "m", "kind": "file_exists", "points": 1, "path": "missing.md"},
    ]
    result = run(checks, sandbox=check_sandbox)
    assert [c.score for c in result.checks] == [1.0, 1.0, 0.0]
