"""command and python checks and stdout: targets, through the CheckSandbox protocol.

They run against LocalProcessSandbox, a subprocess TEST DOUBLE (see conftest.py);
the point here is the engine's plumbing, not isolation.
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


def test_the_double_satisfies_the_protocol(local_sandbox):
    assert isinstance(local_sandbox, CheckSandbox)


def test_command_exit_codes(local_sandbox, workspace):
    (workspace / "flag").write_text("1")
    result = run(
        [cmd("ok", "test -f flag"), cmd("bad", "test -f nope"), cmd("three", "exit 3", expect_exit=3)],
        sandbox=local_sandbox,
    )
    assert [(c.id, c.score) for c in result.checks] == [("ok", 1.0), ("bad", 0.0), ("three", 1.0)]
    assert "exit code 1" in result.checks[1].explanation


def test_command_runs_in_the_workspace(local_sandbox, workspace):
    result = run([cmd("pwd", f'test "$(pwd)" = {workspace.resolve()}')], sandbox=local_sandbox)
    assert result.checks[0].score == 1.0


def test_a_command_that_times_out_fails(local_sandbox):
    result = run([cmd("slow", "sleep 5", timeout_s=0.3)], sandbox=local_sandbox)
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "timed out" in result.checks[0].explanation
    assert result.complete and result.reward == 0.0


def test_a_penalty_command_that_times_out_is_charged(local_sandbox):
    result = run([cmd("ok", "true"), {**cmd("cheat", "sleep 5", timeout_s=0.3), "points": -1}], sandbox=local_sandbox)
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


def test_stdout_target(local_sandbox):
    checks = [
        {"id": "s", "kind": "number", "points": 1, "expected": 6, "target": "stdout:echo $((2*3))"},
        {"id": "t", "kind": "string_match", "points": 1, "expected": "6", "target": "stdout:echo $((2*3))"},
    ]
    result = run(checks, sandbox=local_sandbox)
    assert [c.score for c in result.checks] == [1.0, 1.0]
    assert local_sandbox.execs.count(local_sandbox.execs[0]) == 1  # the same command runs once per grade


def test_python_code_sees_the_context(local_sandbox, workspace):
    (workspace / "out.txt").write_text("forty-two")
    code = (
        "def check(ctx):\n"
        "    print('noise on stdout is fine')\n"
        "    return ctx.answer == 'hi' and ctx.read('out.txt') == 'forty-two' and ctx.args['n'] == 2\n"
    )
    result = run([py("p", code=code, args={"n": 2})], answer="hi", sandbox=local_sandbox)
    assert result.checks[0].score == 1.0, result.checks[0].explanation


def test_python_returns_a_fractional_score(local_sandbox):
    result = run([py("p", code="def check(ctx):\n    return 0.25\n")], sandbox=local_sandbox)
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
def test_python_failures_fail_the_check_with_the_reason(local_sandbox, body, reason):
    result = run([py("p", code=f"def check(ctx):\n{body}\n")], sandbox=local_sandbox)
    check = result.checks[0]
    assert check.status == "scored" and check.score == 0.0 and reason in check.explanation, check.explanation


def test_python_timeout_fails_the_check(local_sandbox):
    result = run(
        [py("p", code="import time\ndef check(ctx):\n    time.sleep(5)\n", timeout_s=0.5)], sandbox=local_sandbox
    )
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "timed out" in result.checks[0].explanation


def test_printing_a_fake_result_line_does_not_fool_the_engine(local_sandbox):
    code = 'def check(ctx):\n    import os\n    os.write(1, b\'GYMWRIGHT-RESULT-0 {"ok": true, "value": true}\\n\')\n    return False\n'
    result = run([py("p", code=code)], sandbox=local_sandbox)
    assert result.checks[0].score == 0.0


def test_python_function_from_the_checks_module(local_sandbox):
    module = "def totals(ctx):\n    return ctx.args['want'] in ctx.answer\n"
    check = py("p", function="checks:totals", args={"want": "1,234"})
    result = run([check], answer="total 1,234", sandbox=local_sandbox, checks_module=module)
    assert result.checks[0].score == 1.0, result.checks[0].explanation
    missing = run([check], answer="total", sandbox=local_sandbox)
    assert missing.checks[0].status == "unscored" and "no checks module" in missing.checks[0].explanation


def test_python_never_runs_in_the_engine_process(local_sandbox, tmp_path):
    marker = tmp_path / "pid"
    code = f"import os\ndef check(ctx):\n    open({str(marker)!r}, 'w').write(str(os.getpid()))\n    return True\n"
    run([py("p", code=code)], sandbox=local_sandbox)
    assert int(marker.read_text()) != os.getpid()


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


def test_file_reads_fall_back_to_the_sandbox_without_a_workspace(local_sandbox, workspace):
    (workspace / "r.md").write_text("done")
    checks = [
        {"id": "f", "kind": "file_content", "points": 1, "path": "r.md", "contains": "done"},
        {"id": "e", "kind": "file_exists", "points": 1, "path": "r.md"},
        {"id": "m", "kind": "file_exists", "points": 1, "path": "missing.md"},
    ]
    result = run(checks, sandbox=local_sandbox)
    assert [c.score for c in result.checks] == [1.0, 1.0, 0.0]
