"""Abuse suite of the `tests` check kind, on both backends: every way below of passing the demo coding task's
tests without implementing fizzbuzz scores 0 (or, with per-test credit, only what was honestly passed).

Each attack is the agent's episode (shell commands), then the real rollout grading: processes ended,
protected test file put back, Gymwright's runner run in the same sandbox.
"""

from __future__ import annotations

import pytest

from authoring.demo import demo_task_document
from sandbox.runtime import make_policy, run_rollout
from tests.sandbox.runtime.test_runtime_roles import ScriptPolicy


def _task(credit: str = "all", timeout_s: int = 20) -> tuple[dict, dict]:
    task, files = demo_task_document("fizzbuzz-implementation")
    task["rubric"] = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [
            {
                "id": "tests_pass",
                "kind": "tests",
                "points": 10,
                "files": ["test_fizzbuzz.py"],
                "credit": credit,
                "timeout_s": timeout_s,
            }
        ],
    }
    return task, files


def _heredoc(path: str, text: str) -> str:
    return f"mkdir -p \"$(dirname {path})\" && cat > {path} <<'PYEOF'\n{text}\nPYEOF\necho written"


def _solution(source: str) -> str:
    return _heredoc("fizzbuzz.py", source)


GOOD = """def fizzbuzz(n):
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)"""

ALWAYS_EQUAL = """class Anything(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = str.__hash__

def fizzbuzz(n):
    return Anything("?")"""

FAKE_TESTS = """import unittest

class FizzBuzzTest(unittest.TestCase):
    def test_numbers(self):
        pass

    def test_fizz_and_buzz(self):
        pass
"""

ATTACKS = {
    "os._exit(0) at import": _solution("import os\nos._exit(0)\ndef fizzbuzz(n):\n    return ''"),
    "a test_fizzbuzz package beside the test file": _heredoc("test_fizzbuzz/__init__.py", FAKE_TESTS),
    "a unittest package in the workspace": (
        "mkdir -p unittest && cat > unittest/__init__.py <<'PYEOF'\n"
        "class TestCase:\n    def __init__(self, *a, **k):\n        pass\n"
        "    def __getattr__(self, name):\n        return lambda *a, **k: None\n"
        "def main(*a, **k):\n    pass\nPYEOF\necho planted"
    ),
    "assertEqual patched at import": _solution(
        "import unittest\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\ndef fizzbuzz(n):\n    return ''"
    ),
    "assertEqual patched through the class dict's setattr at call time": _solution(
        "import unittest\ndef fizzbuzz(n):\n"
        "    type.__setattr__(unittest.TestCase, 'assertEqual', lambda self, *a, **k: None)\n    return ''"
    ),
    "a str subclass whose __eq__ is always true": _solution(ALWAYS_EQUAL),
    "sys.exit in a test": _solution("import sys\ndef fizzbuzz(n):\n    sys.exit(0)"),
    "conftest.py, pytest.ini, sitecustomize.py and a .pth in the workspace": (
        "printf 'import unittest\\nunittest.TestCase.assertEqual = lambda *a, **k: None\\n' > sitecustomize.py && "
        "cp sitecustomize.py conftest.py && cp sitecustomize.py usercustomize.py && "
        "printf 'import sitecustomize\\n' > evil.pth && printf '[pytest]\\naddopts = -p no:python\\n' > pytest.ini "
        "&& mkdir -p /tmp/.local/lib && cp sitecustomize.py /tmp/sitecustomize.py && echo planted"
    ),
    "planted bytecode for the test module": (
        _heredoc("/tmp/fake/test_fizzbuzz.py", FAKE_TESTS)
        + " && python3 -c \"import py_compile, sys, os; os.makedirs('__pycache__', exist_ok=True); "
        "py_compile.compile('/tmp/fake/test_fizzbuzz.py', cfile='__pycache__/test_fizzbuzz.' + "
        "sys.implementation.cache_tag + '.pyc', invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\" "
        "&& ls __pycache__"
    ),
    "a forked child that prints a fake report": _solution(
        "import os, sys\ntry:\n    pid = os.fork()\nexcept Exception:\n    pid = -1\n"
        "if pid == 0:\n    print('OK 2 passed')\n    os._exit(0)\n"
        "import subprocess\nsubprocess.Popen(['sh', '-c', 'echo GYMWRIGHT-TESTS-0 {\"done\": true}'])\n"
        "def fizzbuzz(n):\n    return ''"
    ),
    "an infinite loop": _solution("def fizzbuzz(n):\n    while True:\n        pass"),
    "deleting the test file": "rm -f test_fizzbuzz.py && echo gone",
    "editing the test file": _heredoc("test_fizzbuzz.py", FAKE_TESTS),
    "a forged report on stdout": _solution(
        "import sys\nprint('GYMWRIGHT-TESTS-deadbeef')\nprint('{\"done\": true, \"results\": []}')\n"
        "sys.stdout.flush()\ndef fizzbuzz(n):\n    return ''"
    ),
    "a trace function that skips the assertions": _solution(
        "import sys\ndef _skip(frame, event, arg):\n    return _skip\n"
        "try:\n    sys.settrace(_skip)\nexcept Exception:\n    pass\ndef fizzbuzz(n):\n    return ''"
    ),
    "the test module replaced in sys.modules": _solution(
        "import sys, types\ndef fizzbuzz(n):\n"
        "    sys.modules['test_fizzbuzz'] = types.ModuleType('test_fizzbuzz')\n    return str(n)"
    ),
    "the runner's comparison helper replaced": _solution(
        "import sys\ndef fizzbuzz(n):\n    module = sys.modules.get('test_fizzbuzz')\n"
        "    helper = getattr(module, '__gymwright_strict__', None)\n"
        "    if helper is not None:\n        import types\n"
        "        module.__gymwright_strict__ = types.SimpleNamespace(**{k: (lambda *a, **kw: True) "
        "for k in vars(helper)})\n    return ''"
    ),
    "unittest rebound in the test module before its classes are made": _solution(
        "import sys, types\nclass _Case:\n    def __init__(self, *a, **k):\n        pass\n"
        "    def __getattr__(self, name):\n        return lambda *a, **k: None\n"
        "_fake = types.SimpleNamespace(TestCase=_Case, main=lambda *a, **k: None)\n"
        "sys.modules['test_fizzbuzz'].unittest = _fake\n"
        "def fizzbuzz(n):\n    return ''"
    ),
    "a walk up the stack from a traceback to the runner's results": _solution(
        "def _forge():\n    try:\n        raise ValueError\n    except ValueError as exc:\n"
        "        frame = exc.__traceback__.tb_frame\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()):\n"
        "            if isinstance(value, dict):\n"
        "                for key in list(value):\n"
        "                    if isinstance(key, str) and '::' in key:\n"
        "                        value[key] = ('passed', '')\n"
        "            if isinstance(value, list):\n"
        "                value.append(('passed', ''))\n"
        "        frame = frame.f_back\n"
        "def fizzbuzz(n):\n    _forge()\n    return ''"
    ),
    "sys._getframe up to the runner": _solution(
        "import sys\ndef fizzbuzz(n):\n    depth = 1\n    while True:\n"
        "        try:\n            frame = sys._getframe(depth)\n        except ValueError:\n            break\n"
        "        frame.f_locals.get('results', {}).clear()\n        depth += 1\n    return ''"
    ),
    "a thread left running": _solution(
        "import threading, time\ndef _spin():\n    time.sleep(30)\n"
        "threading.Thread(target=_spin, daemon=True).start()\ndef fizzbuzz(n):\n    return ''"
    ),
    "a test method's code swapped at call time": _solution(
        "import sys\ndef fizzbuzz(n):\n    cls = sys.modules['test_fizzbuzz'].FizzBuzzTest\n"
        "    for name in ('test_numbers', 'test_fizz_and_buzz'):\n"
        "        try:\n            getattr(cls, name).__code__ = (lambda self: None).__code__\n"
        "        except Exception:\n            setattr(cls, name, lambda self: None)\n    return ''"
    ),
    "ctypes reading the runner's memory": _solution(
        "import ctypes\ndef fizzbuzz(n):\n    ctypes.string_at(id(n), 8)\n    return ''"
    ),
    "a fake approx class slipped into the runner's trusted set": _solution(
        "import sys\nclass Fake:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "runner = sys.modules['__main__']\ntry:\n    runner._APPROX.add(Fake)\nexcept AttributeError:\n"
        "    runner._APPROX = frozenset(runner._APPROX | {Fake})\n"
        "def fizzbuzz(n):\n    return Fake()"
    ),
    "a runner helper swapped by the tested code, put back by its own first call": _solution(
        "import sys\nrunner = sys.modules['__main__']\ndef fizzbuzz(n):\n    real = runner.equal\n    def fake(a, b, depth=0):\n        runner.equal = real\n        return True\n    runner.equal = fake\n    return ''\n"
    ),
    "a runner helper swapped by a thread of the tested code, put back before the test ends": _solution(
        "import sys, threading, time\nrunner = sys.modules['__main__']\ndef _restore(real):\n    time.sleep(0.3)\n    runner.equal = real\ndef fizzbuzz(n):\n    real = runner.equal\n    if getattr(real, '__name__', '') == 'equal':\n        runner.equal = lambda a, b, depth=0: True\n        threading.Thread(target=_restore, args=(real,)).start()\n    return ''\n"
    ),
    "the runner's report writer swapped for one that says every test passed": _solution(
        "import sys\nrunner = sys.modules['__main__']\n_IDS = ('test_fizzbuzz.py::FizzBuzzTest::test_numbers', 'test_fizzbuzz.py::FizzBuzzTest::test_fizz_and_buzz')\ndef _forged(value):\n    return '{\"done\": true, \"results\": [' + ', '.join(\n        '{\"id\": \"%s\", \"outcome\": \"passed\", \"message\": \"\"}' % test_id for test_id in _IDS) + ']}'\nrunner._json = _forged\ndef fizzbuzz(n):\n    return ''\n"
    ),
    "the runner's sealed globals rebound (lookup, defaults, items)": _solution(
        "import unittest\ndef fizzbuzz(n):\n    sealed = unittest.TestCase.assertEqual.__globals__\n    getter = type(sealed).__getitem__\n    fake = dict(getter.__defaults__[0])\n    fake['equal'] = lambda a, b, depth=0: True\n    try:\n        getter.__defaults__ = (fake,)\n    except Exception:\n        pass\n    try:\n        type(sealed).__getitem__ = lambda self, key, _fake=fake: _fake[key]\n    except Exception:\n        pass\n    sealed['equal'] = fake['equal']\n    dict.__setitem__(sealed, 'equal', fake['equal'])\n    return ''\n"
    ),
    "the strict helpers of the test module rebound on their class": _solution(
        "import sys\ndef fizzbuzz(n):\n    helper = sys.modules['test_fizzbuzz'].__gymwright_strict__\n    for name in ('compare', 'assert_compare', 'truth'):\n        try:\n            setattr(helper, name, staticmethod(lambda *a, **k: True))\n        except Exception:\n            pass\n    return ''\n"
    ),
    "the builtin AssertionError replaced": _solution(
        "import builtins\nclass Never(Exception):\n    pass\nbuiltins.AssertionError = Never\n"
        "def fizzbuzz(n):\n    return ''"
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_an_attack_on_the_tests_check_scores_nothing(python_backend, attack):
    task, files = _task(timeout_s=15)
    result = run_rollout(task, policy=ScriptPolicy(ATTACKS[attack]), backend=python_backend, files=files)
    assert result.error is None, result.error
    check = result.grade.checks[0]
    assert check.status == "scored", check.explanation
    assert check.score == 0.0 and result.grade.reward == 0.0, (attack, check.explanation, check.tests)
    assert check.tests and all(test.outcome != "passed" for test in check.tests), check.tests


def test_the_honest_solution_passes_every_test(python_backend):
    task, files = _task()
    result = run_rollout(task, policy=ScriptPolicy(_solution(GOOD)), backend=python_backend, files=files)
    assert result.error is None, result.error
    check = result.grade.checks[0]
    assert check.score == 1.0 and result.grade.reward == 1.0, check.explanation
    assert [(test.id, test.outcome) for test in check.tests] == [
        ("test_fizzbuzz.py::FizzBuzzTest::test_numbers", "passed"),
        ("test_fizzbuzz.py::FizzBuzzTest::test_fizz_and_buzz", "passed"),
    ]


def test_per_test_credit_pays_what_was_honestly_passed(python_backend):
    task, files = _task(credit="per_test")
    result = run_rollout(
        task, policy=ScriptPolicy(_solution("def fizzbuzz(n):\n    return str(n)")), backend=python_backend, files=files
    )
    assert result.error is None, result.error
    check = result.grade.checks[0]
    assert check.score == 0.5, check.explanation
    outcomes = {test.id.rsplit("::", 1)[1]: (test.outcome, test.message) for test in check.tests}
    assert outcomes["test_numbers"] == ("passed", "")
    assert outcomes["test_fizz_and_buzz"][0] == "failed"
    assert "'9' != 'Fizz'" in outcomes["test_fizz_and_buzz"][1]


def test_the_always_equal_string_fails_with_the_types_named(python_backend):
    task, files = _task(credit="per_test")
    result = run_rollout(task, policy=ScriptPolicy(_solution(ALWAYS_EQUAL)), backend=python_backend, files=files)
    check = result.grade.checks[0]
    assert check.score == 0.0
    assert all("types Anything and str" in test.message for test in check.tests), check.tests


def test_a_shadowing_package_is_refused_by_name(python_backend):
    task, files = _task()
    result = run_rollout(
        task,
        policy=ScriptPolicy(ATTACKS["a unittest package in the workspace"] + " && " + _solution(GOOD)),
        backend=python_backend,
        files=files,
    )
    check = result.grade.checks[0]
    assert check.score == 0.0
    assert "the workspace defines unittest" in check.explanation and "refused" in check.explanation


def test_the_oracle_of_a_task_with_a_tests_check_passes(python_backend):
    task, files = _task()
    result = run_rollout(task, policy=make_policy("oracle", task=task), backend=python_backend, files=files)
    assert result.error is None, result.error
    assert result.grade.reward == 1.0, result.grade.checks[0].explanation


PYTEST_STYLE = """import pytest
from fizzbuzz import fizzbuzz

@pytest.mark.parametrize("n, want", [(1, "1"), (9, "Fizz"), (10, "Buzz"), (30, "FizzBuzz")])
def test_fizzbuzz(n, want):
    assert fizzbuzz(n) == want

def test_rejects_zero():
    with pytest.raises(ValueError):
        fizzbuzz(0)

class TestShape:
    def test_is_a_str(self):
        assert isinstance(fizzbuzz(2), str)
"""


def _pytest_task() -> tuple[dict, dict]:
    import hashlib

    task, files = demo_task_document("fizzbuzz-implementation")
    files = {"fizzbuzz.py": files["fizzbuzz.py"], "tests/test_fizz.py": PYTEST_STYLE.encode()}
    task["files"] = [
        {
            "path": path,
            "sha256": hashlib.sha256(data).hexdigest(),
            **({"role": "grader"} if path.startswith("tests/") else {}),
        }
        for path, data in files.items()
    ]
    task["rubric"] = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [
            {
                "id": "tests_pass",
                "kind": "tests",
                "points": 10,
                "files": ["tests/test_fizz.py"],
                "runner": "pytest",
                "credit": "per_test",
                "timeout_s": 30,
            }
        ],
    }
    return task, files


@pytest.mark.parametrize(
    "source, score",
    [
        (GOOD.replace("def fizzbuzz(n):", "def fizzbuzz(n):\n    if n <= 0:\n        raise ValueError(n)"), 1.0),
        (GOOD, 5 / 6),
        (ALWAYS_EQUAL, 1 / 6),  # only isinstance(..., str) holds for the always-equal str subclass
    ],
)
def test_a_pytest_style_suite_runs_without_pytest_in_the_sandbox(python_backend, source, score):
    task, files = _pytest_task()
    result = run_rollout(task, policy=ScriptPolicy(_solution(source)), backend=python_backend, files=files)
    assert result.error is None, result.error
    check = result.grade.checks[0]
    assert check.score == pytest.approx(score), (check.explanation, check.tests)
    assert [test.id for test in check.tests] == [
        "tests/test_fizz.py::test_fizzbuzz[0]",
        "tests/test_fizz.py::test_fizzbuzz[1]",
        "tests/test_fizz.py::test_fizzbuzz[2]",
        "tests/test_fizz.py::test_fizzbuzz[3]",
        "tests/test_fizz.py::test_rejects_zero",
        "tests/test_fizz.py::TestShape::test_is_a_str",
    ]


def test_pytest_raises_rebound_by_the_tested_code_earns_nothing(python_backend):
    task, files = _pytest_task()
    cheat = "import contextlib, pytest\npytest.raises = lambda *a, **k: contextlib.suppress(BaseException)\n" + GOOD
    result = run_rollout(task, policy=ScriptPolicy(_solution(cheat)), backend=python_backend, files=files)
    check = result.grade.checks[0]
    assert check.score == 0.0 and "pytest.raises was replaced" in check.explanation, check.explanation


# -- the run's own footing: /tmp, the report, the test files, the runner's globals (issue 27, review) ----------

FILL_TMP = (
    "cat /dev/zero > /tmp/fill 2>/dev/null; n=0; while [ $n -lt 2000 ] && : > /tmp/f$n 2>/dev/null; do n=$((n+1)); done"
)


def _grade_of(task, files, policy, backend):
    result = run_rollout(task, policy=policy, backend=backend, files=files)
    assert result.error is None, result.error
    return result.grade.checks[0], result.grade


def test_a_full_tmp_fails_the_tests_check_and_does_not_make_it_unscored(python_backend):
    # The honest solution, then /tmp filled to its cap (space, then inodes) and left so: the runner cannot be
    # written; that is the agent's doing, so the check fails (it is not the grader's unscored).
    task, files = _task()
    check, grade = _grade_of(task, files, ScriptPolicy(_solution(GOOD) + "\n" + FILL_TMP), python_backend)
    assert check.status == "scored" and check.score == 0.0, (check.status, check.explanation)
    assert grade.reward == 0.0 and grade.reward_upper == 0.0
    assert "/tmp" in check.explanation, check.explanation


def test_tested_code_that_fills_tmp_while_the_tests_run_fails_the_check(python_backend):
    task, files = _task()
    filler = "import os\nwith open('/tmp/fill', 'wb') as fh:\n    try:\n        while True:\n            fh.write(b'0' * 65536)\n            fh.flush()\n    except OSError:\n        pass\n"
    check, grade = _grade_of(task, files, ScriptPolicy(_solution(filler + GOOD)), python_backend)
    assert check.status == "scored" and check.score == 0.0, (check.status, check.explanation)


# The report, replaced by what the tested code can make of it in its runner folder (it does not know the
# nonce): a link to the test file, a FIFO, a folder, an 8 MB+ file. Each is read as a file, bounded, no links.
REPORT_SWAPS = {
    "a link": "os.symlink('/workspace/test_fizzbuzz.py', report)",
    "a FIFO": "os.mkfifo(report)",
    "a folder": "os.mkdir(report)",
    "a file past the report's cap": "open(report, 'wb').write(b'x' * (9 * 1024 * 1024))",
    "a parent folder swapped for a link": (
        "folder = os.path.dirname(report); os.rename(folder, folder + '.old'); os.mkdir('/tmp/decoy'); "
        "open('/tmp/decoy/report', 'w').write('x'); os.symlink('/tmp/decoy', folder)"
    ),
}


@pytest.mark.parametrize("swap", list(REPORT_SWAPS), ids=list(REPORT_SWAPS))
def test_a_report_swapped_by_the_tested_code_fails_the_check(python_backend, swap):
    source = (
        "import atexit, glob, os\n"
        "def _swap():\n"
        "    for report in glob.glob('/tmp/.gw-runner-*/report'):\n"
        "        try:\n            os.unlink(report)\n        except OSError:\n            pass\n"
        f"        {REPORT_SWAPS[swap]}\n"
        "_swap()\n" + GOOD
    )
    task, files = _task()
    check, grade = _grade_of(task, files, ScriptPolicy(_solution(source)), python_backend)
    assert check.status == "scored" and check.score == 0.0, (check.status, check.explanation)
    assert grade.reward_upper == 0.0


EXPECTED_TESTS = """import unittest
from fizzbuzz import fizzbuzz
from fizz_expected import EXPECTED

class FizzBuzzTest(unittest.TestCase):
    def test_table(self):
        for n, want in EXPECTED.items():
            self.assertEqual(fizzbuzz(n), want)
"""


def test_files_edited_by_an_earlier_check_are_put_back_before_the_tests_run(python_backend):
    # The tests read a protected data module from the workspace. A command check before the tests check runs
    # the agent's code, which rewrites that module (and the test file) to match what it returns; the tests
    # check still runs the task's tests against the task's data.
    import hashlib

    task, files = demo_task_document("fizzbuzz-implementation")
    files = {
        "fizzbuzz.py": files["fizzbuzz.py"],
        "test_fizzbuzz.py": EXPECTED_TESTS.encode(),
        "fizz_expected.py": b"EXPECTED = {1: '1', 9: 'Fizz', 10: 'Buzz', 30: 'FizzBuzz'}\n",
    }
    task["files"] = [
        {
            "path": path,
            "sha256": hashlib.sha256(data).hexdigest(),
            **({} if path == "fizzbuzz.py" else {"role": "protected"}),
        }
        for path, data in files.items()
    ]
    task["rubric"] = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [
            {"id": "runs", "kind": "command", "points": 1, "run": "python3 fizzbuzz.py"},
            {"id": "tests_pass", "kind": "tests", "points": 10, "files": ["test_fizzbuzz.py"], "timeout_s": 20},
        ],
    }
    # Only when the command check runs it as a script (imported by the tests, it changes nothing).
    rewrite = (
        "import pathlib\n"
        "if __name__ == '__main__':\n"
        "    pathlib.Path('/workspace/fizz_expected.py').write_text('EXPECTED = {1: \\'\\'}\\n')\n"
        f"    pathlib.Path('/workspace/test_fizzbuzz.py').write_text({FAKE_TESTS!r})\n"
        "def fizzbuzz(n):\n    return ''\n"
    )
    result = run_rollout(task, policy=ScriptPolicy(_solution(rewrite)), backend=python_backend, files=files)
    assert result.error is None, result.error
    runs, tests = result.grade.checks
    assert runs.score == 1.0, runs.explanation  # the agent's code ran, and rewrote the files
    assert tests.status == "scored" and tests.score == 0.0, (tests.explanation, tests.tests)
    assert [(test.id, test.outcome) for test in tests.tests] == [
        ("test_fizzbuzz.py::FizzBuzzTest::test_table", "failed")
    ], tests.tests
    # The honest solution still passes with the data put back.
    result = run_rollout(task, policy=ScriptPolicy(_solution(GOOD)), backend=python_backend, files=files)
    assert result.grade.reward == 1.0, [check.explanation for check in result.grade.checks]


UNITTEST_OWN_TESTS = """import unittest
from fizzbuzz import fizzbuzz

class FizzBuzzTest(unittest.TestCase):
    def setUp(self):
        unittest.TestCase.setUp(self)

    def test_zero_is_refused_quietly(self):
        self.assertIsNone(fizzbuzz(0))

    def test_numbers(self):
        self.assertEqual(fizzbuzz(1), "1")
"""

# The value's repr (unittest's own assertIsNone prints it) walks up to the test case through a traceback and
# shadows its `fail` (and the assertion) with do-nothing ones in the instance's __dict__.
SHADOWING_REPR = """class Sneaky:
    def __repr__(self):
        try:
            raise ValueError
        except ValueError as exc:
            frame = exc.__traceback__.tb_frame
        while frame is not None:
            case = frame.f_locals.get('self')
            if case is not None and hasattr(case, 'assertIsNone'):
                for name in ('fail', 'assertIsNone', '_formatMessage'):
                    try:
                        setattr(case, name, lambda *a, **k: None)
                    except Exception:
                        pass
                    case.__dict__[name] = lambda *a, **k: None
            frame = frame.f_back
        return 'Sneaky'

def fizzbuzz(n):
    return Sneaky() if n == 0 else str(n)
"""


def test_a_test_case_method_shadowed_through_a_traceback_earns_nothing(python_backend):
    import hashlib

    task, files = demo_task_document("fizzbuzz-implementation")
    files = {"fizzbuzz.py": files["fizzbuzz.py"], "test_fizzbuzz.py": UNITTEST_OWN_TESTS.encode()}
    task["files"] = [
        {
            "path": path,
            "sha256": hashlib.sha256(data).hexdigest(),
            **({} if path == "fizzbuzz.py" else {"role": "protected"}),
        }
        for path, data in files.items()
    ]
    task["rubric"]["checks"] = [
        {"id": "tests_pass", "kind": "tests", "points": 10, "files": ["test_fizzbuzz.py"], "credit": "per_test"}
    ]
    result = run_rollout(task, policy=ScriptPolicy(_solution(SHADOWING_REPR)), backend=python_backend, files=files)
    assert result.error is None, result.error
    outcomes = {test.id.rsplit("::", 1)[1]: test.outcome for test in result.grade.checks[0].tests}
    assert outcomes == {"test_zero_is_refused_quietly": "failed", "test_numbers": "passed"}, result.grade.checks[0]
