"""Checks that read workspace files: file_exists, file_content and table_cell (CSV, TSV and XLSX,
bounded before they are parsed)."""

from __future__ import annotations

import fnmatch
import io
import math
from typing import Any

from ..limits import GradeLimits
from ..models import (
    FileContentCheck,
    FileExistsCheck,
    TableCellCheck,
)
from ..text import normalise_unicode
from .context import (
    Failed,
    GradingContext,
    Missing,
    Outcome,
    Unscored,
    _binary,
    _num,
    _short,
    failed_outcome,
)
from .text_kinds import _is_number, _search, _texts_read, odd_file_outcome


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
    # Where finding the text lowers the reward (a penalty, or not_contains), lookalike letters are read as Latin
    # too, so a confusable spelling does not dodge it.
    odd = odd_file_outcome(check, ctx, f"file:{check.path}", absence_wanted=check.not_contains is not None)
    if odd is not None:
        return odd
    texts = _texts_read(check, ctx, text, absence_wanted=check.not_contains is not None)
    if check.regex is not None:
        found, note = _search(check.compiled(), texts)
        return _binary(
            found is not None,
            f"matched {_short(found.group(0))}{note}" if found else f"{check.path!r} does not match the pattern",
        )
    if check.not_contains is not None:
        for candidate, text_note in texts:
            if check.unicode_value("not_contains", lookalikes=bool(text_note)) in candidate:
                return _binary(False, f"{check.path!r} contains {_short(check.not_contains)}{text_note}")
        return _binary(True, f"{check.path!r} does not contain {_short(check.not_contains)}")
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
