"""Abuse suite for HealthBench / RaR rows and a table's points and criteria_tags columns: absurd points,
non-string criteria, deep nesting and oversize rows are refused at their line (or row) and JSON pointer,
in words; the other rows are still imported and nothing is a server error."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from authoring.models import Task
from packs import importer

GOOD_HEALTHBENCH = {
    "prompt": [{"role": "user", "content": "Is it safe to take ibuprofen with a cold?"}],
    "rubrics": [{"criterion": "Mentions stomach irritation.", "points": 3, "tags": ["axis:accuracy"]}],
    "example_tags": [],
    "prompt_id": "good-row",
}


def item(**changes) -> dict:
    return {**GOOD_HEALTHBENCH["rubrics"][0], **changes}


def row(**changes) -> dict:
    return {**GOOD_HEALTHBENCH, "prompt_id": None, **changes}


def nested(depth: int):
    value: object = "deep"
    for _ in range(depth):
        value = {"a": value}
    return value


# (the row's JSON text, the pointer, words of the message)
HOSTILE_HEALTHBENCH = [
    (
        json.dumps(row(rubrics=[item(points=float("nan"))])),
        "/rubrics/0/points",
        "finite",
    ),  # NaN: Python's JSON reads it
    (
        '{"prompt": [{"role": "user", "content": "x"}], "rubrics": [{"criterion": "c", "points": Infinity, "tags": []}]}',
        "/rubrics/0/points",
        "finite",
    ),
    (
        '{"prompt": [{"role": "user", "content": "x"}], "rubrics": [{"criterion": "c", "points": 1e400, "tags": []}]}',
        "/rubrics/0/points",
        "finite",
    ),
    (json.dumps(row(rubrics=[item(points=10**12)])), "/rubrics/0/points", "out of range"),
    (json.dumps(row(rubrics=[item(points=True)])), "/rubrics/0/points", "not a boolean"),
    (json.dumps(row(rubrics=[item(points="5")])), "/rubrics/0/points", "not a string"),
    (json.dumps(row(rubrics=[item(points=0)])), "/rubrics/0/points", "must not be 0"),
    (json.dumps(row(rubrics=[item(criterion=7)])), "/rubrics/0/criterion", "not a number"),
    (json.dumps(row(rubrics=[item(criterion={"text": "c"})])), "/rubrics/0/criterion", "not an object"),
    (json.dumps(row(rubrics=[item(criterion="   ")])), "/rubrics/0/criterion", "empty"),
    (json.dumps(row(rubrics=[item(criterion="x" * 20_001)])), "/rubrics/0/criterion", "longer than 20,000"),
    (json.dumps(row(rubrics=[item(tags=["ok", 3])])), "/rubrics/0/tags/1", "must be a string"),
    (json.dumps(row(rubrics=[item(tags="axis:accuracy")])), "/rubrics/0/tags", "must be a list"),
    (json.dumps(row(rubrics=[item(tags=["t" * 201])])), "/rubrics/0/tags/0", "longer than 200"),
    (json.dumps(row(rubrics=[item()] * 501)), "/rubrics", "more than 500"),
    (json.dumps(row(rubrics=[])), "/rubrics", "at least one criterion"),
    (json.dumps(row(rubrics=["just text"])), "/rubrics/0", "must be an object"),
    (json.dumps(row(prompt="a plain string")), "/prompt", "list of messages"),
    (json.dumps(row(prompt=[{"role": "user", "content": [{"type": "text"}]}])), "/prompt/0/content", "a string"),
    (json.dumps(row(prompt=[{"role": "user"}])), "/prompt/0/content", "not null"),
    (json.dumps(row(prompt=[{"role": "user", "content": "x" * 500_001}])), "/prompt/0/content", "longer than"),
    (json.dumps(row(canary=nested(40))), "/canary", "nested more than 32"),
    (json.dumps(row(rubrics=[item(extra=nested(40))])), "/rubrics/0/extra", "nested more than 32"),
    (json.dumps(row(prompt=[{"role": "user", "content": "a\u0000b"}])), "/prompt/0/content", "NUL"),
    ("[" * 100_000 + "]" * 100_000, None, "invalid JSON"),  # deeper than the decoder: refused at its line
    ("[1, 2]", None, "HealthBench row"),
]


@pytest.fixture
def scratch(settings, tmp_path):
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    return tmp_path


def test_hostile_healthbench_rows_are_refused_at_their_line_and_pointer(author, scratch):
    path = scratch / "hb.jsonl"
    path.write_text("\n".join([json.dumps(GOOD_HEALTHBENCH)] + [text for text, _, _ in HOSTILE_HEALTHBENCH]) + "\n")
    report = importer.tasks_import(path=path, user=author)
    assert report.lines[0].status == "created", report.as_dict()
    for line, (_, pointer, words) in zip(report.lines[1:], HOSTILE_HEALTHBENCH, strict=True):
        assert line.status == "rejected", (line, words)
        if pointer is not None:
            assert line.pointer == pointer, (line, words)
        assert words in line.message, (line.message, words)
    assert list(Task.objects.values_list("slug", flat=True)) == ["good-row"]


HOSTILE_RAR = [
    ({"title": "t", "description": "d", "weight": "Critical"}, "/rubric/0/weight", "neither a number nor a class"),
    ({"title": "t", "description": "d", "weight": -1e9}, "/rubric/0/weight", "out of range"),
    ({"title": "t", "description": "d", "weight": None}, "/rubric/0/weight", "not null"),
    ({"title": "t", "weight": 5}, "/rubric/0/description", "not null"),
    ({"title": ["t"], "description": "d", "weight": 5}, "/rubric/0/title", "not a list"),
]


def test_hostile_rar_rows_are_refused_at_their_line_and_pointer(author, scratch):
    rows = [{"question": "q", "rubric": [{"title": "t", "description": "d", "weight": 5}]}]
    rows += [{"question": f"q{n}", "rubric": [criterion]} for n, (criterion, _, _) in enumerate(HOSTILE_RAR)]
    rows.append({"question": 42, "rubric": [{"description": "d", "weight": 1}]})
    path = scratch / "rar.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = importer.tasks_import(path=path, user=author)
    assert report.lines[0].status == "created", report.as_dict()
    expected = [(p, w) for _, p, w in HOSTILE_RAR] + [("/question", "question must be a string")]
    for line, (pointer, words) in zip(report.lines[1:], expected, strict=True):
        assert (line.status, line.pointer) == ("rejected", pointer), line
        assert words in line.message and line.message.startswith("RaR row: "), line.message


def write_csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_tables_points_and_criteria_tags_columns_become_the_criteria_checks(author, scratch):
    path = write_csv(
        scratch / "rows.csv",
        [
            {
                "id": "dose",
                "prompt": "Adult dose of ibuprofen?",
                "answer": "200-400 mg every 4-6 h",
                "criteria": "States 200-400 mg\nSays every 4-6 hours\nRecommends more than 3200 mg a day",
                "points": "5\n2\n-8",
                "criteria_tags": "axis:accuracy\naxis:completeness, level:example\naxis:safety",
                "tags": "medicine, dosing",
            },
            {"id": "all-two", "prompt": "Name two primes.", "criteria": "Names 2\nNames 3", "points": "2"},
        ],
    )
    report = importer.tasks_import(path=path, user=author)
    assert [line.status for line in report.lines] == ["created", "created"], report.as_dict()
    dose = Task.objects.get(slug="dose").latest_version.spec
    assert [(c["points"], c.get("tags")) for c in dose["rubric"]["checks"]] == [
        (5, ["axis:accuracy"]),
        (2, ["axis:completeness", "level:example"]),
        (-8, ["axis:safety"]),
    ]
    assert sorted(dose["tags"]) == ["dosing", "medicine"]  # the task's own tags, as before
    two = Task.objects.get(slug="all-two").latest_version.spec
    assert [c["points"] for c in two["rubric"]["checks"]] == [2, 2]


HOSTILE_CELLS = [
    ({"points": "abc"}, "/points", "points value 1: 'abc' is not a number"),
    ({"points": "nan"}, "/points", "finite"),
    ({"points": "inf"}, "/points", "finite"),
    ({"points": "-Infinity"}, "/points", "finite"),
    ({"points": "1e400"}, "/points", "finite"),
    ({"points": "1e12"}, "/points", "out of range"),
    ({"points": "0"}, "/points", "must not be 0"),
    ({"points": "1\n2\n3"}, "/points", "3 values for 2 criteria"),
    ({"points": "9" * 41}, "/points", "longer than 40"),
    ({"criteria_tags": "a\nb\nc"}, "/criteria_tags", "3 values for 2 criteria"),
    ({"criteria_tags": "t" * 201}, "/criteria_tags", "at most 50 tags of at most 200"),
    ({"criteria_tags": ",".join(f"t{n}" for n in range(51))}, "/criteria_tags", "at most 50 tags"),
]


def test_bad_points_and_criteria_tags_cells_are_refused_at_their_row_and_column(author, scratch):
    base = {"prompt": "p", "criteria": "one\ntwo", "points": "", "criteria_tags": ""}
    rows = [{**base, "id": "fine"}] + [
        {**base, "id": f"bad-{n}", **cells} for n, (cells, _, _) in enumerate(HOSTILE_CELLS)
    ]
    rows.append(
        {
            "id": "with-rubric",
            "prompt": "p",
            "points": "3",
            "criteria_tags": "",
            "criteria": "",
            "rubric": json.dumps(
                {"schema": "gymwright.rubric/v1", "checks": [{"id": "a", "kind": "regex", "points": 1, "pattern": "x"}]}
            ),
        }
    )
    report = importer.tasks_import(path=write_csv(scratch / "bad.csv", rows), user=author)
    assert report.lines[0].status == "created", report.as_dict()
    expected = [(p, w) for _, p, w in HOSTILE_CELLS] + [("/points", "a rubric (JSON) gives its checks' own points")]
    for line, (pointer, words) in zip(report.lines[1:], expected, strict=True):
        assert (line.where, line.status, line.pointer) == (line.where, "rejected", pointer), line
        assert words in line.message, (line.message, words)
    assert report.lines[1].where == "row 2"


def test_a_jsonl_rows_points_may_be_a_list_and_a_number_is_checked_as_in_a_csv(author, scratch):
    path = scratch / "rows.jsonl"
    rows = [
        {
            "id": "listed",
            "prompt": "p",
            "criteria": ["a", "b"],
            "points": [3, -1],
            "criteria_tags": [["x"], ["y", "z"]],
        },
        {"id": "bool", "prompt": "p", "criteria": ["a"], "points": True},
        {"id": "nested", "prompt": "p", "criteria": ["a"], "points": [[1]]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = importer.tasks_import(path=path, user=author)
    assert [line.status for line in report.lines] == ["created", "rejected", "rejected"], report.as_dict()
    listed = Task.objects.get(slug="listed").latest_version.spec["rubric"]["checks"]
    assert [(c["points"], c["tags"]) for c in listed] == [(3, ["x"]), (-1, ["y", "z"])]
    assert "not a boolean" in report.lines[1].message and report.lines[2].pointer == "/points"


def test_a_reference_answer_copied_into_many_judge_checks_is_refused_past_its_bound(author, scratch):
    """A row's reference answer goes into each of its judge checks: a 400,000-character answer over 500 criteria made
    one 426 kB RaR row a 200 MB task. Past REFERENCE_COPIES_MAX_CHARS in all, each shape is refused at its
    answer's pointer, and the same row with a short answer imports."""
    from packs.importer.rubric_formats import REFERENCE_COPIES_MAX_CHARS

    long = "r" * 400_000
    many = 500
    assert len(long) * many > REFERENCE_COPIES_MAX_CHARS >= len(long) * 10
    criteria = [{"title": f"t{n}", "description": f"criterion {n}", "weight": 1} for n in range(many)]
    rar = scratch / "rar.jsonl"
    rar.write_text(
        json.dumps({"question": "q", "reference_answer": long, "rubric": criteria})
        + "\n"
        + json.dumps({"question": "q2", "reference_answer": "short", "rubric": criteria})
        + "\n"
    )
    judged = {"checks": [{"id": f"j{n}", "kind": "llm_judge", "points": 1, "criterion": f"c{n}"} for n in range(many)]}
    rows = scratch / "rows.jsonl"
    rows.write_text(
        json.dumps({"id": "rubric-row", "prompt": "p", "answer": long, "rubric": json.dumps(judged)})
        + "\n"
        + json.dumps({"id": "criteria-row", "prompt": "p", "answer": long, "criteria": [f"c{n}" for n in range(many)]})
        + "\n"
    )
    for path, pointer in ((rar, "/reference_answer"), (rows, "/answer")):
        report = importer.tasks_import(path=path, user=author)
        refused = [line for line in report.lines if line.status == "rejected"]
        assert refused and all(line.pointer == pointer for line in refused), report.as_dict()
        assert all("would be copied into each of 500 judge checks" in line.message for line in refused)
    statuses = [line.status for line in importer.tasks_import(path=rar, user=author).lines]
    assert statuses == ["rejected", "unchanged"]  # the short answer's row imported the first time
    assert len(refused) == 2
