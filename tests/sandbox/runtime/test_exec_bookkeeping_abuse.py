"""An agent against the bookkeeping that ends its processes after each exec (issue 27, hole 2), on both backends.

Docker's killer once read a pid file under /tmp/.gymwright that the sandbox user owned: the agent swapped it for a
FIFO, the killer blocked on it, the sweep never ran, exec() returned after 10.7 s and a `setsid` writer ran on.
Nothing that ends the agent's processes may read a file the agent controls; every process an exec started is gone
when it returns, whatever the agent planted for this exec or the next. No timing assertions: the processes and
their writes are counted."""

from __future__ import annotations

import pytest

from sandbox.runtime import SandboxSpec

WRITER = "while :; do echo x >> /tmp/beat; sleep 0.05; done"
# Every file of exec bookkeeping the sandbox user can reach, and the places it used to be, become FIFOs (a reader
# blocks until a writer comes), with a writer that outlives its session.
SWAP_FOR_FIFOS = (
    "for f in /tmp/.gymwright/* /tmp/.gymwright/.[!.]* /tmp/*.pid /tmp/.*.pid; do "
    '[ -e "$f" ] || [ -L "$f" ] || continue; rm -rf "$f"; mkfifo "$f"; done; '
    "mkdir -p /tmp/.gymwright && chmod 777 /tmp/.gymwright; "
    "for n in 0 1 2 3 4 5 6 7 8 9; do mkfifo /tmp/.gymwright/$n.pid 2>/dev/null; done; "
    f"setsid sh -c '{WRITER}' </dev/null >/dev/null 2>&1 & sleep 0.3; echo planted"
)


@pytest.fixture
def box(python_backend):
    sandbox = python_backend.start(
        SandboxSpec(memory_mb=128, pids=64, exec_timeout_s=30, output_cap=65536, workspace_mb=8, tmp_mb=8)
    )
    yield sandbox
    sandbox.stop()


def _agent_processes(box) -> list[str]:
    """Command lines of every process still running as the sandbox user, but the `ps` that lists them."""
    listing = box.exec("ps -o user,args").stdout.splitlines()[1:]
    return [
        line
        for line in listing
        if "ps -o user,args" not in line
        and "sh -c ps" not in line
        and line.split(None, 1)[0] not in ("root", "0", "65533", "65532")
    ]


def _beats(box) -> str:
    return box.exec("wc -l < /tmp/beat").stdout.strip()


def test_swapping_the_pid_bookkeeping_for_fifos_neither_blocks_the_exec_nor_spares_a_writer(box):
    planted = box.exec(SWAP_FOR_FIFOS)
    assert planted.exit_code == 0 and planted.stdout == "planted\n", planted
    assert not planted.timed_out
    before = _beats(box)
    assert int(before) > 0  # the writer ran during its exec
    # The next execs run as usual, and the writer is gone: nothing more written, no process left.
    assert box.exec("echo next").stdout == "next\n"
    assert _beats(box) == before
    assert not [line for line in _agent_processes(box) if "echo x" in line or "sleep" in line], _agent_processes(box)


def test_bookkeeping_planted_for_later_execs_does_not_stop_them_either(box):
    # Exec 1 plants FIFOs (and a directory of them) where bookkeeping could go; execs 2 and 3 start writers of
    # their own, each gone when its exec returns; end_processes (before the checks) finds nothing left.
    assert box.exec(SWAP_FOR_FIFOS).exit_code == 0
    for _ in range(2):
        started = box.exec(f"setsid sh -c '{WRITER}' </dev/null >/dev/null 2>&1 & sleep 0.2; echo again")
        assert started.stdout == "again\n" and not started.timed_out, started
    before = _beats(box)
    assert box.exec("true").exit_code == 0 and _beats(box) == before
    box.end_processes()
    assert _agent_processes(box) == []


def test_a_background_fork_bomb_is_gone_when_its_exec_returns(box):
    bomb = "b() { b & b & }; b"
    started = box.exec(f"setsid sh -c '{bomb}' </dev/null >/dev/null 2>&1 & sleep 0.5; echo lit")
    assert started.stdout.startswith("lit") or started.exit_code is not None, started
    # The pids it held are free again: the next exec starts, and no process of the agent is left.
    assert box.exec("echo free").stdout == "free\n"
    assert _agent_processes(box) == []


# Fork bombs against the sweep that ends each exec (docker's `kill` by uid races processes that fork faster than
# one pass kills them): started in their own session, in shell and in Python, while the command itself runs on
# past its timeout. The exec still ends at its timeout, as timed out, and nothing of the bomb is left after it.
BOMBS = {
    "shell": "b() { b & b & }; b",
    "python": "python3 -c 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass'",
    # each newborn resumes every stopped sibling it can signal before it forks again
    "python, resuming what is stopped": (
        "python3 -c 'import os, signal\nwhile True:\n    try:\n        os.kill(-1, signal.SIGCONT)\n"
        "        os.fork()\n    except OSError:\n        pass'"
    ),
}


@pytest.mark.parametrize("bomb", list(BOMBS), ids=list(BOMBS))
@pytest.mark.timeout(300)
def test_a_fork_bomb_racing_the_sweep_is_gone_and_the_exec_ends_at_its_timeout(box, bomb):
    script = BOMBS[bomb].replace("'", "'\\''")
    started = box.exec(f"setsid sh -c '{script}' </dev/null >/dev/null 2>&1 & while :; do :; done", timeout_s=3)
    assert started.timed_out and started.exit_code is None, started
    assert box.exec("echo free").stdout == "free\n"
    assert _agent_processes(box) == []
    # Once more, with the bomb in the foreground of an exec that finishes (no timeout): gone as well.
    finished = box.exec(f"setsid sh -c '{script}' </dev/null >/dev/null 2>&1 & sleep 1; echo lit")
    assert finished.stdout == "lit\n" and not finished.timed_out, finished
    assert _agent_processes(box) == []


# -- what one check's exec learns, used against the next (issue 27: nonce and bookkeeping reuse) ---------------

GRADE_HELPER = b"def verdict():\n    import fizzbuzz\n    return fizzbuzz.fizzbuzz(15) == 'FizzBuzz'\n"
GRADE_CHECK = b"import sys\nimport grade_helper\nsys.exit(0 if grade_helper.verdict() else 1)\n"
# Run as a script by the first check: whatever the grader's execs tell it in their environment (a bytecode cache
# folder, a nonce), it plants bytecode for the grader's helper there and beside it, made "unchecked" so that Python
# never compares it with the source; imported by the grader, it does nothing.
PLANT = r"""import importlib.util, os, py_compile, sys
def fizzbuzz(n):
    return ''
if __name__ == '__main__':
    with open('/tmp/fake_helper.py', 'w') as fh:
        fh.write('def verdict():\n    return True\n')
    targets = [importlib.util.cache_from_source('/workspace/grade_helper.py')]
    sys.pycache_prefix = None
    targets.append(importlib.util.cache_from_source('/workspace/grade_helper.py'))
    for target in targets:
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            py_compile.compile('/tmp/fake_helper.py', cfile=target,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        except OSError:
            pass
    with open('/tmp/env-seen', 'w') as fh:
        fh.write(repr(sorted(os.environ.items())))
"""


def test_bytecode_planted_by_one_check_for_the_next_is_never_run(python_backend):
    # The grader's own script and helper (grader files) run in a command check after one that ran the agent's
    # code: the agent's program, learning the grading execs' environment, plants bytecode for the helper. The
    # helper that runs is the task's: the unsolved task earns nothing from the second check.
    import hashlib

    from authoring.demo import demo_task_document
    from sandbox.runtime import run_rollout
    from tests.sandbox.runtime.test_runtime_roles import ScriptPolicy

    task, files = demo_task_document("fizzbuzz-implementation")
    files = {"fizzbuzz.py": files["fizzbuzz.py"], "grade_helper.py": GRADE_HELPER, "grade_check.py": GRADE_CHECK}
    task["files"] = [
        {
            "path": path,
            "sha256": hashlib.sha256(data).hexdigest(),
            **({} if path == "fizzbuzz.py" else {"role": "grader"}),
        }
        for path, data in files.items()
    ]
    task["rubric"] = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [
            {"id": "runs", "kind": "command", "points": 1, "run": "python3 fizzbuzz.py"},
            {"id": "graded", "kind": "command", "points": 10, "run": "python3 grade_check.py"},
        ],
    }
    policy = ScriptPolicy(f"cat > fizzbuzz.py <<'PYEOF'\n{PLANT}\nPYEOF\necho written")
    result = run_rollout(task, policy=policy, backend=python_backend, files=files)
    assert result.error is None, result.error
    runs, graded = result.grade.checks
    assert runs.score == 1.0, runs.explanation  # the agent's program ran, and planted what it could
    assert graded.status == "scored" and graded.score == 0.0, graded.explanation
