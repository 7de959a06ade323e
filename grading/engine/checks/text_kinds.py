"""Checks that read a text (the answer, the trajectory, a file or a command's stdout): string_match,
regex, number, json_field and text_similarity, with the bounded JSON reader they use."""

from __future__ import annotations

import json
import re
from typing import Any

from .. import similarity
from ..models import (
    JsonFieldCheck,
    NumberCheck,
    RegexCheck,
    StringMatchCheck,
    TextSimilarityCheck,
)
from .context import (
    Failed,
    GradingContext,
    Outcome,
    _binary,
    _num,
    _short,
)

#: JSON an agent wrote is measured before it is parsed: its length and its nesting depth.
MAX_JSON_CHARS = 10_000_000
MAX_JSON_DEPTH = 256


def match_lowers_reward(check, *, absence_wanted: bool = False) -> bool:
    """Does finding this check's phrase or pattern lower the reward? A penalty's match is charged; a positive
    check met by the phrase's absence (`not_contains`, `must_match: false`) fails. There the text is also read
    with lookalike letters as Latin (`text.fold_lookalikes`): a lookalike spelling must not dodge it."""
    return check.normalize_unicode and (check.points < 0) != absence_wanted


def odd_file_outcome(check, ctx: GradingContext, target: str, *, absence_wanted: bool = False) -> Outcome | None:
    """Where finding the phrase lowers the reward, a target file or command output that is not plain UTF-8 text
    (`odd_text`: UTF-16, NULs between the letters, stray bytes) cannot show the phrase's absence, only hide it: the check goes against
    the agent (a penalty is charged, an absence-wanted check fails). None where the file is plain text."""
    if (check.points < 0) == absence_wanted:
        return None
    reason = ctx.odd_text(target)
    if reason is None:
        return None
    what = f"{target[5:]!r}" if target.startswith("file:") else f"the output of {target[7:]!r}"
    return _binary(check.points < 0, f"{what} {reason}: a phrase could hide in it, so it counts against the answer")


_LOOKALIKE_NOTE = " (reading lookalike letters of other scripts as Latin)"


def _found(mode: str, text: str, expected: str) -> bool:
    """Whether `expected` is found in `text` as `mode` says (`not_contains`: whether it is contained)."""
    if mode == "equals":
        return text == expected
    if mode in ("contains", "not_contains"):
        return expected in text
    if mode == "starts_with":
        return text.startswith(expected)
    return text.endswith(expected)


def string_match(check: StringMatchCheck, ctx: GradingContext) -> Outcome:
    fold_case, collapse_space = not check.case_sensitive, check.normalize_whitespace
    compared = ctx.compared_text(check)
    mode = check.mode
    odd = odd_file_outcome(check, ctx, check.target, absence_wanted=mode == "not_contains")
    if odd is not None:
        return odd
    found = _found(
        mode, ctx.normalised(compared, fold_case=fold_case, collapse_space=collapse_space), check.expected_normalised()
    )
    by_lookalikes = False
    if not found and match_lowers_reward(check, absence_wanted=mode == "not_contains"):
        folded = ctx.lookalike_text(compared)
        expected = check.expected_normalised(lookalikes=True)
        if folded is not compared or expected != check.expected_normalised():
            found = by_lookalikes = _found(
                mode, ctx.normalised(folded, fold_case=fold_case, collapse_space=collapse_space), expected
            )
    met = not found if mode == "not_contains" else found
    verb = mode.replace("_", " ")
    explanation = f"{check.target} {'' if met else 'does not satisfy: '}{verb} {_short(check.expected)}".strip()
    return _binary(met, explanation + (_LOOKALIKE_NOTE if by_lookalikes else ""))


def _texts_read(check, ctx: GradingContext, text: str, *, absence_wanted: bool = False) -> list[tuple[str, str]]:
    """(text, note) pairs a pattern is searched in: the normalised text, and where a match lowers the reward
    and the text has lookalike letters, that text read with them as Latin."""
    texts = [(text, "")]
    if match_lowers_reward(check, absence_wanted=absence_wanted):
        folded = ctx.lookalike_text(text)
        if folded is not text and folded != text:
            texts.append((folded, _LOOKALIKE_NOTE))
    return texts


def _search(pattern, texts: list[tuple[str, str]]):
    """The first match of `pattern` in the first of `texts` that has one, with that text's note."""
    for text, note in texts:
        found = pattern.search(text)
        if found:
            return found, note
    return None, ""


def regex(check: RegexCheck, ctx: GradingContext) -> Outcome:
    pattern = check.compiled()
    odd = odd_file_outcome(check, ctx, check.target, absence_wanted=not check.must_match)
    if odd is not None:
        return odd  # before the lookalike reading is built: the check is decided without it
    texts = _texts_read(check, ctx, ctx.compared_text(check), absence_wanted=not check.must_match)
    if not check.must_match:
        found, note = _search(pattern, texts)
        if found:
            return _binary(False, f"pattern matched {_short(found.group(0))} but must not match{note}")
        return _binary(True, "pattern does not match, as required")
    if check.min_count == 1:
        found, note = _search(pattern, texts)
        return _binary(
            found is not None, f"matched {_short(found.group(0))}{note}" if found else "pattern does not match"
        )
    count, note = 0, ""
    for text, text_note in texts:
        seen = 0
        for _ in pattern.finditer(text):
            seen += 1
            if seen >= check.min_count:
                break
        if seen > count:
            count, note = seen, text_note
    met = count >= check.min_count
    return _binary(met, f"{count}{'+' if met else ''} match(es), needed {check.min_count}{note}")


_NUMBER = re.compile(r"(?<![\w.])([-+\u2212]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE]([-+]?\d+))?(\s?%)?")


def find_number(text: str) -> tuple[float, bool, str] | None:
    """The first number in `text`: (value, is_percent, matched text). Thousands commas are removed."""
    found = _NUMBER.search(text)
    if not found:
        return None
    sign, digits, exponent, percent = found.groups()
    value = float(digits.replace(",", "") + (f"e{exponent}" if exponent else ""))
    if sign in ("-", "\u2212"):
        value = -value
    return value, bool(percent), found.group(0)


def number(check: NumberCheck, ctx: GradingContext) -> Outcome:
    text = ctx.compared_text(check)
    pattern = check.compiled_extract()
    if pattern is not None:
        found = pattern.search(text)
        if not found or found.group(1) is None:
            return _binary(False, f"extract pattern {_short(check.extract)} does not match")
        text = found.group(1)
    parsed = find_number(text)
    if parsed is None:
        return _binary(False, "no number found" + (f" in {_short(text)}" if pattern is not None else ""))
    value, is_percent, shown = parsed
    allowed = max(check.tolerance, check.rel_tolerance * abs(check.expected))
    candidates = [value, value / 100.0] if is_percent else [value]
    met = any(
        abs(candidate - check.expected) <= allowed + 1e-12 * max(1.0, abs(check.expected)) for candidate in candidates
    )
    return _binary(
        met, f"read {shown.strip()!s} ({'within' if met else 'not within'} ±{_num(allowed)} of {_num(check.expected)})"
    )


_FENCE_LANGUAGE = re.compile(r"[a-zA-Z0-9_-]*")


def _strip_fence(text: str) -> str:
    """The body of a Markdown code fence that is the whole (stripped) text, else the stripped text: what
    `re.fullmatch(r"```[a-zA-Z0-9_-]*\\s*\\n(.*)\\n\\s*```", stripped, re.DOTALL)` would capture, found in
    linear time (that pattern backtracks in cubic time: a 5 KB fence of newlines took minutes). The
    body starts after the last newline of the opening line's whitespace that leaves a newline before
    the closing fence's whitespace, and ends at the last newline of that whitespace."""
    stripped = text.strip()
    size = len(stripped)
    if size < 8 or not stripped.startswith("```") or not stripped.endswith("```"):
        return stripped
    head = _FENCE_LANGUAGE.match(stripped, 3).end()
    # str.strip's whitespace is str.isspace, which is re's \\s for str patterns.
    head_end = size - len(stripped[head:].lstrip())
    tail = size - 3
    tail_start = len(stripped[:tail].rstrip())
    closing = stripped.rfind("\n", tail_start, tail)
    if closing < 0:
        return stripped
    opening = stripped.rfind("\n", head, min(head_end, closing))
    if opening < 0:
        return stripped
    return stripped[opening + 1 : closing]


_JSON_STRUCTURE = re.compile(r'[\[\]{}"\\]')


def json_bounded(text: str, *, max_chars: int = MAX_JSON_CHARS, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why `text` is not parsed as JSON (too long, nested too deep), or None. Measured before any
    parse, in one linear pass over the brackets, quotes and backslashes (a character class: no
    backtracking), brackets inside strings not counted: the standard parser recurses per level, and
    `"[" * 100000` would raise RecursionError deep inside it."""
    if len(text) > max_chars:
        return f"is {len(text):,} characters long, over the limit of {max_chars:,} for JSON"
    depth = 0
    in_string = False
    escaped_at = -1
    for found in _JSON_STRUCTURE.finditer(text):
        at = found.start()
        if at == escaped_at:
            continue
        ch = text[at]
        if in_string:
            if ch == "\\":
                escaped_at = at + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return f"is nested deeper than {max_depth} levels"
        elif ch in "]}":
            depth -= 1
    return None


def parse_json(text: str) -> Any:
    """`json.loads` of agent text, bounded first (`json_bounded`): `Failed` when over a bound,
    ValueError when not JSON."""
    why = json_bounded(text)
    if why:
        raise Failed(f"the JSON {why}; refused unparsed")
    return json.loads(text)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


_ABSENT = object()


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or `_ABSENT`."""
    if pointer == "":
        return document
    current = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            if token not in current:
                return _ABSENT
            current = current[token]
        elif isinstance(current, list):
            if not re.fullmatch(r"0|[1-9][0-9]*", token) or int(token) >= len(current):
                return _ABSENT
            current = current[int(token)]
        else:
            return _ABSENT
    return current


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_field(check: JsonFieldCheck, ctx: GradingContext) -> Outcome:
    text = ctx.target_text(check.target)
    try:
        document = parse_json(text)
    except ValueError:
        try:
            document = parse_json(_strip_fence(text))
        except ValueError as exc:
            raise Failed(f"{check.target} is not JSON ({exc})") from None
    value = resolve_pointer(document, check.pointer)
    if check.op == "exists":
        return _binary(value is not _ABSENT, f"{'a' if value is not _ABSENT else 'no'} value at {check.pointer!r}")
    if value is _ABSENT:
        return _binary(False, f"no value at {check.pointer!r}")
    shown = _short(json.dumps(value), 60)
    if check.op == "eq":
        met = json_equal(value, check.expected)
    elif check.op == "ne":
        met = not json_equal(value, check.expected)
    elif check.op == "in":
        met = isinstance(check.expected, list) and any(json_equal(value, item) for item in check.expected)
    else:
        if not _is_number(value) or not _is_number(check.expected):
            return _binary(False, f"value {shown} at {check.pointer!r} is not a number")
        met = {
            "lt": value < check.expected,
            "le": value <= check.expected,
            "gt": value > check.expected,
            "ge": value >= check.expected,
        }[check.op]
    return _binary(
        met,
        f"value {shown} at {check.pointer!r} {'satisfies' if met else 'fails'} {check.op} {_short(json.dumps(check.expected), 60)}",
    )


def text_similarity(check: TextSimilarityCheck, ctx: GradingContext) -> Outcome:
    text = ctx.compared_text(check)
    limit = ctx.limits.similarity_max_chars
    if len(text) > limit:
        # fuzzy's cost grows with both lengths, and this kind runs with no CPU timer in a trainer's threads
        # (bounded_by_design): a text too long to compare fails, as one too long for the judge does.
        raise Failed(
            f"the {check.target} is {len(text):,} characters long, over the limit of {limit:,} for "
            "text_similarity (GYMWRIGHT_SIMILARITY_MAX_CHARS); not compared"
        )
    reference = check.unicode_value("reference")
    if check.metric == "fuzzy":
        candidate = ctx.normalised(text, fold_case=True, collapse_space=True)
        value = similarity.fuzzy(candidate, similarity.normalise(reference), normalised=True)
    elif check.metric == "rouge_l":
        value = similarity.rouge_l(ctx.tokens(text)[0], similarity.tokens(reference))
    else:
        words, joined = ctx.tokens(text)
        value = similarity.bleu(words, similarity.tokens(reference), candidate_joined=joined)
    met = value >= check.threshold
    return _binary(met, f"{check.metric} similarity {value:.3f} {'≥' if met else '<'} threshold {check.threshold:g}")
