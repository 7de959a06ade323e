"""Pass 1 of validation: pydantic's errors turned into `Issue`s at the RFC 6901 pointer of the offending
value in the document, in words an author reads (see `validation`)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .models import (
    CHECK_ID_PATTERN,
    CHECK_KINDS,
    CHECK_MODELS,
    EXAMPLE_NAME_PATTERN,
    FUNCTION_PATTERN,
    REGEX_FLAGS_PATTERN,
    SHA256_PATTERN,
    SLUG_PATTERN,
    TOOL_NAME_PATTERN,
)


@dataclass(frozen=True)
class Issue:
    """One validation error: `pointer` is the RFC 6901 pointer of the offending value."""

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.message}"


class SpecError(Exception):
    """A rubric or task document is invalid; `.issues` lists every problem."""

    def __init__(self, issues: list[Issue]):
        self.issues = list(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues) or "invalid document")


def escape_pointer_token(token: str | int) -> str:
    """Escape one reference token for a JSON pointer (RFC 6901: '~' → '~0', '/' → '~1')."""
    return str(token).replace("~", "~0").replace("/", "~1")


def make_pointer(tokens) -> str:
    """Build a JSON pointer from reference tokens."""
    return "".join("/" + escape_pointer_token(token) for token in tokens)


_PATTERN_WORDS = {
    CHECK_ID_PATTERN: "a check id: 1 to 64 lowercase letters, digits or underscores",
    SHA256_PATTERN: "a sha256: 64 lowercase hex digits",
    SLUG_PATTERN: "an id: lowercase letters, digits, '.', '_' or '-', starting with a letter or digit",
    TOOL_NAME_PATTERN: "a tool name: letters, digits, '_' or '-', starting with a letter or '_'",
    FUNCTION_PATTERN: "'module:function', e.g. 'checks:totals_match'",
    REGEX_FLAGS_PATTERN: "flag letters from 'aimsx', e.g. 'im'",
    EXAMPLE_NAME_PATTERN: "a name: 1 to 80 characters, no control characters",
}

_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _walk_loc(document: Any, loc: tuple, error_type: str) -> list:
    """Map a pydantic `loc` onto real document keys, dropping discriminator tags and union labels."""
    tokens: list = []
    current = document
    for index, component in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(current, list) and isinstance(component, int):
            tokens.append(component)
            current = current[component] if 0 <= component < len(current) else None
        elif isinstance(current, dict) and isinstance(component, str) and component in current:
            tokens.append(component)
            current = current[component]
        elif isinstance(current, dict) and isinstance(component, str) and last and error_type == "missing":
            tokens.append(component)
        # else: a discriminator tag ("regex") or union member label ("int", "JudgeScale"): not in the document
    return tokens


def _allowed_hint(document: Any, tokens: list) -> str:
    """For an unknown key in a check: the nearest allowed key and the full list."""
    parent = document
    for token in tokens[:-1]:
        try:
            parent = parent[token]
        except (KeyError, IndexError, TypeError):
            return "; remove it or check its spelling"
    model = CHECK_MODELS.get(parent.get("kind")) if isinstance(parent, dict) else None
    if model is None:
        return "; remove it or check its spelling"
    allowed = sorted(field.alias or name for name, field in model.model_fields.items())
    close = difflib.get_close_matches(str(tokens[-1]), allowed, n=1)
    suggestion = f"; did you mean {close[0]!r}?" if close else ""
    return f"{suggestion} (a {parent['kind']} check allows: {', '.join(allowed)})"


def _message(error: dict, tokens: list, document: Any) -> tuple[list, str]:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    key = tokens[-1] if tokens else None
    if kind == "missing":
        return tokens, f"required key {key!r} is missing"
    if kind == "extra_forbidden":
        return tokens, f"unknown key {key!r}" + _allowed_hint(document, tokens)
    if kind == "union_tag_invalid":
        return tokens + ["kind"], (f"unknown check kind {ctx.get('tag')!r}; expected one of: {', '.join(CHECK_KINDS)}")
    if kind == "union_tag_not_found":
        return tokens + ["kind"], f"a check needs a 'kind', one of: {', '.join(CHECK_KINDS)}"
    if kind == "literal_error":
        return tokens, f"{_describe(value)} is not allowed here; expected {ctx.get('expected')}"
    if kind == "string_pattern_mismatch":
        words = _PATTERN_WORDS.get(ctx.get("pattern"), f"a string matching {ctx.get('pattern')}")
        return tokens, f"{_describe(value)} is not {words}"
    if kind == "too_short" and key == "checks":
        return tokens, "a group needs at least one child check in 'checks'"
    if kind == "too_short":
        return tokens, f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "string_too_short":
        return tokens, "must not be empty"
    if kind == "string_unicode":  # a bounded string is checked as UTF-8, which a lone surrogate is not
        return tokens, "contains an unpaired surrogate (a lone \\ud800-\\udfff escape, not Unicode text)"
    if kind == "string_too_long":
        return (
            tokens,
            f"is too long: at most {ctx.get('max_length')} characters (this one has {len(value) if isinstance(value, str) else '?'})",
        )
    if kind == "too_long":
        return tokens, f"has too many items: at most {ctx.get('max_length')} (this one has {ctx.get('actual_length')})"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {
            "greater_than_equal": "≥ {ge}",
            "greater_than": "> {gt}",
            "less_than_equal": "≤ {le}",
            "less_than": "< {lt}",
        }[kind].format(**{k: ctx.get(k) for k in ("ge", "gt", "le", "lt")})
        return tokens, f"{_describe(value)} is out of range; expected a number {words}"
    if kind == "value_error":
        message = str(ctx.get("error") or error.get("msg", ""))
        return tokens, message.removeprefix("Value error, ")
    if kind in _TYPE_WORDS:
        return tokens, f"{_describe(value)} has the wrong type; expected {_TYPE_WORDS[kind]}"
    return tokens, error.get("msg", "invalid value")


def _pydantic_issues(exc: ValidationError, document: Any, prefix: list) -> list[Issue]:
    by_pointer: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        tokens = _walk_loc(document, tuple(error["loc"]), error["type"])
        tokens, message = _message(error, tokens, document)
        pointer = make_pointer(prefix + tokens)
        messages = by_pointer.setdefault(pointer, [])
        if message not in messages:
            messages.append(message)
    issues = []
    for pointer, messages in by_pointer.items():
        if pointer.endswith("/scale") and len(messages) > 1:
            messages = ['expected "binary" or an object {"min": <number>, "max": <number>}']
        issues.append(Issue(pointer, _merge_union_messages(messages)))
    return issues


def _merge_union_messages(messages: list[str]) -> str:
    """Several messages at one pointer come from the members of a union: say it once."""
    if len(messages) == 1:
        return messages[0]
    wrong_type = [message.partition(" has the wrong type; expected ") for message in messages]
    if all(sep for _, sep, _ in wrong_type):
        wanted = [expected for _, _, expected in wrong_type]
        if set(wanted) == {"an integer", "a number"}:
            wanted = ["a number"]
        return f"{wrong_type[0][0]} has the wrong type; expected {' or '.join(dict.fromkeys(wanted))}"
    return " — or — ".join(messages)
