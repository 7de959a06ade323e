"""Pydantic v2 models of gymwright.rubric/v1, gymwright.task/v1 and gymwright.grade/v1.

These models ARE the format contract (see docs/formats.md). Every model forbids unknown
keys and validates strictly (no "1" -> 1 coercion), so what the JSON Schema says
and what the engine accepts are the same thing.

Single-field rules (a regex that compiles, a safe relative path, a JSON pointer
that is RFC 6901) are field validators here, so pydantic reports them at the
field's own location. Rules across fields or checks (duplicate ids, one of
`contains`/`regex`/`equals`/`sha256`, no positive points) live in
`validation.py`, which also turns every error into an `Issue` with a JSON
pointer. Use `parse_rubric` / `parse_task` rather than `Rubric.model_validate`.

Long (over 600 lines) because it is the formats' one schema: every model of the three
documents in one module, read side by side with docs/formats.md.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    WithJsonSchema,
)

from .fastregex import Searcher, compile_pattern, validate_pattern
from .text import fold_lookalikes, normalise_pattern, normalise_unicode

RUBRIC_SCHEMA = "gymwright.rubric/v1"
TASK_SCHEMA = "gymwright.task/v1"
GRADE_SCHEMA = "gymwright.grade/v1"

CHECK_ID_PATTERN = r"^[a-z0-9_]{1,64}$"
TARGET_PATTERN = r"^(answer|trajectory|file:[\s\S]+|stdout:[\s\S]+)$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"
TOOL_NAME_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$"
FUNCTION_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"
REGEX_FLAGS_PATTERN = r"^[aimsx]*$"

# ---------------------------------------------------------------- field types


def _nonzero(value: int | float) -> int | float:
    if value == 0:
        raise ValueError("points must not be 0: use a positive number for a reward, a negative one for a penalty")
    return value


def _finite(value: int | float) -> int | float:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return value


PATH_MAX_CHARS = 255


def relative_path_problem(value: str) -> str | None:
    """What is wrong with `value` as a workspace-relative POSIX path, or None: the one set of path
    rules (task files, `file:` targets, uploads, a dry run's workspace files)."""
    if not value:
        return "is empty"
    if len(value) > PATH_MAX_CHARS:
        return f"is longer than {PATH_MAX_CHARS} characters"
    if "\x00" in value:
        return "contains a NUL byte"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return "contains control characters"
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        return "is absolute"
    if "\\" in value:
        return "contains a backslash"
    if any(part == ".." for part in value.split("/")):
        return "contains '..'"
    if any(part == "" for part in value.split("/")[:-1]):
        return "contains an empty segment ('//')"
    return None


def safe_relative_path(value: str) -> str:
    """Accept a workspace-relative POSIX path (relative_path_problem's rules), else ValueError saying why."""
    problem = relative_path_problem(value)
    if problem:
        raise ValueError(f"path {value!r} {problem}; expected a path relative to the workspace such as 'out/report.md'")
    return value


def normalised_relative_path(value: str) -> str:
    """safe_relative_path, then '.' segments and a trailing '/' folded away: 'data/./x.csv' → 'data/x.csv'."""
    normalised = posixpath.normpath(safe_relative_path(value))
    if normalised == ".":
        raise ValueError(f"path {value!r} names the workspace itself; expected a file such as 'out/report.md'")
    return normalised


def _compiles(value: str) -> str:
    try:
        validate_pattern(value)
    except ValueError as exc:
        raise ValueError(f"regular expression does not compile: {exc}; expected a Python `re` pattern") from None
    return value


def _one_group_regex(value: str) -> str:
    _compiles(value)
    groups = compile_pattern(value).groups
    if groups != 1:
        raise ValueError(
            f"extract must have exactly one capturing group around the number (it has {groups}), "
            r"e.g. 'total: (\S+)'"
        )
    return value


def is_json_pointer(value: str) -> bool:
    """True if `value` is an RFC 6901 JSON pointer ("" or "/a/b", with `~` only as `~0`/`~1`)."""
    if value == "":
        return True
    if not value.startswith("/"):
        return False
    return re.search(r"~(?![01])", value) is None


def _json_pointer(value: str) -> str:
    if not is_json_pointer(value):
        raise ValueError(
            f"{value!r} is not an RFC 6901 JSON pointer; expected '' for the whole document or "
            "'/key/0/sub' (write '~' as '~0' and '/' inside a key as '~1')"
        )
    return value


def _target(value: str) -> str:
    if not re.fullmatch(TARGET_PATTERN, value):
        raise ValueError(
            f"target {value!r} is not understood; expected 'answer', 'trajectory', "
            "'file:<workspace path>' or 'stdout:<command>'"
        )
    if value.startswith("file:"):
        safe_relative_path(value[len("file:") :])
    return value


def _python_code(value: str) -> str:
    try:
        tree = ast.parse(value, "<check code>", "exec")
    except SyntaxError as exc:
        raise ValueError(f"code has a syntax error on line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"code cannot be parsed: {exc}") from None
    if not any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "check" for node in tree.body
    ):
        raise ValueError(
            "code must define a top-level function `check(ctx)` returning true/false or a number in [0, 1]"
        )
    return value


def _checks_module_source(value: str) -> str:
    try:
        ast.parse(value, "checks.py", "exec")
    except SyntaxError as exc:
        raise ValueError(f"checks module has a syntax error on line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"checks module cannot be parsed: {exc}") from None
    return value


_NUMBER_SCHEMA = {"type": "number"}

# Strict int-or-float: keeps 5 as 5 and 0.5 as 0.5 (documents round-trip unchanged), rejects true and "5".
Number = Annotated[StrictInt | StrictFloat, AfterValidator(_finite), WithJsonSchema(_NUMBER_SCHEMA)]
NonNegative = Annotated[
    StrictInt | StrictFloat, AfterValidator(_finite), Field(ge=0), WithJsonSchema({"type": "number", "minimum": 0})
]
Points = Annotated[
    StrictInt | StrictFloat,
    AfterValidator(_finite),
    AfterValidator(_nonzero),
    WithJsonSchema(
        {
            "type": "number",
            "not": {"const": 0},
            "description": "Non-zero: positive = reward, negative = penalty (awarded when the bad behaviour is present).",
        }
    ),
]
CheckId = Annotated[
    str,
    Field(pattern=CHECK_ID_PATTERN, description="Unique in the whole rubric (groups included): [a-z0-9_]{1,64}."),
]
Target = Annotated[
    str,
    AfterValidator(_target),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": TARGET_PATTERN,
            "default": "answer",
            "description": "What the check reads: 'answer', 'trajectory', 'file:<workspace path>' or 'stdout:<command>'.",
        }
    ),
]
# The same rules as safe_relative_path, for Ajv in the browser (ECMAScript lookaheads; pydantic's
# own regex engine has none, so the pattern lives only in the published schema).
RELATIVE_PATH_PATTERN = r"^(?![A-Za-z]:)(?!/)(?!(.*/)?\.\.(/|$))(?!.*//)[^\\\u0000-\u001f\u007f]+$"
RelPath = Annotated[
    str,
    AfterValidator(safe_relative_path),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": PATH_MAX_CHARS,
            "pattern": RELATIVE_PATH_PATTERN,
            "description": "A path relative to the workspace: not absolute, no '..', no backslashes.",
        }
    ),
]
Regex = Annotated[str, AfterValidator(_compiles)]
JsonValue = Any


class Strict(BaseModel):
    """Base of every format model: unknown keys are errors, types are not coerced."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )


# ---------------------------------------------------------------- checks


class CheckBase(Strict):
    id: CheckId
    points: Points
    title: str | None = None
    tags: list[str] = Field(default_factory=list)
    required: StrictBool = Field(
        default=False,
        description="A gate: if this check scores below 1 the reward is 0 (gated). Not allowed on penalties.",
    )
    target: Target = "answer"

    # What a kind needs and does: declared on every kind's own class, with no default here, so that a
    # new kind must decide each one (tests/grading/engine/test_check_kinds.py holds every kind to it).
    # They are the one place these facts live: code reads them from a model (`check.judged`), from a
    # check document (`check_model(check)`) or as a set of kinds (`kinds_with("judged")`).
    #: An LLM judge scores it: grading needs a judge, and judge injection is worth trying.
    judged: ClassVar[bool]
    #: It runs code in the task's sandbox: a dry run cannot score it, and the test-run hacks apply.
    needs_sandbox: ClassVar[bool]
    #: It reads the workspace file its `path` names.
    reads_workspace: ClassVar[bool]
    #: It needs the episode (the agent's workspace, sandbox or trajectory) whatever its target: graded
    #: from a response alone it is unscored. (Any check whose target is not `answer` needs it too.)
    reads_episode: ClassVar[bool]
    #: Its work grows with what the agent wrote (a process, a parse, a pattern, a judge's context):
    #: `hack:exhaust` applies. A substring test or a group's arithmetic does not.
    grows_with_output: ClassVar[bool]
    #: The check's work on any text is bounded without a CPU timer (which works only on the main thread):
    #: linear string work, patterns under their own timeout, parses with size and depth limits. Reading
    #: an in-memory target (the answer, the trajectory), it runs with no timer at all (limits.cpu_budget).
    bounded_by_design: ClassVar[bool]


class UnicodeNormalised(Strict):
    """A check that compares text: both the text it reads and its own values are normalised first."""

    normalize_unicode: StrictBool = Field(
        default=True,
        description="Remove invisible format characters (zero-width space, soft hyphen, bidi controls, ...) and "
        "apply NFKC (fullwidth and other compatibility forms become plain letters) to the text read and to this "
        "check's expected values and pattern before comparing (docs/formats.md, 'Text normalisation').",
    )

    # The values these checks compute once per rubric are read from `__pydantic_private__` itself, not as
    # `self._x`: pydantic serves a private attribute through its `__getattr__`, a miss of the instance's
    # dict that cost a tenth of a 10-check grade (bench/bench_reward_fn.py).
    _unicode_values: dict = PrivateAttr(default_factory=dict)

    def unicode_form(self, value: str) -> str:
        """`value` normalised as the text it is compared with is."""
        return normalise_unicode(value) if self.normalize_unicode else value

    def unicode_value(self, name: str, *, lookalikes: bool = False) -> str:
        """This check's string field `name`, normalised as the text it is compared with is (with lookalike
        letters read as Latin if `lookalikes`; computed once)."""
        kept = self.__pydantic_private__["_unicode_values"]  # not self._x: see UnicodeNormalised
        value = kept.get((name, lookalikes))
        if value is None:
            value = self.unicode_form(getattr(self, name))
            value = kept[(name, lookalikes)] = fold_lookalikes(value) if lookalikes else value
        return value

    def pattern_form(self, value: str) -> str:
        """A pattern of this check made to match the text as it is compared."""
        return normalise_pattern(value) if self.normalize_unicode else value


class StringMatchCheck(CheckBase, UnicodeNormalised):
    """Met when `mode` holds between the target text and `expected`."""

    kind: Literal["string_match"]
    judged = False
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = False
    bounded_by_design = True
    expected: str
    mode: Literal["equals", "contains", "not_contains", "starts_with", "ends_with"] = "contains"
    case_sensitive: StrictBool = False
    normalize_whitespace: StrictBool = Field(
        default=True, description="Collapse runs of whitespace to one space and strip both ends before comparing."
    )
    _expected: dict = PrivateAttr(default_factory=dict)

    def expected_normalised(self, *, lookalikes: bool = False) -> str:
        """`expected` normalised (with lookalike letters read as Latin if `lookalikes`), case-folded and/or
        whitespace-collapsed as the options say (computed once)."""
        kept = self.__pydantic_private__["_expected"]  # not self._x: see UnicodeNormalised
        value = kept.get(lookalikes)
        if value is None:
            value = self.unicode_form(self.expected)
            if lookalikes:
                value = fold_lookalikes(value)
            value = value if self.case_sensitive else value.casefold()
            value = kept[lookalikes] = " ".join(value.split()) if self.normalize_whitespace else value
        return value


class RegexCheck(CheckBase, UnicodeNormalised):
    """Met when `pattern` matches at least `min_count` times (or, with must_match false, never)."""

    kind: Literal["regex"]
    judged = False
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = True
    bounded_by_design = True
    pattern: Regex
    flags: str = Field(default="", pattern=REGEX_FLAGS_PATTERN, description="Letters from 'aimsx' (Python re flags).")
    must_match: StrictBool = True
    min_count: StrictInt = Field(default=1, ge=1)
    _compiled: Searcher | None = PrivateAttr(default=None)

    def compiled(self) -> Searcher:
        """The pattern, compiled once at parse time (with its literal prefilter)."""
        private = self.__pydantic_private__  # not self._x: see UnicodeNormalised
        if private["_compiled"] is None:
            private["_compiled"] = compile_pattern(self.pattern_form(self.pattern), self.flags)
        return private["_compiled"]

    def model_post_init(self, __context: Any) -> None:
        self.compiled()


class NumberCheck(CheckBase, UnicodeNormalised):
    """Met when a number read from the target is within tolerance of `expected`.

    The number is the first capture group of the first `extract` match, or else
    the first number in the text. Thousands separators (1,234.5) are removed. A
    percentage ("25%") is met if either 25 or 0.25 is within tolerance.
    Tolerance is max(tolerance, rel_tolerance × |expected|).
    """

    kind: Literal["number"]
    judged = False
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = True
    bounded_by_design = True
    expected: Number
    tolerance: NonNegative = 0
    rel_tolerance: NonNegative = 0
    extract: Annotated[str, AfterValidator(_one_group_regex)] | None = None
    _compiled: Searcher | None = PrivateAttr(default=None)

    def compiled_extract(self) -> Searcher | None:
        private = self.__pydantic_private__  # not self._x: see UnicodeNormalised
        if self.extract is not None and private["_compiled"] is None:
            private["_compiled"] = compile_pattern(self.pattern_form(self.extract))
        return private["_compiled"]

    def model_post_init(self, __context: Any) -> None:
        self.compiled_extract()


class JsonFieldCheck(CheckBase):
    """Met when the target parses as JSON and the value at `pointer` satisfies `op` against `expected`."""

    kind: Literal["json_field"]
    judged = False
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = True
    bounded_by_design = True
    pointer: Annotated[str, AfterValidator(_json_pointer)]
    op: Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "exists"] = "eq"
    expected: JsonValue = None


def _glob(value: str) -> str:
    if any("**" in part and part != "**" for part in value.split("/")):
        raise ValueError(f"glob {value!r}: '**' must be a whole path segment, as in 'out/**/*.csv'")
    return value


class FileExistsCheck(CheckBase):
    """Met when at least one workspace path matches the glob `path` (`*`, `?`, `[..]`; `**` crosses folders)."""

    kind: Literal["file_exists"]
    judged = False
    needs_sandbox = False
    reads_workspace = True
    reads_episode = True
    grows_with_output = True
    bounded_by_design = False
    path: Annotated[RelPath, AfterValidator(_glob)]


_FILE_CONTENT_ONE_OF = {
    "oneOf": [
        {"type": "object", "required": ["contains"], "properties": {"contains": {"type": "string"}}},
        {"type": "object", "required": ["not_contains"], "properties": {"not_contains": {"type": "string"}}},
        {"type": "object", "required": ["regex"], "properties": {"regex": {"type": "string"}}},
        {"type": "object", "required": ["equals"], "properties": {"equals": {"type": "string"}}},
        {"type": "object", "required": ["sha256"], "properties": {"sha256": {"type": "string"}}},
    ]
}
_PYTHON_ONE_OF = {
    "oneOf": [
        {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
        {"type": "object", "required": ["function"], "properties": {"function": {"type": "string"}}},
    ]
}


class FileContentCheck(CheckBase, UnicodeNormalised):
    """Met when the workspace file at `path` contains / does not contain / matches / equals / has the sha256
    given (exactly one). A missing file meets none of them: deleting a file never passes `not_contains`."""

    # Exactly one condition, for Ajv (a null one counts as absent, as in the engine).
    model_config = ConfigDict(json_schema_extra=_FILE_CONTENT_ONE_OF)

    kind: Literal["file_content"]
    judged = False
    needs_sandbox = False
    reads_workspace = True
    reads_episode = True
    grows_with_output = True
    bounded_by_design = False
    path: RelPath
    contains: str | None = None
    not_contains: str | None = None
    regex: Regex | None = None
    equals: str | None = None
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)] | None = None
    _compiled: Searcher | None = PrivateAttr(default=None)

    def compiled(self) -> Searcher | None:
        private = self.__pydantic_private__  # not self._x: see UnicodeNormalised
        if self.regex is not None and private["_compiled"] is None:
            private["_compiled"] = compile_pattern(self.pattern_form(self.regex))
        return private["_compiled"]

    def model_post_init(self, __context: Any) -> None:
        self.compiled()


class TableCellCheck(CheckBase, UnicodeNormalised):
    """Met when a CSV/XLSX cell equals `expected` (numbers within `tolerance`).

    The first row is the header: `column` is a header label or a 0-based column
    index. `row` is a label looked up in the first column, or a 0-based index
    of the data rows (the row after the header is 0). `sheet` (XLSX only) is a
    sheet name or 0-based index; the first sheet by default. `delimiter` (CSV
    only) is the one-character field separator; without it, it is sniffed from the
    start of the first line. String cells are compared after stripping
    whitespace, case-sensitively.
    """

    kind: Literal["table_cell"]
    judged = False
    needs_sandbox = False
    reads_workspace = True
    reads_episode = True
    grows_with_output = True
    bounded_by_design = False
    path: RelPath
    sheet: str | StrictInt | None = None
    delimiter: Annotated[str, Field(min_length=1, max_length=1, pattern=r'^[^\r\n"]$')] | None = None
    row: str | Annotated[StrictInt, Field(ge=0)]
    column: str | Annotated[StrictInt, Field(ge=0)]
    expected: StrictInt | StrictFloat | str
    tolerance: NonNegative = 0


#: An author's reference text, bounded so that comparing it with an answer under GYMWRIGHT_SIMILARITY_MAX_CHARS
#: stays bounded too (fuzzy's cost grows with the product of the two lengths).
SIMILARITY_REFERENCE_MAX_CHARS = 100_000


class TextSimilarityCheck(CheckBase, UnicodeNormalised):
    """Met when similarity(target, reference) ≥ threshold.

    Metrics (all in [0, 1], on lower-cased text): `fuzzy` = rapidfuzz ratio of
    whitespace-normalised text; `rouge_l` = ROUGE-L F1 over word tokens;
    `bleu` = sentence BLEU-4 over word tokens with add-one smoothing for
    2- to 4-grams and the brevity penalty.
    """

    kind: Literal["text_similarity"]
    judged = False
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = True
    bounded_by_design = True
    metric: Literal["fuzzy", "rouge_l", "bleu"] = "fuzzy"
    reference: Annotated[str, Field(max_length=SIMILARITY_REFERENCE_MAX_CHARS)]
    threshold: Annotated[
        StrictInt | StrictFloat, Field(ge=0, le=1), WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1})
    ]


class CommandCheck(CheckBase):
    """Met when `run` (a shell command, run in the workspace inside the sandbox) exits with `expect_exit`.

    A command that times out or is killed is unscored, not failed.
    """

    kind: Literal["command"]
    judged = False
    needs_sandbox = True
    reads_workspace = False
    reads_episode = True
    grows_with_output = True
    bounded_by_design = False
    run: Annotated[str, Field(min_length=1)]
    expect_exit: StrictInt = 0
    timeout_s: Annotated[
        StrictInt | StrictFloat,
        Field(gt=0, le=3600),
        WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 3600}),
    ] = 60


class PythonCheck(CheckBase):
    """Runs Python INSIDE the sandbox: `code` defining `check(ctx)`, or `function` ("checks:fn").

    The function gets `ctx` with `answer`, `text` (the target text), `trajectory`,
    `workspace` (path), `args` and `read(path)`; it returns true/false or a number
    in [0, 1] used as the score. Exceptions, timeouts and any other return value
    make the check unscored.
    """

    model_config = ConfigDict(json_schema_extra=_PYTHON_ONE_OF)

    kind: Literal["python"]
    judged = False
    needs_sandbox = True
    reads_workspace = False
    reads_episode = True
    grows_with_output = True
    bounded_by_design = False
    code: Annotated[str, AfterValidator(_python_code)] | None = None
    function: Annotated[str, Field(pattern=FUNCTION_PATTERN)] | None = None
    args: dict[str, JsonValue] = Field(default_factory=dict)
    timeout_s: Annotated[
        StrictInt | StrictFloat,
        Field(gt=0, le=3600),
        WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 3600}),
    ] = 60


TESTS_MAX_FILES = 50
TESTS_MAX_SELECT = 10_000
TEST_ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,500}$"


def _test_file(value: str) -> str:
    if not value.endswith(".py"):
        raise ValueError(f"test file {value!r} is not a Python file; expected a path ending in '.py'")
    stem = posixpath.basename(value)[:-3]
    if not stem.isidentifier():
        raise ValueError(f"test file {value!r}: {stem!r} is not a Python module name")
    return value


def _unique_modules(value: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for path in value:
        stem = posixpath.basename(path)[:-3]
        if stem in seen and seen[stem] != path:
            raise ValueError(f"test files {seen[stem]!r} and {path!r} have the same module name {stem!r}; rename one")
        seen[stem] = path
    if len(set(value)) != len(value):
        raise ValueError("a test file is listed twice")
    return value


class TestsCheck(CheckBase):
    """Runs a test suite the grader owns with Gymwright's own runner (never the agent's) in the sandbox.

    `files` are task files with role `protected` or `grader` (test modules, loaded by path);
    `runner` says how tests are found: `unittest` (TestCase subclasses' test* methods) or
    `pytest` (also test_* functions and Test* classes with plain `assert`; pytest itself is not
    needed). Test ids are `<file>::<Class>::<method>` or `<file>::<function>`, fixed from the
    files' source before any code runs; `select` (ids, or `<file>::<Class>` for a whole class)
    narrows them. `credit`: `all` scores 1 only if every selected test passed, `per_test` scores
    the fraction that passed. A test missing from the runner's report, a run that ends without
    the report, times out or tampers with the runner fails.
    """

    __test__ = False  # not a pytest test class, whatever its name

    kind: Literal["tests"]
    judged = False
    needs_sandbox = True
    reads_workspace = False
    reads_episode = True
    grows_with_output = True
    bounded_by_design = False
    files: Annotated[
        list[Annotated[RelPath, AfterValidator(_test_file)]],
        Field(min_length=1, max_length=TESTS_MAX_FILES),
        AfterValidator(_unique_modules),
    ]
    runner: Literal["unittest", "pytest"] = "unittest"
    select: (
        Annotated[list[Annotated[str, Field(pattern=TEST_ID_PATTERN)]], Field(max_length=TESTS_MAX_SELECT)] | None
    ) = None
    credit: Literal["all", "per_test"] = "all"
    timeout_s: Annotated[
        StrictInt | StrictFloat,
        Field(gt=0, le=3600),
        WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 3600}),
    ] = 120


class JudgeScale(Strict):
    min: Number = 0
    max: Number = 10


class LlmJudgeCheck(CheckBase):
    """The judge model decides whether `criterion` is met (binary) or scores it on a scale.

    `samples` independent verdicts are asked for (default: the rubric's judge.samples).
    Binary: majority vote, a tie is NOT met. Scale: mean of the scores, normalised
    to [0, 1] by (score − min) / (max − min). `model` names a judge model the
    grading caller maps to a real one (JudgeConfig.models); unmapped names use
    the configured default.
    """

    kind: Literal["llm_judge"]
    judged = True
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = True
    bounded_by_design = False
    criterion: Annotated[str, Field(min_length=1)]
    reference: str | None = None
    scale: Literal["binary"] | JudgeScale = "binary"
    samples: Annotated[StrictInt, Field(ge=1, le=25)] | None = None
    model: str | None = None


class GroupCheck(CheckBase):
    """Aggregates its child checks into one score in [0, 1].

    Each scored child contributes its "goodness": its score if its points are
    positive, 1 − score if negative (a penalty child is good when not triggered).
    `all`: 1 if every child's goodness is 1, else 0. `any`: 1 if at least one is 1,
    else 0. `mean`: mean of goodness weighted by |points|. `min`: the lowest
    goodness. The group is scored only when its unscored children cannot change
    the aggregate (`all` with a failed child, `any` with a met child, ...); else
    it is unscored. Children contribute to the reward only through their
    group (their own points act as weights for `mean`), but a `required` child
    still gates the whole grade.
    """

    kind: Literal["group"]
    judged = False
    needs_sandbox = False
    reads_workspace = False
    reads_episode = False
    grows_with_output = False
    bounded_by_design = False
    aggregate: Literal["all", "any", "mean", "min"] = "all"
    checks: Annotated[list[Check], Field(min_length=1)]


Check = Annotated[
    StringMatchCheck
    | RegexCheck
    | NumberCheck
    | JsonFieldCheck
    | FileExistsCheck
    | FileContentCheck
    | TableCellCheck
    | TextSimilarityCheck
    | CommandCheck
    | PythonCheck
    | TestsCheck
    | LlmJudgeCheck
    | GroupCheck,
    Field(discriminator="kind"),
]

CHECK_MODELS: dict[str, type[CheckBase]] = {
    "string_match": StringMatchCheck,
    "regex": RegexCheck,
    "number": NumberCheck,
    "json_field": JsonFieldCheck,
    "file_exists": FileExistsCheck,
    "file_content": FileContentCheck,
    "table_cell": TableCellCheck,
    "text_similarity": TextSimilarityCheck,
    "command": CommandCheck,
    "python": PythonCheck,
    "tests": TestsCheck,
    "llm_judge": LlmJudgeCheck,
    "group": GroupCheck,
}
CHECK_KINDS = tuple(CHECK_MODELS)

GroupCheck.model_rebuild()


# ---------------------------------------------------------------- rubric


#: The most judge models a panel may name (each is asked every sample of every judged check it grades).
PANEL_MAX = 7
PANEL_NAME_MAX = 200


class JudgeSettings(Strict):
    model: str | None = Field(default=None, description="A judge model name the grading caller maps to a real model.")
    samples: Annotated[StrictInt, Field(ge=1, le=25)] = 1
    temperature: Annotated[
        StrictInt | StrictFloat, Field(ge=0, le=2), WithJsonSchema({"type": "number", "minimum": 0, "maximum": 2})
    ] = 0
    # Several judge models, each named like `model`: every judged check that names no `model` of its own is
    # asked of each member, and its verdict is theirs combined (grading.engine.judge.combine_panel).
    panel: (
        Annotated[
            list[Annotated[str, Field(min_length=1, max_length=PANEL_NAME_MAX)]],
            Field(min_length=2, max_length=PANEL_MAX),
        ]
        | None
    ) = Field(
        default=None,
        description="2 to 7 distinct judge model names: a judged check's verdict is their majority (binary; a tie is "
        "not met) or their mean (scales), each member's own verdict from its `samples`",
    )


class Probe(Strict):
    answer: str
    max_reward: Annotated[
        StrictInt | StrictFloat, Field(ge=0, le=1), WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1})
    ]


class Rubric(Strict):
    """gymwright.rubric/v1. Build it with `parse_rubric`, which adds the cross-check rules."""

    schema_: Literal["gymwright.rubric/v1"] = Field(alias="schema")
    pass_threshold: Annotated[
        StrictInt | StrictFloat,
        Field(ge=0, le=1),
        WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1, "default": 0.7}),
    ] = 0.7
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    checks: list[Check]
    probes: list[Probe] = Field(default_factory=list)
    _judge_checks: tuple | None = PrivateAttr(default=None)

    def iter_checks(self) -> Iterator[Check]:
        """Every check, depth first, groups before their children (`flat_checks`)."""
        return (row.check for row in flat_checks(self.checks))

    def judge_checks(self) -> tuple[LlmJudgeCheck, ...]:
        """The llm_judge checks, depth first (found once: every grade asks, and a parsed rubric is not changed)."""
        private = self.__pydantic_private__  # not self._x: see UnicodeNormalised
        if private["_judge_checks"] is None:
            private["_judge_checks"] = tuple(check for check in self.iter_checks() if isinstance(check, LlmJudgeCheck))
        return private["_judge_checks"]

    def to_document(self) -> dict:
        """The rubric as a JSON-ready dict (what `parse_rubric` accepts back)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---------------------------------------------------------------- task


FILE_ROLES = ("workspace", "protected", "grader")
# An environment file may also be `build`: part of its Dockerfile's build context (what its COPY and ADD
# read), sent to the image build and never put in /env (a Harbor task's environment/ folder).
ENV_FILE_ROLES = (*FILE_ROLES, "build")


class FileRef(Strict):
    path: RelPath
    sha256: Annotated[str, Field(pattern=SHA256_PATTERN)]
    # Absent means "workspace", so that documents written before roles existed keep their bytes
    # (and their sha256): workspace, copied in and the agent may change it; protected, copied in
    # and restored to these bytes before any check runs; grader, copied in only after the episode.
    role: Literal["workspace", "protected", "grader", "build"] | None = Field(
        default=None,
        description="workspace (default) | protected | grader; an environment file may be build; see the task format",
    )

    @property
    def effective_role(self) -> str:
        return self.role or "workspace"


# The agent's built-in tools (sandbox/runtime/tools.py runs them), and those an environment offers when
# it names none. With Limits' and Environment's field defaults, the one source of environment defaults:
# the browser form, the API, the runtime and the docs (docs/formats.md) all read them from here.
BUILTIN_TOOLS = ("bash", "read_file", "write_file", "list_files", "submit")
DEFAULT_TOOLS = ("bash", "read_file", "write_file", "submit")


class Limits(Strict):
    cpus: Annotated[
        StrictInt | StrictFloat,
        Field(gt=0, le=64),
        WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 64}),
    ] = 1
    memory_mb: Annotated[StrictInt, Field(ge=16, le=262144)] = 2048
    timeout_s: Annotated[StrictInt, Field(ge=1, le=86400)] = 600
    max_steps: Annotated[StrictInt, Field(ge=1, le=10000)] = 40
    # Optional finer limits, passed to the sandbox backend when given (sandbox.runtime.SandboxSpec).
    exec_timeout_s: Annotated[StrictInt, Field(ge=1, le=86400)] | None = None
    pids: Annotated[StrictInt, Field(ge=8, le=65536)] | None = None
    output_cap_bytes: Annotated[StrictInt, Field(ge=1024, le=1 << 30)] | None = None
    workspace_mb: Annotated[StrictInt, Field(ge=1, le=1 << 20)] | None = None
    tmp_mb: Annotated[StrictInt, Field(ge=1, le=1 << 20)] | None = None


class CustomTool(Strict):
    name: Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]
    description: str = ""
    parameters: dict[str, JsonValue] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    command: Annotated[str, Field(min_length=1)]


class Environment(Strict):
    """The sandbox a task runs in. `files` are mounted at /env; `checks_module` is importable as `checks`."""

    id: Annotated[str, Field(pattern=SLUG_PATTERN)] = "default"
    version: Annotated[StrictInt, Field(ge=1)] = 1
    image: str | None = None
    dockerfile: str | None = None
    setup: str | None = None
    network: Literal["none", "allowed", "egress"] = Field(
        default="none", description="'none': no network; 'allowed' (or its synonym 'egress'): outbound network."
    )
    limits: Limits = Field(default_factory=Limits)
    tools: list[Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    custom_tools: list[CustomTool] = Field(default_factory=list)
    files: list[FileRef] = Field(default_factory=list)
    checks_module: Annotated[str, AfterValidator(_checks_module_source)] | None = None


class Solution(Strict):
    script: str | None = None
    answer: str | None = None


# Example answers are small by design: they are part of the task document, travel in tasks.jsonl and
# are re-graded on every new version. Larger fixtures belong in the task's attached files.
MAX_EXAMPLES = 50
EXAMPLE_ANSWER_MAX_CHARS = 100_000
# A task's words, bounded where every path meets them (editor, API, import, bulk): the web app's columns
# hold a title of 200 characters and tags of 64, and a prompt past 500,000 characters (~125k tokens) is
# no prompt an agent reads, while its page would render it on every view.
TITLE_MAX_CHARS = 200
TAG_MAX_CHARS = 64
MAX_TAGS = 50
PROMPT_MAX_CHARS = 500_000
EXAMPLE_MAX_FILES = 20
EXAMPLE_FILE_MAX_CHARS = 256 * 1024
EXAMPLE_FILES_MAX_CHARS = 1024 * 1024  # all files of one example together
EXAMPLE_NAME_PATTERN = r"^[^\x00-\x1f\x7f]{1,80}$"


class ExampleFile(Strict):
    """A text file put in the workspace before the example answer is graded."""

    path: RelPath
    content: Annotated[str, Field(max_length=EXAMPLE_FILE_MAX_CHARS)]


class RewardRange(Strict):
    min: Annotated[
        StrictInt | StrictFloat,
        Field(ge=0, le=1),
        WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1, "default": 0}),
    ] = 0
    max: Annotated[
        StrictInt | StrictFloat,
        Field(ge=0, le=1),
        WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1, "default": 1}),
    ] = 1


class ExampleAnswer(Strict):
    """An answer the author saved with the verdict they expect: the rubric's own test.

    `expect` is "pass" or "fail" (the grade's `passed`); `reward`, when given, also bounds the
    reward ({"min": 0.8} = at least 0.8). An example whose grade is incomplete (a judge or
    sandbox check could not be scored) is never counted as behaving as expected.
    """

    name: Annotated[str, Field(pattern=EXAMPLE_NAME_PATTERN, description="1 to 80 characters, unique in the task.")]
    answer: Annotated[str, Field(max_length=EXAMPLE_ANSWER_MAX_CHARS)]
    files: Annotated[list[ExampleFile], Field(max_length=EXAMPLE_MAX_FILES)] = Field(default_factory=list)
    expect: Literal["pass", "fail"]
    reward: RewardRange | None = None


class Task(Strict):
    """gymwright.task/v1. Build it with `parse_task`."""

    schema_: Literal["gymwright.task/v1"] = Field(alias="schema")
    id: Annotated[str, Field(pattern=SLUG_PATTERN)]
    version: Annotated[StrictInt, Field(ge=1)] = 1
    title: Annotated[str, Field(max_length=TITLE_MAX_CHARS)] = ""
    prompt: Annotated[str, Field(max_length=PROMPT_MAX_CHARS)]
    environment: Environment = Field(default_factory=Environment)
    files: list[FileRef] = Field(default_factory=list)
    solution: Solution | None = None
    rubric: Rubric
    tags: Annotated[list[Annotated[str, Field(max_length=TAG_MAX_CHARS)]], Field(max_length=MAX_TAGS)] = Field(
        default_factory=list
    )
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    # Optional, and absent rather than [] when there are none: documents written before example
    # answers existed keep their bytes and their sha256.
    examples: Annotated[list[ExampleAnswer], Field(max_length=MAX_EXAMPLES)] | None = Field(
        default=None, description="Example answers with the verdict the author expects; graded on every version."
    )

    def to_document(self) -> dict:
        """The task as a JSON-ready dict (what `parse_task` accepts back)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---------------------------------------------------------------- grade


class TestResult(Strict):
    """One test of a `tests` check: its id, whether it passed, and why not (bounded)."""

    __test__ = False

    id: str
    outcome: Literal["passed", "failed", "error", "skipped", "missing"]
    message: str = ""


#: Each class `construct_whole` has built: its fields' names, or {None} (no dict's keys) if it needs model_construct.
_WHOLE_FIELDS: dict[type, frozenset] = {}


def construct_whole(cls: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    """`cls.model_construct(**values)` when `values` names every field of `cls` exactly (the engine's own
    results): the same object without pydantic's walk over the fields on each call, which was a quarter of
    a 10-check grade's CPU time (bench/bench_reward_fn.py). Anything else goes through model_construct."""
    fields = _WHOLE_FIELDS.get(cls)
    if fields is None:
        plain = cls.__pydantic_post_init__ is None and not cls.__private_attributes__
        fields = _WHOLE_FIELDS[cls] = frozenset(cls.model_fields) if plain else frozenset({None})
    if values.keys() != fields:
        return cls.model_construct(**values)
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


class PanelVerdicts(Strict):
    """How each member of a judge panel voted on one check, in the rubric's order."""

    models: list[str]
    verdicts: list[StrictBool | StrictInt | StrictFloat | None] = Field(
        description="per member: met (binary) or its score normalised to [0, 1] (scales); null when it gave no verdict"
    )
    disagreement: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description="binary: the share of the members that voted who are in the minority; scales: the spread "
        "(highest − lowest) of the members' normalised scores; null when no member voted",
    )


class CheckGrade(Strict):
    """The result of one check. `awarded` is points × score for scored top-level checks,
    null for unscored checks and for children of a group (they count through the group)."""

    id: str
    kind: str
    status: Literal["scored", "unscored"]
    score: Annotated[float, Field(ge=0, le=1)] | None = None
    points: StrictInt | StrictFloat
    awarded: float | None = None
    required: bool = False
    explanation: str = ""
    votes: list[StrictBool | StrictInt | StrictFloat] | None = None
    duration_ms: int = 0
    checks: list[CheckGrade] | None = None
    # A judged check graded by a panel of judge models (the rubric's judge.panel).
    panel: PanelVerdicts | None = None
    # A `tests` check's per-test results, in the order run (bounded: TestResult).
    tests: list[TestResult] | None = None


class ProtectedFileState(Strict):
    """What the agent had done to one `protected` task file when its episode ended (the file was
    then restored to its original bytes before any check ran)."""

    path: str
    state: Literal["unchanged", "modified", "deleted", "replaced"] = Field(
        description="modified: other bytes; deleted: nothing there; replaced: a link, directory or other "
        "non-file in its place"
    )

    @property
    def changed(self) -> bool:
        return self.state != "unchanged"


class Grade(Strict):
    """A graded answer (docs/formats.md, "Scoring"). `reward` is the lower bound of an incomplete
    grade (its unscored checks earn nothing and stay in `max`); `reward_upper` is the reward had every
    unscored check been met (equal to `reward` when `complete`). `passed` needs a complete grade."""

    schema_: Literal["gymwright.grade/v1"] = Field(default=GRADE_SCHEMA, alias="schema")
    reward: Annotated[float, Field(ge=0, le=1)]
    reward_upper: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description="the reward had every unscored check been met; equal to reward when the grade is complete. "
        "Always set by the engine; absent (null) only in grades stored before it existed",
    )
    earned: float
    max: float
    passed: bool
    gated: bool
    complete: bool
    checks: list[CheckGrade]
    duration_ms: int = 0
    # Filled by a sandbox rollout for tasks with protected files; empty for a dry run.
    protected_files: list[ProtectedFileState] = Field(default_factory=list)
    # Filled by a sandbox rollout: the workspace symlinks removed before the checks ran (they led outside
    # the workspace, nowhere, or to a protected or grader path).
    links_removed: list[str] = Field(default_factory=list)

    def to_document(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)

    def iter_checks(self) -> Iterator[CheckGrade]:
        """Every check result, depth first, groups before their children (`flat_checks`)."""
        return (row.check for row in flat_checks(self.checks))


CheckGrade.model_rebuild()


class FlatCheck(NamedTuple):
    check: Any  # the check as given: a dict or one of the engine's models
    parent_id: str  # the enclosing group's id, "" at the top
    depth: int
    pointer: str  # RFC 6901 pointer to the check


# tuple.__new__ itself: a NamedTuple's own __new__ is a Python function, and half of the walk's time.
_flat_check = tuple.__new__


def flat_checks(checks: Any, *, pointer: str = "/checks") -> Iterator[FlatCheck]:
    """Every check of a tree of checks, depth first, a group's children right after it: the one walk
    over a rubric's or a grade's checks, as dicts (stored, unsaved or hostile JSON: anything that is
    not an object is skipped, and any object's `checks` list is entered, so that nothing written is
    hidden) or as the engine's models (Check, CheckGrade). Iterative, so that no depth of nesting reaches Python's recursion limit."""
    if not isinstance(checks, (list, tuple)):
        return
    # One entry per open list of checks: (its items, its pointer, the group's id, depth).
    stack = [(enumerate(checks), pointer, "", 0)]
    while stack:
        items, at, parent_id, depth = stack[-1]
        for index, check in items:
            if isinstance(check, dict):
                children = check.get("checks")
            else:
                # The engine's models, where only a group has children; `getattr`, not
                # isinstance(BaseModel): an ABC check per check would cost more than the rest of the walk.
                kind = getattr(check, "kind", None)
                if kind is None:
                    continue
                children = check.checks if kind == "group" else None
            here = f"{at}/{index}"
            yield _flat_check(FlatCheck, (check, parent_id, depth, here))
            if isinstance(children, (list, tuple)):
                check_id = check.get("id") if isinstance(check, dict) else check.id
                group_id = check_id if isinstance(check_id, str) else str(check_id or "")
                stack.append((enumerate(children), f"{here}/checks", group_id, depth + 1))
                break
        else:
            stack.pop()


def check_model(check: Any) -> type[CheckBase] | None:
    """The model class of a check given as a model, a check document or a check's grade (its `kind`),
    or None for a kind the engine does not know: the way to a kind's facts (`judged`, ...)."""
    if isinstance(check, CheckBase):
        return type(check)
    kind = check.get("kind") if isinstance(check, Mapping) else getattr(check, "kind", None)
    return CHECK_MODELS.get(kind) if isinstance(kind, str) else None


CHECK_FLAGS = ("judged", "needs_sandbox", "reads_workspace", "reads_episode", "grows_with_output", "bounded_by_design")


@functools.cache
def kinds_with(flag: str) -> frozenset[str]:
    """The kinds whose model sets `flag`, one of CHECK_FLAGS: e.g. kinds_with("needs_sandbox")."""
    if flag not in CHECK_FLAGS:
        raise ValueError(f"{flag!r} is not a check kind's flag; expected one of: {', '.join(CHECK_FLAGS)}")
    return frozenset(kind for kind, model in CHECK_MODELS.items() if getattr(model, flag))


def has_judge_checks(rubric: Any) -> bool:
    """Whether a rubric (a parsed Rubric or a rubric document) has a judged check at any depth."""
    checks = (
        rubric.checks if isinstance(rubric, Rubric) else rubric.get("checks") if isinstance(rubric, Mapping) else None
    )
    return any(getattr(check_model(row.check), "judged", False) for row in flat_checks(checks))
