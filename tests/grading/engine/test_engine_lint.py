"""Rubric lint (warnings with pointers) and the checks that cannot fail (errors at the field)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from authoring.demo import DEMO_TASKS, demo_task_document
from grading.engine import validate_rubric, validate_task
from grading.engine.lint import lint_rubric, lint_task


def rubric(*checks):
    return {"schema": "gymwright.rubric/v1", "checks": list(checks)}


RUN_TESTS = {"id": "tests_pass", "kind": "command", "points": 10, "run": "python3 -m unittest -q test_fizzbuzz"}
UNTOUCHED = {
    "id": "tests_untouched",
    "kind": "file_content",
    "points": 1,
    "path": "test_fizzbuzz.py",
    "contains": "assertEqual(fizzbuzz(30)",
}


def messages(issues):
    return {issue.pointer: issue.message for issue in issues}


def test_a_command_running_workspace_tests_is_flagged_and_protected_or_grader_tests_are_not():
    files = [{"path": "fizzbuzz.py"}, {"path": "test_fizzbuzz.py"}]
    found = messages(lint_rubric(rubric(RUN_TESTS), files))
    assert "test_fizzbuzz.py" in found["/checks/0/run"] and "protected or grader" in found["/checks/0/run"]
    for role in ("protected", "grader"):
        assert "/checks/0/run" not in messages(
            lint_rubric(rubric(RUN_TESTS), [{"path": "test_fizzbuzz.py", "role": role}])
        )
    # A runner that finds the tests itself runs them too.
    discover = {**RUN_TESTS, "run": "pytest -q"}
    assert "/checks/0/run" in messages(lint_rubric(rubric(discover), [{"path": "tests/test_a.py"}]))
    # Not a test file: nothing to say.
    assert lint_rubric(rubric({**RUN_TESTS, "run": "python3 main.py"}), [{"path": "main.py"}]) == []


@pytest.mark.parametrize(
    "run",
    ["python3 -m unittest -q test_fizzbuzz", "pytest -q tests/", "py.test", "cd src && python -m pytest", "nose2 -v"],
)
def test_a_command_running_a_python_test_runner_is_pointed_to_the_tests_kind(run):
    for files in (None, [{"path": "test_fizzbuzz.py", "role": "protected"}]):
        found = messages(lint_rubric(rubric({**RUN_TESTS, "run": run}), files))
        assert "use a `tests` check" in found["/checks/0/kind"], run


@pytest.mark.parametrize("run", ["python3 main.py", "make test", "pytest_report.sh", "./unittests-helper"])
def test_other_commands_are_not_pointed_to_the_tests_kind(run):
    assert "/checks/0/kind" not in messages(lint_rubric(rubric({**RUN_TESTS, "run": run})))


def test_an_untouched_check_is_flagged_and_is_always_met_on_a_protected_file():
    found = messages(lint_rubric(rubric(RUN_TESTS, UNTOUCHED), [{"path": "test_fizzbuzz.py"}]))
    assert "an edit anywhere else" in found["/checks/1"]
    protected = messages(lint_rubric(rubric(UNTOUCHED), [{"path": "test_fizzbuzz.py", "role": "protected"}]))
    assert "always met" in protected["/checks/0"]
    # Without the files, its name gives it away; a sha256 check is exact and not flagged.
    assert "/checks/0" in messages(lint_rubric(rubric(UNTOUCHED)))
    exact = {**UNTOUCHED, "contains": None, "sha256": "0" * 64}
    exact.pop("contains")
    assert lint_rubric(rubric(exact), [{"path": "test_fizzbuzz.py"}]) == []


def test_judge_checks_without_a_penalty_and_penalties_on_restored_files_are_flagged():
    judged = {"id": "right", "kind": "llm_judge", "points": 5, "criterion": "Names Paris."}
    found = messages(lint_rubric(rubric({"id": "a", "kind": "regex", "points": 1, "pattern": "x"}, judged)))
    assert "penalises" in found["/checks/1"]
    harm = {"id": "unsafe", "kind": "llm_judge", "points": -5, "criterion": "Gives unsafe advice."}
    assert lint_rubric(rubric(judged, harm)) == []
    penalty = {"id": "no_ref", "kind": "file_exists", "points": -2, "path": "grading/ref.txt"}
    found = messages(lint_rubric(rubric(judged, harm, penalty), [{"path": "grading/ref.txt", "role": "grader"}]))
    assert "never changes" in found["/checks/2"]


def test_lint_task_points_into_the_rubric_and_the_demo_tasks_are_clean():
    for demo in DEMO_TASKS:
        document, _ = demo_task_document(demo["slug"])
        assert validate_task(document) == [] and lint_task(document) == [], demo["slug"]
    document, _ = demo_task_document("fizzbuzz-implementation")
    assert document["rubric"]["checks"][0]["kind"] == "tests"
    for ref in document["files"]:
        ref.pop("role", None)
    assert "role workspace" in messages(validate_task(document))["/rubric/checks/0/files/0"]
    document["rubric"]["checks"][0] = RUN_TESTS
    assert "/rubric/checks/0/run" in messages(lint_task(document))


@pytest.mark.parametrize(
    "check, pointer",
    [
        ({"id": "c", "kind": "string_match", "points": 1, "expected": ""}, "/checks/0/expected"),
        ({"id": "c", "kind": "string_match", "points": 1, "expected": "  ", "mode": "equals"}, "/checks/0/expected"),
        ({"id": "c", "kind": "regex", "points": 1, "pattern": ""}, "/checks/0/pattern"),
        ({"id": "c", "kind": "file_content", "points": 1, "path": "a.txt", "contains": ""}, "/checks/0/contains"),
        ({"id": "c", "kind": "file_content", "points": 1, "path": "a.txt", "regex": ""}, "/checks/0/regex"),
        ({"id": "c", "kind": "group", "points": 1, "checks": []}, "/checks/0/checks"),
    ],
)
def test_checks_that_cannot_fail_are_refused_at_the_field(check, pointer):
    issues = validate_rubric(rubric(check))
    assert pointer in [issue.pointer for issue in issues], issues


def test_whitespace_counts_when_whitespace_is_not_normalised():
    check = {"id": "c", "kind": "string_match", "points": 1, "expected": " ", "normalize_whitespace": False}
    assert validate_rubric(rubric(check)) == []


def test_the_cli_refuses_an_empty_pattern_and_prints_warnings_without_failing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rubric({"id": "c", "kind": "regex", "points": 1, "pattern": ""})))
    proc = subprocess.run(
        [sys.executable, "-m", "grading.engine", "validate", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "/checks/0/pattern" in proc.stdout + proc.stderr
    document, _ = demo_task_document("fizzbuzz-implementation")
    for ref in document["files"]:
        ref.pop("role", None)
    document["rubric"]["checks"][0] = dict(RUN_TESTS)  # a tests check refuses unprotected files outright
    task = tmp_path / "task.json"
    task.write_text(json.dumps(document))
    proc = subprocess.run(
        [sys.executable, "-m", "grading.engine", "validate", str(task)], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok"
    assert "warning: /rubric/checks/0/run:" in proc.stderr
