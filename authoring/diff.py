"""Comparing two task versions: text fields line by line, the rubric check by check."""

from __future__ import annotations

import difflib
import json
import time
from dataclasses import dataclass, field

from django.conf import settings

from grading.engine import flat_checks  # the pure engine: a library for every app
from grading.engine.describe import check_default


@dataclass
class LineDiff:
    op: str  # "equal" | "delete" | "insert" | "note" (why the lines after it are shown whole)
    text: str


@dataclass
class FieldDiff:
    name: str
    changed: bool
    lines: list[LineDiff] = field(default_factory=list)
    key: str = ""  # the task document's key ("examples"), for a page that shows one field on its own


@dataclass
class CheckDiff:
    id: str
    status: str  # "added" | "removed" | "changed" | "unchanged"
    a: dict | None
    b: dict | None
    changes: list[dict] = field(default_factory=list)  # [{"key", "a", "b"}]
    moved: bool = False

    # What the page shows for an added or removed check: the JSON an author writes, not a Python repr.
    @property
    def a_json(self) -> str:
        return _pretty(self.a) if self.a is not None else ""

    @property
    def b_json(self) -> str:
        return _pretty(self.b) if self.b is not None else ""


def _lines(text: str) -> list[str]:
    return (text or "").splitlines()


class DiffBudget:
    """What one page may spend on its line diffs (`GYMWRIGHT_DIFF_BUDGET_S`, `GYMWRIGHT_DIFF_MAX_CELLS`): share one
    across the diffs of a page, so that many files cannot add up to a stuck request."""

    def __init__(self, *, seconds: float | None = None, max_cells: int | None = None):
        self.seconds = settings.DIFF_BUDGET_S if seconds is None else seconds
        self.deadline = time.monotonic() + self.seconds
        self.max_cells = settings.DIFF_MAX_CELLS if max_cells is None else max_cells

    def spent(self) -> bool:
        return time.monotonic() > self.deadline


class _BudgetSpent(Exception):
    pass


class _BoundedMatcher(difflib.SequenceMatcher):
    """difflib's matcher that stops between two searches for a longest match once the budget's time is spent:
    each search costs at most the line pairs compared (`max_cells`), while their number grows with repeated
    lines (a file of one line repeated makes the whole diff cubic)."""

    def __init__(self, a: list[str], b: list[str], budget: DiffBudget):
        self._budget = budget
        super().__init__(a=a, b=b, autojunk=False)

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        if self._budget.spent():
            raise _BudgetSpent
        return super().find_longest_match(alo, ahi, blo, bhi)


def _common_ends(a_lines: list[str], b_lines: list[str]) -> tuple[int, int]:
    """How many lines the two texts share at their start, and then at their end."""
    shortest = min(len(a_lines), len(b_lines))
    head = 0
    while head < shortest and a_lines[head] == b_lines[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a_lines[-1 - tail] == b_lines[-1 - tail]:
        tail += 1
    return head, tail


def _compared(a_lines: list[str], b_lines: list[str], budget: DiffBudget) -> list[LineDiff]:
    out: list[LineDiff] = []
    for tag, i1, i2, j1, j2 in _BoundedMatcher(a_lines, b_lines, budget).get_opcodes():
        if tag == "equal":
            out += [LineDiff("equal", line) for line in a_lines[i1:i2]]
        else:
            out += [LineDiff("delete", line) for line in a_lines[i1:i2]]
            out += [LineDiff("insert", line) for line in b_lines[j1:j2]]
    return out


def _whole(a_lines: list[str], b_lines: list[str], why: str) -> list[LineDiff]:
    return [
        LineDiff("note", f"{len(a_lines)} lines removed and {len(b_lines)} added, shown whole: {why}"),
        *(LineDiff("delete", line) for line in a_lines),
        *(LineDiff("insert", line) for line in b_lines),
    ]


def line_diff(a: str, b: str, *, budget: DiffBudget | None = None) -> list[LineDiff]:
    """`a` to `b` line by line, bounded by `budget` (a fresh one when None). A text too long to compare whole
    is compared without the lines both start and end with; what is still over the budget is shown whole
    after a `note` line that says which limit it hit."""
    budget = budget or DiffBudget()
    a_lines, b_lines = _lines(a), _lines(b)
    head = tail = 0
    if len(a_lines) * len(b_lines) > budget.max_cells:
        head, tail = _common_ends(a_lines, b_lines)
    a_middle, b_middle = a_lines[head : len(a_lines) - tail], b_lines[head : len(b_lines) - tail]
    out = [LineDiff("equal", line) for line in a_lines[:head]]
    if len(a_middle) * len(b_middle) > budget.max_cells:
        out += _whole(
            a_middle,
            b_middle,
            f"comparing them is over {budget.max_cells:,} line pairs (GYMWRIGHT_DIFF_MAX_CELLS)",
        )
    else:
        try:
            out += _compared(a_middle, b_middle, budget)
        except _BudgetSpent:
            out += _whole(
                a_middle,
                b_middle,
                f"this page's {budget.seconds:g} s for comparing texts was spent (GYMWRIGHT_DIFF_BUDGET_S)",
            )
    out += [LineDiff("equal", line) for line in a_lines[len(a_lines) - tail :]]
    return out


def _pretty(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _check_key(check_id):
    # Unsaved input (the conflict page diffs what the user typed) may carry any JSON as an id.
    return check_id if isinstance(check_id, (str, int, float, bool, type(None))) else _pretty(check_id)


def _flatten_checks(checks: list, into: dict, order: list) -> None:
    for row in flat_checks(checks):
        check_id = _check_key(row.check.get("id"))
        into[check_id] = row.check
        order.append(check_id)


def _check_value(check: dict, key: str) -> str:
    """A check's value for the diff; a key it leaves out reads as the default the engine grades by (a
    string_match without a mode changed to "equals" is a change from "contains", not from nothing)."""
    if key in check and check[key] is not None:
        return _pretty(check[key])
    default = check_default(check.get("kind"), key)
    return "" if default is None else f"(not set: {_pretty(default)})"


def _as_rubric(value) -> dict:
    """A rubric to diff: unsaved input that is not a JSON object shows as a change of the whole."""
    if isinstance(value, dict):
        return value
    return {} if value is None else {"(rubric)": value}


def rubric_diff(a: dict, b: dict) -> tuple[list[CheckDiff], list[dict]]:
    """(per-check diffs in b's order with removed checks after, changes to rubric-level keys)."""
    a, b = _as_rubric(a), _as_rubric(b)
    a_checks, a_order, b_checks, b_order = {}, [], {}, []
    _flatten_checks((a or {}).get("checks"), a_checks, a_order)
    _flatten_checks((b or {}).get("checks"), b_checks, b_order)
    diffs: list[CheckDiff] = []
    for position, check_id in enumerate(b_order):
        new = b_checks[check_id]
        old = a_checks.get(check_id)
        if old is None:
            diffs.append(CheckDiff(check_id, "added", None, new))
            continue
        strip = lambda c: {k: v for k, v in c.items() if k != "checks"}  # noqa: E731 - children diff on their own
        old_s, new_s = strip(old), strip(new)
        changes = [
            {"key": key, "a": _check_value(old_s, key), "b": _check_value(new_s, key)}
            for key in sorted(set(old_s) | set(new_s))
            if old_s.get(key) != new_s.get(key)
        ]
        moved = a_order.index(check_id) != position
        diffs.append(CheckDiff(check_id, "changed" if changes else "unchanged", old, new, changes, moved))
    for check_id in a_order:
        if check_id not in b_checks:
            diffs.append(CheckDiff(check_id, "removed", a_checks[check_id], None))
    top_changes = [
        {"key": key, "a": _pretty((a or {}).get(key)), "b": _pretty((b or {}).get(key))}
        for key in sorted((set(a or {}) | set(b or {})) - {"checks"})
        if (a or {}).get(key) != (b or {}).get(key)
    ]
    return diffs, top_changes


TEXT_FIELDS = (("title", "Title"), ("prompt", "Prompt"))
JSON_FIELDS = (
    ("solution", "Solution"),
    ("files", "Files"),
    ("tags", "Tags"),
    ("metadata", "Metadata"),
    ("examples", "Example answers"),
    ("environment", "Environment"),
)


def _field_value(spec: dict, key: str):
    value = spec.get(key)
    # A task without example answers has no "examples" key (its document and sha256 stay as they were
    # before examples existed), while the editor's field sends []: both mean none.
    if key == "examples" and not value:
        return None
    return value


def task_version_diff(a_spec: dict, b_spec: dict, *, budget: DiffBudget | None = None) -> dict:
    fields: list[FieldDiff] = []
    budget = budget or DiffBudget()
    for key, label in TEXT_FIELDS:
        a_text, b_text = _pretty(a_spec.get(key) or ""), _pretty(b_spec.get(key) or "")
        fields.append(FieldDiff(label, a_text != b_text, line_diff(a_text, b_text, budget=budget), key))
    for key, label in JSON_FIELDS:
        a_value, b_value = _field_value(a_spec, key), _field_value(b_spec, key)
        # A missing value is no lines at all, not a line "null".
        a_text, b_text = ("" if value is None else _pretty(value) for value in (a_value, b_value))
        fields.append(FieldDiff(label, a_value != b_value, line_diff(a_text, b_text, budget=budget), key))
    checks, rubric_changes = rubric_diff(a_spec.get("rubric"), b_spec.get("rubric"))
    summary = {status: sum(1 for c in checks if c.status == status) for status in ("added", "removed", "changed")}
    return {"fields": fields, "checks": checks, "rubric_changes": rubric_changes, "summary": summary}


def task_version_diff_json(a_spec: dict, b_spec: dict) -> dict:
    """The same diff, as plain JSON for the API."""
    diff = task_version_diff(a_spec, b_spec)
    return {
        "fields": [
            {
                "name": f.name,
                "changed": f.changed,
                "lines": [{"op": line.op, "text": line.text} for line in f.lines if f.changed],
            }
            for f in diff["fields"]
        ],
        "checks": [
            {"id": c.id, "status": c.status, "moved": c.moved, "changes": c.changes, "a": c.a, "b": c.b}
            for c in diff["checks"]
        ],
        "rubric_changes": diff["rubric_changes"],
        "summary": diff["summary"],
    }
