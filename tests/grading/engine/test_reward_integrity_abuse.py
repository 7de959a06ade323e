"""Abuse suite for the scoring contract (issue 26, docs/formats.md "Scoring"): nothing the graded work
can cause leaves a check unscored. A hang, a kill, a flood, an oversized, linked or deeply nested
file, a pathological fence: each FAILS its check with the reason (a required one gates), so breaking
the grader never earns more than doing the task. Unscored is the grader's own failure only, and an
incomplete grade's reward is its lower bound, with `reward_upper` beside it.

The command-check attacks run in real sandboxes (bubblewrap and docker), through a whole rollout of
the demo tasks; the file attacks run against the engine with a real workspace directory.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os

import pytest

from authoring.demo import FIZZBUZZ_SOLUTION, demo_task_document
from grading.engine import grade, parse_rubric, parse_task
from grading.engine.checks import MAX_JSON_DEPTH
from sandbox.runtime import SandboxSpec, run_rollout
from tests.sandbox.runtime.conftest import make_backend
from tests.sandbox.runtime.test_runtime_roles import ScriptPolicy


@pytest.fixture(params=["bubblewrap", "docker"])
def python_backend(request):
    backend = make_backend(request.param, request)
    if backend.name == "docker":
        backend.default_image = request.getfixturevalue("python_image")
    return backend


def by_id(result):
    return {check.id: check for check in result.iter_checks()}


def small_spec(task: dict) -> SandboxSpec:
    """The task's own sandbox, with less memory (a memory hog reaches it sooner on a shared machine)."""
    return dataclasses.replace(SandboxSpec.from_environment(parse_task(task).environment), memory_mb=256)


# ------------------------------------------------------------------------------------------------ commands


def fizzbuzz_with_command_check(timeout_s: float = 20) -> tuple[dict, dict[str, bytes]]:
    """The demo coding task, graded by a `command` check that runs its tests (as it was when the issue
    was filed), with a short timeout so a hang is quick to show."""
    task, files = demo_task_document("fizzbuzz-implementation")
    task = copy.deepcopy(task)
    task["rubric"] = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [
            {
                "id": "tests_pass",
                "kind": "command",
                "points": 10,
                "required": True,
                "run": "python3 -m unittest -q test_fizzbuzz",
                "expect_exit": 0,
                "timeout_s": timeout_s,
            }
        ],
    }
    return task, files


def write_solution(source: str) -> str:
    """A shell command that writes fizzbuzz.py: the correct solution, preceded by `source` (run at import)."""
    correct = FIZZBUZZ_SOLUTION.split("<<'PY'\n", 1)[1].rsplit("PY\n", 1)[0]
    return f"cat > fizzbuzz.py <<'PY'\n{source}\n{correct}PY\necho written"


ATTACKS = {
    # The import never ends: the test command times out.
    "hang": "while True:\n    pass",
    # The import takes all the memory it can: the kernel kills it (or Python raises MemoryError).
    "oom": "hog = []\nwhile True:\n    hog.append(bytearray(64 * 1024 * 1024))",
    # A correct solution that prints 8 MB straight to the descriptor first: the output is cut.
    "flood": "import os\nfor _ in range(128):\n    os.write(1, b'x' * 65536)",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_solution_that_hangs_is_killed_or_floods_fails_the_command_check_and_earns_nothing(python_backend, attack):
    task, files = fizzbuzz_with_command_check(timeout_s=8)
    result = run_rollout(
        task,
        policy=ScriptPolicy(write_solution(ATTACKS[attack])),
        backend=python_backend,
        files=files,
        spec=small_spec(task),
    )
    assert result.error is None, result.error
    check = by_id(result.grade)["tests_pass"]
    assert check.status == "scored" and check.score == 0.0, check.explanation
    assert result.grade.reward == 0.0 and result.grade.reward_upper == 0.0 and not result.grade.passed
    assert result.grade.complete and result.grade.gated
    words = {"hang": "timed out", "oom": "", "flood": "output"}[attack]
    assert words in check.explanation, check.explanation


def test_the_oracle_still_earns_full_reward_through_the_command_check(python_backend):
    task, files = fizzbuzz_with_command_check()
    result = run_rollout(task, policy=ScriptPolicy(write_solution("")), backend=python_backend, files=files)
    assert result.error is None, result.error
    assert result.grade.reward == 1.0 and result.grade.passed and result.grade.complete, result.grade


def test_the_demo_coding_task_as_shipped_pays_nothing_for_a_solution_that_exhausts_memory(python_backend):
    """Whatever check the demo task grades with, a solution whose import takes all the memory earns 0."""
    task, files = demo_task_document("fizzbuzz-implementation")
    result = run_rollout(
        task,
        policy=ScriptPolicy(write_solution(ATTACKS["oom"])),
        backend=python_backend,
        files=files,
        spec=small_spec(task),
    )
    assert result.error is None, result.error
    assert result.grade.reward == 0.0 and not result.grade.passed, result.grade
    assert all(check.status == "scored" for check in result.grade.iter_checks()), result.grade


# ------------------------------------------------------------------------------------------------ files


def q3_rubric():
    task, _ = demo_task_document("q3-revenue-summary")
    return parse_rubric(task["rubric"])


def test_a_120_mb_summary_csv_fails_the_q3_demo_instead_of_leaving_it_unscored(tmp_path):
    with open(tmp_path / "summary.csv", "wb") as handle:  # sparse: 120 MB apparent, a few bytes on disk
        handle.write(b"metric,Q1,Q2,Q3,Q4\nRevenue,1000.0,1100.5,1234.5,1302.0\nCosts,800.0,850.0,900.0,950.0\n")
        handle.truncate(120 * 1024 * 1024)
    (tmp_path / "report.md").write_text("Revenue grew to 1234.5 in Q3.\n")
    result = grade(q3_rubric(), answer="1234.5", workspace=tmp_path)
    checks = by_id(result)
    for check_id in ("q3_revenue", "q4_costs"):
        assert checks[check_id].status == "scored" and checks[check_id].score == 0.0
        assert "larger than 50 MB" in checks[check_id].explanation
    assert result.complete and result.gated and result.reward == 0.0 and not result.passed


def test_a_120_mb_summary_csv_written_in_the_sandbox_fails_through_a_rollout(python_backend):
    task, files = demo_task_document("q3-revenue-summary")
    make = (
        "python3 -c \"f = open('summary.csv', 'wb'); f.write(b'metric,Q3,Q4\\nRevenue,1234.5,1\\nCosts,1,950\\n'); "
        "f.truncate(120 * 1024 * 1024)\" && printf 'Q3 revenue: 1234.5\\n' > report.md && echo 1234.5"
    )
    result = run_rollout(task, policy=ScriptPolicy(make), backend=python_backend, files=files, spec=small_spec(task))
    assert result.error is None, result.error
    check = by_id(result.grade)["q3_revenue"]
    assert check.status == "scored" and check.score == 0.0, check.explanation
    assert result.grade.reward == 0.0 and not result.grade.passed


def test_a_symlinked_output_file_fails_and_a_linked_directory_does_not_count(tmp_path):
    outside = tmp_path / "grader"
    outside.mkdir()
    (outside / "expected.csv").write_text("metric,Q3,Q4\nRevenue,1234.5,1\nCosts,1,950\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.symlink(outside / "expected.csv", workspace / "summary.csv")
    (workspace / "report.md").write_text("1234.5")
    result = grade(q3_rubric(), answer="1234.5", workspace=workspace)
    checks = by_id(result)
    assert checks["csv_exists"].score == 0.0  # a link is not the file the task asked for
    assert checks["q3_revenue"].status == "scored" and checks["q3_revenue"].score == 0.0
    assert "symbolic link" in checks["q3_revenue"].explanation
    assert result.reward == 0.0 and result.gated
    # a link inside the workspace, to a real file there, is still a link
    os.unlink(workspace / "summary.csv")
    (workspace / "real").mkdir()
    (workspace / "real" / "summary.csv").write_text("metric,Q3,Q4\nRevenue,1234.5,1\nCosts,1,950\n")
    os.symlink("real", workspace / "out")
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "cell",
                    "kind": "table_cell",
                    "points": 1,
                    "path": "out/summary.csv",
                    "row": "Revenue",
                    "column": "Q3",
                    "expected": 1234.5,
                },
                {"id": "there", "kind": "file_exists", "points": 1, "path": "out/*.csv"},
            ],
        }
    )
    result = grade(rubric, answer="", workspace=workspace)
    assert [check.score for check in result.checks] == [0.0, 0.0]
    assert "symbolic link" in result.checks[0].explanation and result.complete


def json_rubric(**extra):
    return parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "verdict",
                    "kind": "json_field",
                    "points": 5,
                    "required": True,
                    "pointer": "/ok",
                    "op": "eq",
                    "expected": True,
                    **extra,
                },
                {"id": "says_ok", "kind": "string_match", "points": 1, "mode": "contains", "expected": "ok"},
            ],
        }
    )


def test_deeply_nested_json_fails_a_required_json_field_instead_of_a_recursion_error():
    result = grade(json_rubric(), answer="[" * 100_000 + " ok")
    check = by_id(result)["verdict"]
    assert check.status == "scored" and check.score == 0.0
    assert f"nested deeper than {MAX_JSON_DEPTH}" in check.explanation
    assert result.complete and result.gated and result.reward == 0.0 and not result.passed
    # the same in a file, and just under the limit it parses
    at_the_limit = json.dumps({"ok": True, "x": json.loads("[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1))})
    assert grade(json_rubric(), answer=at_the_limit).checks[0].score == 1.0
    over = json.dumps({"ok": True, "x": json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)})
    assert "nested deeper" in grade(json_rubric(), answer=over).checks[0].explanation


def test_a_bracket_inside_a_string_does_not_count_as_nesting():
    text = json.dumps({"ok": True, "note": "[" * 10_000 + '\\"[' + "{" * 10_000})
    result = grade(json_rubric(), answer=text)
    assert by_id(result)["verdict"].score == 1.0, by_id(result)["verdict"].explanation


def test_deeply_nested_json_in_a_file_fails_too(tmp_path):
    (tmp_path / "out.json").write_text('{"a":' * 5000)
    result = grade(json_rubric(target="file:out.json"), answer="ok", workspace=tmp_path)
    assert by_id(result)["verdict"].score == 0.0 and result.gated


def test_a_4000_line_code_fence_fails_the_check_rather_than_leaving_it_unscored():
    body = "".join(f'    line_{index} = [{index}, {{"k": {index}}}]\n' for index in range(4000))
    answer = "```python\n" + body + "\n```"
    result = grade(json_rubric(), answer=answer)
    check = by_id(result)["verdict"]
    assert check.status == "scored" and check.score == 0.0, check.explanation
    assert "CPU-time budget" not in check.explanation  # not parsed by backtracking until stopped
    assert result.complete
    # an almost-fence (no closing line) is read whole, and fails as not JSON
    assert grade(json_rubric(), answer="```json\n" + "{\n" * 4000).checks[0].score == 0.0


def test_a_fenced_json_answer_is_still_read():
    result = grade(json_rubric(), answer='```json\n{"ok": true}\n```')
    assert by_id(result)["verdict"].score == 1.0


# ------------------------------------------------------------------------------------------------ the rule


def test_an_unscored_required_check_gates_and_the_upper_bound_says_what_it_could_be():
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "safe", "kind": "llm_judge", "points": 2, "required": True, "criterion": "Safe."},
                {"id": "says", "kind": "string_match", "points": 8, "expected": "42"},
            ],
        }
    )
    result = grade(rubric, answer="42", judge=None)
    assert result.checks[0].status == "unscored" and result.checks[0].explanation == "no judge model configured"
    assert (result.reward, result.reward_upper, result.max) == (0.0, 1.0, 10.0)
    assert result.gated and not result.complete and not result.passed


def test_reward_upper_counts_unscored_positive_checks_in_full_and_never_charges_an_unscored_penalty():
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "says", "kind": "string_match", "points": 4, "expected": "42"},
                {"id": "wrong", "kind": "string_match", "points": 4, "expected": "zzz"},
                {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "Explains."},
                {"id": "unsafe", "kind": "llm_judge", "points": -10, "criterion": "Unsafe."},
            ],
        }
    )
    result = grade(rubric, answer="42")
    # earned 4 of max 10 (the judge check stays in max); had it been met: 6 of 10
    assert (result.earned, result.max) == (4.0, 10.0)
    assert result.reward == pytest.approx(0.4) and result.reward_upper == pytest.approx(0.6)


def test_no_answer_earns_more_by_leaving_a_check_unscored_than_by_failing_it():
    """For every way a check can end (met, failed, unscored), the incomplete grade's reward is at most
    the reward of the same grade with that check failed: unscored is never a way up."""
    checks = [
        {"id": "a", "kind": "string_match", "points": 3, "expected": "a"},
        {"id": "b", "kind": "string_match", "points": 2, "expected": "b", "required": True},
        {
            "id": "g",
            "kind": "group",
            "points": 4,
            "aggregate": "mean",
            "checks": [
                {"id": "g1", "kind": "string_match", "points": 1, "expected": "c"},
                {"id": "g2", "kind": "string_match", "points": 1, "expected": "d"},
            ],
        },
    ]
    failing_judge = {"kind": "llm_judge", "criterion": "Met."}
    for answer in ("a b c d", "a b c", "b d", "a c d"):
        scored = grade(parse_rubric({"schema": "gymwright.rubric/v1", "checks": checks}), answer=answer)
        for index, check in enumerate(checks):
            if check["kind"] == "group":
                continue
            # the same check, now one the grader could not score (a judge with no judge configured)
            unscored_checks = copy.deepcopy(checks)
            unscored_checks[index] = {
                **failing_judge,
                "id": check["id"],
                "points": check["points"],
                "required": check.get("required", False),
            }
            open_ = grade(parse_rubric({"schema": "gymwright.rubric/v1", "checks": unscored_checks}), answer=answer)
            failed_reward = scored.reward if not by_id(scored)[check["id"]].score else None
            assert open_.reward <= scored.reward + 1e-9, (answer, check["id"])
            assert open_.reward_upper >= open_.reward and not open_.passed
            if failed_reward is not None:
                assert open_.reward <= failed_reward + 1e-9


def test_a_group_with_unscored_children_is_scored_only_when_they_cannot_change_it():
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "all_of",
                    "kind": "group",
                    "points": 2,
                    "aggregate": "all",
                    "checks": [
                        {"id": "a1", "kind": "string_match", "points": 1, "expected": "zzz"},
                        {"id": "a2", "kind": "llm_judge", "points": 1, "criterion": "c"},
                    ],
                },
                {
                    "id": "any_of",
                    "kind": "group",
                    "points": 2,
                    "aggregate": "any",
                    "checks": [
                        {"id": "b1", "kind": "string_match", "points": 1, "expected": "x"},
                        {"id": "b2", "kind": "llm_judge", "points": 1, "criterion": "c"},
                    ],
                },
                {
                    "id": "open",
                    "kind": "group",
                    "points": 2,
                    "aggregate": "min",
                    "checks": [
                        {"id": "c1", "kind": "string_match", "points": 1, "expected": "x"},
                        {"id": "c2", "kind": "llm_judge", "points": 1, "criterion": "c"},
                    ],
                },
                {
                    "id": "mean_of",
                    "kind": "group",
                    "points": 4,
                    "aggregate": "mean",
                    "checks": [
                        {"id": "d1", "kind": "string_match", "points": 3, "expected": "x"},
                        {"id": "d2", "kind": "llm_judge", "points": 1, "criterion": "c"},
                    ],
                },
            ],
        }
    )
    result = grade(rubric, answer="x")
    checks = by_id(result)
    assert (checks["all_of"].status, checks["all_of"].score) == ("scored", 0.0)  # a1 failed: all fails
    assert (checks["any_of"].status, checks["any_of"].score) == ("scored", 1.0)  # b1 met: any is met
    assert checks["open"].status == "unscored" and "depends on 1 unscored child check" in checks["open"].explanation
    assert checks["mean_of"].status == "unscored"
    # earned 2 (any_of) of max 10; at best + 2 (open) + 4 × 1.0 (mean_of) = 8 of 10
    assert result.reward == pytest.approx(0.2) and result.reward_upper == pytest.approx(0.8)
    assert not result.complete and not result.passed


def test_a_required_child_of_an_unscored_group_gates_the_lower_bound_only():
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "g",
                    "kind": "group",
                    "points": 2,
                    "aggregate": "any",
                    "checks": [
                        {"id": "must", "kind": "llm_judge", "points": 1, "required": True, "criterion": "c"},
                        {"id": "x", "kind": "string_match", "points": 1, "expected": "x"},
                    ],
                },
                {"id": "y", "kind": "string_match", "points": 2, "expected": "y"},
            ],
        }
    )
    result = grade(rubric, answer="x y")
    assert result.gated and result.reward == 0.0 and result.reward_upper == 1.0
