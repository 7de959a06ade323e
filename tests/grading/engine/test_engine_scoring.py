"""Scoring rules of docs/formats.md, with hand-computed expectations."""

from __future__ import annotations

import pytest

from grading.engine import grade, parse_rubric
from grading.engine.models import CheckGrade


def contains(check_id: str, expected: str, points: float, **extra) -> dict:
    return {"id": check_id, "kind": "string_match", "mode": "contains", "expected": expected, "points": points, **extra}


def judge(check_id: str, points: float, **extra) -> dict:
    return {"id": check_id, "kind": "llm_judge", "criterion": "anything", "points": points, **extra}


def run(checks, answer, **rubric_extra):
    rubric = parse_rubric({"schema": "gymwright.rubric/v1", "checks": checks, **rubric_extra})
    return grade(rubric, answer=answer)


def by_id(result):
    return {check.id: check for check in result.iter_checks()}


def test_all_met_gives_reward_one():
    result = run([contains("a", "x", 2), contains("b", "y", 3)], "x y")
    assert (result.reward, result.earned, result.max) == (1.0, 5.0, 5.0)
    assert result.passed and result.complete and not result.gated


def test_partial_credit_is_earned_over_max():
    # earned = 2 (a) + 0 (b) = 2; max = 5 -> 0.4
    result = run([contains("a", "x", 2), contains("b", "y", 3)], "x")
    assert result.reward == pytest.approx(0.4)
    assert by_id(result)["a"].awarded == 2 and by_id(result)["b"].awarded == 0
    assert not result.passed  # default threshold 0.7


def test_a_triggered_penalty_subtracts_and_an_untriggered_one_does_not():
    checks = [contains("good", "answer", 4), contains("bad", "unsafe", -3)]
    # triggered: earned = 4 - 3 = 1, max = 4 -> 0.25
    triggered = run(checks, "answer, unsafe")
    assert (triggered.earned, triggered.max, triggered.reward) == (1.0, 4.0, 0.25)
    assert by_id(triggered)["bad"].awarded == -3
    clean = run(checks, "answer")
    assert (clean.earned, clean.max, clean.reward) == (4.0, 4.0, 1.0)


def test_reward_is_clipped_at_zero():
    # earned = 0 - 10 = -10, max = 2 -> clip(-5) = 0
    result = run([contains("good", "nope", 2), contains("bad", "unsafe", -10)], "unsafe")
    assert result.earned == -10 and result.reward == 0.0


def test_a_failed_required_check_gates_the_reward():
    checks = [contains("gate", "must", 1, required=True), contains("rest", "x", 9)]
    result = run(checks, "x")
    assert result.gated and result.reward == 0.0 and not result.passed
    assert result.earned == 9  # earned and max are still reported
    passed = run(checks, "must x")
    assert not passed.gated and passed.reward == 1.0


def test_a_required_check_inside_a_group_gates_too():
    group = {
        "id": "g",
        "kind": "group",
        "points": 1,
        "aggregate": "any",
        "checks": [contains("needed", "must", 1, required=True), contains("other", "x", 1)],
    }
    result = run([group, contains("rest", "x", 1)], "x")
    assert by_id(result)["g"].score == 1.0  # any: "other" is met
    assert result.gated and result.reward == 0.0


def test_pass_threshold_is_inclusive():
    checks = [contains("a", "x", 7), contains("b", "y", 3)]
    assert run(checks, "x", pass_threshold=0.7).passed  # 0.7 >= 0.7
    assert not run(checks, "x", pass_threshold=0.71).passed


def test_unscored_checks_stay_in_max_and_the_reward_is_the_lower_bound():
    # judge checks without a judge are unscored: they earn nothing, and "j" still counts in max (2 + 8)
    result = run([contains("a", "x", 2), judge("j", 8), judge("pen", -5)], "x")
    assert (result.earned, result.max, result.reward) == (2.0, 10.0, 0.2)
    # had "j" been met (and the penalty not charged): 10 / 10
    assert result.reward_upper == 1.0
    assert not result.complete and not result.passed
    j = by_id(result)["j"]
    assert j.status == "unscored" and j.score is None and j.awarded is None
    assert j.explanation == "no judge model configured"


def test_a_complete_grade_has_its_reward_as_upper_bound():
    result = run([contains("a", "x", 2), contains("b", "y", 3)], "x")
    assert result.complete and result.reward_upper == result.reward == pytest.approx(0.4)


def test_only_unscored_positive_checks_gives_zero_reward_and_an_upper_bound_of_one():
    result = run([judge("j", 3), contains("bad", "x", -1)], "")
    assert result.max == 3 and result.reward == 0.0 and not result.complete
    assert result.reward_upper == 1.0 and not result.passed


def test_an_incomplete_grade_never_passes_even_over_the_threshold():
    result = run([contains("a", "x", 9), judge("j", 1)], "x", pass_threshold=0.5)
    assert result.reward == pytest.approx(0.9) and not result.complete and not result.passed


def test_an_unscored_required_check_gates_the_reward_but_not_its_upper_bound():
    result = run([judge("j", 3, required=True), contains("a", "x", 1)], "x")
    assert result.gated and not result.complete and result.reward == 0.0
    assert result.reward_upper == 1.0
    failed = run([judge("j", 3, required=True), contains("a", "x", 1, required=True)], "")
    assert failed.gated and failed.reward == failed.reward_upper == 0.0  # a scored required miss gates both


def group(aggregate, *children, points=6, **extra):
    return {"id": "g", "kind": "group", "points": points, "aggregate": aggregate, "checks": list(children), **extra}


@pytest.mark.parametrize(
    "aggregate, answer, expected",
    [
        ("all", "a b", 1.0),
        ("all", "a", 0.0),
        ("any", "b", 1.0),
        ("any", "", 0.0),
        # mean weighted by |points|: (1*1 + 3*0) / 4
        ("mean", "a", 0.25),
        ("mean", "b", 0.75),
        ("min", "a", 0.0),
        ("min", "a b", 1.0),
    ],
)
def test_group_aggregates(aggregate, answer, expected):
    result = run([group(aggregate, contains("ca", "a", 1), contains("cb", "b", 3))], answer)
    g = by_id(result)["g"]
    assert g.score == pytest.approx(expected)
    assert g.awarded == pytest.approx(6 * expected)
    assert result.reward == pytest.approx(expected)
    assert by_id(result)["ca"].awarded is None  # children count through the group


def test_a_penalty_child_is_good_when_not_triggered():
    g = group("all", contains("ok", "ok", 1), contains("bad", "TODO", -1))
    assert run([g], "ok").checks[0].score == 1.0
    assert run([g], "ok TODO").checks[0].score == 0.0
    mean = group("mean", contains("ok", "ok", 1), contains("bad", "TODO", -1))
    assert run([mean], "ok TODO").checks[0].score == pytest.approx(0.5)


def test_nested_groups_by_hand():
    inner = {
        "id": "inner",
        "kind": "group",
        "points": 2,
        "aggregate": "mean",
        "checks": [contains("i1", "a", 1), contains("i2", "b", 1)],
    }
    outer = {"id": "outer", "kind": "group", "points": 4, "aggregate": "min", "checks": [inner, contains("o1", "c", 1)]}
    checks = [outer, contains("top", "d", 4)]
    # answer "a c d": inner = mean(1, 0) = 0.5; outer = min(0.5, 1) = 0.5; earned = 4*0.5 + 4 = 6; max = 8
    result = run(checks, "a c d")
    ids = by_id(result)
    assert ids["inner"].score == 0.5 and ids["outer"].score == 0.5
    assert (result.earned, result.max, result.reward) == (6.0, 8.0, 0.75)
    assert [child.id for child in ids["outer"].checks] == ["inner", "o1"]


def test_a_group_is_scored_only_when_its_unscored_children_cannot_change_it():
    undecided = run([group("all", contains("ca", "a", 1), judge("cj", 1))], "a")
    assert undecided.checks[0].status == "unscored"
    assert undecided.checks[0].explanation.startswith("depends on 1 unscored child check(s)")
    assert (undecided.reward, undecided.reward_upper) == (0.0, 1.0)
    decided = run([group("all", contains("ca", "a", 1), judge("cj", 1))], "")
    assert decided.checks[0].status == "scored" and decided.checks[0].score == 0.0  # "ca" failed: all fails
    assert "1 unscored could not change it" in decided.checks[0].explanation
    assert not decided.complete and decided.reward == decided.reward_upper == 0.0
    anyone = run([group("any", contains("ca", "a", 1), judge("cj", 1))], "a")
    assert anyone.checks[0].status == "scored" and anyone.checks[0].score == 1.0
    empty = run([group("all", judge("j1", 1), judge("j2", 1)), contains("x", "x", 1)], "x")
    assert by_id(empty)["g"].status == "unscored"
    assert (empty.earned, empty.max) == (1.0, 7.0)


@pytest.mark.parametrize(
    "aggregate, low, high",
    [("all", 0.0, 1.0), ("any", 1.0, 1.0), ("min", 0.0, 1.0), ("mean", 1 / 3, 1.0)],
)
def test_aggregate_bounds_span_what_the_unscored_children_allow(aggregate, low, high):
    from grading.engine.models import CheckGrade
    from grading.engine.scoring import aggregate_bounds

    met = CheckGrade(id="m", kind="string_match", status="scored", score=1.0, points=1)
    open_ = CheckGrade(id="u", kind="llm_judge", status="unscored", points=2)
    assert aggregate_bounds(aggregate, [met, open_]) == (pytest.approx(low), pytest.approx(high))


def test_an_unscored_mean_group_counts_its_highest_score_in_the_upper_bound():
    # mean over "ma" (weight 1, missed) and "mj" (weight 1, unscored): at most 0.5 of the group's 4 points
    result = run([group("mean", contains("ma", "zzz", 1), judge("mj", 1), points=4), contains("b", "x", 4)], "x")
    assert result.checks[0].status == "unscored"
    assert result.reward == pytest.approx(0.5) and result.reward_upper == pytest.approx(0.75)


def test_a_negative_group_is_a_penalty():
    bad = group("any", contains("b1", "hack", 1), contains("b2", "cheat", 1), points=-5)
    result = run([contains("ok", "ok", 5), bad], "ok cheat")
    # group met (score 1) with -5 points: earned = 5 - 5 = 0
    assert result.earned == 0 and result.reward == 0.0


def test_grade_document_shape():
    result = run([contains("a", "x", 2), group("all", contains("ca", "a", 1))], "x a")
    document = result.to_document()
    assert document["schema"] == "gymwright.grade/v1"
    assert set(document) >= {"reward", "earned", "max", "passed", "gated", "complete", "checks"}
    first = document["checks"][0]
    assert {key: first[key] for key in ("id", "kind", "status", "score", "points", "awarded")} == {
        "id": "a",
        "kind": "string_match",
        "status": "scored",
        "score": 1.0,
        "points": 2,
        "awarded": 2.0,
    }
    assert isinstance(first["duration_ms"], int) and isinstance(first["explanation"], str)
    assert document["checks"][1]["checks"][0]["id"] == "ca"


def test_grade_accepts_a_dict_rubric_and_validates_it():
    from grading.engine import SpecError

    result = grade({"schema": "gymwright.rubric/v1", "checks": [contains("a", "x", 1)]}, answer="x")
    assert result.reward == 1.0
    with pytest.raises(SpecError):
        grade({"schema": "gymwright.rubric/v1", "checks": []}, answer="x")


def test_flat_checks_walks_a_grade_and_its_document_the_same_way():
    from grading.engine import flat_checks

    group = {"id": "both", "kind": "group", "points": 2, "checks": [contains("a", "x", 1), contains("b", "y", 1)]}
    result = run([contains("first", "x", 1), group], "x")

    typed = [(check.id, parent, depth, pointer) for check, parent, depth, pointer in flat_checks(result.checks)]
    assert typed == [
        ("first", "", 0, "/checks/0"),
        ("both", "", 0, "/checks/1"),
        ("a", "both", 1, "/checks/1/checks/0"),
        ("b", "both", 1, "/checks/1/checks/1"),
    ]
    document = result.to_document()["checks"]
    assert [(c["id"], p, d, ptr) for c, p, d, ptr in flat_checks(document)] == typed
    # Unsaved or hostile JSON: what is not a check object is skipped, not a crash.
    assert [row.pointer for row in flat_checks([7, None, {"id": "x", "checks": "no"}])] == ["/checks/2"]
    assert list(flat_checks({"not": "a list"})) == []


def test_an_unmatched_penalty_awards_plain_zero_not_minus_zero():
    import json
    import math

    result = run([contains("good", "42", 2), contains("unsafe", "all at once", -8)], "It is 42.")
    awarded = by_id(result)["unsafe"].awarded
    assert awarded == 0 and math.copysign(1.0, awarded) == 1.0
    assert '"awarded": -0' not in json.dumps(result.to_document())


@pytest.mark.parametrize("answer", ["a", "b"])  # the required group scores 0.25 or 0.75: partial, not met
def test_a_required_check_with_partial_credit_gates_the_reward(answer):
    # Every other gating test scores its required check 0 or 1: "below 1" must gate, not only "0".
    checks = [group("mean", contains("ca", "a", 1), contains("cb", "b", 3), required=True), contains("rest", "x", 4)]
    result = run(checks, f"{answer} x")
    assert 0.0 < by_id(result)["g"].score < 1.0
    assert result.complete and result.gated and result.reward == result.reward_upper == 0.0 and not result.passed
    assert result.earned > 0  # earned is still reported; the gate alone zeroes the reward
    met = run(checks, "a b x")
    assert by_id(met)["g"].score == 1.0 and not met.gated and met.reward == 1.0


def test_the_totals_of_a_stored_grade_gate_on_a_required_score_below_one():
    from grading.engine.scoring import grade_totals, reward_range

    def stored(score):
        return [
            {"id": "judge", "status": "scored", "score": score, "points": 2, "required": True},
            {"id": "rest", "status": "scored", "score": 1.0, "points": 2},
        ]

    partial = grade_totals(stored(0.5), pass_threshold=0.5)
    assert partial["gated"] and partial["reward"] == partial["reward_upper"] == 0.0 and not partial["passed"]
    assert reward_range(stored(0.5)) == (0.0, 0.0, True)
    assert reward_range(stored(0.999))[2] is True
    full = grade_totals(stored(1.0), pass_threshold=0.5)
    assert not full["gated"] and full["reward"] == 1.0 and full["passed"]
    assert reward_range(stored(1.0)) == (1.0, 1.0, False)


def test_a_stored_grade_with_odd_fields_is_totalled_by_rule_not_by_crash():
    # Stored grade documents are read back by the gates, packs and CLI: a field of the wrong type counts as absent.
    from grading.engine.scoring import grade_totals

    checks = [
        {"id": "bool_score", "status": "scored", "score": True, "points": 2},  # a bool is not a score: 0
        {"id": "text_points", "status": "scored", "score": 1.0, "points": "3"},  # nor text points: 0 points
        {"id": "met", "status": "scored", "score": 1.0, "points": 2},
    ]
    totals = grade_totals(checks, pass_threshold=0.5)
    assert (totals["earned"], totals["max"], totals["reward"]) == (2.0, 4.0, 0.5)


def test_a_check_is_scored_only_with_status_scored_and_a_score():
    from grading.engine.scoring import grade_totals

    for odd in (
        {"id": "x", "status": "scored", "score": None, "points": 1},
        {"id": "x", "status": "unscored", "score": 1.0, "points": 1},
    ):
        totals = grade_totals([odd, {"id": "y", "status": "scored", "score": 1.0, "points": 1}], pass_threshold=0.5)
        assert not totals["complete"] and totals["earned"] == 1.0 and totals["max"] == 2.0, odd
        assert totals["reward"] == 0.5 and totals["reward_upper"] == 1.0 and not totals["passed"]


def test_a_rubric_of_penalties_only_has_reward_zero_not_a_division_by_zero():
    from grading.engine.scoring import grade_totals, reward_range

    penalties = [{"id": "bad", "status": "scored", "score": 0.0, "points": -2}]
    totals = grade_totals(penalties, pass_threshold=0.0)
    assert (totals["max"], totals["reward"], totals["reward_upper"]) == (0.0, 0.0, 0.0)
    assert reward_range(penalties) == (0.0, 0.0, False)


def test_a_fractional_penalty_stays_out_of_max():
    # earned = 2 - 0.5 = 1.5; max = 2 (penalties never count in max, however small) -> 0.75
    result = run([contains("good", "x", 2), contains("bad", "y", -0.5)], "x y")
    assert (result.earned, result.max, result.reward) == (1.5, 2.0, 0.75)


def test_an_unscored_one_point_check_could_still_earn_its_point():
    result = run([contains("a", "x", 1), judge("j", 1)], "x")
    assert (result.reward, result.reward_upper) == (0.5, 1.0)


def test_an_unscored_fractional_penalty_is_not_charged_in_the_upper_bound_but_is_in_the_lowest():
    from grading.engine.scoring import reward_range

    result = run([contains("a", "x", 2), judge("pen", -0.5)], "x")
    assert (result.reward, result.reward_upper) == (1.0, 1.0)
    lowest, highest, gated = reward_range(result.to_document()["checks"])
    assert (lowest, highest, gated) == (0.75, 1.0, False)  # (2 - 0.5) / 2 at worst


def test_an_unscored_penalty_group_is_charged_at_most_what_its_children_allow():
    from grading.engine.scoring import reward_range

    group = {
        "id": "pen",
        "status": "unscored",
        "score": None,
        "points": -2,
        "checks": [
            {"id": "a", "status": "scored", "score": 0.0, "points": 1},
            {"id": "b", "status": "unscored", "score": None, "points": 1},
        ],
    }
    checks = [{"id": "good", "status": "scored", "score": 1.0, "points": 4}, group]
    # mean of (0, anything in [0, 1]): the group scores at most 0.5, so it charges at most 2 * 0.5 = 1 of 4
    assert reward_range(checks, {"pen": "mean"}) == (0.75, 1.0, False)
    assert reward_range(checks) == (0.5, 1.0, False)  # its aggregate unknown: anything up to its 2 points


def test_a_groups_aggregate_is_none_while_its_unscored_children_could_change_it():
    from grading.engine.scoring import aggregate

    met = CheckGrade(id="m", kind="string_match", status="scored", score=1.0, points=1)
    missed = CheckGrade(id="n", kind="string_match", status="scored", score=0.0, points=1)
    open_ = CheckGrade(id="u", kind="llm_judge", status="unscored", score=None, points=1)
    assert aggregate("all", [met, met]) == 1.0 and aggregate("all", [met, missed]) == 0.0
    assert aggregate("all", [met, open_]) is None  # could go either way
    assert aggregate("all", [missed, open_]) == 0.0  # decided despite the unscored child
    assert aggregate("any", [met, open_]) == 1.0 and aggregate("mean", [met, open_]) is None


def test_the_reward_is_clipped_to_one_even_for_a_stored_score_above_one():
    from grading.engine.scoring import grade_totals

    totals = grade_totals([{"id": "x", "status": "scored", "score": 1.5, "points": 2}], pass_threshold=0.5)
    assert totals["earned"] == 3.0 and totals["reward"] == 1.0


def test_grade_totals_takes_its_options_by_name():
    from grading.engine.scoring import grade_totals

    with pytest.raises(TypeError):
        grade_totals([], 0.5)  # a threshold given by position is refused, not read as something else
    assert grade_totals(checks=[], pass_threshold=0.5)["reward"] == 0.0


def test_a_grade_is_built_without_inspecting_default_factories(monkeypatch):
    """pydantic's model_construct inspects the signature of each default_factory left to it, on every call: two
    left to it were half the CPU of grading a 2 KB answer against 10 checks (a training loop's case,
    bench/bench_engine.py (c)). The engine gives every such field itself."""
    from pydantic._internal import _typing_extra

    from grading.engine.models import Grade

    factories = {name for name, field in Grade.model_fields.items() if field.default_factory is not None}
    assert factories >= {"protected_files", "links_removed"}
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "a", "kind": "string_match", "points": 1, "expected": "x"},
                {"id": "b", "kind": "regex", "points": 1, "pattern": "y+"},
            ],
        }
    )

    def refused(*args, **kwargs):
        raise AssertionError("a default factory's signature was inspected")

    monkeypatch.setattr(_typing_extra, "signature", refused)  # what pydantic inspects a default factory with
    result = grade(rubric, answer="x yy")
    assert result.reward == 1.0 and result.links_removed == [] and result.protected_files == []
