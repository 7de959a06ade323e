"""Validation of rubric and task documents into `Issue`s that carry RFC 6901 JSON pointers.

Two passes, both always run so an author sees every problem at once:

1. pydantic validation of the models (types, unknown keys, single-field rules);
   each error's `loc` is turned into the pointer of the offending value in the
   document (the tags and union-member labels pydantic inserts are dropped).
2. rules across fields and checks, walked over the raw document (tolerant of
   shape errors already reported): duplicate ids, one-of keys, no positive
   points, a penalty marked required, inconsistent json_field op/expected,
   scale min < max, duplicate file paths, checks that cannot fail (an empty `expected`,
   pattern or `contains`).

Warnings about rubrics that can be gamed are in `lint`.

`Issue`, the pointer helpers and pass 1 are in `pydantic_issues`; this module re-exports them.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .models import (
    CHECK_MODELS,
    EXAMPLE_FILES_MAX_CHARS,
    RUBRIC_SCHEMA,
    TASK_SCHEMA,
    Rubric,
    Task,
    flat_checks,
)
from .pydantic_issues import Issue, SpecError, _describe, _pydantic_issues, escape_pointer_token, make_pointer
from .text import normalise_unicode

__all__ = [
    "Issue",
    "SpecError",
    "escape_pointer_token",
    "make_pointer",
    "parse_rubric",
    "parse_task",
    "rubric_semantic_issues",
    "validate_document",
    "validate_rubric",
    "validate_task",
]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_NO_TARGET = {
    "file_exists": "it looks at 'path'",
    "file_content": "it reads the file at 'path'",
    "table_cell": "it reads the table at 'path'",
    "command": "it runs 'run'",
    "group": "its child checks have their own targets",
}


def _cannot_fail(check: dict, kind: Any, pointer: str, issues: list[Issue]) -> None:
    """Checks whose outcome is fixed whatever the answer: refused at the field."""
    # Texts are compared normalised (text.normalise_unicode): a value of only invisible characters is empty.
    normalised = check.get("normalize_unicode", True) is not False

    def blank(value: Any) -> bool:
        return value == "" or (normalised and isinstance(value, str) and normalise_unicode(value) == "")

    invisible = " (it has only invisible characters, which are removed before comparing)"
    if kind == "string_match" and isinstance(check.get("expected"), str):
        expected = check["expected"]
        empty = blank(expected) or (
            check.get("normalize_whitespace", True) is not False
            and not (normalise_unicode(expected) if normalised else expected).strip()
        )
        if empty:
            issues.append(
                Issue(
                    f"{pointer}/expected",
                    "'expected' is empty"
                    + (invisible if expected.strip() else "")
                    + ", so the check has the same result for every answer; give the text to look for",
                )
            )
    elif kind == "regex" and blank(check.get("pattern")):
        issues.append(
            Issue(
                f"{pointer}/pattern",
                "the pattern is empty"
                + (invisible if check.get("pattern") else "")
                + ", so it matches every answer; give a pattern",
            )
        )
    elif kind == "file_content":
        if blank(check.get("not_contains")):
            issues.append(
                Issue(
                    f"{pointer}/not_contains",
                    "'not_contains' is empty"
                    + (invisible if check.get("not_contains") else "")
                    + ", which every file contains, so no file passes; give the text that must be absent",
                )
            )
        for key in ("contains", "regex"):
            if blank(check.get(key)):
                issues.append(
                    Issue(
                        f"{pointer}/{key}",
                        f"'{key}' is empty"
                        + (invisible if check.get(key) else "")
                        + ", so every existing file passes; give the text or pattern "
                        "(file_exists checks that the file is there)",
                    )
                )


def _check_rules(check: dict, pointer: str, issues: list[Issue]) -> None:
    kind = check.get("kind")
    points = check.get("points")
    if kind in _NO_TARGET and check.get("target", "answer") != "answer":
        issues.append(
            Issue(
                f"{pointer}/target",
                f"a {kind} check does not read a target ({_NO_TARGET[kind]}); remove 'target'",
            )
        )
    if check.get("required") is True and _is_number(points) and points < 0:
        issues.append(
            Issue(
                f"{pointer}/required",
                "a penalty (negative points) cannot be required: required means 'must score 1'; "
                "remove required, or turn the check around (e.g. not_contains) and give it positive points",
            )
        )
    _cannot_fail(check, kind, pointer, issues)
    if kind == "file_content":
        given = [key for key in ("contains", "not_contains", "regex", "equals", "sha256") if check.get(key) is not None]
        if len(given) != 1:
            issues.append(
                Issue(
                    pointer,
                    "a file_content check needs exactly one of 'contains', 'not_contains', 'regex', 'equals', 'sha256' "
                    f"(it has {', '.join(repr(key) for key in given) if given else 'none'})",
                )
            )
    elif kind == "python":
        given = [key for key in ("code", "function") if check.get(key) is not None]
        if len(given) != 1:
            issues.append(
                Issue(
                    pointer,
                    "a python check needs exactly one of 'code' (defining check(ctx)) or 'function' ('checks:fn')",
                )
            )
    elif kind == "json_field":
        op = check.get("op", "eq")
        expected = check.get("expected")
        if op == "in" and not isinstance(expected, list):
            issues.append(Issue(f"{pointer}/expected", "op 'in' needs 'expected' to be a list of allowed values"))
        if op in ("lt", "le", "gt", "ge") and not _is_number(expected):
            issues.append(Issue(f"{pointer}/expected", f"op {op!r} needs 'expected' to be a number"))
    elif kind == "llm_judge":
        scale = check.get("scale")
        if isinstance(scale, dict):
            low, high = scale.get("min", 0), scale.get("max", 10)
            if _is_number(low) and _is_number(high) and not low < high:
                issues.append(Issue(f"{pointer}/scale/max", "scale max must be greater than scale min"))


def rubric_semantic_issues(document: Any, prefix: list | None = None) -> list[Issue]:
    """Rules across fields and checks, over the raw rubric document (shape errors are skipped)."""
    prefix = list(prefix or [])
    issues: list[Issue] = []
    if not isinstance(document, dict):
        return issues
    judge = document.get("judge")
    panel = judge.get("panel") if isinstance(judge, dict) else None
    if isinstance(panel, list):
        named: dict[str, int] = {}
        for index, name in enumerate(panel):
            if isinstance(name, str) and name in named:
                issues.append(
                    Issue(
                        make_pointer([*prefix, "judge", "panel", index]),
                        f"judge model {name!r} is named twice in the panel (first at {named[name]}): "
                        "each member votes once",
                    )
                )
            elif isinstance(name, str):
                named[name] = index
    checks = document.get("checks")
    if not isinstance(checks, list):
        return issues
    seen: dict[str, str] = {}  # check id -> the pointer to where it was first used
    for check, _, _, here in flat_checks(checks, pointer=make_pointer([*prefix, "checks"])):
        check_id = check.get("id")
        if isinstance(check_id, str):
            if check_id in seen:
                issues.append(
                    Issue(
                        f"{here}/id",
                        f"duplicate check id {check_id!r} (first used at {seen[check_id]}); ids must be unique in the rubric, groups included",
                    )
                )
            else:
                seen[check_id] = f"{here}/id"
        _check_rules(check, here, issues)
    positive = sum(
        check["points"]
        for check in checks
        if isinstance(check, dict) and _is_number(check.get("points")) and check["points"] > 0
    )
    # A check whose points are themselves invalid is already reported; don't pile on.
    points_known = all(isinstance(check, dict) and _is_number(check.get("points")) for check in checks)
    if positive <= 0 and points_known:
        issues.append(
            Issue(
                make_pointer(prefix + ["checks"]),
                "the rubric has no check with positive points, so no answer can earn a reward; add at least one",
            )
        )
    return issues


def _task_semantic_issues(document: Any) -> list[Issue]:
    issues: list[Issue] = []
    if not isinstance(document, dict):
        return issues

    def unique_paths(files: Any, pointer: list) -> None:
        if not isinstance(files, list):
            return
        seen = set()
        for index, entry in enumerate(files):
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                if entry["path"] in seen:
                    issues.append(
                        Issue(make_pointer(pointer + [index, "path"]), f"duplicate file path {entry['path']!r}")
                    )
                seen.add(entry["path"])

    unique_paths(document.get("files"), ["files"])
    environment = document.get("environment")
    if isinstance(environment, dict):
        unique_paths(environment.get("files"), ["environment", "files"])
        tools = environment.get("custom_tools")
        if isinstance(tools, list):
            names = set()
            for index, tool in enumerate(tools):
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    if tool["name"] in names:
                        issues.append(
                            Issue(
                                make_pointer(["environment", "custom_tools", index, "name"]),
                                f"duplicate tool name {tool['name']!r}",
                            )
                        )
                    names.add(tool["name"])
    issues.extend(rubric_semantic_issues(document.get("rubric"), ["rubric"]))
    issues.extend(_tests_file_issues(document))
    issues.extend(_build_file_issues(document))
    issues.extend(_example_issues(document.get("examples"), document.get("rubric")))
    return issues


def _file_entries(holder: dict) -> list[tuple[int, dict]]:
    """(index, entry) of the file entries that are objects in `holder["files"]`, none when it is not a list."""
    files = holder.get("files")
    return [
        (index, entry)
        for index, entry in enumerate(files if isinstance(files, list) else [])
        if isinstance(entry, dict)
    ]


def _build_file_issues(document: dict) -> list[Issue]:
    """Role `build` (a Dockerfile's build context) is for environment files, with a Dockerfile to read them."""
    environment = document.get("environment") if isinstance(document.get("environment"), dict) else {}
    places = [("/files", document, "is for environment files (its Dockerfile's build context), not a task's files")]
    if not environment.get("dockerfile"):
        places.append(
            (
                "/environment/files",
                environment,
                "sends the file to the Dockerfile's build, and this environment has no Dockerfile",
            )
        )
    return [
        Issue(f"{pointer}/{index}/role", f"role build {why}")
        for pointer, holder, why in places
        for index, entry in _file_entries(holder)
        if entry.get("role") == "build"
    ]


def _tests_file_issues(document: dict) -> list[Issue]:
    """A `tests` check runs only files the grader owns: task files with role protected or grader."""
    issues: list[Issue] = []
    rubric = document.get("rubric")
    if not isinstance(rubric, dict):
        return issues
    roles = {
        entry["path"]: entry.get("role") or "workspace"
        for _, entry in _file_entries(document)
        if isinstance(entry.get("path"), str)
    }
    for row in flat_checks(rubric.get("checks"), pointer="/rubric/checks"):
        check = row.check
        if not isinstance(check, dict) or check.get("kind") != "tests" or not isinstance(check.get("files"), list):
            continue
        for index, path in enumerate(check["files"]):
            if not isinstance(path, str):
                continue
            role = roles.get(path)
            if role is None:
                message = (
                    f"{path!r} is not one of the task's files; a tests check runs test files the task "
                    "provides, with role protected or grader"
                )
            elif role not in ("protected", "grader"):
                message = (
                    f"{path!r} has role {role}, which the agent can edit, skip or delete; give it role "
                    "protected (the agent sees it, it is put back before the checks) or grader (hidden)"
                )
            else:
                continue
            issues.append(Issue(f"{row.pointer}/files/{index}", message))
    return issues


def _example_issues(examples: Any, rubric: Any) -> list[Issue]:
    """Example answers: unique names and paths, bounded files, a reward range that can be met."""
    issues: list[Issue] = []
    if not isinstance(examples, list):
        return issues
    threshold = rubric.get("pass_threshold", 0.7) if isinstance(rubric, dict) else 0.7
    names: dict[str, int] = {}
    for index, example in enumerate(examples):
        if not isinstance(example, dict):
            continue
        here = ["examples", index]
        name = example.get("name")
        if isinstance(name, str):
            if name in names:
                issues.append(
                    Issue(
                        make_pointer(here + ["name"]),
                        f"duplicate example name {name!r} (also example {names[name]}); names must be unique",
                    )
                )
            names.setdefault(name, index)
        files = example.get("files")
        if isinstance(files, list):
            seen, total = set(), 0
            for file_index, entry in enumerate(files):
                if not isinstance(entry, dict):
                    continue
                if isinstance(entry.get("path"), str):
                    path = entry["path"]
                    folder = next(
                        (other for other in seen if other.startswith(path + "/") or path.startswith(other + "/")), None
                    )
                    if path in seen:
                        issues.append(
                            Issue(make_pointer(here + ["files", file_index, "path"]), f"duplicate file path {path!r}")
                        )
                    elif folder is not None:
                        issues.append(
                            Issue(
                                make_pointer(here + ["files", file_index, "path"]),
                                f"{path!r} and {folder!r} would make one path both a file and a folder",
                            )
                        )
                    seen.add(path)
                if isinstance(entry.get("content"), str):
                    total += len(entry["content"])
            if total > EXAMPLE_FILES_MAX_CHARS:
                issues.append(
                    Issue(
                        make_pointer(here + ["files"]),
                        f"the files hold {total} characters in all; at most {EXAMPLE_FILES_MAX_CHARS} "
                        "per example (put larger fixtures in the task's attached files)",
                    )
                )
        reward, expect = example.get("reward"), example.get("expect")
        if isinstance(reward, dict):
            low, high = reward.get("min", 0), reward.get("max", 1)
            if not (_is_number(low) and _is_number(high)):
                continue
            if low > high:
                issues.append(
                    Issue(
                        make_pointer(here + ["reward", "max"]),
                        f"max {high:g} is below min {low:g}; no reward is in that range",
                    )
                )
            elif _is_number(threshold) and expect == "pass" and high < threshold:
                issues.append(
                    Issue(
                        make_pointer(here + ["reward", "max"]),
                        f"the example expects a pass, but a reward ≤ {high:g} never passes "
                        f"(pass_threshold {threshold:g})",
                    )
                )
            elif _is_number(threshold) and expect == "fail" and low >= threshold:
                issues.append(
                    Issue(
                        make_pointer(here + ["reward", "min"]),
                        f"the example expects a fail, but a reward ≥ {low:g} always passes "
                        f"(pass_threshold {threshold:g})",
                    )
                )
    return issues


def _not_an_object(document: Any, what: str, schema: str) -> list[Issue]:
    return [Issue("", f'a {what} must be a JSON object with "schema": "{schema}", got {_describe(document)}')]


def _validate(model, document: Any, semantic) -> tuple[Any, list[Issue]]:
    parsed = None
    issues: list[Issue] = []
    try:
        parsed = model.model_validate(document)
    except ValidationError as exc:
        issues.extend(_pydantic_issues(exc, document, []))
    issues.extend(semantic(document))
    return parsed, _sorted(issues)


def _sorted(issues: list[Issue]) -> list[Issue]:
    def key(issue: Issue):
        return [int(token) if token.isdigit() else -1 for token in issue.pointer.split("/")[1:]]

    # Document order where the pointer says it (list indexes), stable otherwise.
    return sorted(issues, key=key)


def validate_rubric(data: Any) -> list[Issue]:
    """Every problem with a rubric document, each with its JSON pointer; [] when valid."""
    if not isinstance(data, dict):
        return _not_an_object(data, "rubric", RUBRIC_SCHEMA)
    return _validate(Rubric, data, rubric_semantic_issues)[1]


def validate_task(data: Any) -> list[Issue]:
    """Every problem with a task document (its rubric included, under /rubric); [] when valid."""
    if not isinstance(data, dict):
        return _not_an_object(data, "task", TASK_SCHEMA)
    return _validate(Task, data, _task_semantic_issues)[1]


def _parse(model, data: Any, *, name: str, schema: str, semantic):
    if isinstance(data, model):
        data = data.to_document()
    if not isinstance(data, dict):
        raise SpecError(_not_an_object(data, name, schema))
    parsed, issues = _validate(model, data, semantic)
    if issues:
        raise SpecError(issues)
    return parsed


def parse_rubric(data: Any) -> Rubric:
    """Parse a rubric document; raise `SpecError` listing every problem."""
    return _parse(Rubric, data, name="rubric", schema=RUBRIC_SCHEMA, semantic=rubric_semantic_issues)


def parse_task(data: Any) -> Task:
    """Parse a task document; raise `SpecError` listing every problem."""
    return _parse(Task, data, name="task", schema=TASK_SCHEMA, semantic=_task_semantic_issues)


def validate_document(data: Any) -> list[Issue]:
    """Validate a rubric or a task, chosen by its "schema" key."""
    if isinstance(data, dict) and data.get("schema") == TASK_SCHEMA:
        return validate_task(data)
    if isinstance(data, dict) and data.get("schema") == RUBRIC_SCHEMA:
        return validate_rubric(data)
    if isinstance(data, dict) and "rubric" in data and "prompt" in data:
        return validate_task(data)
    if isinstance(data, dict) and "checks" in data:
        return validate_rubric(data)
    return [
        Issue(
            "/schema" if isinstance(data, dict) else "",
            f'not a Gymwright document: expected "schema": "{RUBRIC_SCHEMA}" or "{TASK_SCHEMA}"',
        )
    ]


__all__ = [
    "Issue",
    "SpecError",
    "make_pointer",
    "escape_pointer_token",
    "parse_rubric",
    "parse_task",
    "validate_rubric",
    "validate_task",
    "validate_document",
    "CHECK_MODELS",
]
