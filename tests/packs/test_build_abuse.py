"""Hostile task documents on their way through a pack build: what an author controls comes out as it went in."""

from __future__ import annotations

import json
import socket
import tarfile
from pathlib import Path

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


def test_a_process_named_with_odd_bytes_does_not_stop_the_scratch_reaper(tmp_path):
    """The scratch reaper reads /proc/PID/stat of the pid a build folder's owner had; after a reuse that pid may be
    any process of the host, one a sandbox runs among them, named as its code likes (/proc/self/comm): a name with
    bytes that are not UTF-8, a ')' and blanks is read past, and the folder is the live process's."""
    import subprocess
    import sys
    import time

    from packs.services import scratch

    name = b"\xff) Z 1 2 3 ("
    child = subprocess.Popen(
        [sys.executable, "-c", f"open('/proc/self/comm', 'wb').write({name!r}); import time; time.sleep(60)"]
    )
    try:
        comm = Path(f"/proc/{child.pid}/comm")
        for _ in range(200):
            if comm.read_bytes().rstrip(b"\n") == name:
                break
            time.sleep(0.05)
        assert comm.read_bytes().rstrip(b"\n") == name
        stat = Path(f"/proc/{child.pid}/stat").read_bytes()
        started = scratch._process_start(child.pid)
        assert started == stat.rpartition(b")")[2].split()[19].decode()
        folder = tmp_path / "scratch"
        folder.mkdir()
        owner = {"host": socket.gethostname(), "pid": child.pid, "started": started}
        (folder / scratch.SCRATCH_OWNER).write_text(json.dumps(owner))
        assert scratch._scratch_orphaned(folder, building=True, now=time.time()) is False
    finally:
        child.kill()
        child.wait()  # no zombie named with odd bytes left for the rest of the run's /proc readers
        child.wait()
