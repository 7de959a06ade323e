"""Rubric patterns: the one place an author's regular expression is compiled and run.

Patterns run on PyPI's `regex` engine (its VERSION0 mode is `re`'s syntax and
semantics, so existing rubrics keep their meaning, backreferences and lookarounds
included) with a `timeout` on every search: a catastrophic pattern such as
`(a+)+$` stops at the check's time budget (`limits.pattern_timeout_s()`) and the
check fails with the reason, instead of holding a worker for hours. google-re2 was
the alternative: linear time, but it rejects backreferences and lookarounds that
published rubrics may use, which would change the format's meaning.

Searches keep the GIL (`concurrent=False`), as `re` does: `regex` gives it up for every search of a `str`
by default, and a trainer grading from a thread pool paid for each hand-over (with 8 threads a 10-check
grade took twice the CPU of one thread: bench/bench_reward_fn.py). The cost is that a search running
to its timeout holds up the process's other threads for that long (at most the check's budget).

`compile_pattern(pattern, flags)` is the only constructor; `validate_pattern` is
the schema's check that a pattern compiles. Searches also use a literal
prefilter, so a pattern that cannot match costs a `str.find`.

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
import time
from collections.abc import Iterator

import regex

from .limits import BudgetExceeded, pattern_timeout_s

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


_FLAG_LETTERS = "aimsx"
_RE_FLAGS = {"a": re.ASCII, "i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}
_REGEX_FLAGS = {"a": regex.ASCII, "i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL, "x": regex.VERBOSE}


def _flag_bits(letters: str, table: dict[str, int]) -> int:
    bits = 0
    for letter in letters:
        bits |= table[letter]
    return bits


def validate_pattern(pattern: str, flags: str = "") -> None:
    """Raise `ValueError` with the engine's message if the pattern does not compile."""
    try:
        regex.compile(pattern, _flag_bits(flags, _REGEX_FLAGS) | regex.VERSION0)
    except regex.error as exc:
        raise ValueError(str(exc)) from None


def compile_pattern(pattern: str, flags: str = "") -> Searcher:
    """An author's pattern (flag letters from 'aimsx'), compiled for time-bounded searches."""
    compiled = regex.compile(pattern, _flag_bits(flags, _REGEX_FLAGS) | regex.VERSION0)
    return Searcher(compiled, re_flags=_flag_bits(flags, _RE_FLAGS))


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("regex timed out")
    return left


def _timed_out(searcher: Searcher) -> BudgetExceeded:
    text = searcher.pattern.pattern
    shown = text if len(text) <= 60 else text[:57] + "..."
    return BudgetExceeded(f"the pattern {shown!r} ran longer than its {pattern_timeout_s():g} s time budget")


def _required_literals(pattern, re_flags: int) -> tuple[str | None, str | None, bool]:
    """(longest required literal, literal every match starts with, ignore case), from `re`'s parser."""
    if not isinstance(pattern.pattern, str):
        return None, None, False
    try:
        from re import _parser as sre_parse  # Python ≥ 3.11
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(pattern.pattern, re_flags)
        ignore_case = bool((parsed.state.flags | re_flags) & re.IGNORECASE)
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
    """A compiled pattern plus its literal prefilter; `search`/`finditer` behave like `re`'s.

    Each search is bounded by the running check's time budget; running over it
    raises `BudgetExceeded` (the check then fails with the reason).
    """

    __slots__ = ("pattern", "literal", "prefix", "ignore_case")

    def __init__(self, pattern, *, re_flags: int = 0):
        self.pattern = pattern
        self.literal, self.prefix, self.ignore_case = _required_literals(pattern, re_flags)

    @property
    def groups(self) -> int:
        return self.pattern.groups

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

    def search(self, text: str):
        try:
            return self._search(text, pattern_timeout_s())
        except TimeoutError:
            raise _timed_out(self) from None

    def _search(self, text: str, timeout: float):
        start, haystack = self._start(text)
        if start < 0:
            return None
        deadline = time.monotonic() + timeout
        if haystack is not None:
            # Try the match only where the prefix occurs; after a few dozen tries, let the engine scan.
            for _ in range(_ANCHORED_TRIES):
                found = self.pattern.match(text, start, timeout=_left(deadline), concurrent=False)
                if found is not None:
                    return found
                start = haystack.find(self.prefix, start + 1)
                if start < 0:
                    return None
        return self.pattern.search(text, start, timeout=_left(deadline), concurrent=False)

    def finditer(self, text: str) -> Iterator:
        start, _ = self._start(text)
        if start < 0:
            return
        try:
            yield from self.pattern.finditer(text, start, timeout=pattern_timeout_s(), concurrent=False)
        except TimeoutError:
            raise _timed_out(self) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Searcher) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)
