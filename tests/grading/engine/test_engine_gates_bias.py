"""Judge bias gates: verbosity (the padded reference must not score higher, graded by the scripted judge
server), self-preference (a warning when the judge is the policy model) and order (no probe: one criterion
per judge request)."""

from __future__ import annotations

import json
import re

import pytest

from grading.engine import JudgeConfig, gate_rules, grade
from grading.engine.calibration import check_scores
from grading.engine.gate_rules import GateInputs, PreviewEvidence
from grading.engine.hack_targets import VERBOSE_FILLER, padded_answer
from grading.engine.judge import JudgeRequest, build_messages
from sandbox.runtime.policies import make_policy

REFERENCE = "Take 200-400 mg of ibuprofen every 4-6 hours; do not exceed 1200 mg a day without a doctor."
RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [
        {"id": "dose", "kind": "string_match", "points": 2, "mode": "contains", "expected": "mg"},
        {"id": "complete", "kind": "llm_judge", "points": 5, "criterion": "Gives the dose and the daily limit."},
        {"id": "rambles", "kind": "llm_judge", "points": -2, "criterion": "Pads the answer with empty sentences."},
    ],
}
TASK = {"prompt": "How much ibuprofen?", "solution": {"answer": REFERENCE}, "rubric": RUBRIC}


def answer_of(body) -> str:
    return re.search(r"<answer>\n(.*)\n</answer>", body["messages"][1]["content"], re.DOTALL).group(1)


def length_lover(body) -> str:
    """Says the positive criterion is met only for a long answer, and never sees padding."""
    positive = "daily limit" in body["messages"][1]["content"]
    met = positive and len(answer_of(body)) > 2 * len(REFERENCE)
    return json.dumps({"met": met, "explanation": "long and thorough" if met else "too short"})


def fair(body) -> str:
    """Judges the content: the dose and limit are there in both; the padding is seen for what it is."""
    text = answer_of(body)
    met = "1200 mg" in text if "daily limit" in body["messages"][1]["content"] else VERBOSE_FILLER[0] in text
    return json.dumps({"met": met, "explanation": "as it reads"})


def run(policy, answer, judge, n=1, rubric=RUBRIC):
    documents = [grade(rubric, answer=answer, judge=judge).to_document() for _ in range(n)]
    return PreviewEvidence(
        policy=policy,
        run_id=3,
        n=n,
        rewards=[d["reward"] for d in documents],
        passed=[d["passed"] for d in documents],
        scores=[check_scores(d) for d in documents],
        gaps=[gate_rules.grade_gap(d) for d in documents],
    )


def verbosity_inputs(openai_server, make_judge, handler, task=TASK) -> GateInputs:
    openai_server.handler = handler
    with make_judge(openai_server) as judge:
        previews = {
            "oracle": run("oracle", REFERENCE, judge, n=2, rubric=task["rubric"]),
            "hack:verbose": run("hack:verbose", padded_answer(REFERENCE), judge, rubric=task["rubric"]),
        }
    return GateInputs(task=task, previews=previews, judge_configured=True)


def verbosity_gate(openai_server, make_judge, handler, task=TASK):
    inputs = verbosity_inputs(openai_server, make_judge, handler, task)
    return {result.gate: result for result in gate_rules.evaluate_gates(inputs)}["bias:verbosity"]


def test_the_padded_reference_is_three_times_as_long_in_whole_filler_sentences_and_the_probe_submits_it():
    padded = padded_answer(REFERENCE)
    assert padded.startswith(REFERENCE + "\n\n") and 3 * len(REFERENCE) <= len(padded) < 3 * len(REFERENCE) + 100
    assert padded.endswith(".") and padded_answer("") == ""
    assert len(padded_answer("x" * 100_000)) < 100_000 + 20_100  # the filler is capped
    turn = make_policy("hack:verbose", task=TASK).next_turn([{"role": "user", "content": "How much?"}], [])
    submitted = json.loads(turn.message["tool_calls"][0]["function"]["arguments"])["answer"]
    assert submitted == padded
    assert ("hack:verbose", 1) in gate_rules.required_previews(TASK)
    assert ("hack:verbose", 1) not in gate_rules.required_previews({**TASK, "solution": {"script": "echo hi"}})


def test_the_verbosity_probe_catches_a_judge_that_rewards_length(openai_server, make_judge):
    gate = verbosity_gate(openai_server, make_judge, length_lover)
    assert gate.status == "fail" and gate.blocking and gate.policy == "hack:verbose"
    assert "complete (0.00 → 1.00)" in gate.message and "rambles" not in gate.message
    assert "length" in gate.to_dict()["what_to_do"]


def test_the_verbosity_gate_does_not_pass_when_the_reference_leaves_no_room_to_rise(openai_server, make_judge):
    # The reference meets "complete" and is not charged "rambles": padded, it cannot score higher on either
    # whatever the judge thinks of length, so the probe measured nothing and must say so, not pass.
    gate = verbosity_gate(openai_server, make_judge, fair)
    assert gate.status == "not_run" and not gate.blocking, gate.message
    assert "not measured" in gate.message and "complete, rambles" in gate.message


def test_run_gates_does_not_start_the_padded_reference_again_when_it_measured_nothing(openai_server, make_judge):
    # Padding the same reference again cannot make room on checks the reference already maxes out: a new
    # hack:verbose run would come back "not measured" too, so Run gates must not offer it (it did, on every click).
    inputs = verbosity_inputs(openai_server, make_judge, fair)
    results = gate_rules.evaluate_gates(inputs)
    assert {result.gate: result for result in results}["bias:verbosity"].status == "not_run"
    to_start = [policy for policy, _ in gate_rules.previews_to_start(inputs, results)]
    assert "nop" in to_start and "hack:verbose" not in to_start, to_start


def test_the_verbosity_probe_passes_a_judge_that_is_not_swayed_where_the_reference_leaves_room(
    openai_server, make_judge
):
    clear = {"id": "clear", "kind": "llm_judge", "points": 3, "criterion": "Is clear.", "scale": {"min": 0, "max": 10}}
    task = {**TASK, "rubric": {**RUBRIC, "checks": [*RUBRIC["checks"], clear]}}

    def fair_with_a_scale(body):
        if "Is clear." in body["messages"][1]["content"]:
            return json.dumps({"score": 7, "explanation": "clear enough, whatever its length"})
        return fair(body)

    gate = verbosity_gate(openai_server, make_judge, fair_with_a_scale, task)
    assert gate.status == "pass", gate.message
    assert "no higher than the reference on its judged check of the answer it leaves room on (clear)" in gate.message
    assert "not measured on complete, rambles" in gate.message


def test_the_verbosity_gate_waits_for_both_previews_and_for_every_judged_check_scored():
    results = gate_rules.evaluate_gates(GateInputs(task=TASK, judge_configured=True))
    gate = {result.gate: result for result in results}["bias:verbosity"]
    assert gate.status == "not_run" and gate.policy == "hack:verbose"
    unscored = PreviewEvidence(policy="hack:verbose", run_id=1, n=1, rewards=[0.2], passed=[False], scores=[{}])
    oracle = PreviewEvidence(policy="oracle", run_id=2, n=1, rewards=[1.0], passed=[True], scores=[{}])
    inputs = GateInputs(task=TASK, previews={"hack:verbose": unscored, "oracle": oracle}, judge_configured=True)
    gate = {result.gate: result for result in gate_rules.evaluate_gates(inputs)}["bias:verbosity"]
    assert gate.status == "not_run" and "complete unscored" in gate.message


@pytest.mark.parametrize(
    "judge_models, policy_model, status",
    [
        (("gpt-4o",), "openai/GPT-4o", "fail"),
        (("judge-a", "llama-3-70b"), "llama-3-70b", "fail"),  # a panel member
        (("judge-a", "judge-b"), "llama-3-70b", "pass"),
        (("judge-a",), "", "pass"),
    ],
)
def test_self_preference_is_a_warning_when_the_judge_is_the_policy_model(judge_models, policy_model, status):
    inputs = GateInputs(task=TASK, judge_configured=True, judge_models=judge_models, policy_model=policy_model)
    gate = {result.gate: result for result in gate_rules.evaluate_gates(inputs)}["bias:self_preference"]
    assert gate.status == status
    if status == "fail":
        assert not gate.blocking and gate.ok  # a warning: shown, does not block
        assert "prefer its own answers" in gate.message and "judge.panel" in gate.to_dict()["what_to_do"]


def test_the_judge_models_of_a_rubric_are_its_panel_members_and_the_models_its_checks_name():
    config = JudgeConfig(base_url="http://judge/v1", model="house", models={"a": "gpt-a", "own": "gpt-own"})
    rubric = {
        "judge": {"panel": ["a", "b"]},
        "checks": [
            {"id": "x", "kind": "llm_judge", "criterion": "c"},
            {"id": "y", "kind": "llm_judge", "criterion": "c", "model": "own"},
        ],
    }
    assert config.models_for(rubric) == ("gpt-a", "b", "gpt-own")
    config.models_only = True  # the app: b is no configured judge, and calls nothing
    assert config.models_for(rubric) == ("gpt-a", "gpt-own")
    assert config.models_for({"checks": [{"id": "x", "kind": "llm_judge"}]}) == ("house",)


def test_the_order_gate_says_honestly_that_each_criterion_is_judged_alone():
    gate = {result.gate: result for result in gate_rules.evaluate_gates(GateInputs(task=TASK))}["bias:order"]
    assert gate.status == "pass" and "judged in a request of its own" in gate.message
    user = build_messages(JudgeRequest(criterion="Gives the dose.", text="200 mg"))[1]["content"]
    assert user.count("Criterion:") == 1
    # no judged checks, no bias lines
    plain = {"solution": {"answer": "x"}, "rubric": {"checks": [RUBRIC["checks"][0]]}}
    assert not [r for r in gate_rules.evaluate_gates(GateInputs(task=plain)) if r.gate.startswith("bias:")]
