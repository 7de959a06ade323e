"""The parquet splits (data/train.parquet, data/test.parquet): verl's RLHFDataset columns, one row per task
that a response alone grades."""

from __future__ import annotations

import io
import json
from pathlib import Path

from grading.engine.checks import episode_checks

from .info import PackInfo

PARQUET_BATCH = 1000
PARQUET_BATCH_BYTES = 256 << 20  # a batch's JSON lines stay far below pyarrow's 2 GiB block


def parquet_schema():
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(message)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("task_id", pa.string()),
                        ("version", pa.int64()),
                        ("sha256", pa.string()),
                        ("environment", pa.string()),
                        ("tools", pa.list_(pa.string())),
                        ("split", pa.string()),
                        ("index", pa.int64()),
                        ("response_only", pa.bool_()),
                    ]
                ),
            ),
        ]
    )


class SplitWriter:
    """One parquet file written in row batches. Each batch reaches pyarrow as JSON lines read by its
    JSON reader against the schema: the same table and the same file bytes as `Table.from_pylist`
    (a test compares them), without converting every value through Python objects, and without
    pandas, which pyarrow imports for any array built from a Python list (0.4 s of a build's
    start). A pandas frame cost 3× more again and gave nothing: the schema carries no pandas
    metadata."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[bytes] = []
        self.size = 0
        self.count = 0
        self.writer = None

    def add(self, row: dict) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.lines.append(line)
        self.size += len(line) + 1
        self.count += 1
        if len(self.lines) >= PARQUET_BATCH or self.size >= PARQUET_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        import pyarrow.json as pa_json
        import pyarrow.parquet as pq

        schema = parquet_schema()
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, schema, compression="zstd")
        if self.lines:
            data = b"\n".join(self.lines) + b"\n"
            # one block for the batch: a row must fit in a block, and any row fits this one
            table = pa_json.read_json(
                io.BytesIO(data),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
                parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
            )
            self.writer.write_table(table)
            self.lines, self.size = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


def parquet_row(document: dict, *, sha256: str, info: PackInfo, split: str, index: int) -> dict:
    environment = document.get("environment") or {}
    return {
        "data_source": f"gymwright/{info.slug}",
        "prompt": [{"role": "user", "content": document.get("prompt") or ""}],
        "ability": environment.get("id") or "default",
        "reward_model": {"style": "rubric", "ground_truth": document["id"]},
        "extra_info": {
            "task_id": document["id"],
            "version": int(document.get("version") or 1),
            "sha256": sha256,
            "environment": environment.get("id") or "default",
            "tools": list(environment.get("tools") or []),
            # Always true: a task whose rubric needs its episode has no parquet row (response_only_task).
            "split": split,
            "index": index,
            "response_only": True,
        },
    }


def response_only_task(document: dict) -> bool:
    """Whether a response alone grades the task: every check of its rubric reads the answer (none reads the
    agent's files, runs in its sandbox or reads its trajectory: `episode_checks`). Only such tasks have rows
    in data/*.parquet, which trainers' reward functions grade from the response text; the others ship as
    Harbor tasks (tasks/<id>/), whose verifier grades the whole episode. Graded from a sentence, their
    episode checks would be unscored and a reply that skipped the work would earn their reward's rest."""
    return not episode_checks(document.get("rubric"))
