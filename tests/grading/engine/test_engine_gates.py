"""Sanity gate maths: hand-made evidence, expected verdicts."""

from grading.engine import gate_rules
from grading.engine.gate_rules import GateInputs, GateResult, PreviewEvidence


def task(**overrides):
    document = {
        "solution": {"answer": "42"},
        "rubric": {"checks": [{"id": "a", "kind": "regex"}], "probes": [{"answer": "", "max_reward": 0.0}]},
    }
    document.update(overrides)
    return document


def evidence(policy, rewards, passed=None, errors=0):
    return PreviewEvidence(
        policy=policy,
        run_id=7,
        n=len(rewards) + errors,
        rewards=rewards,
        passed=passed if passed is not None else [r >= 0.5 for r in rewards],
        errors=errors,
    )


def by_gate(results):
    return {result.gate: result for result in results}


def test_with_no_previews_the_preview_gates_are_not_run_and_run_gates_asks_for_them():
    results = by_gate(gate_rules.evaluate_gates(GateInputs(task=task(), judge_configured=True, example_answers=[])))
    assert {name: r.status for name, r in results.items()} == {
        "rubric": "pass",
        "oracle": "not_run",
        "nop": "not_run",
        "probe:0": "not_run",
        "examples": "pass",
        "judge": "pass",
        "judge_validated": "pass",
        "hack:echo-prompt": "not_run",
        "hack:keyword-stuffing": "not_run",
        "hack:exhaust": "not_run",
    }
    hacks = [("hack:echo-prompt", 1), ("hack:keyword-stuffing", 1), ("hack:exhaust", 1)]
    assert gate_rules.missing_previews(task(), {}) == [("oracle", 3), ("nop", 3), ("probe:", 1), *hacks]
    assert gate_rules.missing_previews(task(), {"oracle": None}) == [("nop", 3), ("probe:", 1), *hacks]


def test_oracle_must_always_pass_nop_and_probes_stay_under_their_caps():
    inputs = GateInputs(
        task=task(rubric={"checks": [], "probes": [{"answer": "x", "max_reward": 0.05}]}),
        previews={
            "oracle": evidence("oracle", [1.0, 1.0, 0.4]),
            "nop": evidence("nop", [0.0, 0.1, 0.0]),
            "probe:x": evidence("probe:x", [0.06]),
        },
    )
    results = by_gate(gate_rules.evaluate_gates(inputs))
    assert results["oracle"].status == "fail" and "2 of 3 passed" in results["oracle"].message
    assert results["nop"].status == "pass"  # 0.1 is allowed: ≤ 0.1
    assert results["probe:0"].status == "fail" and "0.06 > 0.05" in results["probe:0"].message
    assert results["probe:0"].run_id == 7 and results["probe:0"].policy == "probe:x"


def test_a_nop_over_the_cap_and_an_oracle_with_errored_rollouts_fail():
    inputs = GateInputs(
        task=task(),
        previews={"oracle": evidence("oracle", [1.0, 1.0], errors=1), "nop": evidence("nop", [0.0, 0.11, 0.0])},
    )
    results = by_gate(gate_rules.evaluate_gates(inputs))
    assert results["oracle"].status == "fail" and "1 of 3 rollouts ended without a grade" in results["oracle"].message
    assert results["nop"].status == "fail"


def test_no_solution_fails_the_oracle_gate_unless_a_passing_example_stands_in_and_judge_checks_need_a_judge():
    document = task(
        solution={"script": None, "answer": None},
        rubric={"checks": [{"id": "g", "kind": "group", "checks": [{"id": "j", "kind": "llm_judge"}]}]},
    )
    results = by_gate(gate_rules.evaluate_gates(GateInputs(task=document)))
    oracle = results["oracle"]
    assert oracle.status == "fail" and oracle.message == (
        "no reference solution, and no example answer expected to pass that passes: nothing shows the task can be solved"
    )
    assert oracle.to_dict()["what_to_do"].startswith(
        "Add a reference solution (solution.script and/or solution.answer)"
    )
    assert results["judge"].status == "fail"
    assert ("oracle", 3) not in gate_rules.required_previews(document)
    assert (
        by_gate(gate_rules.evaluate_gates(GateInputs(task=document, judge_configured=True)))["judge"].status == "pass"
    )

    def oracle_with(*examples):
        return by_gate(gate_rules.evaluate_gates(GateInputs(task=document, example_answers=list(examples))))["oracle"]

    passing = gate_rules.ExampleAnswerResult(name="full marks", ok=True, status="as_expected", expect="pass")
    failing = gate_rules.ExampleAnswerResult(name="empty", ok=True, status="as_expected", expect="fail")
    pending = gate_rules.ExampleAnswerResult(
        name="full marks", ok=False, status="pending", expect="pass", message="not graded yet"
    )
    wrong = gate_rules.ExampleAnswerResult(
        name="full marks", ok=False, status="unexpected", expect="pass", message="expected pass, got fail"
    )
    assert oracle_with(passing, failing).status == "pass"
    assert "“full marks” passes as expected and stands in" in oracle_with(passing).message
    # an example expected to fail shows nothing; one still being graded leaves the gate open
    assert oracle_with(failing).status == "fail" and oracle_with(wrong).status == "fail"
    assert oracle_with(pending).status == "not_run" and "once graded: not graded yet" in oracle_with(pending).message


def test_example_answers_not_gradable_here_are_not_run_but_do_not_block():
    results = by_gate(gate_rules.evaluate_gates(GateInputs(task=task())))
    assert results["examples"].status == "not_run" and results["examples"].ok
    failing = gate_rules.ExampleAnswerResult(name="half-right", ok=False, message="expected 0.5, got 1.0")
    result = by_gate(gate_rules.evaluate_gates(GateInputs(task=task(), example_answers=[failing])))["examples"]
    assert result.status == "fail" and "half-right: expected 0.5, got 1.0" in result.message


def test_a_registered_gate_is_evaluated_and_its_previews_are_requested():
    def evaluate(inputs):
        seen = inputs.previews.get("hack:empty")
        return GateResult("hack:empty", "Hack fails", "not_run" if seen is None else "pass", "")

    try:
        gate_rules.register_gate(
            "hack:empty", title="Hack fails", evaluate=evaluate, previews=lambda document: [("hack:empty", 2)]
        )
        assert ("hack:empty", 2) in gate_rules.required_previews(task())
        assert by_gate(gate_rules.evaluate_gates(GateInputs(task=task())))["hack:empty"].status == "not_run"
    finally:
        gate_rules.unregister_gate("hack:empty")


def test_every_applicable_hack_probe_must_stay_under_the_task_limit_and_a_failing_one_names_its_checks():
    document = task(
        prompt="Write `answer.txt`.",
        rubric={
            "checks": [
                {"id": "tests_pass", "kind": "command"},
                {"id": "says", "kind": "string_match"},
                {"id": "judged", "kind": "llm_judge"},
                {"id": "written", "kind": "file_exists"},
            ]
        },
    )
    policies = [
        f"hack:{name}"
        for name in (
            "skip-tests",
            "delete-tests",
            "edit-tests",
            "echo-prompt",
            "keyword-stuffing",
            "judge-injection",
            "empty-files",
            "exit-zero",
            "always-equal",
            "shadow",
            "monkeypatch",
            "exhaust",
        )
    ]
    # (hack:verbose, the padded reference, is bias:verbosity's preview: the task has a reference answer to pad)
    assert [policy for policy, n in gate_rules.required_previews(document) if policy.startswith("hack:")] == [
        *policies,
        "hack:verbose",
    ]
    previews = {policy: evidence(policy, [0.0]) for policy in policies}
    previews["hack:skip-tests"] = PreviewEvidence(
        policy="hack:skip-tests",
        run_id=9,
        n=2,
        rewards=[0.0, 0.83],
        passed=[False, True],
        rewarded=[(), ("tests_pass",)],
    )
    previews["hack:echo-prompt"] = PreviewEvidence(
        policy="hack:echo-prompt", run_id=10, n=1, rewards=[0.2], passed=[False], rewarded=[("says",)]
    )
    results = by_gate(gate_rules.evaluate_gates(GateInputs(task=document, previews=previews)))
    skip = results["hack:skip-tests"]
    assert skip.status == "fail" and skip.run_id == 9 and skip.policy == "hack:skip-tests"
    assert "0.83" in skip.message and "rewarded by tests_pass" in skip.message
    assert results["hack:echo-prompt"].status == "fail" and "rewarded by says" in results["hack:echo-prompt"].message
    assert results["hack:delete-tests"].status == "pass"
    # The task may allow more (metadata.hack_limit); the nop gate follows the same limit.
    lenient = by_gate(
        gate_rules.evaluate_gates(
            GateInputs(
                task={**document, "metadata": {"hack_limit": 0.25}},
                previews={**previews, "nop": evidence("nop", [0.2])},
            )
        )
    )
    assert lenient["hack:echo-prompt"].status == "pass" and lenient["hack:skip-tests"].status == "fail"
    assert lenient["nop"].status == "pass" and lenient["nop"].title == "Nop scores ≤ 0.25"


def test_a_probe_is_named_by_its_answer_and_the_empty_answer_in_words():
    """A probe's gate read `Probe 1 “” scores ≤ 0` for the empty answer."""
    assert gate_rules.probe_shown("") == "(the empty answer)"
    assert gate_rules.probe_shown("Thought process:") == "“Thought process:”"
    assert gate_rules.probe_shown("x" * 50) == "“" + "x" * 40 + "…”"
