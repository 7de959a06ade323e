"""Hostile task documents on their way through a pack build: what an author controls comes out as it went in."""

from __future__ import annotations

import json
import tarfile

from grading.engine import content_sha256
from packs import archive
from tests.packs.test_archive import document


def test_a_deeply_nested_or_large_task_document_reaches_the_pack_intact(tmp_path):
    """Deep nesting and large text arrive as they were: tests/task.json in the pack is the task's canonical
    JSON."""
    nested: dict = {}
    for _ in range(400):
        nested = {"n": nested}
    doc = dict(document(1), metadata={"deep": nested, "text": "é" * 200_000})
    item = archive.TaskItem(doc, content_sha256(doc), None)
    archive.build_pack(
        out=tmp_path / "p.tar.gz",
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
        tasks=[item],
        read_blob=lambda sha: b"",
        scratch_dir=tmp_path / "s",
    )
    with tarfile.open(tmp_path / "p.tar.gz") as tar:
        task_json = tar.extractfile("demo-1.0.0/tasks/task-001/tests/task.json").read()
    assert json.loads(task_json) == doc and content_sha256(json.loads(task_json)) == item.sha256
