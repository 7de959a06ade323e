"""Property tests (hypothesis): reward bounds, monotonicity, JSON round trip."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grading.engine import grade, parse_rubric

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

points_st = st.one_of(
    st.integers(-10, 10).filter(bool), st.floats(-5, 5, allow_nan=False).filter(lambda x: abs(x) > 1e-3)
)
TOKENS = [f"tok{i}" for i in range(12)]


@st.composite
def checks_st(draw, depth=0, ids=None):
    """A list of string_match / regex / number / group checks over the token vocabulary."""
    ids = ids if ids is not None else iter(range(10_000))
    count = draw(st.integers(1, 4))
    checks = []
    for _ in range(count):
        check_id = f"c{next(ids)}"
        points = draw(points_st)
        kinds = ["string_match", "regex", "number", "text_similarity", "json_field"]
        kind = draw(st.sampled_from(kinds + ["group"] if depth < 2 else kinds))
        required = points > 0 and draw(st.booleans()) and draw(st.booleans())
        check = {"id": check_id, "kind": kind, "points": points}
        if required:
            check["required"] = True
        if kind == "string_match":
            check.update(
                expected=draw(st.sampled_from(TOKENS)),
                mode=draw(st.sampled_from(["contains", "not_contains", "equals", "starts_with", "ends_with"])),
            )
        elif kind == "regex":
            check.update(pattern=r"\b" + draw(st.sampled_from(TOKENS)) + r"\b", must_match=draw(st.booleans()))
        elif kind == "text_similarity":
            check.update(
                metric=draw(st.sampled_from(["fuzzy", "rouge_l", "bleu"])),
                reference=" ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4))),
                threshold=draw(st.sampled_from([0, 0.3, 0.5, 1])),
            )
        elif kind == "json_field":
            check.update(
                pointer=draw(st.sampled_from(["", "/a", "/0"])),
                op=draw(st.sampled_from(["eq", "exists", "ne"])),
                expected=draw(st.sampled_from([None, 1, "tok1"])),
            )
        elif kind == "number":
            check.update(expected=draw(st.integers(0, 3)), tolerance=draw(st.sampled_from([0, 0.5, 1])))
        else:
            check.update(
                aggregate=draw(st.sampled_from(["all", "any", "mean", "min"])),
                checks=draw(checks_st(depth=depth + 1, ids=ids)),
            )
        checks.append(check)
    return checks


@st.composite
def rubric_st(draw):
    checks = draw(checks_st())
    if not any(check["points"] > 0 for check in checks):
        checks.append({"id": "anchor", "kind": "string_match", "points": 1, "expected": "tok0"})
    threshold = draw(st.sampled_from([0, 0.5, 0.7, 1]))
    return {"schema": "gymwright.rubric/v1", "pass_threshold": threshold, "checks": checks}


answer_st = st.one_of(
    st.lists(st.sampled_from(TOKENS + ["1", "2", "3"]), max_size=8).map(" ".join),
    st.sampled_from(['{"a": 1}', '{"a": "tok1"}', "[1]", '"tok1"', "1"]),
)


@SETTINGS
@given(rubric_st(), answer_st)
def test_reward_is_always_in_0_1_and_consistent(document, answer):
    rubric = parse_rubric(document)
    result = grade(rubric, answer=answer)
    assert 0.0 <= result.reward <= 1.0
    assert result.passed == (result.reward >= rubric.pass_threshold)
    if result.gated:
        assert result.reward == 0.0
    for check in result.iter_checks():
        assert check.status == "scored" and 0.0 <= check.score <= 1.0


@SETTINGS
@given(
    st.lists(st.tuples(points_st, st.booleans()), min_size=1, max_size=8),
    st.data(),
)
def test_meeting_an_unmet_positive_check_never_lowers_the_reward(specs, data):
    checks = []
    for index, (points, required) in enumerate(specs):
        check = {"id": f"c{index}", "kind": "string_match", "points": points, "expected": f"tok{index}"}
        if required and points > 0:
            check["required"] = True
        checks.append(check)
    positive = [index for index, (points, _) in enumerate(specs) if points > 0]
    if not positive:
        checks.append({"id": "anchor", "kind": "string_match", "points": 1, "expected": "anchor"})
        positive = [len(checks) - 1]
    rubric = parse_rubric({"schema": "gymwright.rubric/v1", "checks": checks})
    present = data.draw(st.sets(st.sampled_from(range(len(checks)))))
    unmet = [index for index in positive if index not in present]
    if not unmet:
        return
    flip = data.draw(st.sampled_from(unmet))

    def answer(indexes):
        return " ".join(checks[i]["expected"] for i in sorted(indexes))

    before = grade(rubric, answer=answer(present))
    after = grade(rubric, answer=answer(present | {flip}))
    assert after.reward >= before.reward - 1e-12


@SETTINGS
@given(rubric_st(), answer_st)
def test_a_rubric_grades_the_same_after_a_json_round_trip(document, answer):
    rubric = parse_rubric(document)
    again = parse_rubric(json.loads(json.dumps(rubric.to_document())))
    assert again == rubric

    def stable(result):
        payload = result.to_document()
        return json.dumps(_strip_durations(payload), sort_keys=True)

    assert stable(grade(rubric, answer=answer)) == stable(grade(again, answer=answer))


def _strip_durations(node):
    if isinstance(node, dict):
        return {key: _strip_durations(value) for key, value in node.items() if key != "duration_ms"}
    if isinstance(node, list):
        return [_strip_durations(value) for value in node]
    return node


# ---------------------------------------------------------------- the regex literal prefilter

import re  # noqa: E402

from grading.engine.fastregex import compile_pattern  # noqa: E402

piece_st = st.sampled_from(
    [r"\b", "^", "$", "ab", "b", "a", "A", "é", r"\d+", r"\w*", "(a|b)", "x?", ".", r"\s", " ", "(?=b)"]
)
text_st = st.text(alphabet="abAB xé1\nİK", max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(piece_st, min_size=1, max_size=5).map("".join), st.sampled_from(["", "i", "m", "im"]), text_st)
def test_the_prefilter_and_the_timed_engine_never_change_a_search(pattern, flags, text):
    # What `re` finds is the format's meaning (docs/formats.md: "Python re flags").
    compiled = re.compile(pattern, (re.I if "i" in flags else 0) | (re.M if "m" in flags else 0))
    fast = compile_pattern(pattern, flags)
    expected = compiled.search(text)
    found = fast.search(text)
    assert (found and found.span()) == (expected and expected.span())
    assert [m.span() for m in fast.finditer(text)] == [m.span() for m in compiled.finditer(text)]
