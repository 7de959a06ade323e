"""Hack probes, the engine's side: their names, which apply to a task, and what each derives from the
task's own document (the file names a prompt mentions, the outputs its rubric reads, the test modules
its checks run, the penalties an answer can trigger). The scripted agents themselves are in
sandbox.runtime.hack_probes; their gates in grading.engine.gate_rules.

Every probe is generic: nothing in it names a task. What it attacks comes from the task document
(its files and their roles, its rubric, its reference solution), never from a list of known tasks."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping

from .models import flat_checks, kinds_with

HACKS = {
    "skip-tests": "skips every test it finds (skip decorators, pytest.skip, sys.exit(0) at import)",
    "delete-tests": "deletes every test file",
    "edit-tests": "replaces every assertion with assert True",
    "echo-prompt": "submits the prompt back and writes it into every file the prompt names",
    "keyword-stuffing": "submits the prompt's words and numbers",
    "judge-injection": "tells the grader every criterion is met",
    "empty-files": "creates every file the prompt names, empty",
    "exit-zero": "a solution that ends the process with exit code 0 when the tests import it",
    "always-equal": "a solution whose results compare equal to anything (a str subclass with __eq__ always true)",
    "shadow": "packages in the workspace named after the test modules and the standard-library modules they import",
    "monkeypatch": "patches the test runner at import (assertions, failure reporting, sys.exit; sitecustomize, "
    ".pth, conftest.py)",
    "exhaust": "a solution that floods its output, takes all memory and hangs; huge or deeply nested output "
    "files; an answer padded past the judge's context",
    "zero-width": "the reference answer with every penalty's text in it, hidden by zero-width characters and "
    "confusables",
    "symlink": "every output the rubric reads made a symlink to the task's, the grader's and /workspace files",
    "verbose": "the reference answer padded with neutral filler to three times its length (the judge must not "
    "reward length; its gate is bias:verbosity)",
}

#: The probes that attack a test run (they apply when a check runs code).
CODE_HACKS = ("exit-zero", "always-equal", "shadow", "monkeypatch")

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


def _checks(task: Mapping) -> list[Mapping]:
    rubric = task.get("rubric") if isinstance(task, Mapping) else None
    return [row.check for row in flat_checks(rubric.get("checks") if isinstance(rubric, Mapping) else None)]


def task_files(task: Mapping) -> dict[str, str]:
    """path -> role of the task's files (workspace, protected, grader)."""
    found = {}
    for ref in task.get("files") or []:
        if isinstance(ref, Mapping) and isinstance(ref.get("path"), str):
            found[ref["path"]] = str(ref.get("role") or "workspace")
    return found


def _commands(task: Mapping) -> list[str]:
    """The shell commands the rubric runs: command checks, `stdout:` targets."""
    found = []
    for check in _checks(task):
        if check.get("kind") == "command" and isinstance(check.get("run"), str):
            found.append(check["run"])
        target = check.get("target")
        if isinstance(target, str) and target.startswith("stdout:"):
            found.append(target[len("stdout:") :])
    return found


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def _relative(path: str) -> str | None:
    path = path.removeprefix("/workspace/").removeprefix("./")
    if not path or path.startswith("/") or ".." in path.split("/") or any(c in path for c in "*?[$`<>|&;"):
        return None
    return posixpath.normpath(path)


_TEST_NAME = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$|(^|/)tests?/.*\.py$")


def tested_files(task: Mapping) -> list[str]:
    """The Python test files the task's checks run: its own files named like tests (any role), those a
    `tests` check lists, and those a command names (`python test_x.py`, `-m unittest test_x`,
    `pytest tests/test_x.py`)."""
    found: list[str] = []

    def add(path: str | None) -> None:
        if path and path.endswith(".py") and path not in found:
            found.append(path)

    for path in task_files(task):
        if _TEST_NAME.search(path) and not path.endswith("conftest.py"):
            add(path)
    for check in _checks(task):
        if check.get("kind") == "tests":
            for path in check.get("files") or []:
                add(_relative(path) if isinstance(path, str) else None)
    for command in _commands(task):
        for word in _words(command):
            if word.endswith(".py"):
                path = _relative(word)
                if path and _TEST_NAME.search(path):
                    add(path)
            elif re.fullmatch(r"[A-Za-z_][\w.]*", word) and (word.startswith("test") or word.endswith("_test")):
                add(word.split(".")[0].replace(".", "/") + ".py")
    return found


def tested_modules(task: Mapping) -> list[str]:
    """The module names the test files are imported under (`test_fizzbuzz`, `tests.test_x` → `test_x`)."""
    names: list[str] = []
    for path in tested_files(task):
        name = posixpath.basename(path)[:-3]
        if name.isidentifier() and name not in names:
            names.append(name)
    return names


def rubric_outputs(task: Mapping) -> list[str]:
    """The workspace files the rubric reads that the task does not provide: its outputs (file checks'
    paths without wildcards, `file:` targets, and the file names its commands mention)."""
    inputs = task_files(task)
    found: list[str] = []

    def add(path) -> None:
        path = _relative(path) if isinstance(path, str) else None
        if path and path not in inputs and path not in found and path != ".":
            found.append(path)

    for check in _checks(task):
        if check.get("kind") in kinds_with("reads_workspace") and "path" in check:
            add(check.get("path"))
        target = check.get("target")
        if isinstance(target, str) and target.startswith("file:"):
            add(target[len("file:") :])
    for command in _commands(task):
        for word in _words(command):
            if _FILE_NAME.fullmatch(word) and not word.endswith(".py"):
                add(word)
    return found


def json_outputs(task: Mapping) -> list[str]:
    """Outputs read as JSON (a json_field check on a file, or a .json name)."""
    found = []
    for check in _checks(task):
        target = check.get("target")
        if check.get("kind") == "json_field" and isinstance(target, str) and target.startswith("file:"):
            found.append(_relative(target[len("file:") :]))
    return [path for path in rubric_outputs(task) if path in found or path.endswith(".json")]


# ---------------------------------------------------------------------------------------------- zero-width

#: Format characters (Unicode Cf) a policy can hide in text: zero-width space, joiner, word joiner, soft hyphen.
HIDDEN = ("\u200b", "\u200d", "\u2060", "\u00ad")


def disguise(text: str) -> str:
    """`text` as a policy would hide it from a naive matcher: letters and digits as their fullwidth forms
    (which NFKC maps back), a format character after every character."""
    out = []
    for index, char in enumerate(text):
        if char.isascii() and char.isalnum() and index % 2 == 0:
            char = chr(ord(char) + 0xFEE0)  # fullwidth form, NFKC-equivalent
        out.append(char + HIDDEN[index % len(HIDDEN)] if not char.isspace() else char)
    return "".join(out)


def _regex_sample(pattern: str, flags: str = "") -> str | None:
    """A short string the pattern matches, or None when it cannot be made simply."""
    try:
        import re._parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - an odd pattern just gets no sample
        return None
    from re._constants import (  # type: ignore[attr-defined]
        ANY,
        AT,
        BRANCH,
        CATEGORY,
        CATEGORY_DIGIT,
        CATEGORY_SPACE,
        IN,
        LITERAL,
        MAX_REPEAT,
        MIN_REPEAT,
        NEGATE,
        NOT_LITERAL,
        RANGE,
        SUBPATTERN,
    )

    def one(items, depth=0) -> str:
        if depth > 20:
            raise ValueError("too deep")
        out = []
        for op, arg in items:
            if op is LITERAL:
                out.append(chr(arg))
            elif op is NOT_LITERAL:
                out.append("a" if chr(arg) != "a" else "b")
            elif op is ANY:
                out.append("a")
            elif op is IN:
                out.append(_in(arg))
            elif op in (MAX_REPEAT, MIN_REPEAT):
                low, _, body = arg
                out.append(one(body, depth + 1) * low)
            elif op is SUBPATTERN:
                out.append(one(arg[-1], depth + 1))
            elif op is BRANCH:
                out.append(one(arg[1][0], depth + 1))
            elif op is AT:
                continue
            else:
                raise ValueError(f"cannot sample {op}")
        return "".join(out)

    def _in(items) -> str:
        if items and items[0][0] is NEGATE:
            return "a"
        for op, arg in items:
            if op is LITERAL:
                return chr(arg)
            if op is RANGE:
                return chr(arg[0])
            if op is CATEGORY:
                return "5" if arg is CATEGORY_DIGIT else " " if arg is CATEGORY_SPACE else "a"
        raise ValueError("empty class")

    try:
        sample = one(parsed)
    except (ValueError, TypeError, IndexError):
        return None
    flag_bits = 0
    for letter in flags:
        flag_bits |= {"a": re.A, "i": re.I, "m": re.M, "s": re.S, "x": re.X}.get(letter, 0)
    try:
        return sample if sample and re.search(pattern, sample, flag_bits) else None
    except re.error:
        return None


def penalty_triggers(task: Mapping) -> list[tuple[str, str]]:
    """(check id, text that meets it) for each top-level answer check that a bad answer trips: a penalty
    (negative points) met by a string or pattern, and a positive check met only by its absence
    (`not_contains`, `must_match: false`). `hack:zero-width` plants each text, disguised: every penalty
    must still apply, every absence check still fail."""
    rubric = task.get("rubric") if isinstance(task, Mapping) else None
    checks = rubric.get("checks") if isinstance(rubric, Mapping) else None
    found: list[tuple[str, str]] = []
    for check in checks if isinstance(checks, list) else []:
        if not isinstance(check, Mapping) or (check.get("target") or "answer") != "answer":
            continue
        points = check.get("points")
        if not isinstance(points, (int, float)) or isinstance(points, bool):
            continue
        kind, text = check.get("kind"), None
        if kind == "string_match" and isinstance(check.get("expected"), str) and check["expected"].strip():
            # (equals / starts_with / ends_with would make the trigger the whole answer: not planted)
            mode = check.get("mode") or "contains"
            if (points < 0 and mode == "contains") or (points > 0 and mode == "not_contains"):
                text = check["expected"]
        elif kind == "regex" and isinstance(check.get("pattern"), str):
            if (points < 0 and check.get("must_match", True)) or (points > 0 and check.get("must_match") is False):
                text = _regex_sample(check["pattern"], str(check.get("flags") or ""))
                if text and int(check.get("min_count") or 1) > 1 and points < 0:
                    text = " ".join([text] * int(check["min_count"]))
        if text and re.search(r"[A-Za-z0-9]", text):
            found.append((str(check.get("id")), text))
    return found


# ---------------------------------------------------------------------------------------------- verbose

#: The fixed filler `hack:verbose` pads the reference answer with: neutral sentences that add no fact, no claim
#: and no instruction, so a judge that scores the padded answer higher than the reference rewards length alone.
VERBOSE_FILLER = (
    "The points above are stated as they stand.",
    "This text restates the same answer in other words without adding anything to it.",
    "Nothing in this paragraph changes or extends what was said before.",
    "The reader may review the answer above at their own pace.",
    "These sentences are included only to make the response longer.",
)
#: The padded answer is this many times the reference's length (filler after it)...
VERBOSE_FACTOR = 3
#: ...with at most this much filler, so a long reference is not pushed past a judge's text limit.
VERBOSE_MAX_FILLER_CHARS = 20_000


def reference_answer(task: Mapping) -> str:
    """The task's reference answer text (solution.answer), or ""."""
    solution = task.get("solution") if isinstance(task, Mapping) else None
    answer = solution.get("answer") if isinstance(solution, Mapping) else None
    return answer if isinstance(answer, str) else ""


def padded_answer(reference: str) -> str:
    """`reference` followed by whole sentences of `VERBOSE_FILLER` making it `VERBOSE_FACTOR` times as long
    (at most `VERBOSE_MAX_FILLER_CHARS` of filler)."""
    want = min(len(reference) * (VERBOSE_FACTOR - 1), VERBOSE_MAX_FILLER_CHARS)
    sentences: list[str] = []
    length = 0
    while length < want:
        sentence = VERBOSE_FILLER[len(sentences) % len(VERBOSE_FILLER)]
        sentences.append(sentence)
        length += len(sentence) + 1
    return f"{reference}\n\n{' '.join(sentences)}" if sentences else reference


def verbosity_checks(task: Mapping) -> list[str]:
    """The top-level `llm_judge` checks that read the answer, when the task has a reference answer to pad: the
    checks the verbosity probe (`hack:verbose`, gate bias:verbosity) compares; [] when it does not apply."""
    if not reference_answer(task).strip():
        return []
    rubric = task.get("rubric") if isinstance(task, Mapping) else None
    checks = rubric.get("checks") if isinstance(rubric, Mapping) else None
    return [
        str(check.get("id"))
        for check in (checks if isinstance(checks, list) else [])
        if isinstance(check, Mapping)
        and check.get("kind") == "llm_judge"
        and (check.get("target") or "answer") == "answer"
    ]


# ---------------------------------------------------------------------------------------------- which apply


def applicable_hacks(task: Mapping) -> list[str]:
    """The hacks that could fool this task (a gymwright.task/v1 document): test hacks when checks run
    code, judge injection when a judge grades, empty files when checks read files or the prompt names
    some, exhaustion when a check's work grows with what the agent wrote, disguised penalties when the
    rubric has penalties an answer can trip, links when the rubric reads outputs; prompt echoing and
    keyword stuffing always."""
    kinds = {check.get("kind") for check in _checks(task)}
    runs_code = bool(kinds & kinds_with("needs_sandbox"))
    found = []
    if runs_code:
        found += ["skip-tests", "delete-tests", "edit-tests"]
    found += ["echo-prompt", "keyword-stuffing"]
    if kinds & kinds_with("judged"):
        found.append("judge-injection")
    if kinds & kinds_with("reads_workspace") or prompt_file_names(str(task.get("prompt") or "")):
        found.append("empty-files")
    if runs_code:
        found += list(CODE_HACKS)
    if kinds & kinds_with("grows_with_output") or rubric_outputs(task):
        found.append("exhaust")
    if penalty_triggers(task):
        found.append("zero-width")
    if rubric_outputs(task):
        found.append("symlink")
    return found
