"""A worked example and the edge cases of each check kind: one source for the editor's in-place
help and the /grading/kinds/ reference page. tests/grading/engine/test_engine_kind_examples.py grades every
example with `grade()` and checks it comes out as `result` says.

An example: the check (as JSON in a rubric), the answer (and workspace files) it reads, and the
result — scored with a score, or unscored because a dry run has no sandbox or judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KindExample:
    kind: str
    check: dict[str, Any]
    answer: str
    result: str  # in words, shown to the author
    status: str  # "scored" or "unscored", as grade() reports it with no sandbox and no judge
    score: float | None = None
    files: dict[str, str] = field(default_factory=dict)
    edge_cases: tuple[str, ...] = ()


EXAMPLES: dict[str, KindExample] = {
    example.kind: example
    for example in [
        KindExample(
            kind="string_match",
            check={"id": "names_capital", "kind": "string_match", "points": 1, "expected": "Canberra"},
            answer="The capital of Australia is canberra.",
            result="met (score 1): mode defaults to 'contains', and the comparison ignores case",
            status="scored",
            score=1.0,
            edge_cases=(
                "Case is ignored and runs of whitespace count as one space unless case_sensitive / "
                "normalize_whitespace say otherwise.",
                "'contains' also matches inside a longer word: expected 'cat' is found in 'concatenate'.",
                "An empty expected value would always match, so the engine refuses it.",
            ),
        ),
        KindExample(
            kind="regex",
            check={"id": "cites_two_sources", "kind": "regex", "points": 1, "pattern": r"\[\d+\]", "min_count": 2},
            answer="Ibuprofen is an NSAID [1] taken with food [2].",
            result="met (score 1): the pattern matches twice, and min_count is 2",
            status="scored",
            score=1.0,
            edge_cases=(
                "The pattern is searched anywhere in the text; anchor it with ^ and $ (and the 'm' flag "
                "for lines) to match a whole line.",
                "must_match false turns it around: met when the pattern never matches.",
                "Patterns run with a time budget; one that would backtrack for too long is unscored, not failed.",
            ),
        ),
        KindExample(
            kind="number",
            check={"id": "founded", "kind": "number", "points": 1, "expected": 1913},
            answer="Canberra (population 456692) was founded in 1913.",
            result="not met (score 0): without extract the check reads the first number, 456692",
            status="scored",
            score=0.0,
            edge_cases=(
                "Without extract, the first number in the text is read: give extract, a pattern with one "
                'group around the number, e.g. "founded in (\\d+)".',
                "tolerance is absolute (± 0.5), rel_tolerance relative (0.01 = 1 %); either may pass.",
                "Thousands separators and units are not read: '1,913' reads 1.",
            ),
        ),
        KindExample(
            kind="json_field",
            check={
                "id": "total_ok",
                "kind": "json_field",
                "points": 1,
                "pointer": "/totals/0",
                "op": "ge",
                "expected": 100,
            },
            answer='{"totals": [120, 80]}',
            result="met (score 1): the value at /totals/0 is 120, and 120 ≥ 100",
            status="scored",
            score=1.0,
            edge_cases=(
                "The whole target must parse as JSON: an answer with prose around the JSON fails.",
                "The pointer is RFC 6901: /a/0 is key a, then list item 0; '~1' stands for '/' in a key.",
                "op 'exists' ignores expected; 'in' means the value is one of the expected list.",
            ),
        ),
        KindExample(
            kind="file_exists",
            check={"id": "wrote_report", "kind": "file_exists", "points": 1, "path": "out/**/*.csv"},
            answer="",
            files={"out/q3/summary.csv": "region,revenue\nEU,10\n"},
            result="met (score 1): out/q3/summary.csv matches the glob",
            status="scored",
            score=1.0,
            edge_cases=(
                "path is a glob: * and ? stay inside one folder, ** crosses folders.",
                "Links and other non-regular files do not count as files.",
            ),
        ),
        KindExample(
            kind="file_content",
            check={
                "id": "report_mentions_revenue",
                "kind": "file_content",
                "points": 1,
                "path": "report.md",
                "contains": "revenue",
            },
            answer="",
            files={"report.md": "# Q3\nRevenue went up.\n"},
            result="not met (score 0): 'contains' is case-sensitive here, and the file says 'Revenue'",
            status="scored",
            score=0.0,
            edge_cases=(
                "Give exactly one of contains, regex, equals or sha256.",
                "A missing file is not met (score 0), with the reason in the explanation.",
            ),
        ),
        KindExample(
            kind="table_cell",
            check={
                "id": "eu_revenue",
                "kind": "table_cell",
                "points": 1,
                "path": "summary.csv",
                "row": "EU",
                "column": "revenue",
                "expected": 10.5,
                "tolerance": 0.01,
            },
            answer="",
            files={"summary.csv": "region,revenue\nEU,10.50\nUS,12\n"},
            result="met (score 1): the row labelled EU, column revenue, reads 10.50, within 0.01 of 10.5",
            status="scored",
            score=1.0,
            edge_cases=(
                "The first row is the header: column is a header label or a 0-based index; row is the "
                "label in the first column or a 0-based index of the data rows.",
                "Numbers compare within tolerance; text compares exactly.",
            ),
        ),
        KindExample(
            kind="text_similarity",
            check={
                "id": "close_to_reference",
                "kind": "text_similarity",
                "points": 1,
                "metric": "fuzzy",
                "reference": "Take 200 to 400 mg every 4 to 6 hours.",
                "threshold": 0.8,
            },
            answer="Take 200-400 mg every 4-6 hours.",
            result="met (score 1): the fuzzy similarity is above 0.8",
            status="scored",
            score=1.0,
            edge_cases=(
                "Similarity is computed on lower-cased text; fuzzy, rouge_l and bleu give 0 to 1.",
                "A high similarity does not mean the same meaning: one changed number can still pass.",
            ),
        ),
        KindExample(
            kind="command",
            check={"id": "tests_pass", "kind": "command", "points": 1, "run": "python -m pytest -q tests/"},
            answer="",
            result="unscored in a dry run (no sandbox); in a preview it is met when the command exits 0",
            status="unscored",
            edge_cases=(
                "Runs in the workspace inside the sandbox, with no network, within timeout_s.",
                "expect_exit sets the exit code that counts as met.",
            ),
        ),
        KindExample(
            kind="python",
            check={
                "id": "sums_match",
                "kind": "python",
                "points": 1,
                "code": "def check(ctx):\n    return ctx.answer.strip() == '42'\n",
            },
            answer="42",
            result="unscored in a dry run (no sandbox); in a preview check(ctx) returns True, so it is met",
            status="unscored",
            edge_cases=(
                "Runs inside the sandbox, never on the host.",
                "check(ctx) returns True/False, a score in [0, 1], or (score, explanation).",
            ),
        ),
        KindExample(
            kind="tests",
            check={
                "id": "tests_pass",
                "kind": "tests",
                "points": 1,
                "files": ["tests/test_solution.py"],
                "runner": "unittest",
                "credit": "per_test",
            },
            answer="",
            result="unscored in a dry run (no sandbox); in a preview Gymwright's runner runs the tests, and the score "
            "is the share that passed",
            status="unscored",
            edge_cases=(
                "The test files must be task files with role protected or grader, so the agent cannot "
                "change what runs.",
                "Test ids are read from the files before any code runs: a test that does not report, a run "
                "that exits early or tampers with the runner, fails.",
                "Builtin values compare by exact type: a str subclass that equals everything is not a str.",
            ),
        ),
        KindExample(
            kind="llm_judge",
            check={
                "id": "explains_dose",
                "kind": "llm_judge",
                "points": 2,
                "criterion": "The answer gives an adult dose range and says to take it with food.",
            },
            answer="Adults take 200-400 mg every 4-6 hours, with food.",
            result="unscored with no judge model configured; with one, the judge decides met / not met",
            status="unscored",
            edge_cases=(
                "Write one observable criterion per check; split 'and' criteria into two checks.",
                "With no judge configured the check is unscored: never guessed.",
            ),
        ),
        KindExample(
            kind="group",
            check={
                "id": "core",
                "kind": "group",
                "points": 2,
                "aggregate": "all",
                "checks": [
                    {"id": "says_42", "kind": "string_match", "points": 1, "expected": "42"},
                    {"id": "says_unit", "kind": "string_match", "points": 1, "expected": "meters"},
                ],
            },
            answer="It is 42 feet.",
            result="not met (score 0): aggregate 'all' needs every child, and 'meters' is missing",
            status="scored",
            score=0.0,
            edge_cases=(
                "Children count only through their group: the group's points are what the rubric awards.",
                "A group needs at least one child.",
            ),
        ),
    ]
}


def example_for(kind: str) -> KindExample | None:
    return EXAMPLES.get(kind)


def example_as_dict(example: KindExample) -> dict[str, Any]:
    """The example as JSON for the editor (the check, answer, files, result and edge cases)."""
    return {
        "kind": example.kind,
        "check": example.check,
        "answer": example.answer,
        "files": example.files,
        "result": example.result,
        "edge_cases": list(example.edge_cases),
    }
