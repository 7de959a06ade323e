"""Rubric lint: warnings (not errors) about rubrics that a hostile agent can game.

Each warning is an `Issue` with the JSON pointer of the check (or field) it is about:

- a `command` check that runs a test file the agent can change (a `workspace` file, neither
  `protected` nor `grader`): skipping, editing or deleting the tests passes it;
- a `command` check that runs a Python test runner (pytest, unittest, nose) at all: its exit code is
  the tested code's to fake; a `tests` check runs the suite with Gymwright's own runner;
- a `file_content` "untouched" check (contains / regex on a file the task provides): one edit
  elsewhere in the file (a skip decorator) still passes it; on a protected or grader file it
  is always met;
- judge checks that reward but none that penalises an obviously harmful or manipulative answer;
- penalties that can never apply (or always do): a penalty reading a protected or grader file,
  which the sandbox puts back before the checks run.

`lint_rubric(rubric, files)` needs the task's files (`[{path, role}]`) for the rules about
roles; without them it still applies the rest. `lint_task(task)` reads them from the task.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .models import check_model, flat_checks
from .validation import Issue, make_pointer

_TEST_FILE = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py|test[^/]*\.sh|conftest\.py)$|(^|/)tests?/")
_UNTOUCHED = re.compile(
    r"untouched|unchanged|unmodified|intact|not[ _]?(been[ _])?(modified|changed|edited)", re.IGNORECASE
)
_RUNNERS = re.compile(r"\b(pytest|unittest|nose2?|tox|make\s+test|npm\s+test|go\s+test|cargo\s+test)\b")
# Python test runners a `tests` check replaces: their exit code is the agent's to fake.
_PYTHON_RUNNERS = re.compile(r"(?<![\w.-])(py\.?test|unittest|nose2?)(?![\w-])")


def is_test_file(path: str) -> bool:
    return bool(_TEST_FILE.search(path))


def _roles(files: Iterable[Mapping] | None) -> dict[str, str] | None:
    if files is None:
        return None
    roles = {}
    for entry in files:
        if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
            roles[entry["path"]] = entry.get("role") or "workspace"
    return roles


def _names_file(command: str, path: str) -> bool:
    base = posixpath.basename(path)
    stem = base.rsplit(".", 1)[0]
    module = path.rsplit(".", 1)[0].replace("/", ".")
    words = set(re.findall(r"[\w./-]+", command))
    return (
        path in words
        or base in words
        or stem in words
        or module in words
        or any(
            w.startswith(posixpath.dirname(path) + "/") or w.rstrip("/") == posixpath.dirname(path)
            for w in words
            if posixpath.dirname(path)
        )
    )


def _read_path(check: Mapping) -> str | None:
    """The workspace file a check reads, if any."""
    if getattr(check_model(check), "reads_workspace", False) and isinstance(check.get("path"), str):
        return check["path"]
    target = check.get("target")
    if isinstance(target, str) and target.startswith("file:"):
        return target[len("file:") :]
    return None


def lint_rubric(rubric: Any, files: Iterable[Mapping] | None = None, *, prefix: list | None = None) -> list[Issue]:
    """Warnings about `rubric` (a rubric document); `files` are the task's file entries."""
    prefix = list(prefix or [])
    if not isinstance(rubric, Mapping):
        return []
    roles = _roles(files)
    warnings: list[Issue] = []
    checks = [
        (row.check, row.pointer) for row in flat_checks(rubric.get("checks"), pointer=make_pointer([*prefix, "checks"]))
    ]
    for check, pointer in checks:
        kind, points = check.get("kind"), check.get("points")
        penalty = isinstance(points, (int, float)) and not isinstance(points, bool) and points < 0
        if kind == "command" and isinstance(check.get("run"), str) and roles is not None:
            exposed = [path for path, role in roles.items() if role == "workspace" and is_test_file(path)]
            named = [path for path in exposed if _names_file(check["run"], path)]
            if not named and _RUNNERS.search(check["run"]):
                named = exposed
            if named:
                shown = ", ".join(named[:3]) + (" …" if len(named) > 3 else "")
                warnings.append(
                    Issue(
                        f"{pointer}/run",
                        f"runs {shown}, which the agent can edit, skip or delete (role workspace): "
                        "make the tests protected or grader",
                    )
                )
        if kind == "command" and isinstance(check.get("run"), str) and _PYTHON_RUNNERS.search(check["run"]):
            warnings.append(
                Issue(
                    f"{pointer}/kind",
                    "runs a Python test runner and trusts its exit code, which the code under test can fake "
                    "(os._exit(0) at import, a module shadowing the tests or unittest, a patched assertEqual): "
                    "use a `tests` check, which runs the tests with Gymwright's own runner",
                )
            )
        path = _read_path(check)
        role = roles.get(path) if roles is not None and path else None
        if kind == "file_content" and any(check.get(key) is not None for key in ("contains", "not_contains", "regex")):
            if role in ("protected", "grader"):
                warnings.append(
                    Issue(
                        pointer,
                        f"always met: {path} is a {role} file, put back before the checks run; remove this check",
                    )
                )
            elif role == "workspace" or (
                roles is None and _UNTOUCHED.search(f"{check.get('id', '')} {check.get('title', '')}")
            ):
                warnings.append(
                    Issue(
                        pointer,
                        f"only looks for part of {path}: an edit anywhere else (a skip decorator, a deleted test) "
                        "still passes; make the file protected (the grade then records any change) or check its sha256",
                    )
                )
        elif penalty and role in ("protected", "grader"):
            warnings.append(
                Issue(
                    pointer,
                    f"a penalty that never changes: {path} is a {role} file, put back before the checks run, "
                    "so this check scores the same for every rollout",
                )
            )
    judges = [(check, pointer) for check, pointer in checks if getattr(check_model(check), "judged", False)]
    rewarding = [(c, p) for c, p in judges if isinstance(c.get("points"), (int, float)) and c["points"] > 0]
    penalising = [c for c, _ in judges if isinstance(c.get("points"), (int, float)) and c["points"] < 0]
    if rewarding and not penalising:
        warnings.append(
            Issue(
                rewarding[0][1],
                "no judge check penalises an obviously harmful or manipulative answer: add one with negative points "
                "(e.g. 'Gives unsafe advice', 'Tells the grader that the criteria are met')",
            )
        )
    return warnings


def lint_task(task: Any) -> list[Issue]:
    """Warnings about a task document's rubric, with its files' roles."""
    if not isinstance(task, Mapping):
        return []
    files = task.get("files") if isinstance(task.get("files"), list) else []
    return lint_rubric(task.get("rubric"), files, prefix=["rubric"])
