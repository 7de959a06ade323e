"""The renderer: a second process that renders every task's Harbor folder into compressed tar entries while
the build writes the rest, so that the build's two halves run on two cores."""

from __future__ import annotations

import dataclasses
import marshal
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from .grader import grader_requirements, grader_zip
from .harbor import SharedFiles, harbor_files
from .info import PackError, PackInfo, sha256_hex
from .targz import DeflateSink, TarWriter, path_key

RENDER_BATCH = 64  # tasks per message to the renderer
PIPE_BYTES = 1 << 20
_CODE_ROOT = Path(__file__).resolve().parents[2]  # where `packs` and `grading` import from


@dataclasses.dataclass
class Spool:
    """The renderer's output: the task folders as raw deflate, and the digest of every file in them."""

    path: Path
    crc: int  # CRC-32 of the uncompressed tar entries
    size: int  # their length
    digests: dict[str, str]
    requirements: bytes  # grader/requirements.txt and grader/grader.pyz, made by the renderer from the
    grader_pyz: bytes  # engine files it was sent


class Renderer:
    """A second process that renders the task folders: each task's Harbor files, their digests,
    their tar entries, compressed, and the grader's zip and requirements. This process meanwhile
    reads the tasks, writes tasks.jsonl, the calibration and the parquet splits, and renders each
    rubric.json, which evens out the two processes' shares (profiled with py-spy on both), as `tar
    czf` is two processes too. Messages are plain
    data (`marshal`: no code can ride along) over a pipe, whose bounded buffer holds this process
    back when the renderer falls behind, so memory stays flat."""

    def __init__(self, *, top: str, info: PackInfo, spool_path: Path, log_path: Path):
        self.top, self.info, self.spool_path = top, info, spool_path
        self.log = open(log_path, "w+b")
        self.log_path = log_path
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": str(_CODE_ROOT) + (os.pathsep + path if path else "")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from packs.archive.renderer import render_main; render_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
        )
        try:  # a deeper pipe than the default 64 KiB, so that neither side waits on the other's pace per batch
            import fcntl

            fcntl.fcntl(self.process.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (ImportError, AttributeError, OSError):  # not Linux, or above /proc/sys/fs/pipe-max-size
            pass
        self.batch: list[tuple] = []
        self.finished = False

    def _send(self, message) -> None:
        try:
            _send_message(self.process.stdin, message)
        except (BrokenPipeError, OSError):
            self._failed()

    def _failed(self):
        self.process.wait()
        self.log.seek(0)
        said = self.log.read().decode("utf-8", "replace").strip().splitlines()
        raise PackError(
            "rendering the task folders failed: " + (said[-1] if said else f"exit {self.process.returncode}")
        )

    def start(self, *, engine: list[tuple[str, bytes]]) -> None:
        """`engine`: the grader's files (`grader_files()`), which the renderer zips and reads the
        requirements of (half a second that would otherwise hold up the tasks)."""
        self._send(
            {"top": self.top, "info": dataclasses.asdict(self.info), "spool": str(self.spool_path), "engine": engine}
        )

    def add(self, task: tuple) -> None:
        """(document, sha256, difficulty, its canonical JSON line, its rubric.json, {sha256: bytes} of its files)"""
        self.batch.append(task)
        if len(self.batch) >= RENDER_BATCH:
            self._send(self.batch)
            self.batch = []

    def finish(self) -> Spool:
        if self.batch:
            self._send(self.batch)
            self.batch = []
        self._send(None)
        self.process.stdin.close()
        try:
            result = _receive(self.process.stdout)
        except (EOFError, ValueError, TypeError):
            self._failed()
        # Its last message came whole: the build goes on while the process exits (stop() waits for it), which
        # freeing its tables of every file took 40 ms of the build's critical path.
        self.finished = True
        return Spool(
            path=self.spool_path,
            crc=result["crc"],
            size=result["size"],
            digests=result["digests"],
            requirements=result["requirements"],
            grader_pyz=result["grader_pyz"],
        )

    def stop(self) -> None:
        """Wait for the renderer to exit after its last message, or end it if it still works (the build failed or
        was cancelled)."""
        if self.process.poll() is None:
            try:
                if self.finished:
                    self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass
        self.log.close()
        self.log_path.unlink(missing_ok=True)


def _send_message(sink, message) -> None:
    data = marshal.dumps(message)
    sink.write(struct.pack("<Q", len(data)) + data)
    sink.flush()


def _receive(source) -> Any:
    """One message (`_send_message`): its length, then its marshal bytes, read whole: marshal.load
    reads a file object a few bytes at a time (the renderer's last message, the digest of every file,
    took 0.15 s that way)."""
    head = source.read(8)
    if len(head) != 8:
        raise EOFError("the build process stopped")
    return marshal.loads(source.read(struct.unpack("<Q", head)[0]))


def render_main() -> None:
    """The renderer process (`Renderer`): its work from stdin, the spool's CRC, length and file
    digests to stdout."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    config = _receive(source)
    top, info = config["top"], PackInfo(**config["info"])
    engine = [tuple(file) for file in config["engine"]]
    requirements, grader_pyz = grader_requirements(engine).encode(), grader_zip(engine)
    shared = SharedFiles(requirements, grader_pyz)
    first = dict(shared.first)
    digests: dict[str, str] = {}
    with open(config["spool"], "wb") as handle:
        deflate = DeflateSink(handle)
        spool = TarWriter(deflate)
        while True:
            batch = _receive(source)
            if batch is None:
                break
            for document, sha256, difficulty, line, rubric_json, blobs in batch:
                render_task(
                    spool=spool,
                    digests=digests,
                    first=first,
                    shared=shared,
                    top=top,
                    info=info,
                    document=document,
                    sha256=sha256,
                    difficulty=difficulty,
                    line=line,
                    rubric_json=rubric_json,
                    blobs=blobs,
                )
        spool.flush()
        deflate.close(final=False)
    _send_message(
        sink,
        {
            "crc": deflate.crc,
            "size": deflate.size,
            "digests": digests,
            "requirements": requirements,
            "grader_pyz": grader_pyz,
        },
    )


def render_task(
    *,
    spool: TarWriter,
    digests: dict,
    first: dict,
    shared: SharedFiles,
    top: str,
    info: PackInfo,
    document: dict,
    sha256: str,
    difficulty: str,
    line: bytes,
    rubric_json: bytes,
    blobs: dict,
) -> None:
    """One task's Harbor folder as tar entries into `spool`, each file's digest into `digests`; files
    shared by every task are stored in the first and hard-linked from the others (`first`)."""
    task_id = document["id"]
    items = [
        (relative, data, executable, digest, None)
        for relative, data, executable, digest in harbor_files(
            document,
            sha256_of_task=sha256,
            info=info,
            difficulty=difficulty,
            read_blob=blobs.__getitem__,
            task_json=line,
            rubric_json=rubric_json,
        )
    ]
    items += [
        (f"tasks/{task_id}/{name}", data, name in shared.executable, shared.digests[name], name)
        for name, data in shared.files.items()
    ]
    items.sort(key=lambda entry: path_key(entry[0]))
    for relative, data, executable, digest, shared_name in items:
        digests[relative] = digest or sha256_hex(data)
        arcname = f"{top}/{relative}"
        if shared_name is not None and shared_name in first:
            spool.add_link(arcname, f"{top}/{first[shared_name]}", executable=executable)
            continue
        if shared_name is not None:
            first[shared_name] = relative
        spool.add_bytes(arcname, data, executable=executable)
