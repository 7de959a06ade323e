"""The `tests` check kind: its format rules, the ids read from source before anything runs, the report's
strictness, and the runner's strict comparisons (run in a real bubblewrap sandbox, conftest.py's `check_sandbox`;
the attacks on both backends are in tests/sandbox/runtime/test_tests_check_abuse.py)."""

from __future__ import annotations

import hashlib
import textwrap

import pytest

from grading.engine import grade, validate_task
from grading.engine.testsuite import collect, parse_report


def _task(check: dict, files: list[dict]) -> dict:
    return {
        "schema": "gymwright.task/v1",
        "id": "t",
        "prompt": "p",
        "files": files,
        "rubric": {"schema": "gymwright.rubric/v1", "checks": [check]},
    }


def _ref(path: str, role: str | None) -> dict:
    ref = {"path": path, "sha256": hashlib.sha256(path.encode()).hexdigest()}
    if role:
        ref["role"] = role
    return ref


def test_it_rejects_test_files_the_agent_can_change_with_their_pointer():
    check = {"id": "suite", "kind": "tests", "points": 1, "files": ["t/test_a.py", "t/test_b.py", "t/test_c.py"]}
    issues = validate_task(_task(check, [_ref("t/test_a.py", "protected"), _ref("t/test_b.py", None)]))
    shown = {issue.pointer: issue.message for issue in issues}
    assert set(shown) == {"/rubric/checks/0/files/1", "/rubric/checks/0/files/2"}
    assert "role workspace" in shown["/rubric/checks/0/files/1"]
    assert "not one of the task's files" in shown["/rubric/checks/0/files/2"]
    assert (
        validate_task(
            _task(
                check, [_ref("t/test_a.py", "protected"), _ref("t/test_b.py", "grader"), _ref("t/test_c.py", "grader")]
            )
        )
        == []
    )


@pytest.mark.parametrize(
    "files, words",
    [
        (["tests/data.json"], "not a Python file"),
        (["a/test_x.py", "b/test_x.py"], "the same module name"),
        (["tests/test-x.py"], "not a Python module name"),
        ([], "at least 1"),
    ],
)
def test_it_rejects_test_files_that_cannot_be_loaded_as_modules(files, words):
    check = {"id": "suite", "kind": "tests", "points": 1, "files": files}
    issues = validate_task(_task(check, [_ref(path, "grader") for path in files]))
    assert any(issue.pointer.startswith("/rubric/checks/0/files") and words in issue.message for issue in issues), (
        issues
    )


def test_ids_come_from_the_source_unittest_and_pytest_styles():
    source = textwrap.dedent("""
        import unittest
        from solution import f

        class Base(unittest.TestCase):
            def test_shared(self): pass
            def helper(self): pass

        class Child(Base):
            def test_own(self): pass

        class TestPlain:
            def test_method(self): pass

        def test_function(): pass
        def helper(): pass
    """)
    unittest_ids = collect(source, "t/test_x.py", "unittest")
    assert unittest_ids.ids == [
        "t/test_x.py::Base::test_shared",
        "t/test_x.py::Child::test_own",
        "t/test_x.py::Child::test_shared",
    ]
    assert unittest_ids.module == "test_x" and unittest_ids.imports == ["solution", "unittest"]
    assert collect(source, "t/test_x.py", "pytest").ids == unittest_ids.ids + [
        "t/test_x.py::TestPlain::test_method",
        "t/test_x.py::test_function",
    ]


def test_a_report_is_accepted_only_whole_and_with_the_nonce():
    good = b'N\n{"done": true, "results": []}\n'
    assert parse_report(good, "N") == {"done": True, "results": []}
    for bad in (
        b'X\n{"done": true, "results": []}\n',
        good + good,
        b'N\n{"done": false, "results": []}\n',
        b'N\n{"done": true}\n',
        b"N\nnot json\n",
        b"",
    ):
        assert parse_report(bad, "N") is None, bad


SOLUTION = """
import math

class Anything(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__

class Sneaky(list):
    def __eq__(self, other):
        return True

class Truthy:
    def __bool__(self):
        return True

def exact(): return "Fizz"
def sub(): return Anything("no")
def nan(): return math.nan
def negative_zero(): return -0.0
def listish(): return Sneaky([9])
def truthy(): return Truthy()
def nested(): return {"a": [1, Anything("x")]}
"""

TESTS = """
import unittest
from solution import exact, sub, nan, negative_zero, listish, truthy, nested

class T(unittest.TestCase):
    def test_exact(self):
        self.assertEqual(exact(), "Fizz")
    def test_subclass_in_assert_equal(self):
        self.assertEqual(sub(), "Fizz")
    def test_subclass_in_assert_true_of_eq(self):
        self.assertTrue(sub() == "Fizz")
    def test_subclass_in_assert_in(self):
        self.assertIn(sub(), ["Fizz"])
    def test_nan_equals_nan(self):
        self.assertEqual(nan(), float("nan"))
    def test_negative_zero_equals_zero(self):
        self.assertEqual(negative_zero(), 0.0)
    def test_list_subclass(self):
        self.assertEqual(listish(), [1, 2])
    def test_truth_by_own_bool(self):
        self.assertTrue(truthy())
    def test_nested_subclass(self):
        self.assertEqual(nested(), {"a": [1, "y"]})
"""

PYTEST_TESTS = """
from solution import exact, sub

def test_plain_assert():
    assert exact() == "Fizz"

def test_plain_assert_with_subclass():
    assert sub() == "Fizz", "must be Fizz"

def test_chained():
    assert "A" < exact() == "Fizz"

def test_tmp_path(tmp_path):
    (tmp_path / "x").write_text("1")
    assert (tmp_path / "x").read_text() == "1"

def test_unknown_fixture(monkeypatch):
    pass

class TestGroup:
    def test_in(self):
        assert exact() in ("Fizz", "Buzz")
    def test_not_in_with_subclass(self):
        assert not (sub() != "Fizz")
"""


def _run(check_sandbox, tmp_path, runner: str, tests: str, *, credit="per_test"):
    check_sandbox.write_file("solution.py", SOLUTION.encode())
    check_sandbox.write_file("test_strict.py", tests.encode())
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {
                "id": "suite",
                "kind": "tests",
                "points": 1,
                "files": ["test_strict.py"],
                "runner": runner,
                "credit": credit,
                "timeout_s": 60,
            }
        ],
    }
    workspace = check_sandbox.snapshot(tmp_path / "workspace")  # as a rollout grades: the workspace as left
    result = grade(rubric, answer="", workspace=workspace, sandbox=check_sandbox).checks[0]
    assert result.status == "scored", result.explanation
    return result, {test.id.rsplit("::", 1)[1]: (test.outcome, test.message) for test in result.tests}


def test_builtin_values_compare_by_exact_type_and_by_rule(check_sandbox, tmp_path):
    result, outcomes = _run(check_sandbox, tmp_path, "unittest", TESTS)
    passed = {name for name, (outcome, _) in outcomes.items() if outcome == "passed"}
    assert passed == {"test_exact", "test_nan_equals_nan", "test_negative_zero_equals_zero"}, outcomes
    assert result.score == pytest.approx(3 / 9)
    assert "types Anything and str" in outcomes["test_subclass_in_assert_equal"][1]
    assert "decided by its own __bool__" in outcomes["test_truth_by_own_bool"][1]


def test_pytest_style_plain_asserts_run_without_pytest(check_sandbox, tmp_path):
    result, outcomes = _run(check_sandbox, tmp_path, "pytest", PYTEST_TESTS)
    assert {name: outcome for name, (outcome, _) in outcomes.items()} == {
        "test_plain_assert": "passed",
        "test_plain_assert_with_subclass": "failed",
        "test_chained": "passed",
        "test_tmp_path": "passed",
        "test_unknown_fixture": "error",
        "test_in": "passed",
        "test_not_in_with_subclass": "failed",
    }
    assert outcomes["test_plain_assert_with_subclass"][1].startswith("AssertionError: must be Fizz: assert sub() == ")
    assert "fixture 'monkeypatch' is not supported" in outcomes["test_unknown_fixture"][1]


def test_credit_all_needs_every_test(check_sandbox, tmp_path):
    result, _ = _run(check_sandbox, tmp_path, "unittest", TESTS, credit="all")
    assert result.score == 0.0 and "3 of 9 test(s) passed" in result.explanation


def test_select_names_unknown_tests_unscored(check_sandbox, tmp_path):
    check_sandbox.write_file("test_strict.py", TESTS.encode())
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {
                "id": "suite",
                "kind": "tests",
                "points": 1,
                "files": ["test_strict.py"],
                "select": ["test_strict.py::T::nope"],
            }
        ],
    }
    workspace = check_sandbox.snapshot(tmp_path / "workspace")
    result = grade(rubric, answer="", workspace=workspace, sandbox=check_sandbox).checks[0]
    assert result.status == "unscored" and "select names 'test_strict.py::T::nope'" in result.explanation


PYTEST_FEATURES = """
import pytest
from solution import exact, sub, nan

@pytest.mark.parametrize("n, want", [(1, "Fizz"), (2, "Fizz"), (3, "nope")])
def test_parametrized(n, want):
    assert exact() == want

@pytest.mark.parametrize("value", [0.1 + 0.2])
def test_approx(value):
    assert value == pytest.approx(0.3)

def test_approx_refuses_a_subclass():
    assert sub() == pytest.approx(1.0)

def test_raises():
    with pytest.raises(ZeroDivisionError, match="division"):
        1 / 0

def test_raises_not_raised():
    with pytest.raises(ValueError):
        pass

@pytest.mark.skip(reason="later")
def test_skipped():
    pass
"""


def test_pytest_features_work_with_the_runners_own_pytest(check_sandbox, tmp_path):
    result, outcomes = _run(check_sandbox, tmp_path, "pytest", PYTEST_FEATURES)
    assert {name: outcome for name, (outcome, _) in outcomes.items()} == {
        "test_parametrized[0]": "passed",
        "test_parametrized[1]": "passed",
        "test_parametrized[2]": "failed",
        "test_approx[0]": "passed",
        "test_approx_refuses_a_subclass": "failed",
        "test_raises": "passed",
        "test_raises_not_raised": "failed",
        "test_skipped": "skipped",
    }, outcomes["test_raises_not_raised"]
    assert "DID NOT RAISE" in outcomes["test_raises_not_raised"][1], outcomes["test_raises_not_raised"]
