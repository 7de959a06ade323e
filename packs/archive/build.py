"""`build_pack`: one pass over the tasks that writes the pack's files and packs them into the .tar.gz."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from grading.engine import canonical_json
from grading.engine.models import GRADE_SCHEMA, RUBRIC_SCHEMA, TASK_SCHEMA

from .card import canary_guid, dataset_card
from .grader import grader_files
from .harbor import task_files
from .info import BUNDLE_DIR, PACK_SCHEMA, BuildResult, PackError, PackInfo, TaskItem, sha256_hex
from .manifest import indented_json, manifest_digest
from .parquet import SplitWriter, parquet_row, response_only_task
from .renderer import Renderer, Spool
from .splits import DIFFICULTY_BINS, difficulty_of, split_of
from .targz import WRITE_SHARE, write_tar


class Scratch:
    """Writes files under the pack's root folder and remembers each file's sha256."""

    def __init__(self, root: Path):
        self.root = root
        self.digests: dict[str, str] = {}

    def write(self, relative: str, data: bytes) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.digests[relative] = sha256_hex(data)

    def add_existing(self, relative: str) -> None:
        digest = hashlib.sha256()
        with open(self.root / relative, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        self.digests[relative] = digest.hexdigest()


def build_pack(
    *,
    out: BinaryIO | str | Path,
    info: PackInfo,
    tasks: Iterable[TaskItem],
    read_blob: Callable[[str], bytes],
    scratch_dir: str | Path,
    build_record: dict | None = None,
    progress: Callable[[int], None] | None = None,
) -> BuildResult:
    """Write the pack for `tasks` (sorted by task id, each id once) as a .tar.gz to `out`.

    One pass over the tasks, streaming: each task's line of tasks.jsonl, its parquet row and its
    calibration are written to `scratch_dir`, while a second process (`_Renderer`) renders its
    Harbor folder once, hashes its files and writes them as compressed tar entries to a spool file
    there: the build's two halves on two cores. Then the manifest (which needs every digest) and the
    dataset card are written, and the archive is assembled in path order: the top files, then the
    spooled task folders, joined into one gzip stream. Files shared by every task (the grader, the
    verifier scripts) are stored once and hard-linked.
    `read_blob(sha256)` returns a file's bytes. `progress(done)` is called as tasks are written
    and as the archive is compressed (it may raise BuildCancelled). `scratch_dir` must be a
    folder this build owns; what the build writes there is removed at the end. Raises PackError
    for bad input.
    """
    top = f"{info.slug}-{info.version}"
    scratch_dir = Path(scratch_dir)
    root = scratch_dir / top
    spool_path = scratch_dir / f"{top}.tasks.tar.deflate"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    renderer = None
    try:
        renderer = Renderer(top=top, info=info, spool_path=spool_path, log_path=scratch_dir / f"{top}.renderer.log")
        manifest, spool = _write_tasks(
            root=root, top=top, info=info, tasks=tasks, read_blob=read_blob, renderer=renderer, progress=progress
        )
        manifest["build"] = dict(build_record or {})
        (root / "manifest.json").write_bytes(indented_json(manifest))
        sha256, size = write_tar(
            root=root, top=top, out=out, spool=spool, total=len(manifest["tasks"]), progress=progress
        )
        return BuildResult(manifest=manifest, sha256=sha256, size=size, content_sha256=manifest["content_sha256"])
    finally:
        if renderer is not None:
            renderer.stop()
        shutil.rmtree(root, ignore_errors=True)
        spool_path.unlink(missing_ok=True)


def _write_tasks(
    *, root: Path, top: str, info: PackInfo, tasks: Iterable[TaskItem], read_blob, renderer: Renderer, progress
) -> tuple[dict, Spool]:
    """The top files under `root`, every task's Harbor folder through `renderer`; the manifest and the spool."""
    scratch = Scratch(root)
    engine = grader_files()
    renderer.start(engine=engine)
    for name, data in engine:
        scratch.write(f"grader/{name}", data)
    scratch.write("reward.py", (BUNDLE_DIR / "reward.py").read_bytes())
    scratch.write("inspect_task.py", (BUNDLE_DIR / "inspect_task.py").read_bytes())

    splits = {name: SplitWriter(root / "data" / f"{name}.parquet") for name in ("train", "test")}
    histogram: Counter = Counter()
    environments: Counter = Counter()
    harbor_only: list[str] = []
    entries: list[dict] = []
    previous_id = None
    with open(root / "tasks.jsonl", "wb") as jsonl, open(root / "calibration.json", "wb") as calibration_file:
        calibration_file.write(b'{"schema": "gymwright.calibration/v1", "tasks": {')
        for done, item in enumerate(tasks, start=1):
            document = item.document
            task_id = document.get("id")
            if not isinstance(task_id, str) or not task_id:
                raise PackError(f"task number {done} has no id")
            if previous_id is not None and task_id <= previous_id:
                raise PackError(f"task {task_id!r} is duplicated or out of order (after {previous_id!r})")
            previous_id = task_id
            split = split_of(task_id, info.test_ratio)
            difficulty = difficulty_of(item.calibration)
            histogram[difficulty] += 1
            environments[(document.get("environment") or {}).get("id") or "default"] += 1
            entries.append(
                {"id": task_id, "version": int(document.get("version") or 1), "sha256": item.sha256, "split": split}
            )
            if response_only_task(document):
                splits[split].add(
                    parquet_row(document, sha256=item.sha256, info=info, split=split, index=splits[split].count)
                )
            else:
                harbor_only.append(task_id)
            blobs = {}
            for _, path, sha256, _ in task_files(document):
                if sha256 not in blobs:
                    data = read_blob(sha256)
                    if sha256_hex(data) != sha256:
                        raise PackError(f"task {task_id}: file {path!r} does not match its sha256")
                    blobs[sha256] = data
            line = canonical_json(document).encode("utf-8")  # tasks.jsonl and tests/task.json: serialised once
            jsonl.write(line + b"\n")
            calibration_file.write(
                (b"" if done == 1 else b",")
                + b"\n"
                + json.dumps(task_id).encode()
                + b": "
                + canonical_json(item.calibration).encode()
            )
            # rubric.json is rendered here: it evens out the two processes' shares
            rubric_json = indented_json(document.get("rubric"))
            renderer.add((document, item.sha256, difficulty, line, rubric_json, blobs))
            if progress is not None:
                progress(int(done * WRITE_SHARE))
        calibration_file.write(b"\n}}\n")
    for writer in splits.values():
        writer.close()
    # what needs only this process's files first, while the renderer works off what it was sent
    for name in ("tasks.jsonl", "calibration.json", "data/train.parquet", "data/test.parquet"):
        scratch.add_existing(name)
    split_counts = Counter(entry["split"] for entry in entries)
    counts = {
        "tasks": len(entries),
        "train": split_counts["train"],
        "test": split_counts["test"],
        "parquet": {"train": splits["train"].count, "test": splits["test"].count},
    }
    scratch.write(
        "README.md",
        dataset_card(
            info=info, counts=counts, histogram=histogram, environments=environments, harbor_only=harbor_only
        ).encode("utf-8"),
    )
    spool = renderer.finish()
    scratch.write("grader/requirements.txt", spool.requirements)
    scratch.write("grader/grader.pyz", spool.grader_pyz)
    scratch.digests.update(spool.digests)
    manifest = {
        "schema": PACK_SCHEMA,
        "name": info.name,
        "slug": info.slug,
        "version": info.version,
        "description": info.description,
        "licence": info.licence,
        "gymwright_version": info.gymwright_version,
        "schemas": {"task": TASK_SCHEMA, "rubric": RUBRIC_SCHEMA, "grade": GRADE_SCHEMA},
        "counts": counts,
        "test_ratio": info.test_ratio,
        "difficulty": {name: histogram.get(name, 0) for name in DIFFICULTY_BINS},
        "canary": canary_guid(info.slug),
        "tasks": entries,
        "files": dict(sorted(scratch.digests.items())),
    }
    manifest["content_sha256"] = manifest_digest(manifest)
    return manifest, spool
