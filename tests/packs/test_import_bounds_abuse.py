"""Abuse: a row's words past the task format's bounds (a title over 200 characters, a tag over 64, more than 50
tags, a prompt over 500,000 characters) are refused at their pointer, row by row; the import crashed on a long tag
(PostgreSQL: value too long for character varying(64)), which on the web upload was a 500."""

from __future__ import annotations

import json

import pytest

from authoring.models import Task
from grading.engine.models import MAX_TAGS, PROMPT_MAX_CHARS, TAG_MAX_CHARS, TITLE_MAX_CHARS
from packs import importer

pytestmark = pytest.mark.django_db


def test_words_past_the_formats_bounds_are_refused_row_by_row(author, tmp_path):
    rows = [
        {"prompt": "one", "answer": "a", "criteria": "c", "tags": "x" * (TAG_MAX_CHARS + 1)},
        {"prompt": "two", "answer": "a", "criteria": "c", "title": "t" * (TITLE_MAX_CHARS + 1)},
        {"prompt": "p" * (PROMPT_MAX_CHARS + 1), "answer": "a", "criteria": "c"},
        {"prompt": "four", "answer": "a", "criteria": "c", "tags": ",".join(f"t{i}" for i in range(MAX_TAGS + 1))},
        {"prompt": "five", "answer": "a", "criteria": "c", "tags": "fine"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    report = importer.tasks_import(path=path, user=author)
    assert (report.imported, report.rejected) == (1, 4)
    refused = {line.where: line for line in report.lines if line.status == "rejected"}
    pointers = sorted((where, line.pointer) for where, line in refused.items())
    assert pointers == [("line 1", "/tags/0"), ("line 2", "/title"), ("line 3", "/prompt"), ("line 4", "/tags")], [
        line.text() for line in report.lines
    ]


def test_a_csv_header_line_of_megabytes_is_read_in_a_bounded_sample(author, tmp_path):
    """The delimiter is found from the first CSV_HEADER_MAX_BYTES of the file with the csv module's reader (linear;
    csv.Sniffer is quadratic on such a line), and a header row that does not end there is refused before pandas
    reads it: pandas renames repeated column names in quadratic time, and this header's 600,000 equal names ran
    for over five minutes. A header that ends in time but has thousands of columns is refused too."""
    from packs.importer.sources import CSV_HEADER_MAX_BYTES, TABLE_MAX_COLUMNS

    path = tmp_path / "hostile.csv"
    path.write_bytes((b',"a;b\t|' * (3 * CSV_HEADER_MAX_BYTES)) + b"\nx\n")
    with pytest.raises(importer.ImportFailed) as refused:
        importer.tasks_import(path=path, user=author)
    assert "header row is longer than 64 KB" in refused.value.message and len(refused.value.message) < 2_000
    many = TABLE_MAX_COLUMNS * 20
    path.write_bytes(b"prompt," + b"a," * many + b"a\nhi," + b"x," * many + b"x\n")
    with pytest.raises(importer.ImportFailed) as refused:
        importer.tasks_import(path=path, user=author)
    assert f"has {many + 2} columns" in refused.value.message
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "row, said",
    [
        (b"hi," + b"x," * 1_000_000 + b"x\n", "Expected 3 fields in line 3, saw 1000002"),  # pandas never ended
        (b"Say hi,Greets,hi,extra\n", "Expected 3 fields in line 3, saw 4"),  # was read shifted: prompt "Greets"
    ],
)
def test_a_csv_row_wider_than_its_header_is_refused_in_words(author, tmp_path, row, said):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"prompt,criteria,answer\nSay hello,Greets,hello\n" + row)
    with pytest.raises(importer.ImportFailed) as refused:
        importer.tasks_import(path=path, user=author)
    message = refused.value.message
    assert "more fields than the 3 columns of its header row" in message and said in message, message
    assert "a comma outside quotes?" in message and "nothing was imported" in message and len(message) < 1_000
    assert not Task.objects.exists()


def test_csv_nuls_and_a_50_mb_cell_are_refused_at_their_row(author, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(
        b"prompt,criteria\nSay hello,Greets\nSay\x00 hi,Greets\nSay yo,\x00\n"
        + b'"'
        + b"p" * (50 * 1024 * 1024)
        + b'",Greets\n'
    )
    report = importer.tasks_import(path=path, user=author)
    assert (report.imported, report.rejected) == (1, 3), [line.text() for line in report.lines]
    refused = {line.where: line for line in report.lines if line.status == "rejected"}
    assert {where: line.pointer for where, line in refused.items()} == {
        "row 2": "/prompt",
        "row 3": "/criteria",
        "row 4": "/prompt",
    }, [line.text() for line in report.lines]
    assert "NUL" in refused["row 2"].message and "NUL" in refused["row 3"].message
