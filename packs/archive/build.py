"""`build_pack`: two passes. The first goes over the tasks once, writing the pack's top files (tasks.jsonl, the
parquet splits, the calibration, the grader, the card, the manifest) to a scratch folder, rendering and hashing
every task's Harbor folder and spilling what it rendered to one scratch file (a task's own files, named by their
sha256, are not copied there); the second streams the archive (`targz`): the top files, then each task's folder
as the spill file has it, so that no task folder is rendered twice, held in memory or written as files."""

from __future__ import annotations

import hashlib
import itertools
import json
import marshal
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from grading.engine import canonical_json, canonical_json_exact
from grading.engine.models import GRADE_SCHEMA, RUBRIC_SCHEMA, TASK_SCHEMA

from .card import canary_guid, dataset_card
from .envdir import env_files, env_requirements, verifiers_requirements
from .grader import grader_files, grader_requirements, grader_zip
from .harbor import SharedFiles, harbor_files, shared_file_path, task_files
from .info import BUNDLE_DIR, PACK_SCHEMA, BuildResult, PackError, PackInfo, TaskItem, sha256_hex
from .manifest import indented_json, manifest_digest
from .parquet import SplitWriter, parquet_row, response_only_task
from .splits import DIFFICULTY_BINS, difficulty_of, split_of
from .targz import Entry, path_key, write_targz

# The share of the progress bar for the first pass; the second (writing the archive) has the rest.
WRITE_SHARE = 0.8


class Scratch:
    """Writes the pack's top files under its root folder and remembers the sha256 of every file of the pack."""

    def __init__(self, root: Path):
        self.root = root
        self.digests: dict[str, str] = {}
        self.written: list[str] = []  # the top files, in the folder

    def write(self, relative: str, data: bytes) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.written.append(relative)
        self.digests[relative] = sha256_hex(data)

    def add_existing(self, relative: str) -> None:
        self.written.append(relative)
        with open(self.root / relative, "rb") as handle:
            self.digests[relative] = hashlib.file_digest(handle, "sha256").hexdigest()


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

    The first pass streams the tasks: each task's line of tasks.jsonl, its parquet row and its calibration
    are written to `scratch_dir`, and its Harbor folder is rendered and hashed. Then the manifest (which needs
    every digest) and the dataset card are written, and the second pass writes the archive in path order: the
    top files, then each task's folder as the first pass rendered it (spilled to one file under
    `scratch_dir`). Files shared by every task (the grader, the verifier scripts) are stored once and hard-linked.
    `read_blob(sha256)` returns a file's bytes (called in both passes). `progress(done)` is called as tasks
    are written and as the archive is (it may raise BuildCancelled). `scratch_dir` must be a folder this build
    owns; what the build writes there is removed at the end. Raises PackError for bad input.
    """
    top = f"{info.slug}-{info.version}"
    root = Path(scratch_dir) / top
    folders = Path(scratch_dir) / f"{top}.folders"  # the spill file, beside the tree (never in the archive)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    try:
        scratch = Scratch(root)
        with open(folders, "wb") as spill:
            shared, manifest = _write_top_files(
                scratch=scratch, info=info, tasks=tasks, read_blob=read_blob, progress=progress, spill=spill
            )
        manifest["build"] = dict(build_record or {})
        (root / "manifest.json").write_bytes(indented_json(manifest))
        top_files = sorted([*scratch.written, "manifest.json"], key=path_key)
        entries = itertools.chain(
            (Entry(relative, source=root / relative) for relative in top_files),
            _task_folders(
                folders=folders, total=len(manifest["tasks"]), shared=shared, read_blob=read_blob, progress=progress
            ),
        )
        sha256, size = write_targz(out=out, top=top, entries=entries)
        return BuildResult(manifest=manifest, sha256=sha256, size=size, content_sha256=manifest["content_sha256"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
        folders.unlink(missing_ok=True)


def _write_top_files(
    *, scratch: Scratch, info: PackInfo, tasks: Iterable[TaskItem], read_blob, progress, spill: BinaryIO
) -> tuple[SharedFiles, dict]:
    """The first pass: the top files but manifest.json under `scratch`, the digest of every file of the pack,
    each task's folder in `spill` (`_spill_folder`); the files every task folder shares and the manifest."""
    root = scratch.root
    engine = grader_files()
    for name, data in engine:
        scratch.write(f"grader/{name}", data)
    shared = SharedFiles(grader_requirements(engine).encode(), grader_zip(engine))
    scratch.write("grader/requirements.txt", shared.files["tests/requirements.txt"])
    scratch.write("grader/grader.pyz", shared.files["tests/grader.pyz"])
    scratch.write("reward.py", (BUNDLE_DIR / "reward.py").read_bytes())
    scratch.write("inspect_task.py", (BUNDLE_DIR / "inspect_task.py").read_bytes())

    splits = {name: SplitWriter(root / "data" / f"{name}.parquet") for name in ("train", "test")}
    histogram: Counter = Counter()
    environments: Counter = Counter()
    harbor_only: list[str] = []
    human_flagged: list[str] = []  # tasks whose reward blind human scores flag
    entries: list[dict] = []
    previous_id = None
    with open(root / "tasks.jsonl", "wb") as jsonl, open(root / "calibration.json", "wb") as calibration_file:
        calibration_file.write(b'{"schema": "gymwright.calibration/v1", "tasks": {')
        for done, item in enumerate(tasks, start=1):
            # Every file of a task is written from the one canonical document, as tasks.jsonl holds it: a
            # rubric written with "pass_threshold": 1.0 was 1.0 in rubric.json but 1 in tasks.jsonl, so a pack
            # rebuilt from its own tasks.jsonl changed rubric.json's bytes and content_sha256.
            text, exact = canonical_json_exact(item.document)
            document = item.document if exact else json.loads(text)
            task_id = document.get("id")
            if not isinstance(task_id, str) or not task_id:
                raise PackError(f"task number {done} has no id")
            if previous_id is not None and task_id <= previous_id:
                raise PackError(f"task {task_id!r} is duplicated or out of order (after {previous_id!r})")
            previous_id = task_id
            split = split_of(task_id, info.test_ratio)
            difficulty = difficulty_of(item.calibration)
            if ((item.calibration or {}).get("human_prediction") or {}).get("flagged"):
                human_flagged.append(task_id)
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
            line = text.encode("utf-8")  # tasks.jsonl and tests/task.json: serialised once
            jsonl.write(line + b"\n")
            calibration_file.write(
                (b"" if done == 1 else b",")
                + b"\n"
                + json.dumps(task_id).encode()
                + b": "
                + canonical_json(item.calibration).encode()
            )
            folder = _task_folder(
                document,
                sha256=item.sha256,
                difficulty=difficulty,
                line=line,
                info=info,
                shared=shared,
                read_blob=read_blob,
            )
            for relative, data, _, digest, _ in folder:
                scratch.digests[relative] = digest or sha256_hex(data)
            _spill_folder(spill, document["id"], folder)
            if progress is not None:
                progress(int(done * WRITE_SHARE))
        calibration_file.write(b"\n}}\n")
    for writer in splits.values():
        writer.close()
    for name in ("tasks.jsonl", "calibration.json", "data/train.parquet", "data/test.parquet"):
        scratch.add_existing(name)
    if harbor_only:  # agentic tasks: the environment a trainer drives live (env/)
        bundled_env = env_files()
        for name, data in bundled_env:
            scratch.write(name, data)
        scratch.write("env/requirements.txt", env_requirements(engine, bundled_env).encode())
        scratch.write("env/requirements-verifiers.txt", verifiers_requirements(engine, bundled_env).encode())
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
            info=info,
            counts=counts,
            histogram=histogram,
            environments=environments,
            harbor_only=harbor_only,
            human_flagged=human_flagged,
        ).encode("utf-8"),
    )
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
    return shared, manifest


def _task_folder(
    document: dict, *, sha256: str, difficulty: str, line: bytes, info: PackInfo, shared: SharedFiles, read_blob
) -> list[tuple[str, bytes, bool, str | None, str | None]]:
    """A task's Harbor folder, the same in both passes, in path order: (path in the pack, bytes, executable, the
    sha256 when already known, the name in `shared.files` of a file every folder shares)."""
    blobs = {}
    for _, path, blob_sha256, _ in task_files(document):
        if blob_sha256 not in blobs:
            data = read_blob(blob_sha256)
            if sha256_hex(data) != blob_sha256:
                raise PackError(f"task {document['id']}: file {path!r} does not match its sha256")
            blobs[blob_sha256] = data
    items = [
        (relative, data, executable, digest, None)
        for relative, data, executable, digest in harbor_files(
            document,
            sha256_of_task=sha256,
            info=info,
            difficulty=difficulty,
            read_blob=blobs.__getitem__,
            task_json=line,
            rubric_json=indented_json(document.get("rubric")),
        )
    ]
    items += [
        (
            f"tasks/{document['id']}/{shared_file_path(document, name)}",
            data,
            name in shared.executable,
            shared.digests[name],
            name,
        )
        for name, data in shared.files.items()
    ]
    items.sort(key=lambda item: path_key(item[0]))
    return items


def _spill_folder(spill: BinaryIO, task_id: str, folder: list[tuple[str, bytes, bool, str | None, str | None]]) -> None:
    """A task's folder as the second pass writes it, appended to `spill` (one marshal record a task): the
    bytes of what was rendered; of a task's own file only its sha256 (read again, and checked again, when
    the archive is written); of a file every folder shares only its name in `shared.files`."""
    record = []
    for relative, data, executable, digest, name in folder:
        if name is not None:
            record.append((relative, None, executable, None, name))
        elif digest is not None:  # a task's or environment's file, as stored: its bytes stay in the blob store
            record.append((relative, None, executable, digest, None))
        else:
            record.append((relative, data, executable, None, None))
    marshal.dump((task_id, record), spill)


def _task_folders(*, folders: Path, total: int, shared: SharedFiles, read_blob, progress) -> Iterator[Entry]:
    """The second pass: every task's folder as archive entries, as the first pass rendered it (`folders`, the
    spill file); a file every folder shares is stored once (in the grader's folder, or the first task's) and
    hard-linked from the others."""
    first = dict(shared.first)  # where each shared file is stored
    with open(folders, "rb") as spill:
        for done in range(1, total + 1):
            task_id, record = marshal.load(spill)
            blobs: dict[str, bytes] = {}  # a file a folder holds twice (workspace and tests) is read once
            for relative, data, executable, digest, name in record:
                if name is not None and name in first:
                    yield Entry(relative, link=first[name], executable=executable)
                    continue
                if name is not None:
                    first[name] = relative
                    data = shared.files[name]
                elif digest is not None:
                    if digest not in blobs:
                        blobs[digest] = read_blob(digest)
                        if sha256_hex(blobs[digest]) != digest:
                            raise PackError(f"task {task_id}: file {relative!r} does not match its sha256")
                    data = blobs[digest]
                yield Entry(relative, data=data, executable=executable)
            if progress is not None:
                progress(int(total * WRITE_SHARE + total * (1 - WRITE_SHARE) * done / total))
