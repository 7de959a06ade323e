"""Bounds on grading untrusted input: rubric patterns (authors) and workspace files (agents).

Every check runs under a CPU-time budget; going over it fails the check
with the reason, never a stalled worker or web process. The bounds are read from
environment variables (the same names the web app documents in README's settings
table) so that the CLI, the Celery workers and the dry-run subprocess agree:

| variable | default | bound |
| --- | --- | --- |
| `GYMWRIGHT_CHECK_CPU_S` | 5 | CPU seconds one check may use (and the time budget of each pattern search) |
| `GYMWRIGHT_CSV_SNIFF_BYTES` | 2048 | bytes of a CSV's first line the delimiter sniffer reads |
| `GYMWRIGHT_XLSX_MAX_MB` | 100 | declared uncompressed size of an XLSX archive |
| `GYMWRIGHT_XLSX_MAX_RATIO` | 100 | declared uncompressed / compressed size of any XLSX member |
| `GYMWRIGHT_XLSX_MAX_MEMBERS` | 10000 | members in an XLSX archive |
| `GYMWRIGHT_XLSX_MAX_TAGS` | 2000000 | XML tags in all of an XLSX archive's members (counted before parsing) |
| `GYMWRIGHT_TABLE_MAX_CELLS` | 1000000 | cells of a CSV or XLSX table read (empty ones a sheet claims included) |
| `GYMWRIGHT_SIMILARITY_MAX_CHARS` | 100000 | characters of the text a `text_similarity` check compares |
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class BudgetExceeded(BaseException):
    """A check used up its CPU-time budget.

    A BaseException on purpose: the SIGPROF handler raises it from inside parsers
    (pandas, openpyxl) whose `except Exception` would otherwise turn it into a
    wrong "not a readable file" verdict.
    """


def _env_number(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    number = float(value)
    if not number > 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return number


@dataclass(frozen=True)
class GradeLimits:
    check_cpu_s: float = 5.0
    csv_sniff_bytes: int = 2048
    xlsx_max_bytes: int = 100 * 1024 * 1024
    xlsx_max_ratio: float = 100.0
    xlsx_max_members: int = 10_000
    xlsx_max_tags: int = 2_000_000
    table_max_cells: int = 1_000_000
    similarity_max_chars: int = 100_000

    @classmethod
    def from_env(cls) -> GradeLimits:
        return cls(
            check_cpu_s=_env_number("GYMWRIGHT_CHECK_CPU_S", cls.check_cpu_s),
            csv_sniff_bytes=int(_env_number("GYMWRIGHT_CSV_SNIFF_BYTES", cls.csv_sniff_bytes)),
            xlsx_max_bytes=int(_env_number("GYMWRIGHT_XLSX_MAX_MB", cls.xlsx_max_bytes / (1024 * 1024)) * 1024 * 1024),
            xlsx_max_ratio=_env_number("GYMWRIGHT_XLSX_MAX_RATIO", cls.xlsx_max_ratio),
            xlsx_max_members=int(_env_number("GYMWRIGHT_XLSX_MAX_MEMBERS", cls.xlsx_max_members)),
            xlsx_max_tags=int(_env_number("GYMWRIGHT_XLSX_MAX_TAGS", cls.xlsx_max_tags)),
            table_max_cells=int(_env_number("GYMWRIGHT_TABLE_MAX_CELLS", cls.table_max_cells)),
            similarity_max_chars=int(_env_number("GYMWRIGHT_SIMILARITY_MAX_CHARS", cls.similarity_max_chars)),
        )


_current = threading.local()


def pattern_timeout_s() -> float:
    """The time one pattern search may take: the running check's budget (the default outside a check)."""
    return getattr(_current, "budget_s", None) or GradeLimits.check_cpu_s


BUDGET_REPEAT_S = 0.05


#: The import system's own code: the budget never stops it (see `_raise_budget`).
_IMPORT_SYSTEM = frozenset({"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"})


def _raise_budget(signum, frame):  # signal handler signature
    # Never while a module is being imported: raised between the import system taking a module's lock and the
    # `with` that gives it back, the exception leaves that lock held by this thread for ever, and the next
    # import of the module from any other thread (a trainer's reward pool) waits for ever. The timer repeats
    # every BUDGET_REPEAT_S of CPU, so the check is stopped just after the import ends. Imports are the
    # grader's own modules (agent code is never imported on the host): each ends.
    while frame is not None:
        if frame.f_code.co_filename in _IMPORT_SYSTEM:
            return
        frame = frame.f_back
    raise BudgetExceeded()


class PatternBudget:
    """`with PatternBudget(seconds):` runs the body with `seconds` as the time budget of each pattern search
    (`pattern_timeout_s()`), on any thread. What bounds a check whose work is bounded by design (see
    `cpu_budget`). A class, not a @contextmanager: it is entered for every check of every grade, and a
    generator's frame cost a twentieth of a 10-check grade."""

    __slots__ = ("previous", "seconds")

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __enter__(self) -> None:
        self.previous = getattr(_current, "budget_s", None)
        _current.budget_s = self.seconds

    def __exit__(self, *exc_info) -> None:
        _current.budget_s = self.previous


@contextmanager
def cpu_budget(seconds: float) -> Iterator[None]:
    """Run the body with at most `seconds` of CPU time; `BudgetExceeded` when it is used up.

    In the main thread (Celery's prefork children, the dry-run subprocess, the CLI) a
    SIGPROF interval timer interrupts any Python-level work but an import (which it lets
    end first: `_raise_budget`). Elsewhere signals cannot
    be used, so only pattern searches (which take `pattern_timeout_s()`) are bounded:
    a check that can run in a worker thread (a trainer calls the pack's reward function
    from a thread pool) must be bounded without it. The text kinds are, by design
    (`bounded_by_design` on their models: linear string work, patterns under their
    timeout, parses with size and depth limits), and run under `PatternBudget` alone.
    """
    previous_budget = getattr(_current, "budget_s", None)
    _current.budget_s = seconds
    use_timer = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if use_timer:
        previous_handler = signal.signal(signal.SIGPROF, _raise_budget)
        # Once spent, the timer fires again every BUDGET_REPEAT_S of CPU: a BudgetExceeded raised while
        # a weakref finalizer or __del__ runs is swallowed by Python ("Exception ignored in ..."), and
        # a one-shot timer would then let the check run on unbounded.
        previous_timer = signal.setitimer(signal.ITIMER_PROF, seconds, BUDGET_REPEAT_S)
        started = time.monotonic()
    try:
        yield
    finally:
        if use_timer:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous_handler)
            if previous_timer[0] > 0:
                # An outer timer keeps running with what is left of it.
                left = max(previous_timer[0] - (time.monotonic() - started), 0.001)
                signal.setitimer(signal.ITIMER_PROF, left, previous_timer[1])
        _current.budget_s = previous_budget
