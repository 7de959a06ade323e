"""Import tasks: a pack's tasks.jsonl (or a whole pack), a table of simple rows (CSV, JSONL,
Parquet), or a folder / .tar.gz of Harbor or Terminal-Bench tasks.

One path for the CLI (`manage.py import_tasks`), the web upload and the API: `tasks_import`.
Every source becomes a stream of candidates (a task to create or to add a version to) and
rejections (row number or path, reason, JSON pointer where it is a format error). Good rows
are imported in batches with a constant number of queries per batch; bad rows are reported and
skipped. A source that fails as a whole (a hostile archive, an unreadable table) imports nothing.

The parts: records (candidates, rejections, the report), extract (unpacking an archive safely into
the import's scratch folder), sources (each kind of source read into candidates) and store
(`tasks_import`: the batches written). Callers import from here.
"""

from packs.importer.extract import extract_archive
from packs.importer.records import (
    DEFAULT_ENVIRONMENT,
    Candidate,
    ImportFailed,
    ImportReport,
    ImportTooLarge,
    Rejection,
    ReportLine,
)
from packs.importer.sources import (
    HARBOR_REWARD_CHECK,
    TERMINAL_BENCH_CHECK,
    folder_candidates,
    request_candidates,
    source_candidates,
)
from packs.importer.store import tasks_import

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "HARBOR_REWARD_CHECK",
    "TERMINAL_BENCH_CHECK",
    "Candidate",
    "ImportFailed",
    "ImportReport",
    "ImportTooLarge",
    "Rejection",
    "ReportLine",
    "extract_archive",
    "folder_candidates",
    "request_candidates",
    "source_candidates",
    "tasks_import",
]
