"""The pack archive: a pure writer and verifier, without Django (docs/formats.md, "Task pack").

A lab can rebuild a pack from tasks.jsonl alone with `build_pack`: it takes the task
documents in task-id order, one at a time, and streams them to a scratch folder —
tasks.jsonl, the parquet splits, a Harbor task folder per task — then writes the
manifest (every file's sha256 and one `content_sha256` over all of it) and the dataset
card, and packs it into a reproducible .tar.gz (the standard library's tarfile and gzip): entries
sorted path by path (the task folders last, rendered again as they are packed), fixed mtimes,
uid/gid 0, no user names, gzip without a timestamp or file name. Building the same
tasks twice gives the same bytes except the manifest's `build` record, so the same
`content_sha256`.

Only the manifest's task list and file digests (a few dozen bytes per file) stay in
memory; task documents are dropped once written.

The parts, one module each: info (what a build is given and gives back), splits (train/test and
difficulty), manifest, grader (the bundled engine), harbor (a task's Harbor folder), parquet, card
(README.md, from card.md.tmpl), build (`build_pack`), targz (the .tar.gz), verify (`verify_pack`). Other
apps import from here.
"""

from .build import build_pack
from .card import canary_guid, dataset_card
from .info import FIXED_MTIME, PACK_SCHEMA, BuildCancelled, BuildResult, PackError, PackInfo, TaskItem
from .manifest import manifest_summary
from .parquet import parquet_row, response_only_task
from .splits import DIFFICULTY_BINS, difficulty_of, empty_split, split_bucket, split_of, test_ratio_filling_both
from .verify import Verification, verify_pack

__all__ = [
    "DIFFICULTY_BINS",
    "FIXED_MTIME",
    "PACK_SCHEMA",
    "BuildCancelled",
    "BuildResult",
    "PackError",
    "PackInfo",
    "TaskItem",
    "Verification",
    "build_pack",
    "canary_guid",
    "dataset_card",
    "difficulty_of",
    "empty_split",
    "manifest_summary",
    "parquet_row",
    "response_only_task",
    "split_bucket",
    "split_of",
    "test_ratio_filling_both",
    "verify_pack",
]
