"""A check in words (the task and review pages' rubric cards) says what the engine grades, defaults included."""

import pytest

from grading.engine import grade
from grading.engine.describe import check_in_words


@pytest.mark.parametrize(
    "check, words",
    [
        # no mode: the engine grades "contains" (the words said "equals", so a reviewer read another rule)
        ({"kind": "string_match", "expected": "Paris"}, "the answer contains “Paris”"),
        ({"kind": "string_match", "expected": "Paris", "mode": "equals"}, "the answer equals “Paris”"),
        ({"kind": "string_match", "expected": "Lyon", "mode": "not_contains"}, "the answer does not contain “Lyon”"),
        (
            {"kind": "string_match", "expected": "Dear", "mode": "starts_with", "case_sensitive": True},
            "the answer starts with “Dear” (case-sensitive)",
        ),
        ({"kind": "regex", "pattern": r"\d+", "min_count": 2}, r"the answer matches /\d+/ at least 2 times"),
        ({"kind": "regex", "pattern": "TODO", "must_match": False}, "the answer does not match /TODO/"),
        (
            {"kind": "text_similarity", "threshold": 0.8, "reference": "x"},
            "the answer is at least 0.8 similar (fuzzy) to “x”",
        ),
        ({"kind": "command", "run": "pytest -q"}, "`pytest -q` exits with 0 in the sandbox"),
        ({"kind": "group", "checks": [{}, {}]}, "all of its 2 checks"),
    ],
)
def test_words_say_the_rule_the_engine_grades(check, words):
    assert check_in_words(check) == words


def test_a_string_match_without_a_mode_is_graded_as_its_words_say():
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "paris", "kind": "string_match", "points": 1, "expected": "Paris"}],
    }
    result = grade(rubric, answer="It is Paris, of course.")
    assert result.checks[0].score == 1  # contains, as the words say; "equals" would fail this answer
