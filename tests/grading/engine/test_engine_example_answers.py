"""Example answers in gymwright.task/v1: the format, its validation pointers, the verdict logic."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

from grading.engine import json_schema, parse_task, validate_task
from grading.engine.example_answers import (
    AS_EXPECTED,
    INCOMPLETE,
    UNEXPECTED,
    example_verdict,
    rubric_needs,
    verdict_changes,
)
from grading.engine.isolated import grade_many_in_subprocess
from grading.engine.models import EXAMPLE_ANSWER_MAX_CHARS, EXAMPLE_MAX_FILES, MAX_EXAMPLES
from grading.engine.scoring import grade

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
        {"id": "report", "kind": "file_content", "points": 1, "path": "out/report.md", "contains": "revenue"},
    ],
}

TASK = {
    "schema": "gymwright.task/v1",
    "id": "answer-42",
    "prompt": "6 x 7?",
    "rubric": RUBRIC,
    "examples": [
        {
            "name": "right",
            "answer": "42",
            "expect": "pass",
            "files": [{"path": "out/report.md", "content": "revenue up"}],
            "reward": {"min": 1},
        },
        {"name": "wrong", "answer": "41", "expect": "fail"},
    ],
}


def task(**changes) -> dict:
    document = copy.deepcopy(TASK)
    document.update(changes)
    return document


def pointers(document) -> dict[str, str]:
    return {issue.pointer: issue.message for issue in validate_task(document)}


def test_a_task_with_example_answers_parses_and_round_trips_exactly():
    parsed = parse_task(task())
    assert parsed.examples[0].files[0].path == "out/report.md"
    document = parsed.to_document()
    assert document["examples"][0]["reward"] == {"min": 1, "max": 1}  # defaults filled in, like checks'
    assert parse_task(document).to_document() == document


def test_a_task_without_examples_keeps_its_document_unchanged():
    document = task()
    del document["examples"]
    assert "examples" not in parse_task(document).to_document()


def test_the_published_task_schema_describes_examples():
    schema = json_schema("task")
    assert "examples" in schema["properties"]
    example = schema["$defs"]["ExampleAnswer"]
    assert set(example["required"]) == {"name", "answer", "expect"}
    assert example["properties"]["expect"]["enum"] == ["pass", "fail"]


def test_it_points_at_each_bad_example_field():
    bad = task(
        examples=[
            {"name": "right", "answer": "42", "expect": "yes"},
            {
                "name": "right",
                "answer": "x",
                "expect": "pass",
                "files": [
                    {"path": "../etc/passwd", "content": ""},
                    {"path": "a", "content": ""},
                    {"path": "a", "content": ""},
                ],
            },
            {"name": "range", "answer": "x", "expect": "pass", "reward": {"min": 0.9, "max": 0.2}},
            {"name": "never", "answer": "x", "expect": "pass", "reward": {"max": 0.5}},
            {"name": "always", "answer": "x", "expect": "fail", "reward": {"min": 0.8}},
            {"name": "tab\there", "answer": "x", "expect": "fail", "color": "red"},
        ]
    )
    found = pointers(bad)
    assert "'yes' is not allowed" in found["/examples/0/expect"]
    assert "duplicate example name 'right'" in found["/examples/1/name"]
    assert "contains '..'" in found["/examples/1/files/0/path"]
    assert "duplicate file path 'a'" in found["/examples/1/files/2/path"]
    assert "below min" in found["/examples/2/reward/max"]
    assert "never passes (pass_threshold 0.7)" in found["/examples/3/reward/max"]
    assert "always passes" in found["/examples/4/reward/min"]
    assert "not a name" in found["/examples/5/name"]
    assert "unknown key 'color'" in found["/examples/5/color"]


def test_it_bounds_answers_files_and_the_number_of_examples():
    huge = task(examples=[{"name": "huge", "answer": "x" * (EXAMPLE_ANSWER_MAX_CHARS + 1), "expect": "fail"}])
    assert f"at most {EXAMPLE_ANSWER_MAX_CHARS} characters" in pointers(huge)["/examples/0/answer"]
    files = [{"path": f"f{i}.txt", "content": "x"} for i in range(EXAMPLE_MAX_FILES + 1)]
    many_files = task(examples=[{"name": "files", "answer": "x", "expect": "fail", "files": files}])
    assert f"at most {EXAMPLE_MAX_FILES}" in pointers(many_files)["/examples/0/files"]
    big_files = [{"path": f"f{i}.txt", "content": "x" * 200_000} for i in range(6)]
    heavy = task(examples=[{"name": "heavy", "answer": "x", "expect": "fail", "files": big_files}])
    assert "characters in all" in pointers(heavy)["/examples/0/files"]
    many = task(examples=[{"name": f"e{i}", "answer": "x", "expect": "fail"} for i in range(MAX_EXAMPLES + 1)])
    assert f"at most {MAX_EXAMPLES}" in pointers(many)["/examples"]


def test_the_cli_validate_reports_the_same_pointers(tmp_path):
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task(examples=[{"name": "a", "answer": "x", "expect": "maybe"}])))
    result = subprocess.run(
        [sys.executable, "-m", "grading.engine", "validate", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "/examples/0/expect" in result.stdout + result.stderr


def _graded(answer: str, files: dict[str, str] | None = None, tmp_path=None):
    # An example always grades in a workspace (empty without files): a missing file is "not met".
    import tempfile
    from pathlib import Path

    workspace = Path(tempfile.mkdtemp(dir=tmp_path))
    if files:
        for path, content in files.items():
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            (workspace / path).write_text(content)
    return grade(RUBRIC, answer=answer, workspace=workspace)


def test_verdicts_compare_the_grade_with_what_the_author_expects(tmp_path):
    examples = parse_task(task()).examples
    right = example_verdict(examples[0], _graded("42", {"out/report.md": "revenue up"}, tmp_path))
    assert (right.status, right.got, right.reward) == (AS_EXPECTED, "pass", 1.0)
    wrong = example_verdict(examples[1], _graded("41", tmp_path=tmp_path))
    assert wrong.status == AS_EXPECTED and wrong.got == "fail"
    # The file is missing: 0.75 still passes, but is under the expected minimum of 1.
    short = example_verdict(examples[0], _graded("42", tmp_path=tmp_path))
    assert short.status == UNEXPECTED and "below the expected minimum 1" in short.message
    flipped = example_verdict(examples[1], _graded("42", tmp_path=tmp_path))
    assert flipped.status == UNEXPECTED and flipped.message.startswith("expected fail, got pass")


def test_an_unscored_judge_check_makes_the_verdict_incomplete_never_a_pass():
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "says_42", "kind": "string_match", "points": 2, "expected": "42"},
            {"id": "explains", "kind": "llm_judge", "points": 8, "criterion": "Explains the product."},
        ],
    }
    graded = grade(rubric, answer="42", judge=None)
    assert not graded.passed and graded.reward == 0.2 and graded.reward_upper == 1.0  # a lower bound ...
    verdict = example_verdict({"name": "judged", "answer": "42", "expect": "pass"}, graded)
    assert verdict.status == INCOMPLETE and not verdict.ok  # ... and no verdict
    assert verdict.message.startswith("incomplete — 8 of 10 points could not be scored")
    assert rubric_needs(rubric) == {"judge"}


def test_rubric_needs_sees_sandbox_checks_in_groups():
    rubric = {
        "checks": [
            {
                "id": "g",
                "kind": "group",
                "points": 1,
                "checks": [{"id": "t", "kind": "command", "points": 1, "run": "true"}],
            }
        ]
    }
    assert rubric_needs(rubric) == {"sandbox"}


def test_verdict_changes_name_the_examples_that_changed(tmp_path):
    examples = parse_task(task()).examples
    before = [
        example_verdict(examples[0], _graded("42", {"out/report.md": "revenue"}, tmp_path)),
        example_verdict(examples[1], _graded("41", tmp_path=tmp_path)),
    ]
    after = [
        example_verdict(examples[0], _graded("42", tmp_path=tmp_path)),
        example_verdict(examples[1], _graded("41", tmp_path=tmp_path)),
    ]
    rows = {row["name"]: row for row in verdict_changes(before, after)}
    assert rows["right"]["changed"] and rows["right"]["after"].status == UNEXPECTED
    assert not rows["wrong"]["changed"]
    added = {row["name"]: row for row in verdict_changes(before[:1], after)}["wrong"]
    assert added["added"] and not added["changed"] and added["before"] is None


def test_all_examples_grade_in_one_bounded_child(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").write_text("revenue")
    documents = grade_many_in_subprocess(RUBRIC, items=[("42", tmp_path), ("41", None)])
    assert [document["reward"] for document in documents] == [1.0, 0.0]


def test_the_cli_grades_a_tasks_examples_and_fails_when_one_is_not_as_expected(tmp_path):
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task()))
    ok = subprocess.run([sys.executable, "-m", "grading.engine", "examples", str(path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert [item["status"] for item in json.loads(ok.stdout)] == ["as_expected", "as_expected"]
    broken = task(examples=[{"name": "wrong", "answer": "42", "expect": "fail"}])
    path.write_text(json.dumps(broken))
    bad = subprocess.run(
        [sys.executable, "-m", "grading.engine", "examples", str(path)], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "wrong: unexpected — expected fail, got pass" in bad.stderr
