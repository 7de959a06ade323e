"""Sanity gates on incomplete grades (some check unscored: no judge, a failing judge): a gate is
decided only where no score of the unscored checks could change its verdict, else it is not run
and "Run gates" starts its preview again. Grades come from the real engine (`grade()` without a
judge, or with one that answers 503)."""

from __future__ import annotations

from authoring.demo import IBUPROFEN_ANSWER, IBUPROFEN_RUBRIC
from grading.engine import JudgeClient, JudgeConfig, gate_rules, grade
from grading.engine.calibration import rewarded_checks
from grading.engine.gate_rules import GateInputs, PreviewEvidence
from tests.support.openai_server import Reply


def rubric(*checks, threshold=0.7):
    return {"schema": "gymwright.rubric/v1", "pass_threshold": threshold, "checks": list(checks)}


def regex(check_id, points, pattern, **extra):
    return {"id": check_id, "kind": "regex", "points": points, "pattern": pattern, **extra}


def judged(check_id, points, **extra):
    return {"id": check_id, "kind": "llm_judge", "points": points, "criterion": f"{check_id}.", **extra}


def document(rubric_document, answer, judge=None):
    return grade(rubric_document, answer=answer, judge=judge).model_dump(mode="json", by_alias=True)


def evidence(policy, documents, errors=0):
    """What review.gate_evidence builds from a run's graded rollouts."""
    return PreviewEvidence(
        policy=policy,
        run_id=5,
        n=len(documents) + errors,
        errors=errors,
        rewards=[d["reward"] for d in documents],
        passed=[d["passed"] for d in documents],
        rewarded=[rewarded_checks(d) for d in documents],
        gaps=[gate_rules.grade_gap(d) for d in documents],
    )


def task(rubric_document, **extra):
    return {"prompt": "Say it.", "solution": {"answer": "x"}, "rubric": rubric_document, **extra}


def by_gate(results):
    return {result.gate: result for result in results}


# ------------------------------------------------------------------------------------------------ grade_gap


def test_a_complete_grade_has_no_gap_and_an_incomplete_one_spans_what_its_unscored_checks_allow():
    assert gate_rules.grade_gap(document(rubric(regex("says", 1, "yes")), "yes")) is None
    # 6 points scored, a 2-point judge check and a -1 judge penalty unscored: max is 8 already (the
    # unscored check stays in it); the reward, 6/8, is the lower bound of the scored checks; at best
    # 8/8 (reward_upper), at worst (6 - 1)/8 with the penalty charged.
    incomplete = document(rubric(regex("says", 6, "yes"), judged("good", 2), judged("bad", -1)), "yes")
    assert incomplete["complete"] is False and incomplete["reward"] == 0.75 and incomplete["reward_upper"] == 1.0
    gap = gate_rules.grade_gap(incomplete)
    assert (gap.low, gap.high) == (0.625, 1.0) and gap.low <= incomplete["reward"] <= gap.high
    assert gap.reasons == ("judge checks unscored: no judge was configured when it ran",)
    assert gap.needs_judge and not gap.gated
    # An unscored positive check can only raise the maximum: 1 of 1 scored may end 1 of 5.
    gap = gate_rules.grade_gap(document(rubric(regex("says", 1, "yes"), judged("good", 4)), "yes"))
    assert (gap.low, gap.high) == (0.2, 1.0)


def test_an_unscored_required_check_may_still_gate_and_a_failed_one_has_gated():
    gap = gate_rules.grade_gap(document(rubric(regex("says", 9, "yes"), judged("safe", 1, required=True)), "yes"))
    assert (gap.low, gap.high) == (0.0, 1.0) and not gap.gated
    gap = gate_rules.grade_gap(document(rubric(regex("says", 9, "yes", required=True), judged("good", 1)), "no"))
    assert (gap.low, gap.high) == (0.0, 0.0) and gap.gated
    # inside a group: the required child failed, its unscored sibling cannot save it
    group = {
        "id": "both",
        "kind": "group",
        "aggregate": "mean",
        "points": 4,
        "checks": [regex("says", 1, "yes", required=True), judged("good", 1)],
    }
    gap = gate_rules.grade_gap(document(rubric(group, regex("other", 1, "o")), "no"))
    assert gap.gated and (gap.low, gap.high) == (0.0, 0.0)
    # a group with an unscored child may still score anything: its points are open
    gap = gate_rules.grade_gap(document(rubric(group, regex("other", 1, "o")), "yes o"))
    assert (gap.low, gap.high) == (0.2, 1.0)


def test_a_failing_judge_is_named(openai_server):
    openai_server.default = Reply(status=503)
    judge = JudgeClient(JudgeConfig(base_url=openai_server.base_url, model="judge", max_retries=0))
    gap = gate_rules.grade_gap(document(rubric(regex("says", 1, "yes"), judged("good", 1)), "yes", judge=judge))
    assert len(gap.reasons) == 1 and gap.reasons[0].startswith("judge checks unscored: judge call failed")
    assert len(gap.reasons[0]) <= len("judge checks unscored: ") + 80 and gap.needs_judge
    # a check that is not a judge's: a new run may score it, with or without a judge
    command = {"id": "tests", "kind": "command", "status": "unscored", "points": 1, "explanation": "CPU budget"}
    assert not gate_rules.grade_gap({"complete": False, "checks": [command]}).needs_judge


def test_a_grade_that_cannot_be_read_leaves_everything_open():
    gap = gate_rules.grade_gap(None)
    assert (gap.low, gap.high) == (0.0, 1.0) and gap.reasons == ("its grade could not be read",)
    assert gate_rules.grade_gap({"complete": False, "checks": []}).high == 1.0


# ------------------------------------------------------------------------------------------------ the gates


def test_the_walkthrough_without_a_judge_decides_no_preview_gate_and_run_gates_waits_for_a_judge():
    """/tasks/ibuprofen-dosing/ said "PASS Oracle passes — 3 of 3 passed" and "PASS hack:judge-injection
    scores ≤ 0.1" while every judge check was unscored."""
    document_ = task(IBUPROFEN_RUBRIC, solution={"answer": IBUPROFEN_ANSWER})
    previews = {
        "oracle": evidence("oracle", [document(IBUPROFEN_RUBRIC, IBUPROFEN_ANSWER)] * 3),
        "nop": evidence("nop", [document(IBUPROFEN_RUBRIC, "")] * 3),
        "probe:": evidence("probe:", [document(IBUPROFEN_RUBRIC, "")]),
    }
    for policy in gate_rules.hack_policies(document_):
        previews[policy] = evidence(policy, [document(IBUPROFEN_RUBRIC, "Every criterion is met.")])
    previews["hack:verbose"] = evidence("hack:verbose", [document(IBUPROFEN_RUBRIC, IBUPROFEN_ANSWER + " Filler.")])
    # It showed "3 of 3 passed"; an incomplete grade never passes now (its reward is a lower bound).
    assert "hack:judge-injection" in previews and previews["oracle"].passed == [False] * 3
    inputs = GateInputs(task=document_, previews=previews, judge_configured=False, example_answers=[])
    results = by_gate(gate_rules.evaluate_gates(inputs))
    preview_gates, hack_gates = ["oracle", "nop", "probe:0"], gate_rules.hack_policies(document_)
    assert {name: results[name].status for name in preview_gates} == dict.fromkeys(preview_gates, "not_run")
    # a hack probe that did not show the task is safe fails; it too waits for a judge before running again
    assert {name: results[name].status for name in hack_gates} == dict.fromkeys(hack_gates, "fail")
    assert all(results[name].waiting_for == "a judge" and results[name].retry for name in hack_gates)
    assert results["hack:judge-injection"].message.endswith("could lift it above 0.1: did not show the task is safe")
    assert results["oracle"].message == (
        "3 of 3 grades are incomplete (judge checks unscored: no judge was "
        "configured when it ran) — configure a judge, then run it again"
    )
    assert results["oracle"].run_id == 5 and results["oracle"].waiting_for == "a judge"
    assert results["judge"].status == "fail" and not gate_rules.all_pass(results.values())
    # Run gates would get the same unscored checks again: it starts nothing until a judge is configured
    assert gate_rules.previews_to_start(inputs, results.values()) == []
    inputs.judge_configured = True
    results = by_gate(gate_rules.evaluate_gates(inputs))
    assert results["oracle"].message.endswith("— run it again") and not results["oracle"].waiting_for
    assert gate_rules.previews_to_start(inputs, results.values()) == [
        ("oracle", 3),
        ("nop", 3),
        ("probe:", 1),
        *[(policy, 1) for policy in gate_rules.hack_policies(document_)],
        ("hack:verbose", 1),
    ]
    # ... but not one already queued or running again
    assert ("oracle", 3) not in gate_rules.previews_to_start(inputs, results.values(), pending={"oracle"})


def test_an_oracle_is_decided_on_incomplete_grades_only_where_the_unscored_checks_cannot_change_it():
    solid = rubric(regex("says", 9, "yes"), judged("style", 1))  # 9 of 10 at worst: passes whatever
    fragile = rubric(regex("says", 1, "yes"), judged("right", 3))  # 1 of 4 at worst: may fail
    gating = rubric(regex("says", 9, "yes", required=True), judged("style", 1))

    def oracle(rubric_document, answers):
        inputs = GateInputs(
            task=task(rubric_document),
            judge_configured=True,
            previews={"oracle": evidence("oracle", [document(rubric_document, a) for a in answers])},
        )
        return by_gate(gate_rules.evaluate_gates(inputs))["oracle"]

    result = oracle(solid, ["yes"] * 3)
    assert result.status == "pass" and result.message.startswith("3 of 3 passed: the reference solution passes")
    # A passing gate says it once, briefly: nothing to act on.
    assert result.message.endswith("(3 incomplete grades: their unscored checks could not change this)")
    assert "grades are incomplete" not in result.message
    result = oracle(fragile, ["yes"] * 3)
    assert result.status == "not_run" and result.message.startswith("3 of 3 grades are incomplete")
    # A required check already failed: that rollout cannot pass, whatever the judge says.
    result = oracle(gating, ["yes", "no", "yes"])
    assert result.status == "fail" and result.message.startswith("at most 2 of 3 can pass (1 failed a required check)")
    assert "does not always pass" in result.message
    # A complete rollout that failed decides it too.
    mixed = GateInputs(
        task=task(fragile),
        previews={
            "oracle": PreviewEvidence(
                policy="oracle",
                run_id=5,
                n=2,
                rewards=[0.0, 1.0],
                passed=[False, True],
                gaps=[None, gate_rules.grade_gap(document(fragile, "yes"))],
            )
        },
    )
    assert by_gate(gate_rules.evaluate_gates(mixed))["oracle"].status == "fail"


def test_nop_probes_and_hacks_fail_on_incomplete_grades_only_when_over_the_limit_whatever_the_rest_score():
    over = rubric(regex("echo", 8, "Say"), judged("right", 1))  # at least 8/9 whatever the judge says
    under = rubric(regex("echo", 1, "zzz"), judged("right", 1), regex("x", 9, "zzz"))  # at most 1/11
    open_ = rubric(regex("echo", 1, "Say"), judged("right", 9))  # 0.1 .. 1.0
    # Penalties exist: 3 of 3 scored, but an unscored -9 penalty could bring it to 0.
    penalised = rubric(regex("echo", 3, "Say"), judged("harm", -9))

    def run(rubric_document, answer="Say it."):
        document_ = task({**rubric_document, "probes": [{"answer": answer, "max_reward": 0.1}]})
        graded = document(rubric_document, answer)
        previews = {
            policy: evidence(policy, [graded])
            for policy in ["nop", gate_rules.probe_policy(answer), *gate_rules.hack_policies(document_)]
        }
        return by_gate(gate_rules.evaluate_gates(GateInputs(task=document_, previews=previews, judge_configured=True)))

    results = run(over)
    for name in ("nop", "probe:0", "hack:echo-prompt"):
        assert results[name].status == "fail", name
    assert results["nop"].message.startswith("highest reward at least 0.89 > 0.1")
    assert "rewarded by echo" in results["hack:echo-prompt"].message
    assert "1 of 1 grades are incomplete" in results["hack:echo-prompt"].message
    results = run(under)
    assert results["nop"].status == "pass" and results["nop"].message.startswith("highest reward at most 0.09")
    assert results["hack:keyword-stuffing"].status == "pass" and results["probe:0"].message.endswith(
        "(1 incomplete grade: their unscored checks could not change this)"
    )
    for rubric_document in (open_, penalised):
        results = run(rubric_document)
        for name in ("nop", "probe:0"):
            assert results[name].status == "not_run", name
            assert results[name].message == (
                "1 of 1 grades are incomplete (judge checks unscored: no judge was "
                "configured when it ran) — run it again"
            ), name
        for name in ("hack:echo-prompt", "hack:keyword-stuffing"):
            assert results[name].status == "fail" and results[name].retry, name
            assert results[name].message == (
                "1 of 1 grades are incomplete (judge checks unscored: no judge was "
                "configured when it ran), and their unscored checks could lift it "
                "above 0.1: did not show the task is safe"
            ), name


def test_complete_grades_decide_as_before():
    checks = rubric(regex("says", 1, "yes"), judged("good", 1))
    with_judge = [{**document(checks, "no"), "complete": True}]  # as a configured judge would leave it
    previews = {"nop": evidence("nop", with_judge * 3)}
    result = by_gate(gate_rules.evaluate_gates(GateInputs(task=task(checks), previews=previews)))["nop"]
    assert (result.status, result.message) == ("pass", "highest reward 0.00")
    assert previews["nop"].incomplete == []


def test_grades_incomplete_for_another_reason_are_run_again_with_or_without_a_judge():
    checks = rubric(regex("says", 1, "yes"), {"id": "tests", "kind": "command", "points": 3, "run": "true"})
    graded = document(checks, "no")  # no sandbox here: the command check is unscored
    assert graded["complete"] is False
    inputs = GateInputs(task=task(checks), previews={"nop": evidence("nop", [graded] * 3)}, judge_configured=False)
    results = gate_rules.evaluate_gates(inputs)
    nop = by_gate(results)["nop"]
    assert nop.status == "not_run" and not nop.waiting_for
    assert nop.message.startswith("3 of 3 grades are incomplete (tests unscored: ") and nop.message.endswith(
        "— run it again"
    )
    assert ("nop", 3) in gate_rules.previews_to_start(inputs, results)


def test_a_preview_graded_under_the_old_scoring_rule_decides_no_gate_and_is_run_again():
    solid = rubric(regex("says", 1, "yes"))
    graded = document(solid, "yes")
    old = PreviewEvidence(policy="oracle", run_id=7, n=1, rewards=[graded["reward"]], passed=[True], scoring_rule=1)
    nop = PreviewEvidence(policy="nop", run_id=8, n=1, rewards=[0.0], passed=[False], scoring_rule=1)
    inputs = GateInputs(task=task(solid), previews={"oracle": old, "nop": nop}, judge_configured=True)
    results = by_gate(gate_rules.evaluate_gates(inputs))
    for name in ("oracle", "nop"):
        assert results[name].status == "not_run", name
        assert results[name].message == "graded under the old scoring rule — run it again"
    assert not gate_rules.all_pass(results.values())
    assert set(gate_rules.previews_to_start(inputs, results.values())) >= {("oracle", 3), ("nop", 3)}
    fresh = PreviewEvidence(policy="oracle", run_id=9, n=1, rewards=[1.0], passed=[True])
    inputs = GateInputs(task=task(solid), previews={"oracle": fresh}, judge_configured=True)
    assert by_gate(gate_rules.evaluate_gates(inputs))["oracle"].status == "pass"
