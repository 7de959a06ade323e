"""NUL characters in user input.

PostgreSQL stores neither NUL in a text column nor \\u0000 in jsonb: a save or even a
filter that carries one fails deep in the driver. Input is checked up front instead, and
refused with where the character is, on every database alike.
"""

from __future__ import annotations

import json

from grading.engine.validation import escape_pointer_token  # the pure engine: a library for every app
from gymwright.errors import DomainError

NUL = "\x00"


def nul_pointer(value, pointer: str = "") -> str | None:
    """The JSON pointer of the first string or object key in `value` holding a NUL, or None.

    Iterative: the value may be nested as deeply as the JSON decoder allows. JSON text writes a
    NUL as `\\u0000`, so a value whose JSON holds no such escape has none, found by the C encoder
    in a fraction of the walk's time (an import checks every task document); the walk finds where.
    """
    try:
        if "\\u0000" not in json.dumps(value, ensure_ascii=False, check_circular=False):
            return None
    except (TypeError, ValueError, RecursionError):  # not plain JSON (say, tuple keys): walk it
        pass
    stack = [(pointer, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return where
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if isinstance(key, str) and NUL in key:
                    return f"{where}/{escape_pointer_token(key)}"
                stack.append((f"{where}/{escape_pointer_token(str(key))}", child))
        elif isinstance(item, (list, tuple)):
            stack += [(f"{where}/{index}", child) for index, child in reversed(list(enumerate(item)))]
    return None


def nul_check(value, *, pointer: str = "", what: str = "The input") -> None:
    """DomainError at the first NUL character in `value` (any JSON value)."""
    where = nul_pointer(value, pointer)
    if where is not None:
        raise DomainError(f"{what} contains a NUL character (\\u0000) at {where or '/'}; remove it.",
                          details=[{"pointer": where, "message": "contains a NUL character (\\u0000)"}])
