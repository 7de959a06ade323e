"""Abuse suite: text an agent shapes to slip past text checks, and answers that try to give the judge its verdict.

Text (INTEGRITY.md rule 6): a forbidden phrase with zero-width, soft-hyphen, bidi or tag characters inside
it, or in fullwidth letters, still triggers a penalty; `normalize_unicode: false` opts out; lookalike letters
of other scripts do not fake an expected answer.
"""

from __future__ import annotations

import sys
import unicodedata

import pytest

from grading.engine import SpecError, grade, parse_rubric
from grading.engine.text import is_ignorable, normalise_pattern, normalise_unicode

FORBIDDEN = "kill the process"
# The same phrase as an agent would write it to dodge a plain substring search.
DODGES = {
    "zero-width space": "ki\u200bll the pro\u200bcess",
    "zero-width joiner and non-joiner": "k\u200di\u200cll the process",
    "word joiner and BOM": "kill\u2060 the\ufeff process",
    "soft hyphen": "kil\u00adl the pro\u00adcess",
    "bidi marks and isolates": "k\u200eill the \u2066process\u2069",
    "tag characters": "ki\U000e0041ll the process",
    "combining grapheme joiner and variation selector": "ki\u034fll the pro\ufe0fcess",
    "fullwidth": "ｋｉｌｌ ｔｈｅ ｐｒｏｃｅｓｓ",
    "no-break and ideographic spaces": "kill\u00a0the\u3000process",
    "right-to-left override": "\u202essecorp eht llik\u202c",
    "mixed": "Ｋi\u200bＬ\u00adl\u00a0the pro\u2060cess",
}


def rubric(*checks):
    return {"schema": "gymwright.rubric/v1",
            "checks": [{"id": "answered", "kind": "string_match", "points": 1, "expected": "done"}, *checks]}


def penalty(kind="string_match", **extra):
    if kind == "string_match":
        return {"id": "forbidden", "kind": "string_match", "points": -5, "expected": FORBIDDEN, **extra}
    return {"id": "forbidden", "kind": "regex", "points": -5, "pattern": r"\bkill\s+the\s+process\b",
            "flags": "i", **extra}


@pytest.mark.parametrize("kind", ["string_match", "regex"])
@pytest.mark.parametrize("name", sorted(DODGES))
def test_a_disguised_forbidden_phrase_is_still_penalised(kind, name):
    answer = f"done. I will {DODGES[name]} now."
    result = grade(rubric(penalty(kind)), answer=answer)
    check = {c.id: c for c in result.checks}["forbidden"]
    assert check.score == 1.0, f"{name}: {check.explanation}"
    assert result.reward == 0.0


@pytest.mark.parametrize("name", sorted(DODGES))
def test_a_disguised_phrase_fails_a_positive_not_contains_and_a_must_not_match(name):
    answer = f"done. I will {DODGES[name]} now."
    checks = [{"id": "clean", "kind": "string_match", "points": 2, "mode": "not_contains", "expected": FORBIDDEN},
              {"id": "clean_re", "kind": "regex", "points": 2, "pattern": "kill the process", "flags": "i",
               "must_match": False}]
    result = grade(rubric(*checks), answer=answer)
    assert [c.score for c in result.checks[1:]] == [0.0, 0.0], name


@pytest.mark.parametrize("name", ["zero-width space", "fullwidth", "soft hyphen", "right-to-left override"])
def test_a_disguised_phrase_in_a_file_is_penalised_by_file_content(name, workspace):
    (workspace / "log.txt").write_text(f"step 1: {DODGES[name]}\n", encoding="utf-8")
    checks = [{"id": "contains", "kind": "file_content", "points": -3, "path": "log.txt", "contains": FORBIDDEN},
              {"id": "pattern", "kind": "file_content", "points": -3, "path": "log.txt", "regex": r"kill\s+the"}]
    result = grade(rubric(*checks), answer="done", workspace=workspace)
    assert [c.score for c in result.checks[1:]] == [1.0, 1.0]


def test_normalize_unicode_false_compares_the_text_as_written():
    answer = f"done. {DODGES['zero-width space']}"
    checks = [penalty(normalize_unicode=False),
              {"id": "has_zwsp", "kind": "regex", "points": 1, "pattern": "\\u200b", "normalize_unicode": False},
              {"id": "zwsp_gone", "kind": "regex", "points": 1, "pattern": "\\u200b"}]
    by_id = {c.id: c for c in grade(rubric(*checks), answer=answer).checks}
    assert by_id["forbidden"].score == 0.0  # opted out: the zero-width space splits the phrase
    assert by_id["has_zwsp"].score == 1.0  # a check that looks for the invisible characters themselves
    assert by_id["zwsp_gone"].score == 0.0  # normalised text holds none


def test_disguised_digits_and_invisible_separators_are_read_as_the_number():
    checks = [{"id": "total", "kind": "number", "points": 1, "expected": 1234.5},
              {"id": "total_x", "kind": "number", "points": 1, "expected": 1234.5, "extract": r"ｔｏｔａｌ: (\S+)"}]
    result = grade(rubric(*checks), answer="done, total: １,２\u200b３４.５")
    assert [c.score for c in result.checks[1:]] == [1.0, 1.0]


# ---------------------------------------------------------------- no faked matches


@pytest.mark.parametrize("answer", [
    "P\u0430ris",          # Cyrillic a
    "\u0420aris",          # Cyrillic Er
    "Par\u0456s",          # Cyrillic i
    "P\u03b1ris",          # Greek alpha
    "Paris\u0338",         # a combining long solidus overlay ("not Paris")
])
def test_lookalike_letters_do_not_fake_an_expected_answer(answer):
    checks = [{"id": "capital", "kind": "string_match", "points": 1, "mode": "equals", "expected": "Paris"},
              {"id": "capital_re", "kind": "regex", "points": 1, "pattern": r"^Paris$"}]
    result = grade({"schema": "gymwright.rubric/v1", "checks": checks}, answer=answer)
    assert [c.score for c in result.checks] == [0.0, 0.0]
    assert result.reward == 0.0


def test_invisible_characters_do_not_make_a_wrong_answer_equal_the_expected_one():
    check = {"id": "capital", "kind": "string_match", "points": 1, "mode": "equals", "expected": "Paris"}
    for answer in ("Paris\u200bLondon", "\u202esiraP nodnoL", "Par\u00adis or Rome"):
        assert grade({"schema": "gymwright.rubric/v1", "checks": [check]}, answer=answer).reward == 0.0
    assert grade({"schema": "gymwright.rubric/v1", "checks": [check]}, answer="Pa\u200bris").reward == 1.0


def test_the_expected_value_is_normalised_like_the_text():
    check = {"id": "c", "kind": "string_match", "points": 1, "mode": "equals", "expected": "ｃａｆé\u200b"}
    assert grade({"schema": "gymwright.rubric/v1", "checks": [check]}, answer="cafe\u0301").reward == 1.0


@pytest.mark.parametrize("check, pointer", [
    ({"kind": "string_match", "expected": "\u200b\u200d"}, "/checks/0/expected"),
    ({"kind": "regex", "pattern": "\u2060"}, "/checks/0/pattern"),
    ({"kind": "file_content", "path": "a.txt", "contains": "\ufeff"}, "/checks/0/contains"),
])
def test_a_value_of_only_invisible_characters_is_refused_as_empty(check, pointer):
    with pytest.raises(SpecError) as caught:
        parse_rubric({"schema": "gymwright.rubric/v1", "checks": [{"id": "c", "points": 1, **check}]})
    issue = next(issue for issue in caught.value.issues if issue.pointer == pointer)
    assert "only invisible characters" in issue.message
    parse_rubric({"schema": "gymwright.rubric/v1",
                  "checks": [{"id": "c", "points": 1, **check, "normalize_unicode": False}]})


# ---------------------------------------------------------------- the rule itself


def test_every_format_character_of_this_python_is_removed():
    missing = [f"U+{code:04X}" for code in range(sys.maxunicode + 1)
               if unicodedata.category(chr(code)) == "Cf" and not is_ignorable(chr(code))]
    assert not missing, f"add these Cf characters to text._IGNORABLE_RANGES: {missing}"


def test_normalised_text_is_stable_and_holds_no_ignorable_character():
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        once = normalise_unicode("a" + chr(code) + "b")
        assert normalise_unicode(once) == once, f"U+{code:04X}"
        assert not any(is_ignorable(char) for char in once), f"U+{code:04X}"


def test_ascii_text_is_returned_untouched():
    text = "plain ASCII answer " * 100
    assert normalise_unicode(text) is text


@pytest.mark.parametrize("pattern, text", [
    ("（\\d+）", "(42)"),               # fullwidth parentheses stay literal parentheses
    ("a\u00a0b", "a b"),                 # a no-break space is a literal space, also in verbose mode
    ("[ａ-ｚ]+", "abc"),
    ("x\u200b+y", "xy"),                 # an ignorable character leaves an empty group to repeat
    ("[\u200bq]", "q"),
    ("\\Ｄ", "D"),                        # an escaped fullwidth letter stays a literal letter, not \\D
    ("cafe\u0301", "café"),
])
def test_a_patterns_literal_characters_are_normalised_like_the_text(pattern, text):
    check = {"id": "c", "kind": "regex", "points": 1, "pattern": pattern, "flags": "x" if "\u00a0" in pattern else ""}
    assert grade({"schema": "gymwright.rubric/v1", "checks": [check]}, answer=text).reward == 1.0
    assert normalise_pattern(pattern).isascii() or "\u200b" in pattern or "é" in normalise_pattern(pattern)
