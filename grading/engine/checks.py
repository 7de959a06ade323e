"""Evaluation of single checks: what each kind reads and when it is met.

Every evaluator returns an `Outcome` (a score in [0, 1] and an explanation) or
raises one of three reasons not to:

* `Missing`: what the check reads does not exist (a file the agent did not write):
  the check scores 0 (a penalty is not charged: the bad thing is not there).
* `Failed`: the graded work broke the check: a command or python check that timed
  out, was killed, flooded its output or raised; a file that is too large, not a
  regular file, reached through a link, left out of the snapshot, unparsable or
  nested too deep. The check fails closed: goodness 0 (a penalty is charged).
* `Unscored`: only the grader's own failure, which the graded work cannot cause (no
  sandbox or workspace given, the sandbox backend failing, no judge).

`evaluate()` turns `Missing` and `Failed` into outcomes; `Unscored` goes up to the
scorer (RUBRIC.md, "Scoring").
"""

from __future__ import annotations

import fnmatch
import io
import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import similarity
from .limits import GradeLimits
from .models import (
    CommandCheck,
    FileContentCheck,
    FileExistsCheck,
    JsonFieldCheck,
    NumberCheck,
    RegexCheck,
    StringMatchCheck,
    TableCellCheck,
    TextSimilarityCheck,
    check_model,
    flat_checks,
)
from .safe_files import NotRegularFile, has_link, read_regular
from .sandbox import CheckSandbox, ExecResult
from .text import fold_lookalikes, normalise_unicode

MAX_FILE_BYTES = 50 * 1024 * 1024
#: JSON an agent wrote is measured before it is parsed: its length and its nesting depth.
MAX_JSON_CHARS = 10_000_000
MAX_JSON_DEPTH = 256


class Unscored(Exception):
    """The check cannot be decided; the message is the reason shown to the author."""


class Failed(Exception):
    """The graded work broke the check (a timeout, a kill, a flood, an odd or oversized file, a parse error):
    the check fails with this reason. Fail closed: a positive check scores 0 and a penalty is charged, so no
    answer earns more by breaking a check than by doing the task (RUBRIC.md, "Scoring")."""


def failed_outcome(check, reason: str) -> Outcome:
    """The outcome of a check the graded work broke: goodness 0 (a penalty is charged)."""
    return Outcome(0.0 if check.points > 0 else 1.0, reason)


def sandbox_refused(exc: BaseException) -> bool:
    """Whether a sandbox file operation failed for what is in the sandbox, i.e. the agent's doing: a link, a
    FIFO or folder where a file goes, a file too large, a full /tmp or workspace. sandbox.runtime's backends
    raise these as permanent SandboxErrors; a transient one (the engine unreachable, the container gone) is
    the backend's own failure."""
    return isinstance(exc, (NotRegularFile, ValueError)) or bool(getattr(exc, "permanent", False))


class Missing(Exception):
    """What the check reads does not exist (a file the agent did not write): the check scores 0."""


@dataclass
class Outcome:
    score: float
    explanation: str
    votes: list | None = None
    tests: list | None = None  # a `tests` check's per-test results (TestResult dicts)


@dataclass
class GradingContext:
    """Everything one `grade()` call reads, plus per-call caches (normalised texts, command output)."""

    answer: str
    trajectory: str | None = None
    workspace: Path | None = None
    sandbox: CheckSandbox | None = None
    checks_module: str | None = None
    limits: GradeLimits = field(default_factory=GradeLimits)
    left_out: dict = field(default_factory=dict)  # path -> why a bounded snapshot did not copy it
    _text_cache: dict = field(default_factory=dict)
    _stdout_cache: dict = field(default_factory=dict)
    _file_text_cache: dict = field(default_factory=dict)

    # ------------------------------------------------------------ files

    def read_bytes(self, relative: str) -> bytes:
        """A workspace file's bytes; `Missing` if absent, `Failed` if the agent made it unreadable (too
        large, not a regular file, a link anywhere on its path, left out of the snapshot), `Unscored`
        if there is nowhere to read from."""
        if self.workspace is not None:
            normalised = posixpath.normpath(relative)
            if normalised in self.left_out:
                raise Failed(f"file {relative!r} was left out of the workspace snapshot: {self.left_out[normalised]}")
            try:
                # Each component is opened without following links: a linked file or directory is refused.
                return read_regular(normalised, max_bytes=MAX_FILE_BYTES, root=self.workspace)
            except FileNotFoundError:
                raise Missing(f"file {relative!r} does not exist in the workspace") from None
            except NotRegularFile as exc:
                raise Failed(f"{relative!r} {exc.strerror}; only regular files are read") from None
            except ValueError:
                raise Failed(f"file {relative!r} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB") from None
            except OSError as exc:
                raise Failed(f"could not read {relative!r}: {exc.strerror}") from None
        if self.sandbox is not None:
            try:
                return self.sandbox.read_file(relative)
            except FileNotFoundError:
                raise Missing(f"file {relative!r} does not exist in the workspace") from None
            except Exception as exc:  # noqa: BLE001 - a backend error is a reason, not a crash
                if sandbox_refused(exc):
                    raise Failed(f"could not read {relative!r} from the sandbox: {exc}") from None
                raise Unscored(f"could not read {relative!r} from the sandbox: {exc}") from None
        raise Unscored("needs the workspace files, and none were given")

    def glob(self, pattern: str) -> list[str]:
        """Workspace paths matching `pattern`, none of them a link or reached through one, none
        left out of the snapshot (they are not there to check)."""
        if self.workspace is None:
            raise Unscored("needs the workspace files, and none were given")
        root = self.workspace.resolve()
        found = []
        try:
            paths = sorted(root.glob(pattern))
        except ValueError as exc:
            raise Unscored(f"bad glob {pattern!r}: {exc}") from None
        for path in paths:
            relative = path.relative_to(root).as_posix()
            if not has_link(root, relative):
                found.append(relative)
        return found

    # ------------------------------------------------------------ sandbox

    def require_sandbox(self) -> CheckSandbox:
        if self.sandbox is None:
            raise Unscored("needs a sandbox to run in, and none was given")
        return self.sandbox

    def run(self, command: str, timeout_s: float) -> ExecResult:
        """Run a shell command in the sandbox's workspace folder; `Unscored` when the sandbox
        itself fails (the command's own failures are in the result)."""
        sandbox = self.require_sandbox()
        script = f"cd {_shell_quote(sandbox.workspace_path)} && {command}"
        try:
            return sandbox.exec(["/bin/sh", "-c", script], timeout_s=timeout_s)
        except Exception as exc:  # noqa: BLE001
            raise Unscored(f"the sandbox could not run the command: {exc}") from None

    def stdout_of(self, command: str) -> str:
        """A command's whole stdout; `Failed` when it timed out, was killed or printed past the cap
        (a check must not read a cut-off output: what it looks for may be past the cut)."""
        if command not in self._stdout_cache:
            result = self.run(command, timeout_s=STDOUT_TIMEOUT_S)
            broken = process_failure(result, STDOUT_TIMEOUT_S, what=f"the command {command!r}")
            if broken is None and result.stdout_truncated:
                broken = f"the command {command!r} printed more than the sandbox's output cap; its output was cut"
            self._stdout_cache[command] = Failed(broken) if broken else result.stdout
        cached = self._stdout_cache[command]
        if isinstance(cached, Failed):
            raise Failed(str(cached))
        return cached

    # ------------------------------------------------------------ targets

    def target_text(self, target: str) -> str:
        """The text a check reads: the answer, the trajectory, a workspace file or a command's stdout."""
        if target == "answer":
            return self.answer
        if target == "trajectory":
            if self.trajectory is None:
                raise Unscored("reads the trajectory, and none was given")
            return self.trajectory
        if target.startswith("file:"):
            path = target[5:]
            if path not in self._file_text_cache:
                self._file_text_cache[path] = self.read_bytes(path).decode("utf-8", errors="replace")
            return self._file_text_cache[path]
        if target.startswith("stdout:"):
            return self.stdout_of(target[7:])
        raise Unscored(f"unknown target {target!r}")

    def unicode_text(self, text: str) -> str:
        """`text` without format characters and in NFKC (`text.normalise_unicode`), computed once per grade."""
        if text.isascii():
            return text
        key = (id(text), "unicode")
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        value = normalise_unicode(text)
        self._text_cache[key] = (text, value)
        return value

    def lookalike_text(self, text: str) -> str:
        """Normalised `text` with lookalike letters of other scripts read as Latin (`text.fold_lookalikes`),
        computed once per grade."""
        if text.isascii():
            return text
        key = (id(text), "lookalikes")
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        value = fold_lookalikes(text)
        self._text_cache[key] = (text, value)
        return value

    def compared_text(self, check) -> str:
        """The text a comparing check reads: its target, normalised unless the check opts out."""
        text = self.target_text(check.target)
        return self.unicode_text(text) if check.normalize_unicode else text

    def normalised(self, text: str, *, fold_case: bool, collapse_space: bool) -> str:
        key = (id(text), fold_case, collapse_space)
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        value = text
        if fold_case:
            value = value.casefold()
        if collapse_space:
            value = " ".join(value.split())
        self._text_cache[key] = (text, value)
        return value

    def tokens(self, text: str) -> tuple[list[str], str]:
        """Word tokens of `text` and their space-joined form (for BLEU), computed once per grade."""
        key = (id(text), "tokens")
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        words = similarity.tokens(text)
        value = (words, similarity.joined(words))
        self._text_cache[key] = (text, value)
        return value


STDOUT_TIMEOUT_S = 120


def process_failure(result: ExecResult, timeout_s: float, *, what: str) -> str | None:
    """Why a process the graded work ran in did not finish on its own (timed out, killed, no exit
    code), in words; None when it exited. Any of these fails its check."""
    if result.timed_out:
        return f"{what} timed out after {timeout_s:g} s"
    if result.oom_killed:
        return f"{what} was killed: out of memory"
    if result.exit_code is None:
        return f"{what} died without an exit code"
    return None


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _short(text: str, limit: int = 80) -> str:
    text = text.replace("\n", "\\n")
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _num(value: float) -> str:
    return f"{value:.12g}"


def _binary(met: bool, explanation: str) -> Outcome:
    return Outcome(1.0 if met else 0.0, explanation)


# ---------------------------------------------------------------- text kinds


def match_lowers_reward(check, *, absence_wanted: bool = False) -> bool:
    """Does finding this check's phrase or pattern lower the reward? A penalty's match is charged; a positive
    check met by the phrase's absence (`not_contains`, `must_match: false`) fails. There the text is also read
    with lookalike letters as Latin (`text.fold_lookalikes`): a lookalike spelling must not dodge it."""
    return check.normalize_unicode and (check.points < 0) != absence_wanted


_LOOKALIKE_NOTE = " (reading lookalike letters of other scripts as Latin)"


def _found(mode: str, text: str, expected: str) -> bool:
    """Whether `expected` is found in `text` as `mode` says (`not_contains`: whether it is contained)."""
    if mode == "equals":
        return text == expected
    if mode in ("contains", "not_contains"):
        return expected in text
    if mode == "starts_with":
        return text.startswith(expected)
    return text.endswith(expected)


def string_match(check: StringMatchCheck, ctx: GradingContext) -> Outcome:
    fold_case, collapse_space = not check.case_sensitive, check.normalize_whitespace
    compared = ctx.compared_text(check)
    mode = check.mode
    found = _found(
        mode, ctx.normalised(compared, fold_case=fold_case, collapse_space=collapse_space), check.expected_normalised()
    )
    by_lookalikes = False
    if not found and match_lowers_reward(check, absence_wanted=mode == "not_contains"):
        folded = ctx.lookalike_text(compared)
        expected = check.expected_normalised(lookalikes=True)
        if folded is not compared or expected != check.expected_normalised():
            found = by_lookalikes = _found(
                mode, ctx.normalised(folded, fold_case=fold_case, collapse_space=collapse_space), expected
            )
    met = not found if mode == "not_contains" else found
    verb = mode.replace("_", " ")
    explanation = f"{check.target} {'' if met else 'does not satisfy: '}{verb} {_short(check.expected)}".strip()
    return _binary(met, explanation + (_LOOKALIKE_NOTE if by_lookalikes else ""))


def _texts_read(check, ctx: GradingContext, text: str, *, absence_wanted: bool = False) -> list[tuple[str, str]]:
    """(text, note) pairs a pattern is searched in: the normalised text, and where a match lowers the reward
    and the text has lookalike letters, that text read with them as Latin."""
    texts = [(text, "")]
    if match_lowers_reward(check, absence_wanted=absence_wanted):
        folded = ctx.lookalike_text(text)
        if folded is not text and folded != text:
            texts.append((folded, _LOOKALIKE_NOTE))
    return texts


def _search(pattern, texts: list[tuple[str, str]]):
    """The first match of `pattern` in the first of `texts` that has one, with that text's note."""
    for text, note in texts:
        found = pattern.search(text)
        if found:
            return found, note
    return None, ""


def regex(check: RegexCheck, ctx: GradingContext) -> Outcome:
    pattern = check.compiled()
    texts = _texts_read(check, ctx, ctx.compared_text(check), absence_wanted=not check.must_match)
    if not check.must_match:
        found, note = _search(pattern, texts)
        if found:
            return _binary(False, f"pattern matched {_short(found.group(0))} but must not match{note}")
        return _binary(True, "pattern does not match, as required")
    if check.min_count == 1:
        found, note = _search(pattern, texts)
        return _binary(
            found is not None, f"matched {_short(found.group(0))}{note}" if found else "pattern does not match"
        )
    count, note = 0, ""
    for text, text_note in texts:
        seen = 0
        for _ in pattern.finditer(text):
            seen += 1
            if seen >= check.min_count:
                break
        if seen > count:
            count, note = seen, text_note
    met = count >= check.min_count
    return _binary(met, f"{count}{'+' if met else ''} match(es), needed {check.min_count}{note}")


_NUMBER = re.compile(r"(?<![\w.])([-+\u2212]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE]([-+]?\d+))?(\s?%)?")


def find_number(text: str) -> tuple[float, bool, str] | None:
    """The first number in `text`: (value, is_percent, matched text). Thousands commas are removed."""
    found = _NUMBER.search(text)
    if not found:
        return None
    sign, digits, exponent, percent = found.groups()
    value = float(digits.replace(",", "") + (f"e{exponent}" if exponent else ""))
    if sign in ("-", "\u2212"):
        value = -value
    return value, bool(percent), found.group(0)


def number(check: NumberCheck, ctx: GradingContext) -> Outcome:
    text = ctx.compared_text(check)
    pattern = check.compiled_extract()
    if pattern is not None:
        found = pattern.search(text)
        if not found or found.group(1) is None:
            return _binary(False, f"extract pattern {_short(check.extract)} does not match")
        text = found.group(1)
    parsed = find_number(text)
    if parsed is None:
        return _binary(False, "no number found" + (f" in {_short(text)}" if pattern is not None else ""))
    value, is_percent, shown = parsed
    allowed = max(check.tolerance, check.rel_tolerance * abs(check.expected))
    candidates = [value, value / 100.0] if is_percent else [value]
    met = any(
        abs(candidate - check.expected) <= allowed + 1e-12 * max(1.0, abs(check.expected)) for candidate in candidates
    )
    return _binary(
        met, f"read {shown.strip()!s} ({'within' if met else 'not within'} ±{_num(allowed)} of {_num(check.expected)})"
    )


_FENCE_LANGUAGE = re.compile(r"[a-zA-Z0-9_-]*")


def _strip_fence(text: str) -> str:
    """The body of a Markdown code fence that is the whole (stripped) text, else the stripped text: what
    `re.fullmatch(r"```[a-zA-Z0-9_-]*\\s*\\n(.*)\\n\\s*```", stripped, re.DOTALL)` would capture, found in
    linear time (that pattern backtracks in cubic time: a 5 KB fence of newlines took minutes). The
    body starts after the last newline of the opening line's whitespace that leaves a newline before
    the closing fence's whitespace, and ends at the last newline of that whitespace."""
    stripped = text.strip()
    size = len(stripped)
    if size < 8 or not stripped.startswith("```") or not stripped.endswith("```"):
        return stripped
    head = _FENCE_LANGUAGE.match(stripped, 3).end()
    # str.strip's whitespace is str.isspace, which is re's \\s for str patterns.
    head_end = size - len(stripped[head:].lstrip())
    tail = size - 3
    tail_start = len(stripped[:tail].rstrip())
    closing = stripped.rfind("\n", tail_start, tail)
    if closing < 0:
        return stripped
    opening = stripped.rfind("\n", head, min(head_end, closing))
    if opening < 0:
        return stripped
    return stripped[opening + 1 : closing]


_JSON_STRUCTURE = re.compile(r'[\[\]{}"\\]')


def json_bounded(text: str, *, max_chars: int = MAX_JSON_CHARS, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why `text` is not parsed as JSON (too long, nested too deep), or None. Measured before any
    parse, in one linear pass over the brackets, quotes and backslashes (a character class: no
    backtracking), brackets inside strings not counted: the standard parser recurses per level, and
    `"[" * 100000` would raise RecursionError deep inside it."""
    if len(text) > max_chars:
        return f"is {len(text):,} characters long, over the limit of {max_chars:,} for JSON"
    depth = 0
    in_string = False
    escaped_at = -1
    for found in _JSON_STRUCTURE.finditer(text):
        at = found.start()
        if at == escaped_at:
            continue
        ch = text[at]
        if in_string:
            if ch == "\\":
                escaped_at = at + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return f"is nested deeper than {max_depth} levels"
        elif ch in "]}":
            depth -= 1
    return None


def parse_json(text: str) -> Any:
    """`json.loads` of agent text, bounded first (`json_bounded`): `Failed` when over a bound,
    ValueError when not JSON."""
    why = json_bounded(text)
    if why:
        raise Failed(f"the JSON {why}; refused unparsed")
    return json.loads(text)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


_ABSENT = object()


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or `_ABSENT`."""
    if pointer == "":
        return document
    current = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            if token not in current:
                return _ABSENT
            current = current[token]
        elif isinstance(current, list):
            if not re.fullmatch(r"0|[1-9][0-9]*", token) or int(token) >= len(current):
                return _ABSENT
            current = current[int(token)]
        else:
            return _ABSENT
    return current


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_field(check: JsonFieldCheck, ctx: GradingContext) -> Outcome:
    text = ctx.target_text(check.target)
    try:
        document = parse_json(text)
    except ValueError:
        try:
            document = parse_json(_strip_fence(text))
        except ValueError as exc:
            raise Failed(f"{check.target} is not JSON ({exc})") from None
    value = resolve_pointer(document, check.pointer)
    if check.op == "exists":
        return _binary(value is not _ABSENT, f"{'a' if value is not _ABSENT else 'no'} value at {check.pointer!r}")
    if value is _ABSENT:
        return _binary(False, f"no value at {check.pointer!r}")
    shown = _short(json.dumps(value), 60)
    if check.op == "eq":
        met = json_equal(value, check.expected)
    elif check.op == "ne":
        met = not json_equal(value, check.expected)
    elif check.op == "in":
        met = isinstance(check.expected, list) and any(json_equal(value, item) for item in check.expected)
    else:
        if not _is_number(value) or not _is_number(check.expected):
            return _binary(False, f"value {shown} at {check.pointer!r} is not a number")
        met = {
            "lt": value < check.expected,
            "le": value <= check.expected,
            "gt": value > check.expected,
            "ge": value >= check.expected,
        }[check.op]
    return _binary(
        met,
        f"value {shown} at {check.pointer!r} {'satisfies' if met else 'fails'} {check.op} {_short(json.dumps(check.expected), 60)}",
    )


def text_similarity(check: TextSimilarityCheck, ctx: GradingContext) -> Outcome:
    text = ctx.compared_text(check)
    limit = ctx.limits.similarity_max_chars
    if len(text) > limit:
        # fuzzy's cost grows with both lengths, and this kind runs with no CPU timer in a trainer's threads
        # (bounded_by_design): a text too long to compare fails, as one too long for the judge does.
        raise Failed(
            f"the {check.target} is {len(text):,} characters long, over the limit of {limit:,} for "
            "text_similarity (GYMWRIGHT_SIMILARITY_MAX_CHARS); not compared"
        )
    reference = check.unicode_value("reference")
    if check.metric == "fuzzy":
        candidate = ctx.normalised(text, fold_case=True, collapse_space=True)
        value = similarity.fuzzy(candidate, similarity.normalise(reference), normalised=True)
    elif check.metric == "rouge_l":
        value = similarity.rouge_l(ctx.tokens(text)[0], similarity.tokens(reference))
    else:
        words, joined = ctx.tokens(text)
        value = similarity.bleu(words, similarity.tokens(reference), candidate_joined=joined)
    met = value >= check.threshold
    return _binary(met, f"{check.metric} similarity {value:.3f} {'≥' if met else '<'} threshold {check.threshold:g}")


# ---------------------------------------------------------------- file kinds


def file_exists(check: FileExistsCheck, ctx: GradingContext) -> Outcome:
    if ctx.workspace is None and ctx.sandbox is not None and not any(ch in check.path for ch in "*?["):
        try:
            ctx.read_bytes(check.path)
            return _binary(True, f"{check.path!r} exists")
        except Missing:
            return _binary(False, f"{check.path!r} does not exist")
    matches = ctx.glob(check.path)
    if matches:
        more = f" (+{len(matches) - 1} more)" if len(matches) > 1 else ""
        return _binary(True, f"found {matches[0]!r}{more}")
    # fnmatch's * also crosses "/": it matches at least what the glob would, so nothing left out hides.
    left_out = [path for path in ctx.left_out if fnmatch.fnmatchcase(path, check.path)]
    if left_out:
        raise Failed(f"{left_out[0]!r} was left out of the workspace snapshot: {ctx.left_out[left_out[0]]}")
    return _binary(False, f"no workspace path matches {check.path!r}")


def file_content(check: FileContentCheck, ctx: GradingContext) -> Outcome:
    try:
        if check.sha256 is not None:
            data = ctx.read_bytes(check.path)
        else:
            # The file's text as a `file:` target reads it: decoded, and normalised, once per grade.
            text = ctx.target_text(f"file:{check.path}")
            if check.normalize_unicode:
                text = ctx.unicode_text(text)
    except Missing as exc:
        return _binary(False, str(exc))
    except Failed as exc:
        return failed_outcome(check, str(exc))
    if check.sha256 is not None:
        import hashlib

        digest = hashlib.sha256(data).hexdigest()
        return _binary(
            digest == check.sha256,
            f"sha256 {'matches' if digest == check.sha256 else 'is ' + digest[:12] + '…, expected ' + check.sha256[:12] + '…'}",
        )
    texts = _texts_read(check, ctx, text)  # a penalty's match: lookalike letters are read as Latin too
    if check.regex is not None:
        found, note = _search(check.compiled(), texts)
        return _binary(
            found is not None,
            f"matched {_short(found.group(0))}{note}" if found else f"{check.path!r} does not match the pattern",
        )
    key = "contains" if check.contains is not None else "equals"
    met, note = False, ""
    for candidate, text_note in texts:
        value = check.unicode_value(key, lookalikes=bool(text_note))
        if (value in candidate) if key == "contains" else (candidate == value):
            met, note = True, text_note
            break
    if key == "contains":
        return _binary(
            met, f"{check.path!r} {'contains' if met else 'does not contain'} {_short(check.contains)}{note}"
        )
    return _binary(met, f"{check.path!r} {'equals' if met else 'differs from'} the expected content{note}")


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _cell_number(value: Any) -> float | None:
    if _is_number(value):
        return float(value)
    text = _cell_text(value).replace(",", "").replace(" ", "")
    percent = text.endswith("%")
    text = text.rstrip("%").lstrip("$€£")
    try:
        number_value = float(text)
    except ValueError:
        return None
    if math.isnan(number_value):
        return None
    return number_value / 100.0 if percent else number_value


def _xlsx_bounded(data: bytes, path: str, limits: GradeLimits) -> None:
    """Refuse an XLSX archive whose declared sizes or compression ratio are over the limits.

    Python's zipfile never inflates a member past the size its directory declares, so
    checking the declared sizes before openpyxl opens anything bounds the whole parse.
    """
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise Failed(f"{path!r} is not a readable XLSX file ({exc})") from None
    if len(members) > limits.xlsx_max_members:
        raise Failed(
            f"{path!r} has {len(members)} archive members, over the limit of {limits.xlsx_max_members} "
            "(GYMWRIGHT_XLSX_MAX_MEMBERS); refused unread"
        )
    total = sum(member.file_size for member in members)
    if total > limits.xlsx_max_bytes:
        raise Failed(
            f"{path!r} would inflate to {total / (1024 * 1024):.1f} MB, over the limit of "
            f"{limits.xlsx_max_bytes / (1024 * 1024):g} MB (GYMWRIGHT_XLSX_MAX_MB); refused unread "
            "(a decompression bomb?)"
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > 1024 * 1024 and ratio > limits.xlsx_max_ratio:
            raise Failed(
                f"{path!r} member {member.filename!r} inflates {ratio:.0f}:1, over the limit of "
                f"{limits.xlsx_max_ratio:g}:1 (GYMWRIGHT_XLSX_MAX_RATIO); refused unread "
                "(a decompression bomb?)"
            )
    # openpyxl's work and memory grow with the XML tags it parses (a shared string, a cell), not with bytes:
    # `<si/>` is five. So the tags of every member (whatever the workbook names its parts) are counted first,
    # inflating no more than the sizes checked above.
    tags = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in members:
                with archive.open(member) as stream:
                    while chunk := stream.read(1024 * 1024):
                        tags += chunk.count(b"<")
                if tags > limits.xlsx_max_tags:
                    raise Failed(
                        f"{path!r} holds more than {limits.xlsx_max_tags:,} XML tags (cells, shared strings, "
                        f"styles; {tags:,} up to member {member.filename!r}), over the limit "
                        "(GYMWRIGHT_XLSX_MAX_TAGS); refused unparsed (a shared-strings or cell bomb?)"
                    )
    except (zipfile.BadZipFile, ValueError, OSError, RuntimeError, NotImplementedError, EOFError) as exc:
        raise Failed(f"{path!r} is not a readable XLSX file ({exc})") from None


def _too_many_cells(path: str, limits: GradeLimits, what: str) -> Failed:
    return Failed(
        f"{path!r} has more than {limits.table_max_cells:,} cells{what}, over the limit "
        "(GYMWRIGHT_TABLE_MAX_CELLS); refused unread"
    )


def _csv_rows(data: bytes, path: str, dialect, delimiter: str, limits: GradeLimits) -> list[list[Any]]:
    """A CSV's rows read as pandas' python engine read them (the csv module, strict; blank lines skipped; a
    leading BOM dropped; short rows padded, a row wider than the first refused), bounded before and while
    reading: pandas made a DataFrame column of each field, so a line of 10^6 delimiters cost minutes and a
    gigabyte (BENCHMARKS.md, "Hostile table files").

    Every cell but a line's first follows a delimiter, so delimiters + line ends bound the cells (a quoted
    delimiter only makes the bound loose): a file over `table_max_cells` is refused before a row is made.
    A field over the csv module's `field_size_limit` stops the reader where it starts.
    """
    import csv

    separator = delimiter.encode("utf-8", "surrogatepass")
    delimiters = data.count(separator)
    line_ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    if delimiters + line_ends > limits.table_max_cells:
        raise _too_many_cells(path, limits, f" (it has {delimiters:,} {delimiter!r} delimiters and its lines)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Failed(f"{path!r} is not a readable CSV file (not UTF-8: {exc})") from None
    reader = csv.reader(io.StringIO(text, newline=""), dialect, delimiter=delimiter, strict=True)
    rows: list[list[Any]] = []
    try:
        for row in reader:
            if len(row) > 1 or (row and row[0].strip()):
                if rows and len(row) > len(rows[0]):
                    raise Failed(
                        f"{path!r} is not a readable CSV file (line {reader.line_num} has {len(row)} fields, "
                        f"the first row {len(rows[0])})"
                    )
                rows.append(row)
    except csv.Error as exc:
        raise Failed(f"{path!r} is not a readable CSV file (line {reader.line_num}: {exc})") from None
    width = len(rows[0]) if rows else 0
    return [row + [None] * (width - len(row)) if len(row) < width else row for row in rows]


def _csv_dialect(data: bytes, path: str, limits: GradeLimits):
    """The CSV dialect sniffed from at most `csv_sniff_bytes` of the first line.

    `csv.Sniffer` is quadratic on crafted lines (a 60 kB line of `,"` takes minutes),
    so it only ever sees a bounded sample.
    """
    import csv

    sample = data[: limits.csv_sniff_bytes].decode("utf-8", errors="ignore")
    lines = sample.splitlines()
    try:
        return csv.Sniffer().sniff(lines[0] if lines else "")
    except csv.Error as exc:
        raise Failed(f"{path!r} is not a readable CSV file ({exc}; name the `delimiter` in the check)") from None


def read_table(
    data: bytes, path: str, sheet: str | int | None, *, delimiter: str | None = None, limits: GradeLimits | None = None
) -> list[list[Any]]:
    """Rows of a CSV or XLSX file as lists of cell values (the header row included).

    A CSV's delimiter is `delimiter` when given, else sniffed from a bounded sample.
    """
    limits = limits or GradeLimits()
    lower = path.lower()
    if lower.endswith((".xlsx", ".xlsm")):
        import defusedxml  # noqa: F401 - openpyxl parses through it when installed: no XML entity bombs
        import openpyxl

        if not openpyxl.DEFUSEDXML:
            raise Unscored(
                "openpyxl is not parsing through defusedxml (OPENPYXL_DEFUSEDXML is off?); XLSX files are "
                "not read without it"
            )
        _xlsx_bounded(data, path, limits)
        try:
            # keep_links=False: external workbook links are never parsed (nor followed: openpyxl never does);
            # a formula's cached value is what is read.
            workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False)
        except Exception as exc:  # noqa: BLE001 - a corrupt upload is the agent's failure
            from defusedxml import DefusedXmlException

            if isinstance(exc.__cause__ or exc.__context__, DefusedXmlException):
                raise Failed(
                    f"{path!r} declares XML entities or a DTD, which are refused unread "
                    f"(an entity bomb?): {exc.__cause__ or exc.__context__!r}"
                ) from None
            raise Failed(f"{path!r} is not a readable XLSX file ({exc})") from None
        try:
            names = workbook.sheetnames
            if sheet is None:
                worksheet = workbook[names[0]]
            elif isinstance(sheet, int):
                if sheet >= len(names):
                    raise Missing(f"{path!r} has no sheet #{sheet} (it has {len(names)})")
                worksheet = workbook[names[sheet]]
            else:
                if sheet not in names:
                    raise Missing(f"{path!r} has no sheet {sheet!r} (sheets: {', '.join(names)})")
                worksheet = workbook[sheet]
            # openpyxl pads every row to the width the sheet's <dimension> claims and yields an empty row for
            # each row number skipped: counted as they come, a claim of 10^6 columns or rows stops here.
            rows, cells = [], 0
            for row in worksheet.iter_rows(values_only=True):
                cells += max(len(row), 1)
                if cells > limits.table_max_cells:
                    raise _too_many_cells(path, limits, f" in {worksheet.title!r} (empty ones its rows claim counted)")
                rows.append(list(row))
            return rows
        finally:
            workbook.close()
    dialect = "excel" if delimiter is not None else _csv_dialect(data, path, limits)
    return _csv_rows(data, path, dialect, delimiter or dialect.delimiter, limits)


def _find_label(labels: list[Any], wanted: str, form=None) -> int | None:
    """The index of the label equal to `wanted` (stripped, `form`-normalised), else equal case-folded."""
    texts = [_cell_text(label) for label in labels]
    if form is not None:
        texts = [form(text) for text in texts]
        wanted = form(wanted)
    wanted = wanted.strip()
    for index, text in enumerate(texts):
        if text == wanted:
            return index
    folded = wanted.casefold()
    for index, text in enumerate(texts):
        if text.casefold() == folded:
            return index
    return None


def table_cell(check: TableCellCheck, ctx: GradingContext) -> Outcome:
    try:
        rows = read_table(
            ctx.read_bytes(check.path), check.path, check.sheet, delimiter=check.delimiter, limits=ctx.limits
        )
    except Missing as exc:
        return _binary(False, str(exc))
    if not rows:
        return _binary(False, f"{check.path!r} is empty")
    header, data_rows = rows[0], rows[1:]
    form = normalise_unicode if check.normalize_unicode else None
    if isinstance(check.column, int):
        column = check.column
    else:
        column = _find_label(list(header), check.column, form)
        if column is None:
            return _binary(False, f"no column labelled {check.column!r} in the header row")
    if isinstance(check.row, int):
        row = check.row
        if row >= len(data_rows):
            return _binary(False, f"there is no data row {row} (the table has {len(data_rows)})")
    else:
        row = _find_label([r[0] if r else None for r in data_rows], check.row, form)
        if row is None:
            return _binary(False, f"no row labelled {check.row!r} in the first column")
    values = data_rows[row]
    if column >= len(values):
        return _binary(False, f"row {check.row!r} has no column {check.column!r}")
    value = values[column]
    if form is not None and isinstance(value, str):
        value = form(value)
    where = f"cell [{check.row!r}, {check.column!r}] = {_short(_cell_text(value), 40)}"
    if isinstance(check.expected, str):
        met = _cell_text(value) == check.unicode_value("expected").strip()
        return _binary(met, f"{where}, expected {_short(check.expected, 40)}")
    found = _cell_number(value)
    if found is None:
        return _binary(False, f"{where} is not a number")
    met = abs(found - check.expected) <= check.tolerance + 1e-12 * max(1.0, abs(check.expected))
    return _binary(
        met, f"{where} ({'within' if met else 'not within'} ±{_num(check.tolerance)} of {_num(check.expected)})"
    )


# ---------------------------------------------------------------- sandbox kinds


def command(check: CommandCheck, ctx: GradingContext) -> Outcome:
    result = ctx.run(check.run, timeout_s=check.timeout_s)
    broken = process_failure(result, check.timeout_s, what="the command")
    if broken:
        raise Failed(broken)
    if result.stdout_truncated or result.stderr_truncated:
        raise Failed("the command flooded its output past the sandbox's output cap")
    met = result.exit_code == check.expect_exit
    tail = (result.stderr or result.stdout).strip()[-300:]
    detail = f"; output ends: {tail}" if tail and not met else ""
    return _binary(met, f"exit code {result.exit_code}, expected {check.expect_exit}{detail}")


def evaluate(check, ctx: GradingContext) -> Outcome:
    """Run one non-group, non-judge check. Raises only `Unscored` (the grader's own failure): what the
    graded work broke (`Failed`) or left out (`Missing`) is an outcome, and so is any other error
    while the check reads agent input (it fails the check, with the error as its reason)."""
    if check.kind == "python":
        from .pyrunner import python_check

        handler = python_check
    elif check.kind == "tests":
        from .testsuite import tests_check

        handler = tests_check
    else:
        handler = _HANDLERS.get(check.kind)
        if handler is None:
            raise Unscored(f"kind {check.kind!r} is not evaluated here")
    try:
        return handler(check, ctx)
    except Missing as exc:
        return _binary(False, str(exc))
    except Failed as exc:
        return failed_outcome(check, str(exc))
    except Unscored:
        raise
    except RecursionError:
        return failed_outcome(check, "error while checking: the input is nested too deeply to read")
    except Exception as exc:  # noqa: BLE001 - agent input that breaks a reader fails the check, closed
        return failed_outcome(check, f"error while checking: {type(exc).__name__}: {exc}"[:500])


_HANDLERS = {
    "string_match": string_match,
    "regex": regex,
    "number": number,
    "json_field": json_field,
    "file_exists": file_exists,
    "file_content": file_content,
    "table_cell": table_cell,
    "text_similarity": text_similarity,
    "command": command,
}


def episode_checks(rubric: Any) -> list[str]:
    """Ids of a rubric document's checks, at any depth, that need the episode rather than the response text:
    the agent's workspace files, its sandbox (commands, python checks) or its trajectory (a kind that
    `reads_episode`, or a target other than the answer). Graded from a response alone (a trainer's reward
    function, `grade` without a workspace or sandbox), they are unscored. Groups are not listed themselves,
    only their children that need the episode."""
    return [
        str(check.get("id"))
        for check, _, _, _ in flat_checks(rubric.get("checks") if isinstance(rubric, dict) else None)
        if check.get("kind") != "group"
        and (getattr(check_model(check), "reads_episode", False) or (check.get("target") or "answer") != "answer")
    ]
