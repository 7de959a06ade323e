"""`tests` checks, the host's side: which tests there are, how the runner is started, what its report says.

The test ids are read from the test files' source (`collect`) before anything runs, so the agent's
code cannot change how many tests there are. `testrunner.py` (standard library only) is copied into
a fresh directory under the sandbox's /tmp together with the test files, and run there isolated;
its configuration and a nonce go in on stdin. The verdict is the runner's report file, which must
start with that nonce and hold one JSON document: a test it does not name failed, a run that ends
without it (a crash, `os._exit`, a kill, a timeout) failed, a report that says the run was tampered
with fails the check whatever it says about the tests. Exit codes and printed output are never read
as a verdict.

What the agent can do to the run's footing fails the check, never leaves it unscored: a /tmp it filled (the
runner cannot be written), a report the tested code replaced by a link, a FIFO, a folder or an oversized file
(it is read as a regular file, through no link, bounded). The task's protected and grader files are put back
right before the run, after any earlier check that ran the agent's code (`GradingContext.require_sandbox`).
"""

from __future__ import annotations

import ast
import functools
import json
import pkgutil
import posixpath
import secrets
from dataclasses import dataclass

from .checks import GradingContext, Outcome, Unscored, failed_outcome, sandbox_refused
from .models import TestResult, TestsCheck

MAX_REPORT_BYTES = 8 * 1024 * 1024
MAX_SHOWN_TESTS = 1000
MAX_MESSAGE_CHARS = 500
TEST_FILE_MAX_BYTES = 2 * 1024 * 1024


@functools.cache
def runner_source() -> bytes:
    """testrunner.py's bytes, read as package data (the engine may be imported from a zip: a pack's grader)."""
    data = pkgutil.get_data(__package__ or "grading.engine", "testrunner.py")
    if data is None:
        raise Unscored("the grader cannot read its test runner (testrunner.py)")
    return data


# From `/`, isolated, no site, no bytecode written or read from the workspace; the runner's folder is $1.
_START = (
    "cd / || exit 126; if command -v python3 >/dev/null 2>&1; then py=python3; else py=python; fi; "
    'exec "$py" -I -S -B -X "pycache_prefix=$1/pyc" "$1/runner.py"'
)


@dataclass(frozen=True)
class TestFile:
    path: str
    module: str
    ids: list[str]
    imports: list[str]
    cases: frozenset[str] = frozenset()  # the ids whose class the source makes a unittest.TestCase


def _is_test_case_base(base: ast.expr, local_cases: set[str]) -> bool:
    if isinstance(base, ast.Name):
        return base.id in local_cases or base.id.endswith("TestCase")
    if isinstance(base, ast.Attribute):
        return base.attr.endswith("TestCase")
    return False


def _class_bases(node: ast.ClassDef) -> list[str]:
    return [base.id for base in node.bases if isinstance(base, ast.Name)]


def collect(source: str, path: str, runner: str) -> TestFile:
    """The test ids a test file defines, in file order, from its source alone (nothing is imported):
    `<path>::<Class>::<method>` for the test methods of unittest.TestCase subclasses (and, for
    pytest, of `Test*` classes), `<path>::<function>` for pytest's top-level `test*` functions.
    Methods inherited from a class of the same file count. Raises ValueError if the file does not parse."""
    try:
        tree = ast.parse(source, path, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"test file {path!r} does not parse: {exc}") from None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    cases: set[str] = set()
    changed = True
    while changed:  # TestCase subclasses, through bases defined in the same file
        changed = False
        for name, node in classes.items():
            if name not in cases and any(_is_test_case_base(base, cases) for base in node.bases):
                cases.add(name)
                changed = True

    def methods(name: str, seen: set[str]) -> list[str]:
        if name in seen or name not in classes:
            return []
        seen.add(name)
        own = [
            item.name
            for item in classes[name].body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
        ]
        inherited = [method for base in _class_bases(classes[name]) for method in methods(base, seen)]
        return own + [method for method in inherited if method not in own]

    def variants(name: str, node: ast.AST) -> list[str]:
        """`name`, or `name[0]`, `name[1]` ... for a pytest test under one `parametrize` with a literal list."""
        if runner != "pytest":
            return [name]
        marks = [
            decorator
            for decorator in getattr(node, "decorator_list", [])
            if isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize"
        ]
        if len(marks) != 1 or len(marks[0].args) < 2 or not isinstance(marks[0].args[1], (ast.List, ast.Tuple)):
            return [name]  # the runner says why it cannot run it
        return [f"{name}[{index}]" for index in range(len(marks[0].args[1].elts))]

    ids: list[str] = []
    case_ids: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            is_case = node.name in cases
            is_pytest_class = (
                runner == "pytest"
                and node.name.startswith("Test")
                and not any(isinstance(item, ast.FunctionDef) and item.name == "__init__" for item in node.body)
            )
            if is_case or is_pytest_class:
                defined = {
                    item.name: item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
                found = [
                    f"{path}::{node.name}::{variant}"
                    for method in dict.fromkeys(methods(node.name, set()))
                    for variant in (
                        variants(method, defined[method]) if method in defined and not is_case else [method]
                    )
                ]
                ids += found
                if is_case:
                    case_ids.update(found)
        elif (
            runner == "pytest"
            and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name.startswith("test")
        ):
            ids += [f"{path}::{variant}" for variant in variants(node.name, node)]
    imports: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update(alias.name.split(".", 1)[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports.add(node.module.split(".", 1)[0])
    module = posixpath.basename(path)[:-3]
    return TestFile(path=path, module=module, ids=ids, imports=sorted(imports), cases=frozenset(case_ids))


def selected(check: TestsCheck, files: list[TestFile]) -> list[str]:
    """The ids the check counts: every collected test, or those `select` names (an id, or `<file>::<Class>`)."""
    every = [test_id for test_file in files for test_id in test_file.ids]
    if check.select is None:
        return every
    chosen: dict[str, None] = {}
    for wanted in check.select:
        matched = [test_id for test_id in every if test_id == wanted or test_id.startswith(wanted + "::")]
        if not matched:
            raise Unscored(
                f"select names {wanted!r}, which the test files do not define (ids look like {every[0]!r})"
                if every
                else f"select names {wanted!r}; no tests found"
            )
        chosen.update(dict.fromkeys(matched))
    return list(chosen)


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def parse_report(data: bytes, nonce: str) -> dict | None:
    """The runner's report: the nonce line, then one JSON object with `done: true`; None otherwise."""
    lines = data.split(b"\n")
    if len(lines) != 3 or lines[2] != b"" or lines[0] != nonce.encode():
        return None
    try:
        document = json.loads(lines[1].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if (
        not isinstance(document, dict)
        or document.get("done") is not True
        or not isinstance(document.get("results"), list)
    ):
        return None
    return document


def _failed(check: TestsCheck, reason: str, ids: list[str], outcome: str = "failed") -> Outcome:
    result = failed_outcome(check, reason)
    result.tests = [
        TestResult(id=test_id, outcome=outcome, message=_bounded(reason)) for test_id in ids[:MAX_SHOWN_TESTS]
    ]
    return result


def tests_check(check: TestsCheck, ctx: GradingContext) -> Outcome:
    """Run the check's tests in the sandbox with Gymwright's runner and score them (see the module doc)."""
    # The test files (and the data or helpers they read) are the task's bytes again, whatever an earlier check's
    # run did to them (GradingContext.require_sandbox).
    sandbox = ctx.require_sandbox()
    files: list[TestFile] = []
    sources: dict[str, bytes] = {}
    for path in check.files:
        data = ctx.read_bytes(path)
        if len(data) > TEST_FILE_MAX_BYTES:
            raise Unscored(f"test file {path!r} is larger than {TEST_FILE_MAX_BYTES // (1024 * 1024)} MB")
        try:
            source = data.decode("utf-8")
            files.append(collect(source, path, check.runner))
        except UnicodeDecodeError:
            raise Unscored(f"test file {path!r} is not UTF-8 text") from None
        except ValueError as exc:
            raise Unscored(str(exc)) from None
        sources[path] = data
    ids = selected(check, files)
    if not ids:
        raise Unscored(
            f"the test files define no tests for the {check.runner} runner "
            "(unittest: TestCase subclasses' test* methods; pytest: also test* functions)"
        )
    runner_dir = f"/tmp/.gw-runner-{secrets.token_hex(12)}"
    nonce = "GYMWRIGHT-TESTS-" + secrets.token_hex(16)
    try:
        sandbox.write_file(f"{runner_dir}/runner.py", runner_source())
        for path, data in sources.items():
            sandbox.write_file(f"{runner_dir}/tests/{path}", data)
    except Exception as exc:  # noqa: BLE001
        if sandbox_refused(exc):
            # The sandbox's /tmp is the agent's: full (of files the episode or an earlier check left) or
            # otherwise refusing the runner. The run could not happen, for the agent's doing.
            return _failed(check, f"the test runner could not be written to the sandbox's /tmp: {exc}", ids)
        raise Unscored(f"the sandbox could not take the test runner: {exc}") from None
    wanted_modules = {test_id.split("::", 1)[0] for test_id in ids}
    config = {
        "nonce": nonce,
        "workspace": sandbox.workspace_path,
        "runner_dir": runner_dir,
        "report": f"{runner_dir}/report",
        "style": check.runner,
        "modules": [
            {"name": test_file.module, "path": test_file.path, "copy": f"{runner_dir}/tests/{test_file.path}"}
            for test_file in files
            if test_file.path in wanted_modules
        ],
        "imports": sorted({name for test_file in files for name in test_file.imports}),
        "tests": ids,
        "cases": sorted({test_id for test_file in files for test_id in test_file.cases} & set(ids)),
    }
    try:
        result = sandbox.exec(
            ["/bin/sh", "-c", _START, "gymwright-tests", runner_dir],
            timeout_s=check.timeout_s,
            stdin=json.dumps(config).encode("utf-8"),
        )
    except Exception as exc:  # noqa: BLE001
        raise Unscored(f"the sandbox could not run the tests: {exc}") from None
    end_processes = getattr(sandbox, "end_processes", None)
    if callable(end_processes):
        # Whatever the tested code left running must not touch the report after the runner wrote it.
        try:
            end_processes()
        except Exception as exc:  # noqa: BLE001
            raise Unscored(f"the sandbox could not end the test run's processes: {exc}") from None
    if result.timed_out:
        return _failed(check, f"the tests did not finish within {check.timeout_s:g} s", ids)
    if result.oom_killed:
        return _failed(check, "the test run was killed: out of memory", ids)
    tail = (result.stderr or "").strip()[-300:]
    try:
        # The report lies where the tested code could write: read as a file, not through a link, bounded.
        data = sandbox.read_file(f"{runner_dir}/report", max_bytes=MAX_REPORT_BYTES, follow_links=False)
    except FileNotFoundError:
        data = None
    except Exception as exc:  # noqa: BLE001
        if sandbox_refused(exc):
            return _failed(check, f"the runner's report was replaced or overgrown by the tested code: {exc}", ids)
        raise Unscored(f"the sandbox could not read the test report: {exc}") from None
    if not data:
        data = None  # opened by the runner first and never written: the run ended before its end
    if data is None:
        return _failed(
            check,
            f"the test run ended without the runner's report (exit code {result.exit_code})"
            + (f"; stderr ends: {tail}" if tail else ""),
            ids,
        )
    report = parse_report(data, nonce)
    if report is None:
        return _failed(
            check,
            "the runner's report is not the one the runner writes (written to by the tested "
            "code?); the run counts as failed",
            ids,
        )
    if isinstance(report.get("refused"), str):
        return _failed(check, report["refused"], ids, outcome="error")
    reported: dict[str, tuple[str, str]] = {}
    for entry in report["results"]:
        if (
            isinstance(entry, dict)
            and entry.get("id") in ids
            and entry.get("outcome") in ("passed", "failed", "error", "skipped")
        ):
            reported[entry["id"]] = (entry["outcome"], str(entry.get("message") or ""))
    tests = []
    passed = 0
    for test_id in ids:
        outcome, message = reported.get(test_id, ("missing", "the runner's report does not name this test"))
        passed += outcome == "passed"
        tests.append(TestResult(id=test_id, outcome=outcome, message=_bounded(message)))
    shown = tests[:MAX_SHOWN_TESTS]
    if isinstance(report.get("tampered"), str):
        outcome = failed_outcome(
            check,
            f"the tested code tampered with the test run: {_bounded(report['tampered'])}; the run counts as failed",
        )
        outcome.tests = shown
        return outcome
    total = len(ids)
    first_failure = next((entry for entry in tests if entry.outcome != "passed"), None)
    summary = f"{passed} of {total} test(s) passed"
    if first_failure is not None:
        summary += f"; first not passed: {first_failure.id} ({first_failure.outcome}: {first_failure.message[:200]})"
    if check.credit == "per_test":
        score = passed / total
    else:
        score = 1.0 if passed == total else 0.0
    return Outcome(score, summary, tests=shown)


__all__ = ["collect", "parse_report", "runner_source", "selected", "tests_check"]
