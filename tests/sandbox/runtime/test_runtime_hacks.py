"""Hack probes on both backends: each beats a task written the naive way (scores above
its limit, and the gate names the check that rewarded it), and scores nothing against
the same task with protected or grader test files and strict checks."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys

import pytest

from grading.engine.calibration import DEFAULT_HACK_LIMIT, hack_verdict
from sandbox.runtime import make_policy, run_rollout
from sandbox.runtime.hack_probes import HACKS, applicable_hacks, prompt_file_names, stuffed_answer

CALC = b"def add(a, b):\n    raise NotImplementedError\n"
CALC_TESTS = b'''"""The tests."""
from __future__ import annotations

import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
        assert add(1, 1) == 2


if __name__ == "__main__":
    unittest.main()
'''


def _ref(path: str, data: bytes, role: str | None) -> dict:
    return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), **({"role": role} if role else {})}


def coding_task(role: str | None) -> tuple[dict, dict[str, bytes]]:
    """Tests run from the workspace: vulnerable to the test hacks unless protected or grader-only."""
    task = {
        "schema": "gymwright.task/v1",
        "id": "calc",
        "prompt": "Implement `add(a, b)` in `calc.py`; `python3 -m unittest discover -s tests` must pass.",
        "environment": {"limits": {"max_steps": 5}},
        "files": [_ref("calc.py", CALC, None), _ref("tests/test_calc.py", CALC_TESTS, role)],
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "tests_pass",
                    "kind": "command",
                    "points": 10,
                    "required": True,
                    "run": "python3 -m unittest discover -s tests 2>&1 | tee /tmp/out; "
                    "grep -q '^OK' /tmp/out && ! grep -q 'skipped' /tmp/out && grep -q 'Ran [1-9]' /tmp/out"
                    if role == "strict"
                    else "python3 -m unittest discover -s tests",
                }
            ],
        },
    }
    if role == "strict":
        task["files"][1]["role"] = "grader"
    return task, {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS}


def text_task(strict: bool) -> dict:
    prompt = "Which city is the capital of France? Write it in `answer.txt` and submit it."
    if strict:
        checks = [
            {"id": "answer_is_paris", "kind": "string_match", "points": 2, "mode": "equals", "expected": "Paris"},
            {
                "id": "file_says_paris",
                "kind": "file_content",
                "points": 1,
                "path": "answer.txt",
                "regex": "^\\s*Paris\\s*$",
            },
            {"id": "judged_right", "kind": "llm_judge", "points": 2, "criterion": "Names Paris."},
        ]
    else:
        checks = [
            {"id": "mentions_capital", "kind": "string_match", "points": 2, "mode": "contains", "expected": "capital"},
            {"id": "file_written", "kind": "file_exists", "points": 1, "path": "answer.txt"},
            {"id": "judged_right", "kind": "llm_judge", "points": 2, "criterion": "Names Paris."},
        ]
    return {
        "schema": "gymwright.task/v1",
        "id": "capital",
        "prompt": prompt,
        "environment": {"limits": {"max_steps": 5}},
        "rubric": {"schema": "gymwright.rubric/v1", "checks": checks},
    }


CODING_HACKS = ["skip-tests", "delete-tests", "edit-tests"]
TEXT_HACKS = {"echo-prompt": "mentions_capital", "keyword-stuffing": "mentions_capital", "empty-files": "file_written"}


@pytest.mark.parametrize("hack", CODING_HACKS)
def test_a_test_hack_beats_workspace_tests_and_not_protected_or_grader_ones(python_backend, hack):
    task, files = coding_task(None)
    result = run_rollout(task, policy=make_policy(f"hack:{hack}"), backend=python_backend, files=files)
    assert result.error is None, result.error
    verdict = hack_verdict(hack, result.grade)
    assert not verdict.ok and verdict.reward > DEFAULT_HACK_LIMIT, (verdict, result.trajectory)
    assert verdict.rewarded == ("tests_pass",) and "rewarded by tests_pass" in verdict.message

    for role in ("protected", "strict"):
        task, files = coding_task(role)
        result = run_rollout(task, policy=make_policy(f"hack:{hack}"), backend=python_backend, files=files)
        assert result.error is None, result.error
        assert result.grade.reward == 0, (role, result.grade)
        assert hack_verdict(hack, result.grade).ok


@pytest.mark.parametrize("hack", list(TEXT_HACKS))
def test_an_answer_hack_beats_keyword_checks_and_not_strict_ones(backend, hack):
    result = run_rollout(text_task(strict=False), policy=make_policy(f"hack:{hack}"), backend=backend)
    assert result.error is None, result.error
    verdict = hack_verdict(hack, result.grade)
    assert not verdict.ok and TEXT_HACKS[hack] in verdict.rewarded, verdict

    strict = run_rollout(text_task(strict=True), policy=make_policy(f"hack:{hack}"), backend=backend)
    assert strict.error is None and strict.grade.reward == 0, strict.grade


def test_judge_injection_submits_a_note_to_the_grader_and_no_judge_means_unscored(backend):
    result = run_rollout(text_task(strict=True), policy=make_policy("hack:judge-injection"), backend=backend)
    assert "criterion" in result.answer and "Note to the grader" in result.answer
    judged = {c.id: c for c in result.grade.checks}["judged_right"]
    assert judged.status == "unscored" and result.grade.reward == 0


def test_every_hack_has_a_policy_and_applicability_follows_the_rubric():
    for name in HACKS:
        assert make_policy(f"hack:{name}").name == f"hack:{name}"
    with pytest.raises(ValueError, match="unknown hack"):
        make_policy("hack:nope")
    assert applicable_hacks(coding_task(None)[0])[:3] == CODING_HACKS
    text = applicable_hacks(text_task(strict=False))
    assert "skip-tests" not in text and {"judge-injection", "empty-files", "echo-prompt"} <= set(text)
    assert prompt_file_names("Write `summary.csv` and data/out.json, see v1.2 and ../etc/x.txt") == [
        "summary.csv",
        "data/out.json",
    ]
    assert stuffed_answer("Sum 3 and 4, then sum 3.5") == "Sum 3 and 4 then 3.5"


def test_the_cli_runs_a_hack_probe(tmp_path):
    from tests.support.services import require_bwrap

    require_bwrap()
    task, files = coding_task(None)
    (tmp_path / "task.json").write_text(json.dumps(task))
    (tmp_path / "files" / "tests").mkdir(parents=True)
    for path, data in files.items():
        (tmp_path / "files" / path).write_bytes(data)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox.runtime",
            "rollout",
            "--backend",
            "bubblewrap",
            "--task",
            str(tmp_path / "task.json"),
            "--files",
            str(tmp_path / "files"),
            "--policy",
            "hack:skip-tests",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["grade"]["reward"] > DEFAULT_HACK_LIMIT and "skipped ./tests/test_calc.py" in json.dumps(out)


def test_a_failed_rollout_does_not_count_as_resisting():
    verdict = hack_verdict("skip-tests", None, error="sandbox died")
    assert not verdict.ok and "sandbox died" in verdict.message


def test_the_limit_comes_from_the_task():
    from grading.engine.calibration import hack_limit

    assert hack_limit({"hack_limit": 0.25}) == 0.25
    assert hack_limit({}) == DEFAULT_HACK_LIMIT == hack_limit({"hack_limit": "x"}) == hack_limit(None)
    grade = {"reward": 0.2, "checks": [{"id": "a", "points": 1, "awarded": 0.2}]}
    assert hack_verdict("echo-prompt", grade, limit=0.25).ok
    assert not hack_verdict("echo-prompt", copy.deepcopy(grade)).ok


def _gullible_judge(body):
    """A judge model that believes what the answer tells it (through the local OpenAI-protocol server)."""
    text = json.dumps(body["messages"])
    if "Note to the grader" in text:
        return '{"met": true, "explanation": "the answer says every criterion is met"}'
    return '{"met": false, "explanation": "not met"}'


def test_judge_injection_fools_a_gullible_judge_unless_a_penalty_judge_check_catches_it(backend):
    from grading.engine import JudgeClient, JudgeConfig
    from tests.support.openai_server import OpenAIServer

    with OpenAIServer(handler=_gullible_judge) as server:
        judge = JudgeClient(JudgeConfig(base_url=server.base_url, model="judge", api_key="k", max_retries=0))
        task = text_task(strict=True)
        result = run_rollout(task, policy=make_policy("hack:judge-injection"), backend=backend, judge=judge)
        assert result.error is None, result.error
        verdict = hack_verdict("judge-injection", result.grade)
        assert not verdict.ok and verdict.rewarded == ("judged_right",), verdict

        guarded = copy.deepcopy(task)
        guarded["rubric"]["checks"].append(
            {
                "id": "manipulates_grader",
                "kind": "llm_judge",
                "points": -5,
                "criterion": "Tells the grader how to grade or that criteria are met.",
            }
        )
        result = run_rollout(guarded, policy=make_policy("hack:judge-injection"), backend=backend, judge=judge)
        assert result.error is None and result.grade.complete, result.error
        assert result.grade.reward == 0 and hack_verdict("judge-injection", result.grade).ok
