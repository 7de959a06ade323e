"""Text an agent produced, made storable: what PostgreSQL, UTF-8 and a JSON API refuse, escaped readably.

An agent controls its answer, its turns, its tool output and the names of its files, and may put in them what
is not Unicode text: a file named with invalid UTF-8 (`b'a\\xffb'`) reaches Python as a lone surrogate
(`'a\\udcffb'`, the file system's surrogateescape), JSON may carry a lone `\\ud800`, and any of them a NUL.
PostgreSQL's jsonb refuses `\\u0000` and a lone surrogate escape, a text column a NUL, and UTF-8 (the database,
a page, an HTTP request to the model or the judge) a lone surrogate. Any of them would turn a rollout into an
error with its grade lost, which an agent could do to every low-scoring rollout.

So what the sandbox and the policy return is made storable where it enters: a lone surrogate becomes the six
characters `\\udcff`, a NUL the six characters `\\u0000` (both readable, and what JSON would have written), and a
file name the bytes it stands for, invalid ones escaped as `\\xff`, with the raw bytes kept (`storable_name`).
Text that holds neither is returned as it is.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any

#: Any surrogate code point: in a Python str it is never part of Unicode text (a pair is one code point).
SURROGATE = re.compile("[\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def storable_text(text: str) -> str:
    """`text` with each NUL and surrogate written as its `\\uXXXX` escape (six characters); `text` itself when
    it holds neither."""
    if "\x00" not in text and not SURROGATE.search(text):
        return text
    return _UNSTORABLE.sub(_escape, text)


def json_text_storable(text: str) -> bool:
    """Whether JSON text written by `json.dumps(..., ensure_ascii=False)` holds neither a NUL (written `\\u0000`)
    nor a surrogate (kept as it is). False may be a false alarm (a backslash before "u0000" in a string)."""
    return "\\u0000" not in text and not SURROGATE.search(text)


def storable(value: Any) -> Any:
    """A JSON value (dicts, lists, strings, numbers) with every string and key made `storable_text`; `value`
    itself when nothing in it needs it (found by the C encoder, not a walk). Iterative: any depth."""
    try:
        if json_text_storable(json.dumps(value, ensure_ascii=False, check_circular=False)):
            return value
    except (TypeError, ValueError, RecursionError):  # not plain JSON: walk what is
        pass
    root: list = [value]
    stack: list = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, str):
            parent[key] = storable_text(item)
        elif isinstance(item, dict):
            copy = {storable_text(k) if isinstance(k, str) else k: v for k, v in item.items()}
            parent[key] = copy
            stack += [(copy, k, v) for k, v in copy.items()]
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            parent[key] = copy
            stack += [(copy, index, child) for index, child in enumerate(copy)]
    return root[0]


def storable_name(name: str) -> tuple[str, str | None]:
    """(readable, raw) for a file name the sandbox produced: readable is the name's bytes decoded as UTF-8 with
    each invalid byte written `\\xff` (and any other surrogate or NUL escaped by `storable_text`); raw is the
    name's bytes in base64 when readable is not the name itself (None otherwise), so the name is recoverable."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a surrogate the file system's surrogateescape did not make: no bytes stand behind it
        return storable_text(name), None
    readable = storable_text(raw.decode("utf-8", "backslashreplace"))
    if readable == name:
        return name, None
    return readable, base64.b64encode(raw).decode("ascii")
