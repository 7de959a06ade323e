"""Abuse suite for the grader: hostile rubric patterns (authors) and hostile workspace files
(agents) are bounded host-side, and going over a bound fails the check with the reason (the input
is the graded work's: spending the grader's budget on it earns nothing)."""

from __future__ import annotations

import io
import re
import socket
import struct
import threading
import zipfile
import zlib

import openpyxl
import pytest

from grading.engine import grade, parse_rubric
from grading.engine.limits import GradeLimits

CATASTROPHIC = r"(a+)+$"
EVIL_TEXT = "a" * 5000 + "!"


def one(check: dict, *, answer: str = "", **kwargs):
    check = {"id": "c", "points": 1, **check}
    result = grade(parse_rubric({"schema": "gymwright.rubric/v1", "checks": [check]}), answer=answer, **kwargs)
    return result


@pytest.mark.parametrize(
    "check, where",
    [
        ({"kind": "regex", "pattern": CATASTROPHIC}, {"answer": EVIL_TEXT}),
        ({"kind": "regex", "pattern": CATASTROPHIC, "min_count": 2}, {"answer": EVIL_TEXT}),
        ({"kind": "regex", "pattern": CATASTROPHIC, "must_match": False}, {"answer": EVIL_TEXT}),
        ({"kind": "number", "extract": r"((?:a+)+)$"}, {"answer": EVIL_TEXT}),
        ({"kind": "file_content", "path": "out.txt", "regex": CATASTROPHIC}, {"file": EVIL_TEXT}),
        ({"kind": "regex", "pattern": CATASTROPHIC, "target": "file:out.txt"}, {"file": EVIL_TEXT}),
    ],
)
def test_a_catastrophic_pattern_fails_with_the_reason_within_the_budget(check, where, tmp_path):
    if check["kind"] == "number":
        check = {**check, "expected": 1}
    kwargs = {"answer": where.get("answer", ""), "limits": GradeLimits(check_cpu_s=0.5)}
    if "file" in where:
        (tmp_path / "out.txt").write_text(where["file"])
        kwargs["workspace"] = tmp_path
    result = one(check, **kwargs)  # unbounded, this search outlives the universe
    checked = result.checks[0]
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "CPU-time budget" in checked.explanation and "GYMWRIGHT_CHECK_CPU_S" in checked.explanation
    assert result.complete is True and result.reward == 0.0


def test_the_pattern_budget_also_holds_off_the_main_thread():
    # No SIGPROF timer outside the main thread (a threaded web server): the engine's timeout still stops it.
    results = []
    worker = threading.Thread(
        target=lambda: results.append(
            one({"kind": "regex", "pattern": CATASTROPHIC}, answer=EVIL_TEXT, limits=GradeLimits(check_cpu_s=0.5))
        )
    )
    worker.start()
    worker.join(120)
    assert not worker.is_alive()
    assert results[0].checks[0].status == "scored" and results[0].checks[0].score == 0.0
    assert "ran longer than its 0.5 s time budget" in results[0].checks[0].explanation


def test_a_check_that_burns_cpu_in_a_parser_is_stopped_by_the_cpu_budget(tmp_path):
    # A 60 kB first line of `,"` makes csv.Sniffer quadratic; with an unbounded sniff sample the
    # CPU budget is what stops it, and says so.
    (tmp_path / "t.csv").write_text(',"' * 30_000 + "\nRevenue,1\n")
    limits = GradeLimits(check_cpu_s=0.5, csv_sniff_bytes=10**9)
    result = one(
        {"kind": "table_cell", "path": "t.csv", "row": "Revenue", "column": 1, "expected": 1},
        workspace=tmp_path,
        limits=limits,
    )
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "CPU-time budget" in result.checks[0].explanation


def test_the_cpu_budget_fires_again_when_its_first_signal_is_swallowed():
    """Seen in CI: the budget's SIGPROF landed in a weakref finalizer, Python swallowed the exception
    ("Exception ignored in ..."), and the one-shot timer let a CPU-burning check run on to a score."""
    import time

    from grading.engine.limits import BudgetExceeded, cpu_budget

    swallowed = []
    started = time.process_time()
    with pytest.raises(BudgetExceeded):
        with cpu_budget(0.2):
            while time.process_time() - started < 20:  # without the repeat, this loop would end after 20 s
                try:
                    sum(range(10_000))
                except BudgetExceeded:
                    if swallowed:
                        raise
                    swallowed.append("ignored")  # as Python does for an exception raised in a finalizer
    assert swallowed == ["ignored"]


def test_a_crafted_60kb_csv_line_is_sniffed_from_a_bounded_sample(tmp_path):
    header = "label," + ',"' * 30_000  # 60 kB: minutes of csv.Sniffer on the whole line
    (tmp_path / "t.csv").write_text(header + "\nRevenue,7\n")
    result = one(
        {"kind": "table_cell", "path": "t.csv", "row": "Revenue", "column": 1, "expected": 7},
        workspace=tmp_path,
        limits=GradeLimits(check_cpu_s=20),
    )
    checked = result.checks[0]
    # Decided (whatever the verdict on this garbage header), not stopped by the CPU budget: the whole
    # line would take csv.Sniffer minutes of CPU (test_a_check_that_burns_cpu_in_a_parser_...).
    assert "CPU-time budget" not in checked.explanation, checked.explanation


def test_the_check_can_name_its_csv_delimiter(tmp_path):
    (tmp_path / "t.csv").write_text("label;Q3\nRevenue;1234,5\n")
    check = {
        "kind": "table_cell",
        "path": "t.csv",
        "row": "Revenue",
        "column": "Q3",
        "expected": "1234,5",
        "delimiter": ";",
    }
    result = one(check, workspace=tmp_path)
    assert result.checks[0].status == "scored" and result.checks[0].score == 1.0, result.checks[0].explanation
    hostile = ',"' * 30_000 + "\nRevenue;7\n"
    (tmp_path / "t.csv").write_text("label;Q3\n" + hostile)
    result = one({**check, "expected": 1}, workspace=tmp_path, limits=GradeLimits(check_cpu_s=20))
    assert result.checks[0].status == "scored", result.checks[0].explanation


@pytest.mark.parametrize("delimiter", ["", ";;", "\n", '"'])
def test_a_bad_delimiter_is_refused_at_its_pointer(delimiter):
    from grading.engine import validate_rubric

    issues = validate_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {
                    "id": "c",
                    "kind": "table_cell",
                    "points": 1,
                    "path": "t.csv",
                    "row": 0,
                    "column": 0,
                    "expected": 1,
                    "delimiter": delimiter,
                }
            ],
        }
    )
    assert [issue.pointer for issue in issues] == ["/checks/0/delimiter"], issues


def _zip(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip archive of already-deflated members: (name, deflate stream, crc32, inflated size)."""
    out = io.BytesIO()
    central = []
    for name, stream, crc, size in members:
        offset = out.tell()
        encoded = name.encode()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(stream), size, len(encoded), 0))
        out.write(encoded + stream)
        central.append(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                8,
                0,
                0x21,
                crc,
                len(stream),
                size,
                len(encoded),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + encoded
        )
    directory = b"".join(central)
    start = out.tell()
    out.write(directory)
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(directory), start, 0))
    return out.getvalue()


def _bomb(inflated_mb: int) -> bytes:
    """A real workbook whose sheet XML is padded with `inflated_mb` MB of spaces (deflated ~1000:1).

    The padding is one fully flushed deflate block of 1 MB repeated: building a bomb of
    gigabytes costs a CRC over the bytes, not compressing them.
    """
    book = openpyxl.Workbook()
    book.active.title = "Summary"
    book.active.append(["label", "Q3"])
    book.active.append(["Revenue", 5])
    plain = io.BytesIO()
    book.save(plain)
    members = []
    with zipfile.ZipFile(io.BytesIO(plain.getvalue())) as source:
        for name in source.namelist():
            data = source.read(name)
            if name != "xl/worksheets/sheet1.xml":
                deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
                members.append((name, deflate.compress(data) + deflate.flush(), zlib.crc32(data), len(data)))
                continue
            head, tail = data[: -len(b"</worksheet>")], b"</worksheet>"
            chunk = b" " * (1024 * 1024)
            deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
            stream_head = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
            block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
            stream = stream_head + block * inflated_mb + deflate.compress(tail) + deflate.flush()
            crc = zlib.crc32(head)
            for _ in range(inflated_mb):
                crc = zlib.crc32(chunk, crc)
            crc = zlib.crc32(tail, crc)
            members.append((name, stream, crc, len(head) + len(chunk) * inflated_mb + len(tail)))
    return _zip(members)


def test_an_xlsx_bomb_is_refused_before_it_is_inflated(tmp_path):
    data = _bomb(4000)  # 4 GB of XML
    assert len(data) < 5 * 1024 * 1024
    (tmp_path / "model.xlsx").write_bytes(data)
    result = one(
        {"kind": "table_cell", "path": "model.xlsx", "row": "Revenue", "column": "Q3", "expected": 5},
        workspace=tmp_path,
    )
    checked = result.checks[0]
    assert checked.status == "scored" and checked.score == 0.0
    assert "GYMWRIGHT_XLSX_MAX_MB" in checked.explanation and "refused unread" in checked.explanation


def test_an_xlsx_over_the_ratio_is_refused_and_a_normal_one_is_read(tmp_path):
    (tmp_path / "model.xlsx").write_bytes(_bomb(8))  # 8 MB inflated, ~1000:1
    check = {"kind": "table_cell", "path": "model.xlsx", "row": "Revenue", "column": "Q3", "expected": 5}
    result = one(check, workspace=tmp_path)
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "GYMWRIGHT_XLSX_MAX_RATIO" in result.checks[0].explanation
    result = one(check, workspace=tmp_path, limits=GradeLimits(xlsx_max_ratio=10_000))
    assert result.checks[0].status == "scored" and result.checks[0].score == 1.0, result.checks[0].explanation


def test_the_limits_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("GYMWRIGHT_CHECK_CPU_S", "0.25")
    monkeypatch.setenv("GYMWRIGHT_XLSX_MAX_MB", "3")
    limits = GradeLimits.from_env()
    assert limits.check_cpu_s == 0.25 and limits.xlsx_max_bytes == 3 * 1024 * 1024
    result = one({"kind": "regex", "pattern": CATASTROPHIC}, answer=EVIL_TEXT)
    assert "0.25 s CPU-time budget" in result.checks[0].explanation
    monkeypatch.setenv("GYMWRIGHT_CHECK_CPU_S", "-1")
    with pytest.raises(ValueError, match="GYMWRIGHT_CHECK_CPU_S"):
        GradeLimits.from_env()


def test_an_xlsx_with_an_xml_entity_bomb_is_not_expanded(tmp_path):
    book = openpyxl.Workbook()
    book.active.append(["label", "Q3"])
    book.active.append(["Revenue", "placeholder"])
    plain = io.BytesIO()
    book.save(plain)
    laughs = (
        '<!DOCTYPE worksheet [<!ENTITY l0 "lol">'
        + "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 6))
        + "]>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(plain.getvalue())) as source, zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "xl/worksheets/sheet1.xml":
                assert data.startswith(b"<worksheet") and b"placeholder" in data
                data = laughs.encode() + data.replace(b"placeholder", b"&l5;")
            target.writestr(name, data)
    (tmp_path / "model.xlsx").write_bytes(out.getvalue())
    result = one(
        {"kind": "table_cell", "path": "model.xlsx", "row": "Revenue", "column": "Q3", "expected": "lol" * 100_000},
        workspace=tmp_path,
    )
    checked = result.checks[0]
    # Expanded, the cell would be 'lol' × 100,000 and the check met; defused, the file is refused.
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "refused unread (an entity bomb?)" in checked.explanation, checked.explanation


SIMILAR = "The quick brown fox jumps over the lazy dog. " * 2000  # 90 kB: fuzzy costs ∝ both lengths


@pytest.mark.parametrize("metric", ["fuzzy", "rouge_l", "bleu"])
@pytest.mark.parametrize("points", [1, -1])
def test_a_text_too_long_to_compare_fails_its_similarity_check_in_words(metric, points):
    """Unbounded, a 1 MB answer against this reference held a thread (no CPU timer there) for seconds."""
    check = {"id": "c", "kind": "text_similarity", "metric": metric, "reference": SIMILAR, "threshold": 0.5}
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [{**check, "points": points}, {"id": "x", "kind": "string_match", "points": 1, "expected": "x"}],
        }
    )
    seen = {}
    worker = threading.Thread(target=lambda: seen.update(result=grade(rubric, answer=SIMILAR + "x" * 1_000_000)))
    worker.start()
    worker.join()
    checked = seen["result"].checks[0]
    assert checked.status == "scored" and checked.score == (0.0 if points > 0 else 1.0), checked.explanation
    assert "1,090,000 characters long, over the limit of 100,000" in checked.explanation
    assert "GYMWRIGHT_SIMILARITY_MAX_CHARS" in checked.explanation
    # Under the limit the text is compared.
    checked = grade(rubric, answer=SIMILAR).checks[0]
    assert checked.score == 1.0 and "similarity 1.000" in checked.explanation  # met (a penalty: charged)


def test_a_reference_too_long_to_compare_is_refused_at_its_pointer():
    from grading.engine import validate_rubric

    check = {"id": "c", "kind": "text_similarity", "points": 1, "reference": "x" * 100_001, "threshold": 0.5}
    issues = validate_rubric({"schema": "gymwright.rubric/v1", "checks": [check]})
    assert [issue.pointer for issue in issues] == ["/checks/0/reference"], issues
    assert "100000" in issues[0].message, issues


# -- table files: cell and tag counts bounded before (or as) they are parsed ------------------------------

CELL = {"kind": "table_cell", "path": "model.xlsx", "row": "Revenue", "column": "Q3", "expected": 5}


def _workbook(edit) -> bytes:
    """A real two-row workbook (label/Q3, Revenue/5) with its parts changed by `edit(parts)`."""
    book = openpyxl.Workbook()
    book.active.title = "Summary"
    book.active.append(["label", "Q3"])
    book.active.append(["Revenue", 5])
    plain = io.BytesIO()
    book.save(plain)
    with zipfile.ZipFile(io.BytesIO(plain.getvalue())) as source:
        parts = {name: source.read(name) for name in source.namelist()}
    edit(parts)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in parts.items():
            target.writestr(name, data)
    return out.getvalue()


def _grade_file(tmp_path, name: str, data: bytes, check: dict, **kwargs):
    (tmp_path / name).write_bytes(data)
    return one({**check, "path": name}, workspace=tmp_path, **kwargs).checks[0]


def test_a_normal_workbook_is_read(tmp_path):
    checked = _grade_file(tmp_path, "model.xlsx", _workbook(lambda parts: None), CELL)
    assert checked.status == "scored" and checked.score == 1.0, checked.explanation


def test_a_dimension_that_claims_a_million_rows_and_all_columns_fails_in_words(tmp_path):
    def edit(parts):
        sheet = parts["xl/worksheets/sheet1.xml"]
        sheet = re.sub(rb'<dimension ref="[^"]*"\s*/>', b'<dimension ref="A1:XFD1048576"/>', sheet)
        # One cell at the sheet's far end: openpyxl yields every row before it, padded to 16,384 columns.
        far = b'<row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>x</t></is></c></row>'
        parts["xl/worksheets/sheet1.xml"] = sheet.replace(b"</sheetData>", far + b"</sheetData>")

    checked = _grade_file(tmp_path, "model.xlsx", _workbook(edit), CELL)
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "more than 1,000,000 cells in 'Summary'" in checked.explanation, checked.explanation
    assert "GYMWRIGHT_TABLE_MAX_CELLS" in checked.explanation and "CPU-time budget" not in checked.explanation


def test_a_shared_strings_bomb_is_refused_unparsed(tmp_path):
    # 600,000 distinct strings: 14 MB that deflate only ~4:1 (under the ratio bound), seconds of openpyxl's CPU.
    strings = b"".join(b"<si><t>%x</t></si>" % (index * 2654435761 % 2**40) for index in range(600_000))

    def edit(parts):
        parts["xl/sharedStrings.xml"] = (
            b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">' + strings + b"</sst>"
        )
        parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
            b"</Types>",
            b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
            b'officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
        )

    checked = _grade_file(tmp_path, "model.xlsx", _workbook(edit), CELL)
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "more than 2,000,000 XML tags" in checked.explanation and "xl/sharedStrings.xml" in checked.explanation
    assert "GYMWRIGHT_XLSX_MAX_TAGS" in checked.explanation and "refused unparsed" in checked.explanation
    # Whatever the workbook names the part: every member's tags count.
    renamed = _workbook(lambda parts: parts.update({"xl/notes.bin": strings}))
    checked = _grade_file(tmp_path, "model.xlsx", renamed, CELL)
    assert checked.score == 0.0 and "'xl/notes.bin'" in checked.explanation, checked.explanation


def test_a_member_that_inflates_past_its_declared_size_is_refused(tmp_path):
    """The directory says 1 kB; the stream holds 64 MB. zipfile stops at the declared size (and the CRC fails)."""
    members = []
    with zipfile.ZipFile(io.BytesIO(_workbook(lambda parts: None))) as source:
        for name in source.namelist():
            data = source.read(name)
            if name == "xl/worksheets/sheet1.xml":
                data = data.replace(b"</worksheet>", b" " * (64 * 1024 * 1024) + b"</worksheet>")
                size = 1024
            else:
                size = len(data)
            deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
            members.append((name, deflate.compress(data) + deflate.flush(), zlib.crc32(data), size))
    checked = _grade_file(tmp_path, "model.xlsx", _zip(members), CELL)
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "is not a readable XLSX file" in checked.explanation, checked.explanation


def test_an_external_link_is_neither_followed_nor_parsed(tmp_path):
    """A formula linked to another workbook (a URL on this host, a host file): the cached value is read, the
    link part is never parsed (this one declares a DTD, which would be refused) and nothing is fetched."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]

    def edit(parts):
        parts["xl/worksheets/sheet1.xml"] = parts["xl/worksheets/sheet1.xml"].replace(
            b'<c r="B2" t="n"><v>5</v></c>', b'<c r="B2"><f>[1]Sheet1!A1</f><v>5</v></c>'
        )
        assert b"[1]Sheet1!A1" in parts["xl/worksheets/sheet1.xml"]
        parts["xl/externalLinks/externalLink1.xml"] = (
            b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b'<externalLink xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
            b'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            b'<externalBook r:id="rId1"><sheetNames><sheetName val="&e;"/></sheetNames></externalBook>'
            b"</externalLink>"
        )
        parts["xl/externalLinks/_rels/externalLink1.xml.rels"] = (
            b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            b'externalLinkPath" Target="http://127.0.0.1:%d/book.xlsx" TargetMode="External"/>'
            b"</Relationships>" % port
        )
        parts["xl/_rels/workbook.xml.rels"] = parts["xl/_rels/workbook.xml.rels"].replace(
            b"</Relationships>",
            b'<Relationship Id="rIdX" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            b'externalLink" Target="externalLinks/externalLink1.xml"/></Relationships>',
        )
        parts["xl/workbook.xml"] = parts["xl/workbook.xml"].replace(
            b"</workbook>",
            b'<externalReferences><externalReference xmlns:r="http://schemas.openxmlformats.org/officeDocument/'
            b'2006/relationships" r:id="rIdX"/></externalReferences></workbook>',
        )
        parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
            b"</Types>",
            b'<Override PartName="/xl/externalLinks/externalLink1.xml" ContentType="application/'
            b'vnd.openxmlformats-officedocument.spreadsheetml.externalLink+xml"/></Types>',
        )

    data = _workbook(edit)
    from defusedxml import DefusedXmlException

    with pytest.raises(Exception) as parsed:  # what parsing the link part does
        openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    assert isinstance(parsed.value.__cause__ or parsed.value.__context__, DefusedXmlException), parsed.value
    try:
        checked = _grade_file(tmp_path, "model.xlsx", data, CELL)
        assert checked.status == "scored" and checked.score == 1.0, checked.explanation
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody called
    finally:
        listener.close()


def test_csv_nuls_are_read_as_text_and_decide_nothing(tmp_path):
    data = b"label,Q3\nRev\x00enue,5\nCosts,\x00\x00\x00\n\x00,7\n"
    check = {**CELL, "row": "Revenue"}
    checked = _grade_file(tmp_path, "t.csv", data, check)
    assert checked.status == "scored" and checked.score == 0.0 and "no row labelled" in checked.explanation
    checked = _grade_file(tmp_path, "t.csv", data, {**check, "row": "Costs", "expected": 0})
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation


@pytest.mark.parametrize("delimiter", [None, ","])
def test_a_csv_line_of_a_million_columns_is_refused_unread(tmp_path, delimiter):
    """Read by pandas, this line cost minutes and a gigabyte (BENCHMARKS.md, "Hostile table files")."""
    data = b"label," + b"x," * 1_000_000 + b"\nRevenue,5\n"
    check = {**CELL} | ({"delimiter": delimiter} if delimiter else {})
    checked = _grade_file(tmp_path, "t.csv", data, check)
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "more than 1,000,000 cells" in checked.explanation and "GYMWRIGHT_TABLE_MAX_CELLS" in checked.explanation


def test_a_csv_of_too_many_rows_is_refused_unread_and_its_limit_is_read_from_the_environment(tmp_path, monkeypatch):
    data = b"label,Q3\n" + b"Revenue,5\n" * 600_000
    checked = _grade_file(tmp_path, "t.csv", data, CELL)
    assert checked.status == "scored" and checked.score == 0.0 and "more than 1,000,000 cells" in checked.explanation
    monkeypatch.setenv("GYMWRIGHT_TABLE_MAX_CELLS", "2000000")
    checked = _grade_file(tmp_path, "t.csv", data, CELL, limits=GradeLimits.from_env())
    assert checked.score == 1.0, checked.explanation


def test_a_50_mb_csv_line_is_refused_unread(tmp_path):
    data = b"label,Q3\nRevenue,5\n" + b"a" * (50 * 1024 * 1024 - 100) + b"\n"
    checked = _grade_file(tmp_path, "t.csv", data, CELL)
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation
    assert "line 3: field larger than field limit (131072)" in checked.explanation, checked.explanation
    # A long line of short fields is read.
    wide = b"label,Q3," + b",".join(b"%d" % index for index in range(50_000)) + b"\nRevenue,5\n"
    checked = _grade_file(tmp_path, "t.csv", wide, CELL)
    assert checked.status == "scored" and checked.score == 1.0, checked.explanation
