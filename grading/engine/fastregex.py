"""Regex search with a literal prefilter, so a pattern that cannot match costs a `str.find`.

Python's `re` skips ahead with its literal-prefix optimisation only when a
pattern starts with a case-sensitive literal; `\\bword`, `^total: (\\d+)` or any
IGNORECASE pattern scan the text one character at a time (milliseconds on a
100 kB answer). Every top-level literal of a pattern (outside groups, repeats
and alternations) must appear in any match, so:

* if the longest such literal is absent from the text, there is no match;
* if the pattern starts with a literal (after zero-width assertions such as
  `\\b`, `^`), a match can only start where that literal occurs: the engine
  tries `match` at its first few occurrences, then lets `re` scan from there
  (`re` still sees the real string start for `^` and `\\b`).

Case-insensitive patterns are prefiltered only against ASCII text with ASCII
literals, where `str.lower` is exactly `re`'s case folding. Anything the
internal parser does not make plain disables the prefilter.
"""

from __future__ import annotations

import re
import threading
from typing import Iterator

_ANCHORED_TRIES = 64
_last_text = threading.local()


def _lowered(text: str) -> str | None:
    """`text.lower()` if `text` is ASCII, else None; remembered for the last text seen in this thread."""
    cached = getattr(_last_text, "value", None)
    if cached is not None and cached[0] is text:
        return cached[1]
    value = text.lower() if text.isascii() else None
    _last_text.value = (text, value)
    return value


def _required_literals(pattern: re.Pattern) -> tuple[str | None, str | None, bool]:
    """(longest required literal, literal every match starts with, ignore case)."""
    if not isinstance(pattern.pattern, str):
        return None, None, False
    try:
        from re import _parser as sre_parse  # Python ≥ 3.11
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
        ignore_case = bool((parsed.state.flags | pattern.flags) & re.IGNORECASE)
        literal_op, at_op = sre_parse.LITERAL, sre_parse.AT
    except Exception:  # noqa: BLE001 - no prefilter rather than a wrong one
        return None, None, False
    runs: list[str] = []
    current: list[str] = []
    prefix = None
    leading = True  # only zero-width assertions so far
    for op, argument in parsed:
        if op is literal_op:
            current.append(chr(argument))
            continue
        if current:
            runs.append("".join(current))
            if leading and prefix is None:
                prefix = runs[-1]
            current = []
            leading = False
        if op is not at_op:
            leading = False
    if current:
        runs.append("".join(current))
        if leading and prefix is None:
            prefix = runs[-1]
    longest = max(runs, key=len) if runs else None
    if ignore_case:
        if longest is not None and not longest.isascii():
            return None, None, False
        longest = longest.lower() if longest else None
        prefix = prefix.lower() if prefix and prefix.isascii() else None
    return longest, prefix, ignore_case


class Searcher:
    """A compiled pattern plus its literal prefilter; `search`/`finditer` behave like `re`'s."""

    __slots__ = ("pattern", "literal", "prefix", "ignore_case")

    def __init__(self, pattern: re.Pattern):
        self.pattern = pattern
        self.literal, self.prefix, self.ignore_case = _required_literals(pattern)

    def _haystack(self, text: str) -> str | None:
        if self.literal is None and self.prefix is None:
            return None
        if self.ignore_case:
            return _lowered(text)
        return text

    def _start(self, text: str) -> tuple[int, str | None]:
        """(-1 if no match is possible, else where to start; the text to look for the prefix in)."""
        haystack = self._haystack(text)
        if haystack is None:
            return 0, None
        if self.literal is not None and self.literal not in haystack:
            return -1, None
        if self.prefix is not None:
            return haystack.find(self.prefix), haystack
        return 0, None

    def search(self, text: str) -> re.Match | None:
        start, haystack = self._start(text)
        if start < 0:
            return None
        if haystack is not None:
            # Try the match only where the prefix occurs; after a few dozen tries, let `re` scan.
            for _ in range(_ANCHORED_TRIES):
                found = self.pattern.match(text, start)
                if found is not None:
                    return found
                start = haystack.find(self.prefix, start + 1)
                if start < 0:
                    return None
        return self.pattern.search(text, start)

    def finditer(self, text: str) -> Iterator[re.Match]:
        start, _ = self._start(text)
        if start < 0:
            return iter(())
        return self.pattern.finditer(text, start)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Searcher) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)
