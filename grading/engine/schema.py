"""Published JSON Schemas (draft 2020-12) and canonical JSON.

The schemas are self-contained (`$defs` only, no remote refs) and avoid the
keywords Ajv's strict 2020 mode rejects (pydantic's OpenAPI `discriminator` is
removed; every check variant already pins `kind` with `const`).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from typing import Any

from pydantic import BaseModel

from .models import GRADE_SCHEMA, RUBRIC_SCHEMA, TASK_SCHEMA, Grade, Rubric, Task

_MODELS = {"rubric": (Rubric, RUBRIC_SCHEMA), "task": (Task, TASK_SCHEMA), "grade": (Grade, GRADE_SCHEMA)}
SCHEMA_NAMES = tuple(_MODELS)


def _clean(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _clean(value) for key, value in node.items() if key != "discriminator"}
    if isinstance(node, list):
        return [_clean(value) for value in node]
    return node


@cache
def _schema_text(name: str) -> str:
    model, schema_id = _MODELS[name]
    body = _clean(model.model_json_schema(mode="serialization" if name == "grade" else "validation", by_alias=True))
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://gymwright.dev/schema/{name}.json",
        "description": f"{schema_id}: see docs/formats.md. Rules across checks (unique ids, at least one positive "
        "check, one of contains/regex/equals/sha256) are enforced by `python -m grading.engine validate`.",
    }
    body.pop("description", None)
    schema.update(body)
    return json.dumps(schema)


def json_schema(name: str) -> dict:
    """The JSON Schema of "rubric", "task" or "grade" (a fresh dict each call)."""
    if name not in _MODELS:
        raise ValueError(f"unknown schema {name!r}; expected one of {', '.join(SCHEMA_NAMES)}")
    return json.loads(_schema_text(name))


def _is_integral_float(value: Any) -> bool:
    return isinstance(value, float) and value.is_integer() and abs(value) < 2**53


def _has_integral_float(value: Any) -> bool:
    """Whether `_normalise_numbers` would change `value`: a walk that copies nothing (a third of the
    copy's time), since most documents hold no float like 1.0 and are then dumped as they are."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif _is_integral_float(item):
            return True
    return False


def _normalise_numbers(value: Any) -> Any:
    """Integral floats become ints (1.0 → 1), as in RFC 8785: JSON does not tell them apart,
    and a browser editor that round-trips a document must not change its hash."""
    if _is_integral_float(value):
        return int(value)
    if isinstance(value, dict):
        return {key: _normalise_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalise_numbers(item) for item in value]
    return value


def canonical_json(data: Any) -> str:
    """Sorted keys, compact separators, UTF-8 (no \\u escapes), NaN/Infinity refused."""
    return canonical_json_exact(data)[0]


def canonical_json_exact(data: Any) -> tuple[str, bool]:
    """(canonical_json(data), exact): `exact` when the text is `data` itself, no float like 1.0 having
    become 1, so that it can stand for `data` where JSON is stored (key order and spacing aside)."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json", by_alias=True)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # A float that normalises (below 2**53) is written "1.0", followed by a separator or the end: text
    # without one holds none, found by one scan of the text in a fraction of the walk's time. A match may
    # be in a string ("version 1.0,"): the walk decides.
    if _INTEGRAL_FLOAT_TEXT.search(text) is None or not _has_integral_float(data):
        return text, True
    return json.dumps(
        _normalise_numbers(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ), False


_INTEGRAL_FLOAT_TEXT = re.compile(r"\.0(?:[,\]}]|$)")


def content_sha256(data: Any) -> str:
    """sha256 hex of `canonical_json(data)` encoded as UTF-8."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
