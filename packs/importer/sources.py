"""Sources of tasks, each read into a stream of candidates and rejections: a pack's tasks.jsonl, task documents
(the API), a table of simple rows (CSV, JSONL, Parquet), a folder of Harbor or Terminal-Bench tasks.

Long (over 600 lines) because it holds every kind of source a lab imports from; each is short, and they share
the bounded readers at the top."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

from grading.engine import TASK_SCHEMA, content_sha256, validate_task
from grading.engine.models import MAX_TAGS, relative_path_problem
from gymwright.errors import DomainError
from gymwright.storable_input import nul_check
from packs.importer.extract import _ReadBudget, extract_archive
from packs.importer.harbor_config import HarborSettings, build_context_files
from packs.importer.records import DEFAULT_ENVIRONMENT, TASK_KEYS, Candidate, ImportFailed, ImportTooLarge, Rejection
from packs.importer.rubric_formats import (
    CHECK_TAG_MAX_CHARS,
    Refused,
    format_candidate,
    points_value,
    reference_copies_check,
)
from packs.importer.rubric_formats import detect as rubric_format_of


def _read_text(path: Path, where: str, *, cap: int | None = None, budget: _ReadBudget | None = None) -> str:
    cap = cap or settings.UPLOAD_MAX_BYTES
    if path.is_symlink() or not path.is_file():
        raise ImportFailed(
            f"{where}: not a regular file.", details=[{"pointer": "", "message": f"{where}: not a regular file"}]
        )
    size = path.stat().st_size
    if size > cap:
        raise ImportFailed(
            f"{where}: larger than {cap // (1 << 20)} MB.", details=[{"pointer": "", "message": f"{where}: too large"}]
        )
    if budget is not None:
        budget.take(where, size)
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFailed(
            f"{where}: not valid UTF-8 (byte {exc.start}).",
            details=[{"pointer": "", "message": f"{where}: invalid UTF-8 at byte {exc.start}"}],
        )


def _slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:64].strip("-") or "task"


def _environment_of(document: dict) -> tuple[str, int, dict]:
    environment = dict(document.get("environment") or {})
    slug = environment.pop("id", DEFAULT_ENVIRONMENT)
    number = environment.pop("version", 1)
    return slug, number, environment


def tasks_jsonl_candidates(
    path: Path, *, pack_root: Path | None = None, budget: _ReadBudget | None = None
) -> Iterator[Candidate | Rejection]:
    """gymwright.task/v1 documents, one per line; their files come from the pack folder next to it."""
    if path.stat().st_size > settings.IMPORT_MAX_BYTES:
        raise ImportFailed(f"{path.name} is larger than the import limit (GYMWRIGHT_IMPORT_MAX_MB).")
    budget = budget or _ReadBudget()
    budget.take(path.name, path.stat().st_size)
    yield from task_documents_candidates(_json_lines(path), pack_root=pack_root, budget=budget)


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """Each non-blank line of a JSONL file as JSON reads it, with where (`line 3`); a Rejection in place of a line
    that is not UTF-8 or not JSON, and after IMPORT_MAX_ROWS lines."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"line {number}"
            if number > settings.IMPORT_MAX_ROWS:
                yield (
                    where,
                    Rejection(
                        where,
                        f"more than {settings.IMPORT_MAX_ROWS} rows (GYMWRIGHT_IMPORT_MAX_ROWS); the rest was not read",
                    ),
                )
                return
            if not raw.strip():
                continue
            try:  # without its line end, where JSON's column count would otherwise go past it
                yield where, json.loads(raw.rstrip(b"\r\n").decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield where, Rejection(where, f"not valid UTF-8 (byte {exc.start})")
            except (json.JSONDecodeError, RecursionError) as exc:
                yield (
                    where,
                    Rejection(where, f"invalid JSON: {getattr(exc, 'msg', exc)} (column {getattr(exc, 'colno', '?')})"),
                )


def task_documents_candidates(
    documents: Iterable[tuple[str, Any]], *, pack_root: Path | None = None, budget: _ReadBudget | None = None
) -> Iterator[Candidate | Rejection]:
    """gymwright.task/v1 documents, each with where it was read (`line 3` of a file; a Rejection in
    place of one that could not be read); their files come from `pack_root`, read within `budget`."""
    first_where: dict[str, str] = {}
    budget = budget or _ReadBudget()
    for where, document in documents:
        yield (
            document
            if isinstance(document, Rejection)
            else _document_candidate(where, document, first_where, pack_root=pack_root, budget=budget)
        )


def request_candidates(items: list) -> Iterator[Candidate | Rejection]:
    """A bulk request's items, each at its pointer `/tasks/N` and in their order: gymwright.task/v1
    documents, and simple rows (a prompt, an answer, a rubric or criteria) as a table's; anything else
    is rejected at its pointer, and the other items are still imported."""
    first_where: dict[str, str] = {}
    for index, item in enumerate(items):
        where = f"/tasks/{index}"
        if isinstance(item, dict) and item.get("schema") == TASK_SCHEMA:
            yield _document_candidate(where, item, first_where)
        elif fmt := rubric_format_of(item):
            yield format_candidate(fmt, where, item, first_where, stem="task")
        else:
            yield _row_candidate(where, item, first_where, stem="task")


def _document_candidate(
    where: str,
    document: Any,
    first_where: dict[str, str],
    *,
    pack_root: Path | None = None,
    budget: _ReadBudget | None = None,
) -> Candidate | Rejection:
    slug = document.get("id") if isinstance(document, dict) and isinstance(document.get("id"), str) else None
    if slug is None or not isinstance(document.get("environment", {}), dict):
        issues = validate_task(document)  # the full check runs when the version is built
        issue = issues[0] if issues else None
        return Rejection(
            where,
            issue.message if issue else "not a gymwright.task/v1 object with an id",
            (issue.pointer if issue else "/id") or "",
            slug,
        )
    if slug in first_where:
        return Rejection(where, f"duplicate task id {slug!r} (first on {first_where[slug]})", "/id", slug)
    first_where[slug] = where
    files: dict[str, bytes] = {}
    if pack_root is not None and "/" not in slug and slug not in ("", ".", ".."):  # else refused by its id
        task_root = pack_root / "tasks" / slug
        budget = budget or _ReadBudget()
        for entry in document.get("files") or []:
            _pack_file(files, task_root / "files", entry, pack_root=pack_root, budget=budget)
        for entry in (document.get("environment") or {}).get("files") or []:
            _pack_file(files, task_root / "environment" / "env", entry, pack_root=pack_root, budget=budget)
    content = {key: document.get(key) for key in TASK_KEYS}
    content["title"] = content["title"] or slug  # optional in the format, required in Gymwright
    return Candidate(
        where=where,
        slug=slug,
        content=content,
        environment=_environment_of(document),
        number=int(document.get("version") or 1),
        files=files,
    )


def _pack_file(files: dict, folder: Path, entry: Any, *, pack_root: Path, budget: _ReadBudget) -> None:
    """The bytes of a file a pack's task names, when they are in the pack and match its sha256 (else the
    version check reports the file as never uploaded, at its pointer)."""
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("path"), str)
        and isinstance(entry.get("sha256"), str)
        and relative_path_problem(entry["path"]) is None
    ):
        return
    path = folder / entry["path"]
    if path.is_file() and not path.is_symlink() and path.stat().st_size <= settings.UPLOAD_MAX_BYTES:
        budget.take(path.relative_to(pack_root).as_posix(), path.stat().st_size)
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == entry["sha256"]:
            files[entry["sha256"]] = data


PROMPT_COLUMNS = ("prompt", "question", "instruction", "input")


ANSWER_COLUMNS = ("answer", "reference_answer", "reference", "solution", "target", "expected")


ID_COLUMNS = ("id", "slug", "task_id")


def table_candidates(path: Path) -> Iterator[Candidate | Rejection]:
    """Rows of a CSV / JSONL / Parquet table: prompt, reference answer, rubric (JSON) or criteria (text).

    CSV and Parquet are read with pandas. A JSONL table is read a line at a time, as a tasks.jsonl and a bulk
    request's rows are: pandas' JSONL reader drops an unpaired surrogate from a cell without a word (the row then
    imported text the file did not hold), fails the whole file for one line it cannot read, and names rows by
    position where a line number finds them in the file."""
    import pandas as pd

    if path.stat().st_size > settings.IMPORT_MAX_BYTES:
        raise ImportFailed(f"{path.name} is larger than the import limit (GYMWRIGHT_IMPORT_MAX_MB).")
    if path.suffix.lower() not in (".csv", ".parquet"):
        rows = [(where, _columns_named(row)) for where, row in _json_lines(path)]
        columns = {key for _, row in rows if isinstance(row, dict) for key in row}
    else:
        try:
            if path.suffix.lower() == ".csv":
                delimiter, header = _csv_header(path)
                _csv_header_check(path, header)
                _csv_rows_check(path, delimiter, len(header))
                frame = pd.read_csv(
                    path,
                    dtype=str,
                    keep_default_na=False,
                    encoding="utf-8",
                    sep=delimiter,
                    nrows=settings.IMPORT_MAX_ROWS + 1,
                )
            else:
                frame = pd.read_parquet(path)
        except ImportFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - any parser error: the file as a whole is unreadable
            why = str(exc).replace(str(path), path.name)[:300]  # the parser's message names the file: not our folders
            raise ImportFailed(
                f"{path.name} could not be read as a table: {why}; nothing was imported.",
                details=[{"pointer": "", "message": why}],
            )
        if len(frame) > settings.IMPORT_MAX_ROWS:
            raise ImportFailed(
                f"{path.name} has more than {settings.IMPORT_MAX_ROWS} rows "
                "(GYMWRIGHT_IMPORT_MAX_ROWS); nothing was imported."
            )
        frame.columns = [str(column).strip().lower() for column in frame.columns]
        columns = set(frame.columns)
        rows = [(f"row {index}", row) for index, row in enumerate(frame.to_dict("records"), start=1)]
    if not rows:
        raise ImportFailed(
            f"{path.name} has no rows; nothing was imported.", details=[{"pointer": "", "message": "no rows"}]
        )
    if not any(c in columns for c in PROMPT_COLUMNS):
        raise ImportFailed(
            _no_prompt_column(path, columns), details=[{"pointer": "/prompt", "message": "missing column"}]
        )
    stem = _slugify(path.stem)[:50]
    first_where: dict[str, str] = {}
    for where, row in rows:
        yield row if isinstance(row, Rejection) else _row_candidate(where, row, first_where, stem=stem)


# A table's delimiter is one of these; a CSV's is the first that makes its header name a prompt column.
CSV_DELIMITERS = (",", ";", "\t", "|")


CSV_DELIMITER_NAMES = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "vertical bars"}


CSV_HEADER_MAX_BYTES = 64 * 1024  # of the file's start, where the header row is looked for


# A table's columns: a prompt, an answer, a rubric or criteria, an id, a title, tags, an environment and a few
# more. pandas renames repeated column names in quadratic time (a header of 200,000 equal names ran for minutes).
TABLE_MAX_COLUMNS = 200


def _csv_header_check(path: Path, header: list[str] | None) -> None:
    """Refuse a CSV whose header row pandas should not be handed: one that does not end within
    CSV_HEADER_MAX_BYTES, or has more than TABLE_MAX_COLUMNS columns."""
    if header is None:
        raise ImportFailed(
            f"{path.name}: its header row is longer than {CSV_HEADER_MAX_BYTES // 1024} KB; nothing was imported.",
            details=[{"pointer": "", "message": "header row too long"}],
        )
    if len(header) > TABLE_MAX_COLUMNS:
        raise ImportFailed(
            f"{path.name} has {len(header)} columns, more than a table of tasks has "
            f"({TABLE_MAX_COLUMNS} at most); nothing was imported.",
            details=[{"pointer": "", "message": f"at most {TABLE_MAX_COLUMNS} columns"}],
        )


def _csv_rows_check(path: Path, delimiter: str, width: int) -> None:
    """Refuse a CSV with a row wider than its header row, before pandas reads it for its rows.

    Given a header, pandas' C reader makes a row with more fields than the header an index of one level per
    extra field: a row of 10^4 fields cost seconds, one of 10^6 never ended, and a row with one field too many
    (a delimiter outside quotes) was read shifted, its prompt taken from its second column. Read with as many
    column names as the header has, such a row is a tokenizer error at its line, found in linear time."""
    import pandas as pd

    try:
        pd.read_csv(
            path,
            header=None,
            names=range(width),
            index_col=False,
            dtype=str,
            keep_default_na=False,
            encoding="utf-8",
            sep=delimiter,
            nrows=settings.IMPORT_MAX_ROWS + 2,
        )
    except pd.errors.ParserError as exc:
        why = str(exc).replace(str(path), path.name).removeprefix("Error tokenizing data. C error: ").strip()[:300]
        raise ImportFailed(
            f"{path.name}: a row has more fields than the {width} columns of its header row ({why}; a "
            f"{CSV_DELIMITER_NAMES[delimiter][:-1]} outside quotes?); nothing was imported.",
            details=[{"pointer": "", "message": why}],
        ) from None
    # Any other error is the file's as a whole; the read that follows reports it.


def _csv_header(path: Path) -> tuple[str, list[str] | None]:
    """(delimiter, the header row's columns, stripped and lower case) of a CSV: the first of CSV_DELIMITERS with
    which the header names a prompt column. Excel writes semicolons where a comma is the decimal separator, and
    pandas read such a file as one column ("has no prompt column", with no hint). Failing that, the delimiter
    that splits the header into the most columns (a comma on a tie), for the error to name. Reads at most
    CSV_HEADER_MAX_BYTES with the csv module's reader, in linear time (csv.Sniffer is quadratic on crafted lines)."""
    import csv
    import io

    with path.open("rb") as handle:
        raw = handle.read(CSV_HEADER_MAX_BYTES)
    if len(raw) == CSV_HEADER_MAX_BYTES and b"\n" not in raw and b"\r" not in raw:
        return ",", None  # the header row does not end within the sample (_csv_header_check refuses it)
    text = raw.decode("utf-8-sig", errors="replace")  # Excel's byte order mark
    headers = []
    for delimiter in CSV_DELIMITERS:
        try:
            row = next(csv.reader(io.StringIO(text), delimiter=delimiter), [])
        except csv.Error:  # a NUL, an unclosed quote at the end of the sample: not this way
            row = []
        columns = [str(cell).strip().lower() for cell in row]
        if any(column in PROMPT_COLUMNS for column in columns):
            return delimiter, columns
        headers.append((len(columns), delimiter, columns))
    _, delimiter, columns = max(headers, key=lambda item: item[0])  # max keeps the first of equals: a comma
    return delimiter, columns


def _no_prompt_column(path: Path, columns) -> str:
    """The refusal of a table without a prompt column, naming the columns it has (for a CSV, as its delimiter
    splits them) and what to do."""
    shown = 20
    if path.suffix.lower() == ".csv":
        delimiter, names = _csv_header(path)
        names = names or []
        split = f" (split at {CSV_DELIMITER_NAMES[delimiter]})"
    else:
        names, split = sorted(columns), ""
    found = ", ".join(repr(name[:40] + ("…" if len(name) > 40 else "")) for name in names[:shown])
    found += f" and {len(names) - shown} more" if len(names) > shown else ""
    names_allowed = ", ".join(PROMPT_COLUMNS[:-1]) + f" or {PROMPT_COLUMNS[-1]}"
    delimiters = (
        ", ".join(CSV_DELIMITER_NAMES[d] for d in CSV_DELIMITERS[:-1])
        + f" or {CSV_DELIMITER_NAMES[CSV_DELIMITERS[-1]]}"
    )
    hint = f" (a CSV's columns may be separated by {delimiters})" if split else ""
    return (
        f"{path.name} has no prompt column: its columns are {found or 'none'}{split}. Name the column that "
        f"holds the prompts {names_allowed}{hint}; nothing was imported."
    )


def _columns_named(row: Any) -> Any:
    """A JSON row's keys as a table's columns are named (stripped, lower case)."""
    return {str(key).strip().lower(): value for key, value in row.items()} if isinstance(row, dict) else row


def rows_candidates(rows: Iterable[tuple[str, Any]], *, stem: str) -> Iterator[Candidate | Rejection]:
    """Simple rows, each with where it was read (`row 3` of a table)."""
    first_where: dict[str, str] = {}
    for where, row in rows:
        yield _row_candidate(where, row, first_where, stem=stem)


def _with_reference(rubric: dict, answer: str, pointer: str) -> dict:
    """The row's answer column as the reference answer of each judge check of its rubric that names none (as
    criteria rows get it): a table's answer column was otherwise only the oracle's answer, never the judge's.
    Anything not shaped like a rubric is left for validation to refuse; Refused when the copies pass their bound
    (rubric_formats.reference_copies_check)."""
    copies = 0

    def walk(checks):
        nonlocal copies
        if not isinstance(checks, list):
            return checks
        out = []
        for check in checks:
            if isinstance(check, dict) and check.get("kind") == "llm_judge" and "reference" not in check:
                check = {**check, "reference": answer}
                copies += 1
            elif isinstance(check, dict) and isinstance(check.get("checks"), list):
                check = {**check, "checks": walk(check["checks"])}
            out.append(check)
        return out

    if "checks" not in rubric:
        return rubric
    walked = {**rubric, "checks": walk(rubric.get("checks"))}
    reference_copies_check(answer, copies, pointer)
    return walked


def _row_candidate(where: str, row: Any, first_where: dict[str, str], *, stem: str) -> Candidate | Rejection:
    """A simple row: an object with a prompt, a reference answer, and a rubric (JSON) or criteria (text,
    one per line, or a list). A row without an id is named by its content (`<stem>-<10 hex digits>`):
    the same row imported again is the same task (unchanged), and a row that differs is another task,
    never a new version of one that a row of another file happened to share a position with."""
    if not isinstance(row, dict):
        return Rejection(where, f"expected an object with a prompt, got {type(row).__name__}", "")
    try:  # before any of it is hashed (a row without an id is named by its content) or looked up
        nul_check(row, what="The row")
    except DomainError as exc:
        return Rejection(where, exc.message, exc.details[0]["pointer"])  # the id is not echoed: it may be the one
    row = {str(key).strip().lower(): value for key, value in row.items()}
    prompt_column = next((c for c in PROMPT_COLUMNS if c in row), None)
    answer_column = next((c for c in ANSWER_COLUMNS if c in row), None)
    id_column = next((c for c in ID_COLUMNS if c in row), None)
    prompt = _cell(row.get(prompt_column)) if prompt_column else ""
    answer = _cell(row.get(answer_column)) if answer_column else ""
    given = _cell(row.get(id_column)).strip() if id_column else ""
    if not prompt:
        return Rejection(
            where,
            "the prompt is empty" if prompt_column else f"no prompt (one of {', '.join(PROMPT_COLUMNS)})",
            "/prompt",
            given or None,
        )
    rubric = row.get("rubric")
    if isinstance(rubric, str) and rubric.strip():
        try:
            rubric = json.loads(rubric)
        except json.JSONDecodeError as exc:
            return Rejection(
                where, f"the rubric is not valid JSON: {exc.msg} (column {exc.colno})", "/rubric", given or None
            )
    elif not isinstance(rubric, dict):
        rubric = None
    if rubric is not None and answer:
        try:
            rubric = _with_reference(rubric, answer, f"/{answer_column}")
        except Refused as refusal:
            return Rejection(where, refusal.message, refusal.pointer, given or None)
    if rubric is not None:
        for column in CRITERIA_COLUMNS:
            if not _blank(row.get(column)):
                return Rejection(
                    where,
                    f"the {column} column is for criteria; a rubric (JSON) gives its checks' own points and tags",
                    f"/{column}",
                    given or None,
                )
    if rubric is None:
        criteria = row.get("criteria")
        lines = [_cell(item) for item in criteria] if isinstance(criteria, list) else _cell(criteria).splitlines()
        criteria = [line.strip(" -*\t") for line in lines if line.strip(" -*\t")]
        if not criteria:
            return Rejection(
                where,
                "needs a rubric (JSON) or criteria (one plain-language criterion per line)",
                "/rubric",
                given or None,
            )
        try:
            reference_copies_check(answer, len(criteria), f"/{answer_column}")
            points = _per_criterion(row.get("points"), len(criteria), "points", _points_cell) or [1] * len(criteria)
            tags_of = _per_criterion(row.get("criteria_tags"), len(criteria), "criteria_tags", _tags_cell)
        except Refused as refusal:
            return Rejection(where, refusal.message, refusal.pointer, given or None)
        checks = [
            {
                "id": f"criterion_{number}",
                "kind": "llm_judge",
                "points": points[number - 1],
                "criterion": criterion,
                **({"reference": answer} if answer else {}),
                **({"tags": tags_of[number - 1]} if tags_of and tags_of[number - 1] else {}),
            }
            for number, criterion in enumerate(criteria, 1)
        ]
        rubric = {"schema": "gymwright.rubric/v1", "checks": checks}
    environment = row.get("environment")
    # a table's empty cell reads as None or NaN (no environment); a number is a name, if not an id
    environment = _cell(environment) if environment is None or isinstance(environment, float) else environment
    if not isinstance(environment, str):
        return Rejection(
            where,
            "the environment is named by its id (an environment that exists), "
            f"not given as {type(environment).__name__}",
            "/environment",
            given or None,
        )
    environment = environment.strip() or None
    tags = row.get("tags")
    tags = [_cell(t) for t in tags] if isinstance(tags, list) else _cell(tags).split(",")
    content = {
        "title": _cell(row.get("title")) or prompt.splitlines()[0][:120],
        "prompt": prompt,
        "rubric": rubric,
        "solution": {"script": None, "answer": answer or None},
        "files": [],
        "tags": [t.strip() for t in tags if t.strip()],
        "metadata": {},
    }
    slug = given or f"{stem or 'task'}-{content_sha256([content, environment] if environment else content)[:10]}"
    if slug in first_where:
        return Rejection(
            where,
            f"duplicate task id {slug!r} (first in {first_where[slug]})"
            if given
            else f"the same task as {first_where[slug]} (the same prompt, answer and rubric)",
            "/id",
            slug,
        )
    first_where[slug] = where
    return Candidate(where=where, slug=slug, environment=None, content=content, environment_slug=environment)


# A table row's columns for the checks its criteria become: `points` (one number for every criterion, or one
# per criterion, a line each as the criteria are written; a list in a JSONL row) and `criteria_tags` (likewise:
# a line of comma-separated tags for every criterion, or one line per criterion). The `tags` column stays the
# task's own tags.
CRITERIA_COLUMNS = ("points", "criteria_tags")
POINTS_CELL_MAX_CHARS = 40


def _blank(value: Any) -> bool:
    return (
        value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip())
    )


def _per_criterion(value: Any, count: int, column: str, parse) -> list | None:
    """One value per criterion from a `points` / `criteria_tags` cell (CRITERIA_COLUMNS), parsed by
    `parse(text_or_value, pointer)`; None for an empty cell. Refused (naming the column and the line) when
    the values are neither one nor one per criterion, or one does not parse."""
    if _blank(value):
        return None
    if isinstance(value, list):
        values = value
    elif isinstance(value, str):
        values = [line.strip() for line in value.splitlines() if line.strip()]
    else:
        values = [value]  # a number in a Parquet or JSONL row
    if len(values) not in (1, count):
        raise Refused(
            f"/{column}",
            f"the {column} column has {len(values)} values for {count} criteria: give one for all, or one per "
            "criterion (a line each)",
        )
    parsed = [parse(item, f"/{column}", f"{column} value {number}") for number, item in enumerate(values, 1)]
    return parsed * count if len(parsed) == 1 else parsed


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _points_cell(value: Any, pointer: str, what: str) -> int | float:
    import numbers

    if isinstance(value, str):
        text = value.strip()
        if len(text) > POINTS_CELL_MAX_CHARS:
            raise Refused(pointer, f"{what} is not a number (longer than {POINTS_CELL_MAX_CHARS} characters)")
        try:
            value = int(text) if _INTEGER.fullmatch(text) else float(text)
        except ValueError:
            raise Refused(pointer, f"{what}: {text!r} is not a number") from None
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)  # a Parquet column's numpy integer
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)
    try:
        return points_value(value, pointer)
    except Refused as refusal:
        raise Refused(pointer, f"{what}: {refusal.message}") from None


def _tags_cell(value: Any, pointer: str, what: str) -> list[str]:
    items = value if isinstance(value, list) else _cell(value).split(",")
    if not all(isinstance(item, str) for item in items):
        raise Refused(pointer, f"{what}: tags must be text")
    tags = [item.strip() for item in items if item.strip()]
    if len(tags) > MAX_TAGS or any(len(tag) > CHECK_TAG_MAX_CHARS for tag in tags):
        raise Refused(pointer, f"{what}: at most {MAX_TAGS} tags of at most {CHECK_TAG_MAX_CHARS} characters")
    return list(dict.fromkeys(tags))


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


# Harbor's and Terminal-Bench's verifier, run as a command check in the sandbox the agent used once its episode
# is over. The task's tests are grader files under VERIFIER_FILES (never in the sandbox during the episode),
# listed in VERIFIER_FILES + "tests.list"; exactly those are copied into /tests, so nothing the agent planted
# beside them (a conftest.py) is run. The sandbox makes /tests and /logs writable for the checks only (see
# sandbox/runtime/backends/base.py, `open_verifier_paths`): the agent cannot write /logs/verifier/reward.txt
# during its episode, and the check empties /logs/verifier before the tests run. The tests run from the
# workspace, which the image's WORKDIR (/app in Harbor's template) is a link to.
VERIFIER_FILES = ".harbor/"
# A Harbor task's solution/ files beside solve.sh, kept (as grader files) for the export.
VERIFIER_SOLUTION = ".harbor/solution/"


_VERIFIER_SETUP = r"""set -u
V=/workspace/.harbor
L=/logs/verifier
if ! { [ -d /tests ] && [ -w /tests ] && rm -rf "$L" && mkdir -p "$L" && [ -w "$L" ]; }; then
  echo "this sandbox gives the checks no writable /tests and /logs/verifier (Harbor's verifier paths)" >&2
  exit 3
fi
while IFS= read -r f; do
  [ -n "$f" ] || continue
  mkdir -p "/tests/$(dirname "$f")" && cp "$V/tests/$f" "/tests/$f" || { echo "cannot copy tests/$f to /tests" >&2; exit 3; }
done < "$V/tests.list"
rm -rf "$V"
run() {
  if [ "$(head -c 2 "$1")" = '#!' ]; then chmod +x "$1" && "$1"
  elif command -v bash >/dev/null 2>&1; then bash "$1"
  else sh "$1"; fi
}
"""


# Harbor reads reward.json (named rewards) when test.sh wrote one, else reward.txt (one number). A command
# check passes or fails: it passes on the full reward (every reward at least 1); a fractional reward fails.
def harbor_reward_check(exports: str = "") -> str:
    """The verifier check of a Harbor task, with `exports` (shell lines: its [verifier.env]) before its tests."""
    return _VERIFIER_SETUP + exports + _HARBOR_REWARD


_HARBOR_REWARD = r"""run /tests/test.sh > "$L/test-stdout.txt" 2>&1
tail -c 1500 "$L/test-stdout.txt" >&2
NUM='^[+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$'
if [ -f "$L/reward.json" ]; then
  F=reward.json
  tr -d ' \t\r\n' < "$L/reward.json" | awk -v num="$NUM" '{ s = s $0 } END {
    if (s !~ /^[{].*[}]$/) exit 1
    n = split(substr(s, 2, length(s) - 2), parts, ",")
    for (i = 1; i <= n; i++) { v = parts[i]; sub(/^"[^"]*":/, "", v); if (v !~ num || v + 0 < 1) exit 1 }
    exit (n == 0) }'
elif [ -f "$L/reward.txt" ]; then
  F=reward.txt
  awk -v num="$NUM" 'NF { n++; v = $0 } END { gsub(/^[ \t\r]+|[ \t\r]+$/, "", v); exit !(n == 1 && v ~ num && v + 0 >= 1) }' "$L/reward.txt"
else
  echo "test.sh wrote no /logs/verifier/reward.txt or reward.json" >&2
  exit 1
fi
passed=$?
echo "$F: $(head -c 200 "$L/$F" | tr '\n' ' ')(the full reward passes)" >&2
exit $passed
"""


HARBOR_REWARD_CHECK = harbor_reward_check()


# Terminal-Bench runs run-tests.sh from the image's WORKDIR with TEST_DIR=/tests; its exit code is the verdict
# (as Harbor's own Terminal-Bench mapper reads it).
TERMINAL_BENCH_CHECK = (
    _VERIFIER_SETUP
    + r"""export TEST_DIR=/tests
run /tests/run-tests.sh > "$L/test-stdout.txt" 2>&1
code=$?
tail -c 1500 "$L/test-stdout.txt" >&2
echo "run-tests.sh exited with $code" >&2
exit $code
"""
)


def _refuse_link(path: Path, where: str) -> None:
    """ImportFailed for a folder of a task that is a link: rglob and every check of the files under it would
    follow it, and the host's files there would become the task's (copied into its sandbox, stored)."""
    if path.is_symlink():
        raise ImportFailed(f"{where}: a symbolic link; links are not imported.")


def _folder_files(
    root: Path, prefix: str, where: str, budget: _ReadBudget, *, skip: Iterable[str] = ()
) -> tuple[list[dict], dict[str, bytes]]:
    """Every regular file under `root` as a file entry at `prefix` + its path under `root`, with its bytes
    (read within `budget`); a link is refused. `where` names `root` in messages; `skip`: paths under it."""
    entries, files = [], {}
    _refuse_link(root, where)
    if not root.is_dir():
        return entries, files
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise ImportFailed(f"{where}/{relative}: a symbolic link; links are not imported.")
        if not path.is_file() or relative in skip:
            continue
        size = path.stat().st_size
        if size > settings.UPLOAD_MAX_BYTES:
            raise ImportFailed(f"{where}/{relative}: larger than the upload limit.")
        budget.take(f"{where}/{relative}", size)
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        entries.append({"path": f"{prefix}{relative}", "sha256": sha256})
        files[sha256] = data
    return entries, files


def _verifier_files(entries: list[dict], files: dict[str, bytes]) -> list[dict]:
    """The tests as grader files under VERIFIER_FILES, with the list of them the check copies."""
    listing = "".join(entry["path"][len(VERIFIER_FILES + "tests/") :] + "\n" for entry in entries).encode()
    sha256 = hashlib.sha256(listing).hexdigest()
    files[sha256] = listing
    return [
        {**entry, "role": "grader"} for entry in [*entries, {"path": f"{VERIFIER_FILES}tests.list", "sha256": sha256}]
    ]


# A Terminal-Bench task's own files, beside its Dockerfile in its folder: the rest of the folder is the
# Dockerfile's build context.
TERMINAL_BENCH_OWN_FILES = {
    "Dockerfile",
    "task.yaml",
    "solution.sh",
    "solution.yaml",
    "run-tests.sh",
    "tests",
    "docker-compose.yaml",
    "docker-compose.yml",
}


def harbor_candidate(folder: Path, where: str, budget: _ReadBudget) -> Candidate | Rejection:
    """A Harbor task folder (task.toml, instruction.md, environment/, solution/, tests/); its settings and
    build context are read as `harbor_config` says."""
    try:
        # kept whole in the task's metadata (and written back on export): a settings file, not a data file
        text = _read_text(folder / "task.toml", f"{where}/task.toml", cap=1 << 20, budget=budget)
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Rejection(f"{where}/task.toml", f"does not parse as TOML: {exc}")
    except ImportFailed as exc:
        return Rejection(f"{where}/task.toml", exc.message)
    name = (config.get("task") or {}).get("name") if isinstance(config.get("task"), dict) else None
    slug = _slugify((name if isinstance(name, str) else folder.name).split("/")[-1])
    harbor = HarborSettings(config, text)
    if (refusal := harbor.refusal()) is not None:
        return Rejection(f"{where}/task.toml", refusal, "/environment/network", slug)
    try:
        instruction = _read_text(folder / "instruction.md", f"{where}/instruction.md", budget=budget)
    except ImportFailed as exc:
        return Rejection(f"{where}/instruction.md", exc.message, slug=slug)
    environment = folder / "environment"
    for part in ("environment", "solution", "tests"):
        _refuse_link(folder / part, f"{where}/{part}")
    for compose in ("docker-compose.yaml", "docker-compose.yml"):
        if (environment / compose).exists():
            return Rejection(
                f"{where}/environment/{compose}",
                "multi-container environments (docker-compose) "
                "are not supported: an environment is one image, built from environment/Dockerfile",
                slug=slug,
            )
    dockerfile_path = environment / "Dockerfile"
    dockerfile = (
        _read_text(dockerfile_path, f"{where}/environment/Dockerfile", budget=budget)
        if dockerfile_path.is_file()
        else None
    )
    context_entries, files = (
        build_context_files(environment, f"{where}/environment", budget, skip={"Dockerfile"})
        if dockerfile is not None
        else ([], {})
    )
    image = harbor.environment.get("docker_image")
    solve = folder / "solution" / "solve.sh"
    script = _read_text(solve, f"{where}/solution/solve.sh", budget=budget) if solve.is_file() else None
    # the files solve.sh uses beside it (Harbor's /solution): grader files, never in the agent's sandbox, written
    # back to solution/ by the export
    solution_entries, solution_files = _folder_files(
        folder / "solution", f"{VERIFIER_SOLUTION}", f"{where}/solution", budget, skip={"solve.sh"}
    )
    files.update(solution_files)
    test_entries, test_files = _folder_files(folder / "tests", f"{VERIFIER_FILES}tests/", f"{where}/tests", budget)
    files.update(test_files)
    if not any(entry["path"] == f"{VERIFIER_FILES}tests/test.sh" for entry in test_entries):
        return Rejection(f"{where}/tests/test.sh", "is missing: Harbor's verifier runs tests/test.sh", slug=slug)
    keywords = (config.get("task") or {}).get("keywords") or (config.get("metadata") or {}).get("tags") or []
    spec: dict = {"dockerfile": dockerfile}
    if dockerfile is None and isinstance(image, str) and image.strip():
        spec["image"] = image.strip()
    if context_entries:
        spec["files"] = context_entries
    if limits := harbor.limits():
        spec["limits"] = limits
    if harbor.network != "none":
        spec["network"] = harbor.network
    return Candidate(
        where=where,
        slug=slug,
        number=1,
        files=files,
        note=harbor.note(solution_files=len(solution_entries)),
        environment=(f"harbor-{slug}"[:64].strip("-"), 1, spec),
        content={
            "title": str((config.get("task") or {}).get("description") or slug)[:200],
            "prompt": instruction,
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "checks": [
                    {
                        "id": "tests_pass",
                        "kind": "command",
                        "points": 1,
                        "run": harbor_reward_check(harbor.verifier_exports()),
                        "expect_exit": 0,
                        "timeout_s": harbor.verifier_timeout(),
                    }
                ],
            },
            "solution": {"script": script, "answer": None},
            "files": _verifier_files(test_entries, files) + [{**entry, "role": "grader"} for entry in solution_entries],
            "tags": [str(k) for k in keywords if isinstance(k, str)][:20],
            "metadata": {**harbor.metadata(), "source": "harbor", "harbor_name": name or folder.name},
        },
    )


def terminal_bench_candidate(folder: Path, where: str, budget: _ReadBudget) -> Candidate | Rejection:
    """A Terminal-Bench task folder (task.yaml, Dockerfile, solution.sh, run-tests.sh, tests/)."""
    import yaml

    try:
        config = yaml.safe_load(_read_text(folder / "task.yaml", f"{where}/task.yaml", budget=budget))
    except yaml.YAMLError as exc:
        return Rejection(f"{where}/task.yaml", f"does not parse as YAML: {str(exc).splitlines()[0]}")
    except ImportFailed as exc:
        return Rejection(f"{where}/task.yaml", exc.message)
    if not isinstance(config, dict):
        return Rejection(f"{where}/task.yaml", "is not a mapping")
    slug = _slugify(folder.name)
    instruction = config.get("instruction")
    if not instruction and isinstance(config.get("descriptions"), list) and config["descriptions"]:
        instruction = (config["descriptions"][0] or {}).get("description")
    if not isinstance(instruction, str) or not instruction.strip():
        return Rejection(f"{where}/task.yaml", "has no instruction", "/instruction", slug)
    dockerfile = (
        _read_text(folder / "Dockerfile", f"{where}/Dockerfile", budget=budget)
        if (folder / "Dockerfile").is_file()
        else None
    )
    context_entries, context_files = (
        build_context_files(folder, where, budget, skip=TERMINAL_BENCH_OWN_FILES)
        if dockerfile is not None
        else ([], {})
    )
    script = (
        _read_text(folder / "solution.sh", f"{where}/solution.sh", budget=budget)
        if (folder / "solution.sh").is_file()
        else None
    )
    run_tests = folder / "run-tests.sh"
    if run_tests.is_symlink() or not run_tests.is_file():
        return Rejection(f"{where}/run-tests.sh", "is missing: Terminal-Bench runs run-tests.sh", slug=slug)
    # run-tests.sh goes to /tests beside the tests, as Terminal-Bench puts it (one in tests/ gives way to it)
    test_entries, files = _folder_files(
        folder / "tests", f"{VERIFIER_FILES}tests/", f"{where}/tests", budget, skip={"run-tests.sh"}
    )
    data = _read_text(run_tests, f"{where}/run-tests.sh", budget=budget).encode("utf-8")
    files.update(context_files)
    files[hashlib.sha256(data).hexdigest()] = data
    test_entries.append({"path": f"{VERIFIER_FILES}tests/run-tests.sh", "sha256": hashlib.sha256(data).hexdigest()})
    timeout = int(float(config.get("max_test_timeout_sec") or 600))
    return Candidate(
        where=where,
        slug=slug,
        number=1,
        files=files,
        environment=(
            f"tbench-{slug}"[:64].strip("-"),
            1,
            {"dockerfile": dockerfile, **({"files": context_entries} if context_entries else {})},
        ),
        content={
            "title": slug,
            "prompt": instruction,
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "checks": [
                    {
                        "id": "tests_pass",
                        "kind": "command",
                        "points": 1,
                        "run": TERMINAL_BENCH_CHECK,
                        "expect_exit": 0,
                        "timeout_s": max(1, min(timeout, 86400)),
                    }
                ],
            },
            "solution": {"script": script, "answer": None},
            "files": _verifier_files(test_entries, files),
            "tags": [str(t) for t in config.get("tags") or [] if isinstance(t, str)][:20],
            "metadata": {"source": "terminal-bench"},
        },
    )


def folder_candidates(root: Path, label: str, budget: _ReadBudget | None = None) -> Iterator[Candidate | Rejection]:
    budget = budget or _ReadBudget()
    if (root / "tasks.jsonl").is_file():
        yield from tasks_jsonl_candidates(root / "tasks.jsonl", pack_root=root, budget=budget)
        return
    folders = (
        [root]
        if (root / "task.toml").exists() or (root / "task.yaml").exists()
        else sorted(path for path in root.iterdir() if path.is_dir() and not path.is_symlink())
    )
    found = False
    first_where: dict[str, str] = {}
    for folder in folders:
        where = label if folder == root else f"{label}/{folder.name}"
        kind = (
            harbor_candidate
            if (folder / "task.toml").exists()
            else terminal_bench_candidate
            if (folder / "task.yaml").exists()
            else None
        )
        if kind is None:
            continue
        try:
            candidate = kind(folder, where, budget)
        except ImportTooLarge:
            raise
        except ImportFailed as exc:  # one of its files cannot be read (a link, not UTF-8, too large): that task
            candidate = Rejection(where, exc.message.removesuffix("."))
        found = True
        if isinstance(candidate, Candidate):
            if candidate.slug in first_where:  # two folders, one task id: the first is imported
                candidate = Rejection(
                    where,
                    f"duplicate task id {candidate.slug!r} (first in {first_where[candidate.slug]})",
                    "/id",
                    candidate.slug,
                )
            else:
                first_where[candidate.slug] = where
        yield candidate
    if not found:
        children = [path for path in root.iterdir() if path.is_dir() and not path.is_symlink()]
        if len(children) == 1 and not any(path.is_file() for path in root.iterdir()):
            yield from folder_candidates(children[0], f"{label}/{children[0].name}", budget)
            return
        raise ImportFailed(f"{label}: no tasks.jsonl, task.toml or task.yaml found; nothing was imported.")


# Lines a JSONL file's kind is looked for in: its first JSON object says it (a malformed first line is then
# rejected at its line, in the file's own format, not read as a table's row).
JSONL_KIND_LINES = 20


def _jsonl_kind(path: Path) -> str | None:
    """What a .jsonl file holds, by the fields of its first JSON object among its first JSONL_KIND_LINES
    non-blank lines: TASK_SCHEMA (task documents), a rubric format's name (HealthBench or RaR rows), or
    None (a table's rows)."""
    with open(path, "rb") as handle:
        lines = (line for line in handle if line.strip())
        for _, line in zip(range(JSONL_KIND_LINES), lines):
            try:
                row = json.loads(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
            if isinstance(row, dict):
                return TASK_SCHEMA if row.get("schema") == TASK_SCHEMA else rubric_format_of(row)
    return None


def rubric_rows_candidates(path: Path, fmt: str) -> Iterator[Candidate | Rejection]:
    """A JSONL file of HealthBench or RaR rows (packs.importer.rubric_formats), each at its line."""
    if path.stat().st_size > settings.IMPORT_MAX_BYTES:
        raise ImportFailed(f"{path.name} is larger than the import limit (GYMWRIGHT_IMPORT_MAX_MB).")
    stem = _slugify(path.stem)[:50]
    first_where: dict[str, str] = {}
    for where, row in _json_lines(path):
        yield row if isinstance(row, Rejection) else format_candidate(fmt, where, row, first_where, stem=stem)


def source_candidates(path: Path, scratch: Path) -> Iterator[Candidate | Rejection]:
    name = path.name.lower()
    if path.is_dir():
        yield from folder_candidates(path, path.name)
    elif name.endswith((".tar.gz", ".tgz")):
        extract_archive(path, scratch / "unpacked")
        yield from folder_candidates(scratch / "unpacked", path.name)
    elif name.endswith(".jsonl"):
        kind = _jsonl_kind(path)
        if kind == TASK_SCHEMA:
            yield from tasks_jsonl_candidates(path, pack_root=path.parent)
        elif kind is not None:
            yield from rubric_rows_candidates(path, kind)
        else:
            yield from table_candidates(path)
    elif name.endswith((".csv", ".parquet")):
        yield from table_candidates(path)
    else:
        raise DomainError(
            f"{path.name}: import a tasks.jsonl, a .csv/.jsonl/.parquet table, a folder or a .tar.gz.",
            code="usage",
            details=[{"pointer": "/file", "message": "unknown kind of file"}],
        )
