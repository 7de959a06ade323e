"""Text that cannot be stored: NUL characters and unpaired surrogates in user input.

PostgreSQL stores neither NUL in a text column nor \\u0000 in jsonb: a save or even a
filter that carries one fails deep in the driver. JSON may also carry a lone surrogate
(`"\\ud800"` decodes to a str that is not Unicode text): it cannot be written as UTF-8, so
hashing, storing or even reporting it failed with a UnicodeEncodeError (a 500). Input is
checked up front instead, and refused with where the character is, on every database alike.
"""

from __future__ import annotations

import json

from grading.engine.text import SURROGATE as _SURROGATE
from grading.engine.text import json_text_storable
from grading.engine.validation import escape_pointer_token  # the pure engine: a library for every app
from gymwright.errors import DomainError

NUL = "\x00"


def _bad(text: str) -> str | None:
    """Which kind of unstorable character `text` holds ("nul", "surrogate"), or None."""
    if NUL in text:
        return "nul"
    if _SURROGATE.search(text):
        return "surrogate"
    return None


def unstorable_text(value, pointer: str = "") -> tuple[str, str] | None:
    """(JSON pointer, kind) of the first string or object key in `value` holding a NUL ("nul") or an
    unpaired surrogate ("surrogate"), or None.

    Iterative: the value may be nested as deeply as the JSON decoder allows. JSON text writes a
    NUL as `\\u0000` and keeps a lone surrogate as it is, so a value whose JSON holds neither has
    none, found by the C encoder in a fraction of the walk's time (an import checks every task
    document); the walk finds where.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, check_circular=False)
    except (TypeError, ValueError, RecursionError):  # not plain JSON (say, tuple keys): walk it
        pass
    else:
        if json_text_storable(text):
            return None
    stack = [(pointer, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if kind := _bad(item):
                return where, kind
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if isinstance(key, str) and (kind := _bad(key)):
                    return f"{where}/{escape_pointer_token(key)}", kind
                stack.append((f"{where}/{escape_pointer_token(str(key))}", child))
        elif isinstance(item, (list, tuple)):
            stack += [(f"{where}/{index}", child) for index, child in reversed(list(enumerate(item)))]
    return None


def nul_check(value, *, pointer: str = "", what: str = "The input") -> None:
    """DomainError at the first NUL character or unpaired surrogate in `value` (any JSON value)."""
    found = unstorable_text(value, pointer)
    if found is None:
        return
    where, kind = found
    where = where.encode("utf-8", "replace").decode()  # a key on the way may hold a surrogate too
    if kind == "nul":
        raise DomainError(
            f"{what} contains a NUL character (\\u0000) at {where or '/'}; remove it.",
            details=[{"pointer": where, "message": "contains a NUL character (\\u0000)"}],
        )
    raise DomainError(
        f"{what} contains an unpaired surrogate (a lone \\ud800-\\udfff escape, not Unicode text) "
        f"at {where or '/'}; remove it.",
        details=[{"pointer": where, "message": "contains an unpaired surrogate (\\ud800-\\udfff)"}],
    )
