"""The pure archive writer: reproducible bytes, contents per docs/formats.md "Task pack", verification."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pandas as pd
import pytest

from grading.engine import content_sha256
from packs import archive
from tests.support.services import missing


def document(index: int, *, prompt: str | None = None) -> dict:
    return {
        "schema": "gymwright.task/v1",
        "id": f"task-{index:03d}",
        "version": 2,
        "title": "t",
        "prompt": prompt or f"What is {index} + 1?",
        "environment": {
            "id": "env",
            "version": 1,
            "image": None,
            "dockerfile": None,
            "setup": None,
            "network": "none",
            "limits": {"cpus": 1, "memory_mb": 1024, "timeout_s": 600, "max_steps": 30},
            "tools": ["bash", "submit"],
            "custom_tools": [],
            "files": [],
            "checks_module": None,
        },
        "files": [],
        "solution": {"script": None, "answer": str(index + 1)},
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "right", "kind": "string_match", "points": 1, "expected": str(index + 1)}],
        },
        "tags": [],
        "metadata": {},
    }


def items(count: int, **kwargs):
    for index in range(count):
        doc = document(index, **kwargs)
        yield archive.TaskItem(
            doc,
            content_sha256(doc),
            {"policy": "oracle", "n": 4, "pass_rate": 0.25, "pass_at_k": {"1": 0.25}, "mean_reward": 0.3},
        )


def build(tmp_path, name: str, count: int = 30, record: dict | None = None, **kwargs) -> archive.BuildResult:
    return archive.build_pack(
        out=tmp_path / name,
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
        tasks=items(count, **kwargs),
        read_blob=lambda sha: b"",
        scratch_dir=tmp_path / f"s-{name}",
        build_record=record or {},
    )


def members(path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return {member.name: member for member in tar.getmembers()}


def test_it_builds_the_same_bytes_twice_except_the_build_record(tmp_path):
    first = build(tmp_path, "a.tar.gz", record={"created_at": "2026-01-01T00:00:00Z", "created_by": "x"})
    second = build(tmp_path, "b.tar.gz", record={"created_at": "2026-01-01T00:00:00Z", "created_by": "x"})
    third = build(tmp_path, "c.tar.gz", record={"created_at": "2027-05-05T00:00:00Z", "created_by": "y"})
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert first.sha256 == second.sha256 != third.sha256
    assert first.content_sha256 == third.content_sha256
    assert first.manifest["files"] == third.manifest["files"]
    # a different task changes the digest
    other = build(tmp_path, "d.tar.gz", prompt="something else")
    assert other.content_sha256 != first.content_sha256


def test_the_archive_is_sorted_with_fixed_metadata_and_a_gzip_without_timestamp(tmp_path):
    build(tmp_path, "a.tar.gz")
    raw = (tmp_path / "a.tar.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip MTIME
    assert raw[3] & 0x08 == 0  # no FNAME
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        names = tar.getnames()
        infos = tar.getmembers()
    # sorted path by path, the task folders (written in the second pass) last
    assert names == sorted(names, key=lambda name: (name.split("/")[1] == "tasks", name.split("/")))
    assert all(
        info.uid == 0 and info.gid == 0 and info.mtime == archive.FIXED_MTIME and not info.uname for info in infos
    )
    assert all(name.startswith("demo-1.0.0") for name in names)


def test_the_pack_holds_every_part_of_the_format(tmp_path):
    result = build(tmp_path, "a.tar.gz", count=40)
    names = members(tmp_path / "a.tar.gz")
    top = "demo-1.0.0/"
    for name in (
        "manifest.json",
        "README.md",
        "tasks.jsonl",
        "data/train.parquet",
        "data/test.parquet",
        "reward.py",
        "calibration.json",
        "grader/requirements.txt",
        "grader/grading/engine/scoring.py",
        "tasks/task-000/instruction.md",
        "tasks/task-000/task.toml",
        "tasks/task-000/environment/Dockerfile",
        "tasks/task-000/solution/solve.sh",
        "tasks/task-000/tests/test.sh",
        "tasks/task-000/rubric.json",
    ):
        assert top + name in names, name
    manifest = result.manifest
    assert manifest["counts"]["tasks"] == 40
    assert manifest["counts"]["train"] + manifest["counts"]["test"] == 40
    assert [task["id"] for task in manifest["tasks"]] == [f"task-{i:03d}" for i in range(40)]
    assert all(task["split"] == archive.split_of(task["id"], 0.1) for task in manifest["tasks"])
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        train = pd.read_parquet(io.BytesIO(tar.extractfile(top + "data/train.parquet").read()))
        card = tar.extractfile(top + "README.md").read().decode()
        lines = tar.extractfile(top + "tasks.jsonl").read().decode().splitlines()
        calibration = json.loads(tar.extractfile(top + "calibration.json").read())
    assert list(train.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    row = train.iloc[0]
    assert row["data_source"] == "gymwright/demo"
    assert list(row["prompt"])[0]["role"] == "user"
    assert row["reward_model"]["style"] == "rubric"
    assert row["reward_model"]["ground_truth"] == row["extra_info"]["task_id"]
    assert len(train) == manifest["counts"]["train"]
    assert "| in band | 40 |" in card and archive.canary_guid("demo") in card
    for word in ("verl", "TRL", "Harbor", "Inspect", "Licence"):
        assert word in card
    assert json.loads(lines[0]) == document(0)
    assert calibration["tasks"]["task-001"]["pass_rate"] == 0.25


def test_the_split_is_stable_and_near_the_ratio():
    ids = [f"some-task-{i}" for i in range(2000)]
    test = [task for task in ids if archive.split_of(task, 0.1) == "test"]
    assert 150 < len(test) < 250
    assert [archive.split_of(task, 0.1) for task in ids] == [archive.split_of(task, 0.1) for task in ids]
    assert all(archive.split_of(task, 0.0) == "train" for task in ids)


def test_it_refuses_tasks_out_of_order_or_duplicated(tmp_path):
    doc = document(1)
    twice = [archive.TaskItem(doc, "x"), archive.TaskItem(doc, "x")]
    with pytest.raises(archive.PackError, match="duplicated or out of order"):
        archive.build_pack(
            out=tmp_path / "a.tar.gz",
            info=archive.PackInfo(slug="d", name="d", version="1.0.0"),
            tasks=twice,
            read_blob=lambda sha: b"",
            scratch_dir=tmp_path / "s",
        )
    assert not (tmp_path / "s" / "d-1.0.0").exists()


def test_verify_accepts_a_good_pack_and_names_each_mismatch(tmp_path):
    build(tmp_path, "a.tar.gz")
    good = archive.verify_pack(tmp_path / "a.tar.gz")
    assert good.ok and good.problems == [] and good.files_checked > 20
    # rewrite one member's bytes, keep the manifest
    with tarfile.open(tmp_path / "a.tar.gz") as source, tarfile.open(tmp_path / "bad.tar.gz", "w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("tasks/task-003/instruction.md"):
                data = b"changed"
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    bad = archive.verify_pack(tmp_path / "bad.tar.gz")
    assert not bad.ok
    assert any(problem.startswith("tasks/task-003/instruction.md: sha256") for problem in bad.problems)
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes((tmp_path / "a.tar.gz").read_bytes()[:5000])
    cut = archive.verify_pack(truncated)
    assert not cut.ok and "damaged" in cut.problems[0]
    # the same files in a folder its manifest does not name (repacked under another name)
    with tarfile.open(tmp_path / "a.tar.gz") as source, tarfile.open(tmp_path / "moved.tar.gz", "w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            member.name = member.name.replace("demo-1.0.0", "demo-9.9.9", 1)
            if member.islnk():
                member.linkname = member.linkname.replace("demo-1.0.0", "demo-9.9.9", 1)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    moved = archive.verify_pack(tmp_path / "moved.tar.gz")
    assert moved.problems == ["demo-9.9.9/: the pack's folder, where its manifest names demo-1.0.0/"]


def repack_with_manifest(source_path, target_path, edit) -> None:
    """The pack at `source_path` with its manifest.json rewritten by `edit(manifest)`, every other member as it was."""
    with tarfile.open(source_path) as source, tarfile.open(target_path, "w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("/manifest.json"):
                manifest = json.loads(data)
                edit(manifest)
                data = json.dumps(manifest).encode()
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)


def _drop_a_task(manifest):
    manifest["tasks"].pop()


def _move_a_task_to_test(manifest):
    task = next(task for task in manifest["tasks"] if task["split"] == "train")
    task["split"] = "test"


def _rename_a_task(manifest):
    manifest["tasks"][0]["id"] = "task-999"


def _change_the_counts(manifest):
    manifest["counts"]["tasks"] += 1


def _change_the_name(manifest):
    manifest["name"] = "Another pack"


@pytest.mark.parametrize(
    "edit", [_drop_a_task, _move_a_task_to_test, _rename_a_task, _change_the_counts, _change_the_name]
)
def test_the_manifest_digest_covers_the_task_list_and_every_other_field(tmp_path, edit):
    build(tmp_path, "a.tar.gz", count=4)
    repack_with_manifest(tmp_path / "a.tar.gz", tmp_path / "same.tar.gz", lambda manifest: None)
    assert archive.verify_pack(tmp_path / "same.tar.gz").ok  # rewriting the JSON alone changes nothing
    repack_with_manifest(tmp_path / "a.tar.gz", tmp_path / "edited.tar.gz", edit)
    edited = archive.verify_pack(tmp_path / "edited.tar.gz")
    assert not edited.ok
    assert edited.problems == ["manifest.json: content_sha256 does not match the manifest's content"]


def test_the_build_record_is_outside_the_manifest_digest(tmp_path):
    build(tmp_path, "a.tar.gz", count=4)
    repack_with_manifest(tmp_path / "a.tar.gz", tmp_path / "b.tar.gz", lambda m: m["build"].update(by="someone"))
    assert archive.verify_pack(tmp_path / "b.tar.gz").ok


def test_the_archive_writer_and_the_bundled_files_import_no_django():
    import subprocess
    import sys

    code = (
        "import sys; import packs.archive; sys.path.insert(0, 'packs/bundle'); "
        "assert not [m for m in sys.modules if m == 'django' or m.startswith('django.')], 'django imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_virtualenvs_install_the_requirements_a_pack_ships(tmp_path):
    """`make grader-requirements` (what the grader, Inspect and trainer virtualenvs install) prints the
    grader/requirements.txt a pack carries (the Makefile once called the function with an old signature, and
    only a clone without cached virtualenvs noticed)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "grader-requirements"], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    build(tmp_path, "a.tar.gz", count=2)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        shipped = tar.extractfile("demo-1.0.0/grader/requirements.txt").read().decode()
    assert done.stdout == shipped
    assert "pydantic==" in shipped


def test_the_harbor_layout_follows_file_roles(tmp_path):
    blobs = {b"w": "workspace", b"p": "protected", b"g": "grader"}
    doc = document(1)
    import hashlib

    doc["files"] = [
        {
            "path": f"{role}.txt",
            "sha256": hashlib.sha256(data).hexdigest(),
            **({} if role == "workspace" else {"role": role}),
        }
        for data, role in blobs.items()
    ]
    by_sha = {hashlib.sha256(data).hexdigest(): data for data in blobs}
    archive.build_pack(
        out=tmp_path / "r.tar.gz",
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
        tasks=[archive.TaskItem(doc, content_sha256(doc), None)],
        read_blob=by_sha.__getitem__,
        scratch_dir=tmp_path / "s",
        build_record={},
    )
    base = "demo-1.0.0/tasks/task-001/"
    names = members(tmp_path / "r.tar.gz")
    # The agent's image has workspace and protected files; grader files only reach the verifier,
    # which also puts protected files back before grading.
    assert base + "environment/workspace/workspace.txt" in names
    assert base + "environment/workspace/protected.txt" in names
    assert base + "environment/workspace/grader.txt" not in names
    assert base + "tests/grader-files/grader.txt" in names and base + "tests/grader-files/protected.txt" in names
    assert base + "tests/grader-files/workspace.txt" not in names
    with tarfile.open(tmp_path / "r.tar.gz") as tar:
        line = tar.extractfile("demo-1.0.0/tasks.jsonl").read().decode().splitlines()[0]
    assert {f["path"]: f.get("role") for f in json.loads(line)["files"]} == {
        "workspace.txt": None,
        "protected.txt": "protected",
        "grader.txt": "grader",
    }


def test_shared_files_are_stored_once_and_hard_linked_with_their_modes(tmp_path):
    """The grader and the verifier's scripts are stored once and linked from every task folder; executables keep
    their mode through the link; a path past tar's 100 bytes takes a GNU long name and unpacks whole."""
    import hashlib
    import subprocess

    long_path = "deep/" * 20 + "file.txt"
    doc = document(2)
    doc["files"] = [{"path": long_path, "sha256": hashlib.sha256(b"long").hexdigest()}]
    tasks = [*items(2), archive.TaskItem(doc, content_sha256(doc), None)]
    archive.build_pack(
        out=tmp_path / "l.tar.gz",
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
        tasks=tasks,
        read_blob=lambda sha: b"long",
        scratch_dir=tmp_path / "s",
    )
    top = "demo-1.0.0/"
    found = members(tmp_path / "l.tar.gz")
    assert found[top + "grader/grader.pyz"].isfile() and found[top + "tasks/task-000/tests/test.sh"].isfile()
    for task in ("task-000", "task-001", "task-002"):
        assert found[f"{top}tasks/{task}/tests/grader.pyz"].linkname == top + "grader/grader.pyz"
        assert found[f"{top}tasks/{task}/solution/solve.sh"].mode == 0o755
        assert found[f"{top}tasks/{task}/instruction.md"].mode == 0o644
    link = found[top + "tasks/task-002/tests/test.sh"]
    assert link.islnk() and link.linkname == top + "tasks/task-000/tests/test.sh" and link.mode == 0o755
    assert archive.verify_pack(tmp_path / "l.tar.gz").ok
    subprocess.run(["tar", "xzf", str(tmp_path / "l.tar.gz"), "-C", str(tmp_path)], check=True)
    assert (tmp_path / top / "tasks/task-002/environment/workspace" / long_path).read_bytes() == b"long"
    assert (tmp_path / top / "tasks/task-002/tests/test.sh").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        "",
        0,
        -0.0,
        1.0,
        1e16,
        1e-7,
        2**70,
        -3,
        True,
        False,
        None,
        float("nan"),
        float("inf"),
        float("-inf"),
        {"b": 1, "a": [1, 2.5, {"z": None, "y": [[], {}]}], "é": 'ünï\u2028\x00"\\\n', "": True},
        [[[]], [{}], {"k": [{"k": ["v"]}]}, ("tuple", 1)],
        {"files": {f"tasks/t-{n}/f.txt": f"{n:064x}" for n in range(300, 0, -1)}},
        document(7)["rubric"],
        document(7),
    ],
)
def test_indented_json_is_the_json_modules_text(value):
    # manifest.json and rubric.json must not change with the writer that makes them faster
    assert archive.manifest.indented_json(value) == (
        json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    ).encode("utf-8")


def test_indented_json_leaves_what_is_not_plain_json_to_the_json_module():
    assert archive.manifest.indented_json({1: "a", 2: "b"}) == b'{\n "1": "a",\n "2": "b"\n}\n'
    with pytest.raises(TypeError):
        archive.manifest.indented_json({"a": object()})
    with pytest.raises(TypeError):
        archive.manifest.indented_json({1: "a", "b": 2})


def test_the_manifest_and_rubric_files_are_the_json_modules_text(tmp_path):
    build(tmp_path, "m.tar.gz", count=3)
    with tarfile.open(tmp_path / "m.tar.gz") as tar:
        manifest = tar.extractfile("demo-1.0.0/manifest.json").read()
        rubric = tar.extractfile("demo-1.0.0/tasks/task-001/rubric.json").read()
    for text in (manifest, rubric):
        assert text == (json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def test_the_build_reports_progress_in_order_up_to_the_task_count(tmp_path):
    seen: list[int] = []
    archive.build_pack(
        out=tmp_path / "p.tar.gz",
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
        tasks=items(25),
        read_blob=lambda sha: b"",
        scratch_dir=tmp_path / "s",
        progress=seen.append,
    )
    assert seen == sorted(seen) and seen[-1] == 25 and seen[0] <= 1
    # writing the tasks, then compressing: the bar moves in both
    assert any(value < 25 * archive.build.WRITE_SHARE for value in seen) and seen.count(25) < len(seen)
    # nothing but the archive is left in the scratch folder
    assert not any((tmp_path / "s").iterdir())


def test_the_archive_is_one_gzip_member_any_gunzip_reads(tmp_path):
    import shutil
    import subprocess
    import zlib

    build(tmp_path, "a.tar.gz", count=40)
    raw = (tmp_path / "a.tar.gz").read_bytes()
    inflater = zlib.decompressobj(31)  # a gzip member, its CRC-32 and length checked
    tar_bytes = inflater.decompress(raw)
    assert inflater.eof and inflater.unused_data == b""  # nothing after the one member
    assert gzip.decompress(raw) == tar_bytes and len(tar_bytes) % tarfile.RECORDSIZE == 0
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        assert len(tar.getnames()) > 40 * 8
    if not shutil.which("gzip"):
        missing("gzip", "apt-get install gzip")
    assert subprocess.run(["gzip", "-t", str(tmp_path / "a.tar.gz")]).returncode == 0


@pytest.mark.parametrize("at", [10, 190])  # writing the tasks; packing the archive (from 160 of 200)
def test_a_cancelled_build_leaves_nothing_in_its_scratch_folder(tmp_path, at):
    def progress(done):
        if done >= at:
            raise archive.BuildCancelled()

    with pytest.raises(archive.BuildCancelled):
        archive.build_pack(
            out=tmp_path / "p.tar.gz",
            info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
            tasks=items(200),
            read_blob=lambda sha: b"",
            scratch_dir=tmp_path / "s",
            progress=progress,
        )
    assert not any((tmp_path / "s").iterdir())


def test_a_file_changed_in_the_store_while_the_archive_is_written_fails_the_build(tmp_path):
    """The second pass writes a task's own files from the store again (the spill file keeps only their sha256)
    and checks them again: bytes that changed since the first pass hashed them are refused, not packed."""
    import hashlib

    data = b"workspace bytes"
    sha = hashlib.sha256(data).hexdigest()
    docs = []
    for index in range(10):
        doc = document(index)
        doc["files"] = [{"path": "w.txt", "sha256": sha}]
        docs.append(doc)
    packing = []

    def progress(done):
        if done > 10 * archive.build.WRITE_SHARE:  # the second pass has written a task folder
            packing.append(done)

    with pytest.raises(archive.PackError, match="does not match its sha256"):
        archive.build_pack(
            out=tmp_path / "p.tar.gz",
            info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
            tasks=[archive.TaskItem(doc, content_sha256(doc), None) for doc in docs],
            read_blob=lambda sha256: b"changed" if packing else data,
            scratch_dir=tmp_path / "s",
            progress=progress,
        )
    assert packing  # it failed in the second pass
    assert not any((tmp_path / "s").iterdir())


def test_parquet_batches_are_the_bytes_pyarrow_writes_from_the_rows(tmp_path, monkeypatch):
    """The split writer hands pyarrow JSON lines: the files must be the ones `Table.from_pylist` gives,
    awkward text, empty and missing lists, a batch cut by size and an empty split included."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    info = archive.PackInfo(slug="demo", name="Demo", version="1.0.0")
    prompts = [
        "plain",
        'quotes " and \\ backslashes',
        "line\nbreaks\r\tand tabs",
        "ünïcödé ✓ 𝔘 \u2028\u2029",
        "",
        "x" * 50_000,
        '{"not": "json"}\n{}',
        "\x01\x1f control",
    ]
    rows = []
    for index, prompt in enumerate(prompts * 40):
        doc = document(index, prompt=prompt or " ")
        doc["prompt"] = prompt
        if index % 3 == 0:
            doc["environment"]["tools"] = []
        if index % 5 == 0:
            del doc["environment"]["tools"]
        rows.append(archive.parquet_row(doc, sha256="ab" * 32, info=info, split="train", index=index))
    monkeypatch.setattr(archive.parquet, "PARQUET_BATCH", 100)
    monkeypatch.setattr(archive.parquet, "PARQUET_BATCH_BYTES", 300_000)  # some batches cut by size, not count
    writer = archive.parquet.SplitWriter(tmp_path / "ours.parquet")
    batches, batch, size = [], [], 0
    for row in rows:
        writer.add(row)
        batch.append(row)
        size += len(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()) + 1
        if len(batch) >= 100 or size >= 300_000:
            batches.append(batch)
            batch, size = [], 0
    writer.close()
    batches.append(batch)
    assert len(batches) > len(rows) // 100 + 1  # the size cut happened
    schema = archive.parquet.parquet_schema()
    with pq.ParquetWriter(tmp_path / "pyarrow.parquet", schema, compression="zstd") as reference:
        for batch in batches:
            if batch:
                reference.write_table(pa.Table.from_pylist(batch, schema=schema))
    assert (tmp_path / "ours.parquet").read_bytes() == (tmp_path / "pyarrow.parquet").read_bytes()
    assert pq.read_table(tmp_path / "ours.parquet").to_pylist() == rows

    empty = archive.parquet.SplitWriter(tmp_path / "empty.parquet")
    empty.close()
    with pq.ParquetWriter(tmp_path / "empty-pyarrow.parquet", schema, compression="zstd"):
        pass
    assert (tmp_path / "empty.parquet").read_bytes() == (tmp_path / "empty-pyarrow.parquet").read_bytes()


@pytest.mark.parametrize(
    "licence, expected",
    [
        ("Apache-2.0", {"license": "apache-2.0"}),
        ("cc-by-4.0", {"license": "cc-by-4.0"}),
        ("proprietary", {"license": "other", "license_name": "proprietary"}),
        ("ACME internal use only", {"license": "other", "license_name": "acme-internal-use-only"}),
    ],
)
def test_the_dataset_card_opens_with_a_hugging_face_header(tmp_path, licence, expected):
    """The header `datasets` and the Hub read: licence, name, categories, size and the parquet splits."""
    import yaml

    result = archive.build_pack(
        out=tmp_path / "a.tar.gz",
        tasks=items(30),
        read_blob=lambda sha: b"",
        info=archive.PackInfo(slug="demo", name='Demo: "quoted" ✓', version="1.0.0", licence=licence),
        scratch_dir=tmp_path / "s",
    )
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        card = tar.extractfile("demo-1.0.0/README.md").read().decode()
    assert card.startswith("---\n")
    header = yaml.safe_load(card.split("---\n")[1])
    assert {key: header[key] for key in expected} == expected
    assert header["pretty_name"] == 'Demo: "quoted" ✓' and header["size_categories"] == ["n<1K"]
    assert "text-generation" in header["task_categories"] and "gymwright" in header["tags"]
    assert header["configs"] == [
        {
            "config_name": "default",
            "data_files": [
                {"split": "train", "path": "data/train.parquet"},
                {"split": "test", "path": "data/test.parquet"},
            ],
        }
    ]
    assert result.manifest["counts"]["test"] > 0


def test_tasks_that_need_their_episode_are_harbor_tasks_only_not_parquet_rows(tmp_path):
    """A rubric with a check on the agent's files, its sandbox or its trajectory cannot be graded from a
    response alone (verl's and TRL's reward functions would leave those checks out and pay the rest for a
    sentence): such a task has no row in data/*.parquet, only its Harbor folder; the manifest counts the
    parquet rows per split and the card names the tasks left out and says why."""

    def with_rubric(index: int, checks: list) -> archive.TaskItem:
        doc = document(index)
        doc["rubric"] = {"schema": "gymwright.rubric/v1", "checks": checks}
        return archive.TaskItem(doc, content_sha256(doc), None)

    text = {"id": "right", "kind": "string_match", "points": 1, "expected": "1"}
    tasks = [
        with_rubric(0, [text]),
        with_rubric(1, [text, {"id": "report", "kind": "file_exists", "points": 1, "path": "r.txt"}]),
        with_rubric(
            2,
            [
                {
                    "id": "g",
                    "kind": "group",
                    "points": 1,
                    "checks": [
                        text,
                        {"id": "said", "kind": "regex", "points": 1, "pattern": "x", "target": "trajectory"},
                    ],
                }
            ],
        ),
        with_rubric(3, [text, {"id": "judged", "kind": "llm_judge", "points": 1, "criterion": "Is right."}]),
    ]
    result = archive.build_pack(
        out=tmp_path / "p.tar.gz",
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0", test_ratio=0.0),
        tasks=tasks,
        read_blob=lambda sha: b"",
        scratch_dir=tmp_path / "s",
        build_record={},
    )
    with tarfile.open(tmp_path / "p.tar.gz") as tar:
        train = pd.read_parquet(io.BytesIO(tar.extractfile("demo-1.0.0/data/train.parquet").read()))
        card = tar.extractfile("demo-1.0.0/README.md").read().decode()
        names = tar.getnames()
    assert [row["task_id"] for row in train["extra_info"]] == ["task-000", "task-003"]
    assert [row["index"] for row in train["extra_info"]] == [0, 1]
    assert all(f"demo-1.0.0/tasks/task-00{i}/tests/test.sh" in names for i in range(4))  # every task for Harbor
    assert result.manifest["counts"] == {"tasks": 4, "train": 4, "test": 0, "parquet": {"train": 2, "test": 0}}
    assert [task["id"] for task in result.manifest["tasks"]] == [f"task-00{i}" for i in range(4)]
    assert "**2 of 4 tasks are Harbor tasks only, not rows of `data/*.parquet`** (`task-001`, `task-002`)" in card
    assert "| train | 4 | 2 |" in card and "| total | 4 | 2 |" in card
    # test ratio 0: an empty test split, which verl refuses as its validation set, and Inspect's default
    assert "data.val_files=$PWD/data/train.parquet" in card and "data.val_files=$PWD/data/test.parquet" not in card
    assert "inspect eval inspect_task.py --model openai/<model> -T split=train" in card

    # A test split whose tasks all need their episode: the parquet test split is empty, and the card says why.
    ids = [f"task-{i:03d}" for i in range(40)]
    in_test = next(index for index, task_id in enumerate(ids) if archive.split_of(task_id, 0.1) == "test")
    kept = sorted([index for index, task_id in enumerate(ids) if archive.split_of(task_id, 0.1) == "train"] + [in_test])
    report = {"id": "report", "kind": "file_exists", "points": 1, "path": "r.txt"}
    tasks = [with_rubric(index, [report] if index == in_test else [text]) for index in kept]
    result = archive.build_pack(
        out=tmp_path / "q.tar.gz",
        info=archive.PackInfo(slug="demo", name="Demo", version="1.0.0"),
        tasks=tasks,
        read_blob=lambda sha: b"",
        scratch_dir=tmp_path / "s2",
        build_record={},
    )
    with tarfile.open(tmp_path / "q.tar.gz") as tar:
        card = tar.extractfile("demo-1.0.0/README.md").read().decode()
    assert result.manifest["counts"]["test"] == 1 and result.manifest["counts"]["parquet"]["test"] == 0
    assert "**The test split of `data/*.parquet` is empty**: its 1 task needs the agent's episode" in card
    assert "data.val_files=$PWD/data/train.parquet" in card
    import yaml

    header = yaml.safe_load(card.split("---\n")[1])
    assert header["configs"][0]["data_files"] == [{"split": "train", "path": "data/train.parquet"}]

    build(tmp_path, "all-text.tar.gz", count=3)
    with tarfile.open(tmp_path / "all-text.tar.gz") as tar:
        assert "Harbor tasks only" not in tar.extractfile("demo-1.0.0/README.md").read().decode()


def test_verify_stops_at_max_bytes_with_one_problem_and_defaults_to_8_gib(tmp_path):
    import inspect

    assert inspect.signature(archive.verify_pack).parameters["max_bytes"].default == 8 << 30
    build(tmp_path, "a.tar.gz", count=4)
    stopped = archive.verify_pack(tmp_path / "a.tar.gz", max_bytes=100)
    assert not stopped.ok
    over = [problem for problem in stopped.problems if "unpacks to more than 100 bytes" in problem]
    assert len(over) == 1 and over[0].endswith("; stopped")  # stopped at the first member past it, not each


def test_a_manifest_larger_than_64_mb_is_not_read_whole(tmp_path):
    # Valid JSON, but padded past the 64 MB kept of manifest.json: what is kept does not parse.
    manifest = b'{"files": {},' + b" " * (64 << 20) + b'"slug": "demo", "version": "1.0.0"}'
    path = tmp_path / "big.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        member = tarfile.TarInfo("demo-1.0.0/manifest.json")
        member.size = len(manifest)
        tar.addfile(member, io.BytesIO(manifest))
    result = archive.verify_pack(path)
    assert not result.ok and result.problems == ["manifest.json: not a pack manifest"]


def test_a_repacked_pack_with_folder_entries_and_a_64_mb_manifest_still_verifies(tmp_path):
    # Another tar writes folder entries, and a big pack's manifest may reach the 64 MB kept: neither is a problem.
    build(tmp_path, "a.tar.gz", count=4)
    with tarfile.open(tmp_path / "a.tar.gz") as source, tarfile.open(tmp_path / "b.tar.gz", "w:gz") as target:
        for folder in ("demo-1.0.0", "demo-1.0.0/tasks"):
            entry = tarfile.TarInfo(folder)
            entry.type = tarfile.DIRTYPE
            target.addfile(entry)
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("/manifest.json"):
                # whitespace inside: the same JSON, read whole at half a chunk under the 64 MB kept
                data = b"{" + b" " * ((64 << 20) - (1 << 19) - len(data)) + data[1:]
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    result = archive.verify_pack(tmp_path / "b.tar.gz")
    assert result.ok, result.problems


def test_verify_names_a_file_the_manifest_does_not_list_and_takes_exactly_max_bytes(tmp_path):
    build(tmp_path, "a.tar.gz", count=4)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        unpacked = sum(member.size for member in tar.getmembers() if member.isfile())
    assert archive.verify_pack(tmp_path / "a.tar.gz", max_bytes=unpacked).ok  # at the cap: accepted
    assert not archive.verify_pack(tmp_path / "a.tar.gz", max_bytes=unpacked - 1).ok
    with tarfile.open(tmp_path / "a.tar.gz") as source, tarfile.open(tmp_path / "extra.tar.gz", "w:gz") as target:
        for member in source.getmembers():
            target.addfile(member, source.extractfile(member) if member.isfile() else None)
        extra = tarfile.TarInfo("demo-1.0.0/tasks/smuggled.py")
        extra.size = 5
        target.addfile(extra, io.BytesIO(b"print"))
    result = archive.verify_pack(tmp_path / "extra.tar.gz")
    assert result.problems == ["tasks/smuggled.py: in the archive, not in the manifest"]


def test_verify_walks_past_a_bad_member_and_a_hard_link_to_name_every_problem(tmp_path):
    """A member outside the pack (`..` inside its name), a symlink or a hard link does not end the walk: a file changed
    after them is still named. And a pack whose every member is absolute is outside itself, first member included."""
    build(tmp_path, "a.tar.gz", count=4)
    with tarfile.open(tmp_path / "a.tar.gz") as source:
        members = source.getmembers()
        payload = {m.name: source.extractfile(m).read() for m in members if m.isfile()}
    targets = {member.linkname for member in members if member.islnk()}
    assert targets, "the pack has hard links"
    changed = next(m for m in members if m.isfile() and m.name not in targets and not m.name.endswith("manifest.json"))
    with tarfile.open(tmp_path / "bad.tar.gz", "w:gz") as target:
        escape = tarfile.TarInfo("demo-1.0.0/../escaped.txt")
        escape.size = 3
        target.addfile(escape, io.BytesIO(b"out"))
        link = tarfile.TarInfo("demo-1.0.0/tasks/link.md")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        target.addfile(link)
        for member in [*(m for m in members if m.name != changed.name), changed]:  # the changed file after the links
            data = payload.get(member.name)
            if member.name == changed.name:
                data = b"changed after a hard link"
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    problems = archive.verify_pack(tmp_path / "bad.tar.gz").problems
    relative = changed.name.split("/", 1)[1]
    assert "demo-1.0.0/../escaped.txt: outside the pack folder" in problems, problems
    assert "demo-1.0.0/tasks/link.md: not a regular file (symlink, device or fifo)" in problems, problems
    assert any(problem.startswith(f"{relative}: sha256") for problem in problems), problems
    with tarfile.open(tmp_path / "absolute.tar.gz", "w:gz") as target:
        for member in members:
            data = payload.get(member.name)
            member.name = "/" + member.name
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    absolute = archive.verify_pack(tmp_path / "absolute.tar.gz")
    assert not absolute.ok and f"{members[0].name}: outside the pack folder" in absolute.problems  # renamed above
