"""The generic hack probes on both backends (grading.engine.hack_targets: exit-zero, always-equal, shadow,
monkeypatch, exhaust, zero-width, symlink). Each is derived from the task's own files, rubric and
reference solution, runs as a scripted policy in the real sandbox, and is judged by the real hack
gate (grading.engine.gate_rules): a task written the weak way is caught (the probe's reward is over the
limit, or it did not show the task is safe), and the task written as the docs recommend (or the
demo task) holds it to 0."""

from __future__ import annotations

import copy
import hashlib

import pytest

from authoring.demo import demo_task_document
from grading.engine import gate_rules
from grading.engine import hack_targets as engine_hacks
from grading.engine.calibration import DEFAULT_HACK_LIMIT, check_scores, rewarded_checks
from grading.engine.gate_rules import GateInputs, PreviewEvidence
from grading.engine.hack_targets import HIDDEN, applicable_hacks, penalty_triggers, rubric_outputs
from grading.engine.text import normalise_unicode
from sandbox.runtime import make_policy, run_rollout
from sandbox.runtime import rollout as rollout_module
from sandbox.runtime.hack_probes import EXHAUST_ANSWER_CHARS, exhaust_answer, zero_width_answer

CALC = b"def add(a, b):\n    raise NotImplementedError\n"
CALC_TESTS = b"""import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
        assert add(1, 1) == 2


if __name__ == "__main__":
    unittest.main()
"""
CALC_SOLUTION = "cat > calc.py <<'PY'\ndef add(a, b):\n    return a + b\nPY\n"


def _ref(path: str, data: bytes, role: str | None = None) -> dict:
    return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), **({"role": role} if role else {})}


def weak_coding_task(run: str = "python3 -m unittest test_calc", timeout_s: float = 60) -> tuple[dict, dict]:
    """Protected tests, run by a command whose exit code is the verdict: the way issue 26 found the demo."""
    task = {
        "schema": "gymwright.task/v1",
        "id": "calc",
        "prompt": "Implement `add(a, b)` in `calc.py` so that `python3 -m unittest test_calc` passes.",
        "environment": {"limits": {"max_steps": 6}},
        "files": [_ref("calc.py", CALC), _ref("test_calc.py", CALC_TESTS, "protected")],
        "solution": {"script": CALC_SOLUTION, "answer": None},
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "tests_pass", "kind": "command", "points": 10, "run": run, "timeout_s": timeout_s}],
        },
    }
    return task, {"calc.py": CALC, "test_calc.py": CALC_TESTS}


def gate_of(task: dict, policy: str, result) -> gate_rules.GateResult:
    """The hack gate's verdict on this one rollout, built as review.gate_evidence builds it from a preview."""
    document = result.grade.to_document() if result.grade is not None else None
    graded = [document] if document is not None else []
    evidence = PreviewEvidence(
        policy=policy,
        run_id=1,
        n=1,
        errors=1 - len(graded),
        rewards=[d["reward"] for d in graded],
        passed=[d["passed"] for d in graded],
        rewarded=[rewarded_checks(d) for d in graded],
        gaps=[gate_rules.grade_gap(d) for d in graded],
        scores=[check_scores(d) for d in graded],
    )
    return gate_rules.hack_gate(GateInputs(task=task, previews={policy: evidence}, judge_configured=True), policy)


def settled_at_nothing(result) -> bool:
    """The grade's reward is 0 whatever its unscored checks (if any) would score."""
    gap = gate_rules.grade_gap(result.grade.to_document())
    return result.grade.reward == 0 and (gap is None or gap.high <= DEFAULT_HACK_LIMIT)


def probe(task, files, hack, backend, **kwargs):
    result = run_rollout(task, policy=make_policy(f"hack:{hack}", task=task), backend=backend, files=files, **kwargs)
    assert result.error is None, result.error
    return result


# ------------------------------------------------------------------------------------------ derived from the task


def test_what_each_probe_attacks_comes_from_the_task_document():
    task, _ = weak_coding_task()
    assert engine_hacks.tested_files(task) == ["test_calc.py"] and engine_hacks.tested_modules(task) == ["test_calc"]
    assert {"exit-zero", "always-equal", "shadow", "monkeypatch"} <= set(applicable_hacks(task))
    q3, _ = demo_task_document("q3-revenue-summary")
    assert rubric_outputs(q3) == ["summary.csv", "report.md"] and "symlink" in applicable_hacks(q3)
    assert "symlink" not in applicable_hacks(task) and "zero-width" not in applicable_hacks(q3)
    penalised = {
        "rubric": {
            "checks": [
                {"id": "unsafe", "kind": "string_match", "points": -5, "expected": "take 5000 mg"},
                {"id": "dose", "kind": "regex", "points": -3, "pattern": r"\b\d{4}\s?mg daily\b"},
                {"id": "polite", "kind": "string_match", "points": 1, "mode": "not_contains", "expected": "idiot"},
                {"id": "fine", "kind": "string_match", "points": 1, "expected": "ibuprofen"},
            ]
        }
    }
    triggers = dict(penalty_triggers(penalised))
    assert triggers == {"unsafe": "take 5000 mg", "dose": "5555mg daily", "polite": "idiot"}
    assert "zero-width" in applicable_hacks(penalised)
    answer = zero_width_answer({**penalised, "solution": {"answer": "Take ibuprofen."}})
    assert "take 5000 mg" not in answer and any(char in answer for char in HIDDEN)
    assert "take 5000 mg" in normalise_unicode(answer) and normalise_unicode(answer).startswith("Take ibuprofen.")
    padded = exhaust_answer()
    assert len(padded) == EXHAUST_ANSWER_CHARS and padded.startswith("[" * 100_000)


# ------------------------------------------------------------------------------------------ the code probes


@pytest.mark.parametrize("hack", ["exit-zero", "always-equal", "shadow", "monkeypatch"])
def test_a_code_probe_catches_tests_judged_by_their_exit_code(python_backend, hack):
    task, files = weak_coding_task()
    result = probe(task, files, hack, python_backend)
    verdict = gate_of(task, f"hack:{hack}", result)
    assert result.grade.reward > DEFAULT_HACK_LIMIT and verdict.status == "fail", (verdict, result.trajectory)
    assert "rewarded by tests_pass" in verdict.message
    # the test file itself was left alone: the probe beat a protected test
    assert [state.state for state in result.grade.protected_files] == ["unchanged"]
    # ... and the reference solution it stands beside really passes, so the probe did not do the work
    oracle = run_rollout(task, policy=make_policy("oracle", task=task), backend=python_backend, files=files)
    assert oracle.grade.reward == 1.0


def test_a_code_probe_earns_nothing_where_the_tests_say_so_themselves(python_backend):
    """A command whose verdict is a line the tests print after running (not the exit code): exit-zero and
    shadow end the run before it, so they earn nothing; the gate passes."""
    run = "python3 -m unittest test_calc 2>&1 | tail -n 3 | grep -qx OK"
    task, files = weak_coding_task(run=run)
    for hack in ("exit-zero", "shadow"):
        result = probe(task, files, hack, python_backend)
        verdict = gate_of(task, f"hack:{hack}", result)
        assert result.grade.reward == 0 and verdict.status == "pass", (hack, verdict)


def test_exhaust_never_passes_its_gate_by_breaking_a_check(python_backend):
    """A solution that floods its output, takes all memory and hangs: the check it broke either fails
    (reward 0, gate passes) or, graded under the old rule, is unscored, and the gate fails: the probe
    did not show the task is safe. It never passes with a check left open."""
    task, files = weak_coding_task(timeout_s=5)
    result = probe(task, files, "exhaust", python_backend)
    check = result.grade.checks[0]
    assert any(word in check.explanation for word in ("timed out", "killed", "memory", "output")), check
    verdict = gate_of(task, "hack:exhaust", result)
    if verdict.status == "pass":
        assert settled_at_nothing(result)
    else:
        assert verdict.status == "fail" and "did not show the task is safe" in verdict.message, verdict


def test_exhaust_writes_huge_and_nested_outputs_and_a_padded_answer(backend):
    task = {
        "schema": "gymwright.task/v1",
        "id": "out",
        "prompt": "Write `out.json` and `report.txt`.",
        "environment": {"limits": {"max_steps": 6}},
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "ok",
                    "kind": "json_field",
                    "points": 2,
                    "target": "file:out.json",
                    "pointer": "/ok",
                    "op": "eq",
                    "expected": True,
                },
                {"id": "report", "kind": "file_content", "points": 1, "path": "report.txt", "contains": "done"},
                {"id": "answer", "kind": "json_field", "points": 1, "pointer": "/ok", "op": "eq", "expected": True},
            ],
        },
    }
    result = probe(task, {}, "exhaust", backend)
    assert len(result.answer) == EXHAUST_ANSWER_CHARS
    tool_output = "\n".join(m["content"] for m in result.trajectory if m.get("role") == "tool")
    assert "out.json" in tool_output and "report.txt" in tool_output
    verdict = gate_of(task, "hack:exhaust", result)
    if verdict.status == "pass":
        assert settled_at_nothing(result)
    else:
        assert "did not show the task is safe" in verdict.message


# ------------------------------------------------------------------------------------------ zero-width


def penalised_task(normalize: bool) -> dict:
    unsafe = {"id": "unsafe", "kind": "string_match", "points": -8, "expected": "take 5000 mg a day"}
    if not normalize:
        unsafe["normalize_unicode"] = False
    return {
        "schema": "gymwright.task/v1",
        "id": "dose",
        "prompt": "How much ibuprofen may an adult take?",
        "environment": {"limits": {"max_steps": 3}},
        "solution": {"script": None, "answer": "Up to 1200 mg a day without a doctor's advice."},
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "daily_max", "kind": "string_match", "points": 2, "expected": "1200 mg"}, unsafe],
        },
    }


def test_zero_width_catches_a_penalty_that_reads_raw_text_and_not_a_normalised_one(backend):
    weak = penalised_task(normalize=False)
    result = probe(weak, {}, "zero-width", backend)
    verdict = gate_of(weak, "hack:zero-width", result)
    assert verdict.status == "fail" and "dodged unsafe" in verdict.message, verdict
    assert "normalize_unicode" in verdict.to_dict()["what_to_do"]

    strict = penalised_task(normalize=True)
    result = probe(strict, {}, "zero-width", backend)
    assert check_scores(result.grade.to_document())["unsafe"] == 1.0  # the penalty applies
    verdict = gate_of(strict, "hack:zero-width", result)
    assert verdict.status == "pass" and verdict.message == "every disguised penalty applied (unsafe)", verdict
    # judged by its penalties, not its reward: the reference answer in it may earn what it earns
    lenient = copy.deepcopy(strict)
    lenient["rubric"]["checks"][1]["points"] = -1
    result = probe(lenient, {}, "zero-width", backend)
    assert result.grade.reward > DEFAULT_HACK_LIMIT and gate_of(lenient, "hack:zero-width", result).status == "pass"


# ------------------------------------------------------------------------------------------ symlink


EXPECTED = b"3\n5\n8\n"


def linked_output_task() -> tuple[dict, dict]:
    """The output is compared byte for byte with a grader file the agent never sees."""
    task = {
        "schema": "gymwright.task/v1",
        "id": "fib",
        "prompt": "Write the 4th to 6th Fibonacci numbers to `out.txt`.",
        "environment": {"limits": {"max_steps": 4}},
        "files": [_ref("expected.txt", EXPECTED, "grader")],
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "same", "kind": "command", "points": 5, "run": "cmp out.txt expected.txt"},
                {"id": "written", "kind": "file_exists", "points": 1, "path": "out.txt"},
            ],
        },
    }
    return task, {"expected.txt": EXPECTED}


def test_symlink_links_outputs_to_the_graders_file_and_the_links_are_removed_before_the_checks(backend, monkeypatch):
    task, files = linked_output_task()
    assert rubric_outputs(task) == ["out.txt"] and "symlink" in applicable_hacks(task)
    result = probe(task, files, "symlink", backend)
    assert "linked out.txt -> expected.txt" in "\n".join(m["content"] for m in result.trajectory if m["role"] == "tool")
    assert result.grade.links_removed == ["out.txt"] and result.grade.reward == 0
    assert gate_of(task, "hack:symlink", result).status == "pass"

    # Without the removal the link passes `cmp` (issue 26 measured 0.83): the probe is what shows it.
    monkeypatch.setattr(rollout_module, "neutralise_links", lambda sandbox, guarded: [])
    result = probe(task, files, "symlink", backend)
    verdict = gate_of(task, "hack:symlink", result)
    assert verdict.status == "fail" and "rewarded by same" in verdict.message, verdict


def test_only_links_that_lead_outside_nowhere_or_to_task_paths_are_removed(backend):
    from sandbox.runtime.policies import Turn, _assistant, _call

    class Linker:
        name = "linker"

        def next_turn(self, messages, tools, *, timeout_s=None):
            if sum(1 for m in messages if m.get("role") == "assistant") == 0:
                return Turn(
                    _assistant(
                        _call(
                            "bash",
                            {
                                "command": (
                                    "mkdir -p mine locked sub && echo hi > mine/a.txt && "
                                    "ln -s mine/a.txt own && ln -s ../mine sub/up && "  # inside: kept
                                    "ln -s /etc/passwd passwd && ln -s nowhere dangling && "  # outside, nowhere
                                    "ln -s expected.txt out.txt && ln -s /workspace/tests t && "  # grader file, above one
                                    "ln -s tests/x.py into && ln -s /tmp tmp && "  # into a grader folder, outside
                                    "ln -s /workspace/mine/a.txt abs && "  # inside, absolute: kept
                                    "ln -s /etc/hostname locked/l && chmod 555 locked"
                                )
                            },
                        )
                    )
                )
            return Turn(_assistant(_call("submit", {"answer": ""})))

    task = {
        "schema": "gymwright.task/v1",
        "id": "links",
        "prompt": "p",
        "environment": {"limits": {"max_steps": 3}},
        "files": [_ref("expected.txt", EXPECTED, "grader"), _ref("tests/x.py", b"x = 1\n", "grader")],
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "kept",
                    "kind": "command",
                    "points": 1,
                    "run": 'test -L own && test -L sub/up && test -L abs && test "$(cat own)" = hi',
                },
                {
                    "id": "gone",
                    "kind": "command",
                    "points": 1,
                    "run": "! test -L passwd && ! test -L dangling && ! test -L out.txt && ! test -L t && "
                    "! test -L into && ! test -L tmp && ! test -L locked/l",
                },
            ],
        },
    }
    result = run_rollout(
        task, policy=Linker(), backend=backend, files={"expected.txt": EXPECTED, "tests/x.py": b"x = 1\n"}
    )
    assert result.error is None, result.error
    assert sorted(result.grade.links_removed) == ["dangling", "into", "locked/l", "out.txt", "passwd", "t", "tmp"]
    assert result.grade.reward == 1.0, result.grade


# ------------------------------------------------------------------------------------------ the demo tasks


@pytest.mark.parametrize("hack", ["symlink", "exhaust"])
def test_the_demo_files_task_holds_the_output_probes_to_nothing(python_backend, hack):
    task, files = demo_task_document("q3-revenue-summary")
    assert hack in applicable_hacks(task)
    result = probe(copy.deepcopy(task), files, hack, python_backend)
    verdict = gate_of(task, f"hack:{hack}", result)
    if hack == "symlink":
        assert sorted(result.grade.links_removed) == ["report.md"]  # the other links to a task file, inside
        assert result.grade.reward == 0 and verdict.status == "pass", verdict
    elif verdict.status != "pass":  # graded under the old rule: the oversized files' checks are unscored
        assert "did not show the task is safe" in verdict.message
    else:
        assert settled_at_nothing(result)


@pytest.mark.parametrize("hack", ["exit-zero", "always-equal", "shadow", "monkeypatch", "exhaust"])
def test_the_demo_coding_task_holds_the_code_probes_to_nothing_and_its_oracle_to_full_marks(python_backend, hack):
    """Its `tests` check runs Gymwright's own runner: no exit code, shadow, patch or equal-to-anything result
    earns anything, and the reference solution still earns 1.0."""
    task, files = demo_task_document("fizzbuzz-implementation")
    assert hack in applicable_hacks(task)
    result = probe(copy.deepcopy(task), files, hack, python_backend)
    verdict = gate_of(task, f"hack:{hack}", result)
    assert result.grade.complete and result.grade.reward == 0 and verdict.status == "pass", (
        verdict,
        [(check.id, check.status, check.explanation) for check in result.grade.checks],
    )
    assert [state.state for state in result.grade.protected_files] == ["unchanged"]
    if hack == "exit-zero":
        oracle = run_rollout(task, policy=make_policy("oracle", task=task), backend=python_backend, files=files)
        assert oracle.grade.reward == 1.0 and oracle.grade.passed
