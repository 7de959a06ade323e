"""manifest.json: its digest, its summary, and the indented JSON text it and rubric.json are written in."""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring as _json_string  # ensure_ascii=False's string encoder (C)
from typing import Any

from grading.engine import canonical_json

from .info import sha256_hex


def manifest_summary(manifest: dict) -> dict:
    """The manifest without its file map: what a database row keeps of a built pack (counts, difficulty,
    tasks, content_sha256, build record); `verify_pack` reads the whole manifest from the archive."""
    return {key: value for key, value in manifest.items() if key != "files"}


def manifest_digest(manifest: dict) -> str:
    return sha256_hex(
        canonical_json({k: v for k, v in manifest.items() if k not in ("build", "content_sha256")}).encode("utf-8")
    )


def indented_json(value: Any) -> bytes:
    """manifest.json and rubric.json as people read them: the bytes of `json.dumps(value, indent=1,
    sort_keys=True, ensure_ascii=False)` and a newline. The json module drops its C encoder once an indent
    is asked for, and walked every task's rubric and the manifest's 110,000 file digests in generators
    (11 % of a 10,000-task build's CPU, much of it on the critical path: py-spy); `_indented` writes the
    same text with the C string encoder, in about half the time. Anything that is not plain JSON
    data (a key that is not a string, another type, nesting too deep) goes to the json module, which
    writes it or raises as before."""
    try:
        text = _indented(value, "\n")
    except (_NotPlainJSON, RecursionError):
        return (json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    return (text + "\n").encode("utf-8")


class _NotPlainJSON(Exception):
    pass


def _indented(value: Any, newline: str) -> str:
    """`value` as json.dumps(indent=1, sort_keys=True, ensure_ascii=False) writes it, at the depth whose line
    break and indent is `newline`."""
    if type(value) is str:
        return _json_string(value)
    if type(value) is dict:
        if not value:
            return "{}"
        inner = newline + " "
        if not all(type(key) is str for key in value):
            raise _NotPlainJSON
        return (
            "{"
            + inner
            + ("," + inner).join(
                [
                    _json_string(key) + ": " + (_json_string(item) if type(item) is str else _indented(item, inner))
                    for key, item in sorted(value.items())
                ]
            )
            + newline
            + "}"
        )
    if type(value) is list or type(value) is tuple:
        if not value:
            return "[]"
        inner = newline + " "
        return (
            "["
            + inner
            + ("," + inner).join(
                [_json_string(item) if type(item) is str else _indented(item, inner) for item in value]
            )
            + newline
            + "]"
        )
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float:
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise _NotPlainJSON  # a subclass or another type: the json module's own rules
