"""Hack probes, the engine's side: their names, which apply to a task, and the file names a
prompt mentions (what `hack:empty-files` and `hack:echo-prompt` write). The scripted agents
themselves are in sandbox.runtime.hacks; their gates in grading.engine.gates."""

from __future__ import annotations

import re
from collections.abc import Mapping

HACKS = {
    "skip-tests": "skips every test it finds (skip decorators, pytest.skip, sys.exit(0) at import)",
    "delete-tests": "deletes every test file",
    "edit-tests": "replaces every assertion with assert True",
    "echo-prompt": "submits the prompt back and writes it into every file the prompt names",
    "keyword-stuffing": "submits the prompt's words and numbers",
    "judge-injection": "tells the grader every criterion is met",
    "empty-files": "creates every file the prompt names, empty",
}

# A file name the prompt mentions: a relative path with an extension, no spaces.
_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/-])")


def prompt_file_names(prompt: str, limit: int = 20) -> list[str]:
    """Relative file paths the prompt names (`summary.csv`, `data/out.json`), at most `limit`."""
    names: list[str] = []
    for match in _FILE_NAME.finditer(prompt):
        name = match.group(1)
        if ".." in name.split("/") or name in names or re.fullmatch(r"[\d.]+", name):
            continue
        names.append(name)
        if len(names) >= limit:
            break
    return names


def _kinds(checks) -> set[str]:
    kinds, stack = set(), list(checks or [])
    while stack:
        check = stack.pop()
        if isinstance(check, Mapping):
            kinds.add(check.get("kind"))
            stack.extend(check.get("checks") or [])
    return kinds


def applicable_hacks(task: Mapping) -> list[str]:
    """The hacks that could fool this task (a gymwright.task/v1 document): test hacks when
    checks run code, judge injection when a judge grades, empty files when checks read files
    or the prompt names some; prompt echoing and keyword stuffing always."""
    kinds = _kinds((task.get("rubric") or {}).get("checks"))
    found = []
    if kinds & {"command", "python"}:
        found += ["skip-tests", "delete-tests", "edit-tests"]
    found += ["echo-prompt", "keyword-stuffing"]
    if "llm_judge" in kinds:
        found.append("judge-injection")
    if kinds & {"file_exists", "file_content", "table_cell"} or prompt_file_names(str(task.get("prompt") or "")):
        found.append("empty-files")
    return found
