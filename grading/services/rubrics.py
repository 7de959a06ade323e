"""Rubrics from the editor: its JSON text parsed into the engine's Rubric, or DomainError with pointers."""

from __future__ import annotations

import json
from typing import Any

from grading import engine
from gymwright.errors import DomainError


def rubric_parse(*, data: Any):
    """The engine Rubric for `data`, or DomainError listing every problem with its JSON pointer."""
    if not isinstance(data, dict):
        raise DomainError(
            "The rubric must be a JSON object.",
            code="invalid_rubric",
            details=[{"pointer": "", "message": f"expected an object, got {type(data).__name__}"}],
        )
    try:
        return engine.parse_rubric(data)
    except engine.SpecError as exc:
        details = [{"pointer": issue.pointer, "message": issue.message} for issue in exc.issues]
        count = len(details)
        raise DomainError(
            f"The rubric has {count} problem{'s' if count != 1 else ''}.", code="invalid_rubric", details=details
        ) from None


def rubric_from_text(*, text: str):
    """Parse the raw JSON of the editor's rubric textarea, then the rubric itself."""
    if not text or not text.strip():
        raise DomainError(
            "The rubric is empty.",
            code="invalid_rubric",
            details=[{"pointer": "", "message": "write a gymwright.rubric/v1 JSON object"}],
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        raise DomainError(
            f"The rubric is {message}.", code="invalid_rubric", details=[{"pointer": "", "message": message}]
        ) from None
    except ValueError as exc:  # an integer over Python's 4300-digit limit
        message = f"not valid JSON: {str(exc)[:200]}"
        raise DomainError(
            f"The rubric is {message}.", code="invalid_rubric", details=[{"pointer": "", "message": message}]
        ) from None
    except RecursionError:  # the C decoder recurses once per level of nesting
        raise DomainError(
            "The rubric is nested too deeply to read.",
            code="invalid_rubric",
            details=[{"pointer": "", "message": "nested too deeply"}],
        ) from None
    return rubric_parse(data=data)
