"""Judge calibration maths against values computed by hand: TPR / TNR from labels, the validated rule,
Rogan–Gladen and its edges, and the corrected mean reward with its seeded bootstrap interval."""

import pytest

from grading.engine import calibration
from grading.engine.calibration import JudgedCheck, JudgeRates, JudgeValidationRule, RolloutScores


def known_judge_labels(human_met=40, judge_right_on_met=36, human_not_met=40, judge_right_on_not_met=32):
    """Label rows (answer, judge met, reviewer, human met) of a judge with a known error rate."""
    rows = []
    for i in range(human_met):
        rows.append((f"pass-{i}", i < judge_right_on_met, "rita", True))
    for i in range(human_not_met):
        rows.append((f"fail-{i}", i >= judge_right_on_not_met, "rita", False))
    return rows


def test_tpr_and_tnr_of_a_judge_with_a_known_error_rate():
    rates = calibration.judge_rates(known_judge_labels())
    assert (rates.tp, rates.fn, rates.fp, rates.tn) == (36, 4, 8, 32)
    assert (rates.tpr, rates.tnr) == (0.9, 0.8)
    assert rates.answers == 80 and rates.tpr_ci95 == calibration.wilson_interval(36, 40)
    # F1(met) = 72 / (72 + 8 + 4); F1(not met) = 64 / (64 + 4 + 8)
    assert rates.f1_met == pytest.approx(72 / 84) and rates.f1_not_met == pytest.approx(64 / 76)
    assert rates.macro_f1 == pytest.approx((72 / 84 + 64 / 76) / 2)
    # κ: observed 68/80; p_judge 44/80, p_human 40/80 → expected 0.5; κ = (0.85 - 0.5) / 0.5
    assert rates.kappa == pytest.approx(0.7)


def test_reviewers_split_on_an_answer_go_by_majority_and_an_even_split_is_contested():
    rows = [
        ("a", True, "rita", True),
        ("a", True, "ravi", True),
        ("a", True, "remy", False),  # 2 of 3 say met: met
        ("b", False, "rita", True),
        ("b", False, "ravi", False),  # 1 to 1: contested, left out
        ("c", True, "rita", False),
        ("c", True, "rita", False),  # one reviewer on two copies counts once
        ("d", True, "rita", True),
        ("d", False, "rita", True),  # the judge read copies of d both ways: two observations
    ]
    rates = calibration.judge_rates(rows)
    assert (rates.tp, rates.fn, rates.fp, rates.tn) == (2, 1, 1, 0)
    assert (rates.answers_met, rates.answers_not_met, rates.contested) == (2, 1, 1)


def test_no_labels_and_one_class_only_leave_the_rates_undefined():
    empty = calibration.judge_rates([])
    assert (empty.tpr, empty.tnr, empty.kappa, empty.macro_f1) == (None, None, None, None)
    only_pass = calibration.judge_rates(known_judge_labels(human_not_met=0))
    assert only_pass.tpr == 0.9 and only_pass.tnr is None and only_pass.tnr_ci95 is None
    assert calibration.rogan_gladen(0.5, only_pass.tpr, only_pass.tnr) is None
    assert "TPR or TNR unknown" in calibration.correction_undefined_reason(only_pass)


def test_a_judge_is_validated_with_enough_balanced_labels_and_both_rates_above_the_threshold():
    rule = JudgeValidationRule(min_labels=50, min_rate=0.85)
    assert rule.per_class == 25
    good = calibration.judge_rates(known_judge_labels(25, 23, 25, 22))  # TPR 0.92, TNR 0.88
    verdict = calibration.judge_validation(good, rule)
    assert verdict.ok and verdict.message == "validated: TPR 0.92, TNR 0.88 on 50 answers (25 pass, 25 fail)"
    # 60 answers but only 20 human-fail ones: not balanced
    lopsided = calibration.judge_validation(calibration.judge_rates(known_judge_labels(40, 40, 20, 20)), rule)
    assert not lopsided.ok and "20 human-fail answers labelled, needs 25 of each (50 balanced)" in lopsided.message
    # balanced but TNR 0.80 < 0.85
    weak = calibration.judge_validation(calibration.judge_rates(known_judge_labels()), rule)
    assert not weak.ok and weak.message == "judge not validated: TNR 0.80 below 0.85"
    assert calibration.judge_validation(good, JudgeValidationRule(min_labels=60)).ok is False


def test_rogan_gladen_matches_the_hand_computed_correction_and_is_clipped():
    # p = 0.5, TPR 0.9, TNR 0.8: (0.5 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.3 / 0.7
    assert calibration.rogan_gladen(0.5, 0.9, 0.8) == pytest.approx(3 / 7)
    assert calibration.rogan_gladen(0.1, 0.9, 0.8) == 0.0  # (0.1 - 0.2) / 0.7 < 0: clipped
    assert calibration.rogan_gladen(0.95, 0.9, 0.8) == 1.0  # 0.75 / 0.7 > 1: clipped
    assert calibration.rogan_gladen(0.5, 1.0, 1.0) == 0.5  # a perfect judge corrects nothing


def test_rogan_gladen_is_undefined_when_the_judge_is_no_better_than_chance():
    assert calibration.rogan_gladen(0.5, 0.5, 0.5) is None  # TPR + TNR = 1
    assert calibration.rogan_gladen(0.5, 0.3, 0.6) is None  # < 1
    assert calibration.rogan_gladen(0.5, 0.53, 0.5) is None  # J = 0.03: would divide by ~0
    coin = calibration.judge_rates(known_judge_labels(10, 5, 10, 5))
    assert "no better than chance" in calibration.correction_undefined_reason(coin)


def preview(verdicts: list[bool]) -> list[RolloutScores]:
    """Rollouts of a rubric of one judged check (1 point) and one exact check met every time (1 point)."""
    return [RolloutScores(reward=(1.0 + met) / 2, scores={"clear": 1.0 if met else 0.0}) for met in verdicts]


def test_the_corrected_mean_reward_moves_the_judged_checks_share_by_its_correction():
    rates = calibration.judge_rates(known_judge_labels())
    rollouts = preview([True] * 10 + [False] * 10)
    result = calibration.corrected_rewards(rollouts, [JudgedCheck("clear", 1.0, True, rates)], max_points=2.0)
    check = result.checks[0]
    assert (check.n, check.raw, check.corrected) == (20, 0.5, pytest.approx(3 / 7))
    assert check.raw_ci95 == calibration.wilson_interval(10, 20)
    # mean 0.75; the judged check's point moves by 3/7 - 1/2 out of 2
    assert result.mean_reward == 0.75 and result.corrected_mean_reward == pytest.approx(0.75 + (3 / 7 - 0.5) / 2)
    low, high = check.corrected_ci95
    assert low < 3 / 7 < high and 0 <= low and high <= 1
    low, high = result.corrected_mean_reward_ci95
    assert low < result.corrected_mean_reward < high
    again = calibration.corrected_rewards(rollouts, [JudgedCheck("clear", 1.0, True, rates)], max_points=2.0)
    assert again == result  # seeded: the same figures every time
    other_seed = calibration.corrected_rewards(
        rollouts, [JudgedCheck("clear", 1.0, True, rates)], max_points=2.0, seed=1
    )
    assert other_seed.checks[0].corrected_ci95 != check.corrected_ci95


def test_no_correction_without_labels_or_where_the_reward_is_not_linear_in_the_check():
    rollouts = preview([True, False])
    unlabelled = calibration.corrected_rewards(rollouts, [JudgedCheck("clear", 1.0, True, None)], max_points=2.0)
    assert unlabelled.checks[0].corrected is None and unlabelled.corrected_mean_reward is None
    assert unlabelled.note == "not corrected: clear cannot be corrected yet"
    rates = calibration.judge_rates(known_judge_labels())
    required = calibration.corrected_rewards(rollouts, [JudgedCheck("clear", 1.0, False, rates)], max_points=2.0)
    assert required.checks[0].corrected == pytest.approx(3 / 7)  # the check's own rate is still corrected
    assert required.corrected_mean_reward is None and "not linear in clear" in required.note
    nothing = calibration.corrected_rewards([], [JudgedCheck("clear", 1.0, True, rates)], max_points=2.0)
    assert nothing.mean_reward is None and nothing.checks[0].note == "no graded rollouts"


def test_a_correction_near_chance_in_many_resamples_gives_no_interval():
    # TPR 4/6, TNR 3/6: J = 1/6, above MIN_YOUDEN, but a resample often lands at or below it
    rates = calibration.judge_rates(known_judge_labels(6, 4, 6, 3))
    result = calibration.corrected_rewards(
        preview([True] * 6 + [False] * 4), [JudgedCheck("clear", 1.0, True, rates)], max_points=2.0
    )
    check = result.checks[0]
    assert check.corrected is not None and check.corrected_ci95 is None
    assert "too many resamples" in check.note and result.corrected_mean_reward_ci95 is None


def test_rates_add_up_over_checks_for_an_environment():
    a = calibration.judge_rates(known_judge_labels(10, 9, 10, 8))
    b = calibration.judge_rates(known_judge_labels(10, 10, 10, 10))
    pooled = a + b
    assert (pooled.tp, pooled.fn, pooled.fp, pooled.tn, pooled.answers) == (19, 1, 2, 18, 40)
    assert isinstance(pooled, JudgeRates)


JUDGED_TASK = {
    "rubric": {
        "checks": [
            {"id": "clear", "kind": "llm_judge", "points": 2, "criterion": "Clear."},
            {"id": "tone", "kind": "llm_judge", "points": 1, "criterion": "Kind.", "required": True},
            {"id": "rated", "kind": "llm_judge", "points": 1, "criterion": "Good.", "scale": {"min": 0, "max": 10}},
            {"id": "says", "kind": "regex", "points": 1, "pattern": "42"},
        ]
    }
}


def judge_gate(**inputs):
    from grading.engine.gate_rules import GateInputs, evaluate_gates

    results = evaluate_gates(GateInputs(task=JUDGED_TASK, **inputs))
    return next(result for result in results if result.gate == "judge_validated")


def test_the_binary_judged_checks_of_a_rubric_and_where_the_reward_is_linear_in_them():
    specs = calibration.binary_judged_checks(JUDGED_TASK["rubric"])
    assert [(s.check_id, s.points, s.linear) for s in specs] == [("clear", 2.0, True), ("tone", 1.0, False)]
    assert calibration.rubric_max_points(JUDGED_TASK["rubric"]) == 5.0


def test_a_judge_not_validated_is_a_warning_unless_the_environment_makes_it_blocking():
    from grading.engine.gate_rules import all_pass, what_to_do

    rule = JudgeValidationRule()
    verdicts = {
        "clear": calibration.judge_validation(calibration.judge_rates(known_judge_labels(25, 24, 25, 24)), rule),
        "tone": calibration.judge_validation(calibration.judge_rates(known_judge_labels(25, 25, 5, 5)), rule),
    }
    warning = judge_gate(judge_validation=verdicts)
    assert warning.status == "fail" and warning.blocking is False and warning.ok and all_pass([warning])
    assert warning.message == "tone: judge not validated: 5 human-fail answers labelled, needs 25 of each (50 balanced)"
    blocking = judge_gate(judge_validation=verdicts, judge_validation_blocks=True)
    assert blocking.status == "fail" and not blocking.ok and "Label the judge" in what_to_do(blocking)
    verdicts["tone"] = verdicts["clear"]
    passing = judge_gate(judge_validation=verdicts, judge_validation_blocks=True)
    assert passing.status == "pass" and passing.message == "all 2 judged checks validated by reviewers' labels"
    unlabelled = judge_gate(judge_validation={}, judge_validation_blocks=True)
    assert not unlabelled.ok and unlabelled.message.count("no labels yet") == 2
    unknown = judge_gate(judge_validation=None, judge_validation_blocks=True)
    assert unknown.status == "not_run" and unknown.ok
