"""Importing tasks: a pack's tasks.jsonl (round trip), tables of simple rows, Harbor and Terminal-Bench folders."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from authoring import services as authoring_services
from authoring.models import AuditEvent, Blob, Environment, Task, TaskVersion
from grading.engine import content_sha256
from packs import importer
from packs.archive import verify_pack
from packs.models import PackEntry, PackVersion, TaskPack
from review.models import Review
from tests.packs.conftest import make_approved
from tests.support.venvs import harbor_bin


def test_a_pack_round_trips_through_a_fresh_database_to_the_same_pack(author, reviewer, admin, lab, tmp_path, capsys):
    blob = authoring_services.blob_store(data=b"#!/bin/sh\nexit 0\n")
    data = authoring_services.blob_store(data=b"a,b\n1,2\n")
    for index in range(6):
        make_approved(
            author=author,
            reviewer=reviewer,
            slug=f"round-{index}",
            files=[
                {"path": "data/table.csv", "sha256": data.sha256, "role": "protected"},
                {"path": "checks/grade.sh", "sha256": blob.sha256, "role": "grader"},
            ]
            if index % 2
            else None,
        )
    first_out = tmp_path / "first.tar.gz"
    call_command("export_pack", "round", "--out", str(first_out))
    first = PackVersion.objects.get(pack__slug="round")
    first_tasks = first.manifest["tasks"]
    first_shas = dict(TaskVersion.objects.values_list("task__slug", "sha256"))

    # another database: nothing of the first one is left, not even the files' blobs
    PackEntry.objects.all().delete(), PackVersion.objects.all().delete(), TaskPack.objects.all().delete()
    Review.objects.all().delete()
    Task.objects.update(latest_version=None, approved_version=None)
    TaskVersion.objects.all().delete(), Task.objects.all().delete()
    Environment.objects.update(latest_version=None)
    Environment.objects.all().delete() if False else None
    from authoring.models import EnvironmentVersion

    EnvironmentVersion.objects.all().delete(), Environment.objects.all().delete(), Blob.objects.all().delete()
    assert not Task.objects.exists()

    capsys.readouterr()
    call_command("import_tasks", str(first_out), "--approve-as", admin.username)
    printed = capsys.readouterr().out
    assert "6 imported, 0 rejected, approved as adam" in printed
    assert "line 1: created round-0 v1" in printed
    assert dict(TaskVersion.objects.values_list("task__slug", "sha256")) == first_shas
    roles = {entry["path"]: entry.get("role") for entry in TaskVersion.objects.get(task__slug="round-1").spec["files"]}
    assert roles == {"data/table.csv": "protected", "checks/grade.sh": "grader"}
    assert AuditEvent.objects.filter(verb="approve", data__approve_as=True).count() == 6

    second_out = tmp_path / "second.tar.gz"
    call_command("export_pack", "round", "--out", str(second_out))
    second = PackVersion.objects.get(pack__slug="round")
    assert second.manifest["tasks"] == first_tasks
    assert second.content_sha256 == first.content_sha256
    assert "files" not in second.manifest  # the row keeps the manifest without its file map; the archive has it
    first_files, second_files = (verify_pack(path).manifest["files"] for path in (first_out, second_out))
    assert second_files == first_files and len(first_files) > 6


def test_a_rubric_with_integral_floats_rebuilds_from_its_tasks_jsonl_to_the_same_content_sha256(
    author, reviewer, admin, lab, tmp_path
):
    """Every file of a task comes from the one canonical document: a rubric written with "pass_threshold": 1.0
    was 1.0 in rubric.json and 1 in tasks.jsonl, and a pack rebuilt from its tasks.jsonl changed its bytes."""
    rubric = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [
            {"id": "says_42", "kind": "string_match", "points": 2.0, "mode": "contains", "expected": "42"},
            {"id": "near_42", "kind": "number", "points": 1, "expected": 42.0, "tolerance": 0.5},
        ],
    }
    make_approved(author=author, reviewer=reviewer, slug="floats", rubric=rubric)
    assert TaskVersion.objects.get(task__slug="floats").spec["rubric"]["pass_threshold"] == 1.0
    first_out = tmp_path / "first.tar.gz"
    call_command("export_pack", "floats", "--out", str(first_out))
    first = PackVersion.objects.get(pack__slug="floats")
    with tarfile.open(first_out) as archive:
        names = archive.getnames()
        jsonl_name = next(name for name in names if name.endswith("/tasks.jsonl") or name == "tasks.jsonl")
        rubric_name = next(name for name in names if name.endswith("tasks/floats/rubric.json"))
        tasks_jsonl = archive.extractfile(jsonl_name).read()
        first_rubric = archive.extractfile(rubric_name).read()
    assert json.loads(first_rubric) == json.loads(tasks_jsonl)["rubric"]
    assert b'"pass_threshold": 1,' in first_rubric and b"1.0" not in first_rubric
    verify_pack(first_out)  # the manifest's digest of rubric.json is the digest of the bytes in the archive

    # A fresh database: only the pack's tasks.jsonl is imported.
    PackEntry.objects.all().delete(), PackVersion.objects.all().delete(), TaskPack.objects.all().delete()
    Review.objects.all().delete()
    Task.objects.update(latest_version=None, approved_version=None)
    TaskVersion.objects.all().delete(), Task.objects.all().delete()
    from authoring.models import EnvironmentVersion

    Environment.objects.update(latest_version=None)
    EnvironmentVersion.objects.all().delete(), Environment.objects.all().delete()
    (tmp_path / "tasks.jsonl").write_bytes(tasks_jsonl)
    call_command("import_tasks", str(tmp_path / "tasks.jsonl"), "--approve-as", admin.username)

    second_out = tmp_path / "second.tar.gz"
    call_command("export_pack", "floats", "--out", str(second_out))
    second = PackVersion.objects.get(pack__slug="floats")
    assert second.manifest["tasks"] == first.manifest["tasks"]
    with tarfile.open(second_out) as archive:
        assert archive.extractfile(rubric_name).read() == first_rubric
    assert second.content_sha256 == first.content_sha256


def test_example_answers_travel_in_the_pack_and_come_back_exactly(author, reviewer, admin, lab, tmp_path):
    from grading.models import ExampleRun

    examples = [
        {
            "name": "right",
            "answer": "42",
            "expect": "pass",
            "reward": {"min": 0.9, "max": 1},
            "files": [{"path": "notes/work.md", "content": "6 × 7 = 42\n"}],
        },
        {"name": "wrong", "answer": "41", "expect": "fail"},
    ]
    make_approved(author=author, reviewer=reviewer, slug="with-examples", examples=examples)
    out = tmp_path / "pack.tar.gz"
    call_command("export_pack", "examples-pack", "--out", str(out))
    first = PackVersion.objects.get(pack__slug="examples-pack")
    sha = TaskVersion.objects.get(task__slug="with-examples").sha256
    with tarfile.open(out) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/tasks.jsonl"))
        line = json.loads(archive.extractfile(member).read().decode().splitlines()[0])
    assert line["examples"] == examples

    PackEntry.objects.all().delete(), PackVersion.objects.all().delete(), TaskPack.objects.all().delete()
    Review.objects.all().delete()
    Task.objects.update(latest_version=None, approved_version=None)
    TaskVersion.objects.all().delete(), Task.objects.all().delete()
    call_command("import_tasks", str(out), "--approve-as", admin.username)
    imported = TaskVersion.objects.get(task__slug="with-examples")
    assert imported.spec["examples"] == examples and imported.sha256 == sha
    # An import grades the examples in a worker (queued after commit), never thousands in the request.
    assert ExampleRun.objects.get(task_version=imported).status == ExampleRun.Status.QUEUED

    call_command("export_pack", "examples-pack", "--out", str(tmp_path / "again.tar.gz"))
    again = PackVersion.objects.get(pack__slug="examples-pack")
    assert again.content_sha256 == first.content_sha256


def write_csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


TABLE_ROWS = [
    {
        "id": "capital-france",
        "prompt": "What is the capital of France?",
        "answer": "Paris",
        "rubric": json.dumps(
            {
                "schema": "gymwright.rubric/v1",
                "checks": [
                    {"id": "paris", "kind": "string_match", "points": 1, "mode": "contains", "expected": "Paris"}
                ],
            }
        ),
        "criteria": "",
    },
    {
        "id": "explain-tides",
        "prompt": "Explain tides.",
        "answer": "",
        "rubric": "",
        "criteria": "Mentions the moon's gravity\nMentions two bulges",
    },
    {
        "id": "bad-rubric",
        "prompt": "x",
        "answer": "",
        "rubric": json.dumps(
            {
                "schema": "gymwright.rubric/v1",
                "checks": [{"id": "BAD ID", "kind": "regex", "points": 1, "pattern": "a"}],
            }
        ),
        "criteria": "",
    },
    {"id": "no-rubric", "prompt": "y", "answer": "", "rubric": "", "criteria": ""},
    {"id": "capital-france", "prompt": "again", "answer": "", "rubric": "", "criteria": "c"},
]


def test_a_table_imports_its_good_rows_and_reports_each_bad_one_with_row_and_pointer(author, tmp_path):
    path = write_csv(tmp_path / "rows.csv", TABLE_ROWS)
    dry = importer.tasks_import(path=path, user=author, dry_run=True)
    assert [line.status for line in dry.lines] == [
        "would_create",
        "would_create",
        "rejected",
        "rejected",
        "rejected",
    ], dry.as_dict()
    assert not Task.objects.exists() and not Environment.objects.exists()
    report = importer.tasks_import(path=path, user=author)
    by_where = {line.where: line for line in report.lines}
    assert by_where["row 1"].status == "created" and by_where["row 2"].status == "created"
    assert by_where["row 3"].status == "rejected" and by_where["row 3"].pointer.startswith("/rubric/checks/0/id")
    assert by_where["row 4"].pointer == "/rubric" and "criteria" in by_where["row 4"].message
    assert by_where["row 5"].pointer == "/id" and "duplicate" in by_where["row 5"].message
    tides = Task.objects.get(slug="explain-tides").latest_version.spec
    assert [check["kind"] for check in tides["rubric"]["checks"]] == ["llm_judge", "llm_judge"]
    assert tides["rubric"]["checks"][1]["criterion"] == "Mentions two bulges"
    assert Task.objects.get(slug="capital-france").latest_version.spec["solution"]["answer"] == "Paris"
    # again: nothing changed
    again = importer.tasks_import(path=path, user=author)
    assert [line.status for line in again.lines[:2]] == ["unchanged", "unchanged"]


def test_a_tables_answer_column_is_the_reference_answer_of_its_judge_checks(author, tmp_path):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "right", "kind": "llm_judge", "points": 2, "criterion": "Names the capital."},
            {"id": "own", "kind": "llm_judge", "points": 1, "criterion": "Says why.", "reference": "It is."},
            {"id": "says", "kind": "string_match", "points": 1, "expected": "Paris"},
            {
                "id": "both",
                "kind": "group",
                "points": 1,
                "checks": [{"id": "inner", "kind": "llm_judge", "points": 1, "criterion": "Is brief."}],
            },
        ],
    }
    path = tmp_path / "rows.csv"
    pd.DataFrame(
        [
            {"id": "capital", "prompt": "Capital of France?", "answer": "Paris", "rubric": json.dumps(rubric)},
            {"id": "tides", "prompt": "Explain tides.", "answer": "The Moon pulls.", "criteria": "Mentions the Moon"},
        ]
    ).to_csv(path, index=False)
    report = importer.tasks_import(path=path, user=author)
    assert [line.status for line in report.lines] == ["created", "created"], report.as_dict()
    spec = Task.objects.get(slug="capital").latest_version.spec
    checks = {check["id"]: check for check in spec["rubric"]["checks"]}
    assert spec["solution"]["answer"] == "Paris"
    assert checks["right"]["reference"] == "Paris" and checks["own"]["reference"] == "It is."
    assert "reference" not in checks["says"] and checks["both"]["checks"][0]["reference"] == "Paris"
    tides = Task.objects.get(slug="tides").latest_version.spec
    assert tides["rubric"]["checks"][0]["reference"] == "The Moon pulls."


def test_jsonl_and_parquet_tables_import_the_same_way(author, tmp_path):
    frame = pd.DataFrame([{"prompt": f"Say hi {n}", "reference_answer": "hi", "criteria": "Greets"} for n in range(3)])
    frame.to_parquet(tmp_path / "greet.parquet")
    frame.to_json(tmp_path / "greet.jsonl", orient="records", lines=True)
    assert [line.status for line in importer.tasks_import(path=tmp_path / "greet.parquet", user=author).lines] == [
        "created"
    ] * 3
    # the same rows from the other format are the same tasks: named by their content
    assert [line.status for line in importer.tasks_import(path=tmp_path / "greet.jsonl", user=author).lines] == [
        "unchanged"
    ] * 3
    assert Task.objects.count() == 3 and all(
        re.fullmatch(r"greet-[0-9a-f]{10}", slug) for slug in Task.objects.values_list("slug", flat=True)
    )


def test_a_row_names_its_environment_by_id_or_takes_the_imports(author, tmp_path):
    """An `environment` column pins the row's task to that environment's latest version; an id that names no
    environment rejects that row alone (pointer /environment); a row without one takes the import's."""
    shell = authoring_services.environment_create(slug="shell", name="shell", author=author, spec={"network": "none"})
    py = authoring_services.environment_create(
        slug="py", name="py", author=author, spec={"network": "none", "image": "python:3.11"}
    )
    rows = [
        {"prompt": "What is 2+2?", "answer": "4", "criteria": "Says 4", "environment": "py"},
        {"prompt": "What is 3+3?", "answer": "6", "criteria": "Says 6", "environment": "nowhere"},
        {"prompt": "What is 4+4?", "answer": "8", "criteria": "Says 8", "environment": ""},
        {"prompt": "What is 2+2?", "answer": "4", "criteria": "Says 4", "environment": "shell"},
    ]
    write_csv(tmp_path / "rows.csv", rows)
    dry = importer.tasks_import(path=tmp_path / "rows.csv", user=author, environment="shell", dry_run=True)
    assert [line.status for line in dry.lines] == ["would_create", "rejected", "would_create", "would_create"], (
        dry.as_dict()
    )
    report = importer.tasks_import(path=tmp_path / "rows.csv", user=author, environment="shell")
    lines = {line.where: line for line in report.lines}
    assert lines["row 2"].status == "rejected" and lines["row 2"].pointer == "/environment"
    assert "nowhere" in lines["row 2"].message
    environment_of = {
        line.where: Task.objects.get(slug=line.task).latest_version.environment_version
        for line in report.lines
        if line.status == "created"
    }
    assert environment_of == {"row 1": py.latest_version, "row 3": shell.latest_version, "row 4": shell.latest_version}
    # the same question in two environments is two tasks, each found again by its content
    assert lines["row 1"].task != lines["row 4"].task
    again = importer.tasks_import(path=tmp_path / "rows.csv", user=author, environment="shell")
    assert [line.status for line in again.lines] == ["unchanged", "rejected", "unchanged", "unchanged"]
    # JSON rows: an environment given as anything but an id is refused, not ignored
    (tmp_path / "rows.jsonl").write_text(
        json.dumps({"prompt": "Hi?", "criteria": "Greets", "environment": {"id": "py"}}) + "\n"
    )
    odd = importer.tasks_import(path=tmp_path / "rows.jsonl", user=author).lines[0]
    assert odd.status == "rejected" and odd.pointer == "/environment" and "by its id" in odd.message


def test_rows_without_an_id_never_change_another_task(author, tmp_path):
    """A row without an id is named by its content. Named by its position (rows-00001, ...) before, a second
    file of the same name, or any bulk request of simple rows, made new versions of the first one's tasks."""
    write_csv(tmp_path / "rows.csv", [{"prompt": "What is 2+2?", "answer": "4", "criteria": "Says 4"}])
    first = importer.tasks_import(path=tmp_path / "rows.csv", user=author).lines[0]
    write_csv(
        tmp_path / "rows.csv",
        [
            {"prompt": "What is 3*3?", "answer": "9", "criteria": "Says 9"},
            {"prompt": "What is 2+2?", "answer": "4", "criteria": "Says 4"},
            {"prompt": "What is 2+2?", "answer": "4", "criteria": "Says 4"},
        ],
    )
    second = importer.tasks_import(path=tmp_path / "rows.csv", user=author).lines
    assert [(line.status, line.task == first.task) for line in second] == [
        ("created", False),
        ("unchanged", True),
        ("rejected", True),
    ]
    assert second[2].message == "the same task as row 2 (the same prompt, answer and rubric)"
    assert Task.objects.get(slug=first.task).latest_version.number == 1
    assert Task.objects.get(slug=first.task).latest_version.spec["prompt"] == "What is 2+2?"


def test_import_tasks_command_exit_codes(author, admin, tmp_path, capsys):
    good = write_csv(tmp_path / "good.csv", TABLE_ROWS[:2])
    call_command("import_tasks", str(good), "--dry-run")
    assert "dry run: 2 to import, 0 rejected" in capsys.readouterr().out
    assert not Task.objects.exists()
    call_command("import_tasks", str(good))
    assert "2 imported, 0 rejected" in capsys.readouterr().out
    call_command("import_tasks", str(good), "--dry-run")  # the same rows again: nothing new, and it says so
    assert "dry run: 2 to import (2 unchanged), 0 rejected" in capsys.readouterr().out
    Task.objects.all().delete()
    mixed = write_csv(tmp_path / "mixed.csv", TABLE_ROWS)
    with pytest.raises(CommandError) as failure:
        call_command("import_tasks", str(mixed))
    assert failure.value.returncode == 1
    assert "row 3: rejected bad-rubric: /rubric/checks/0/id" in capsys.readouterr().out
    with pytest.raises(CommandError) as usage:
        call_command("import_tasks", str(tmp_path / "missing.csv"))
    assert usage.value.returncode == 2
    with pytest.raises(CommandError) as not_admin:
        call_command("import_tasks", str(good), "--approve-as", author.username)
    assert not_admin.value.returncode == 2


def harbor_init(root: Path, name: str, instruction: str) -> Path:
    done = subprocess.run(
        [harbor_bin(), "init", "--task", f"acme/{name}", "-o", str(root), "--no-pytest"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = root / name
    (folder / "instruction.md").write_text(instruction)
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > /app/out.txt\n")
    (folder / "tests" / "test.sh").write_text(
        "#!/bin/bash\ngrep -q hello /app/out.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )
    return folder


def test_harbor_task_folders_made_by_harbor_init_import_as_tasks(author, tmp_path):
    harbor_init(tmp_path / "harbor", "say-hello", "Write hello to /app/out.txt.")
    harbor_init(tmp_path / "harbor", "say-bye", "Write bye.")
    report = importer.tasks_import(path=tmp_path / "harbor", user=author)
    assert [(line.where, line.status, line.task) for line in report.lines] == [
        ("harbor/say-bye", "created", "say-bye"),
        ("harbor/say-hello", "created", "say-hello"),
    ]
    spec = Task.objects.get(slug="say-hello").latest_version.spec
    assert spec["prompt"] == "Write hello to /app/out.txt."
    assert spec["environment"]["dockerfile"].startswith("FROM ubuntu:24.04")
    assert spec["solution"]["script"].startswith("#!/bin/bash")
    check = spec["rubric"]["checks"][0]
    assert check == {
        "id": "tests_pass",
        "kind": "command",
        "points": 1,
        "run": importer.HARBOR_REWARD_CHECK,
        "expect_exit": 0,
        "timeout_s": 600,
    }
    # the tests are grader files (in the sandbox only after the episode), with the list of them the check copies
    files = {entry["path"]: entry.get("role") for entry in spec["files"]}
    assert files == {
        ".harbor/tests/test.sh": "grader",
        ".harbor/tests/Dockerfile": "grader",
        ".harbor/tests.list": "grader",
    }
    listing = Blob.objects.get(sha256=next(e["sha256"] for e in spec["files"] if e["path"] == ".harbor/tests.list"))
    assert listing.file.open("rb").read() == b"Dockerfile\ntest.sh\n"
    # the same folders as a .tar.gz
    with tarfile.open(tmp_path / "harbor.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "harbor", arcname="harbor")
    again = importer.tasks_import(path=tmp_path / "harbor.tar.gz", user=author)
    assert [line.status for line in again.lines] == ["unchanged", "unchanged"]


def test_terminal_bench_task_folders_import_as_tasks(author, tmp_path):
    folder = tmp_path / "tb" / "hello-world"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text(
        "instruction: |\n  Create hello.txt containing Hello, world!\n"
        "difficulty: easy\ntags: [file-operations]\nmax_test_timeout_sec: 60\n"
    )
    (folder / "Dockerfile").write_text("FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest\nWORKDIR /app\n")
    (folder / "solution.sh").write_text("echo 'Hello, world!' > hello.txt\n")
    (folder / "run-tests.sh").write_text("pytest tests/test_outputs.py\n")
    (folder / "tests" / "test_outputs.py").write_text("def test_hello():\n    assert open('hello.txt').read()\n")
    report = importer.tasks_import(path=tmp_path / "tb", user=author)
    assert [(line.status, line.task) for line in report.lines] == [("created", "hello-world")]
    spec = Task.objects.get(slug="hello-world").latest_version.spec
    assert spec["prompt"].startswith("Create hello.txt") and spec["tags"] == ["file-operations"]
    assert spec["rubric"]["checks"][0]["run"] == importer.TERMINAL_BENCH_CHECK
    assert spec["rubric"]["checks"][0]["timeout_s"] == 60
    assert sorted(entry["path"] for entry in spec["files"]) == [
        ".harbor/tests.list",
        ".harbor/tests/run-tests.sh",
        ".harbor/tests/test_outputs.py",
    ]


def _task_lines(prefix: str, count: int, *, with_file: str | None = None) -> str:
    lines = []
    for index in range(count):
        document = {
            "schema": "gymwright.task/v1",
            "id": f"{prefix}-{index:03d}",
            "version": 1,
            "title": f"T {index}",
            "prompt": f"What is {index} + {index}?",
            "environment": {"id": "scaled", "version": 1},
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "checks": [{"id": "right", "kind": "string_match", "points": 1, "expected": str(2 * index)}],
            },
            "solution": {"script": None, "answer": str(2 * index)},
            "tags": ["scaled", f"t{index % 3}"],
            "files": [{"path": "data.csv", "sha256": with_file}] if with_file else [],
            "metadata": {},
        }
        lines.append(json.dumps(document))
    return "\n".join(lines) + "\n"


def test_an_import_costs_a_constant_number_of_queries_per_batch_of_rows(
    author, admin, tmp_path, monkeypatch, django_assert_max_num_queries
):
    """N rows cost N / BATCH times the queries of one batch: nothing is looked up or saved row by row
    (tasks, versions, tags, attached files, approvals and audit events are bulk per batch; on PostgreSQL
    the tasks and versions take their ids in one query each before their COPY)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(importer.store, "BATCH", 4)
    blob = authoring_services.blob_store(data=b"a,b\n1,2\n")
    (tmp_path / "warm.jsonl").write_text(_task_lines("warm", 4, with_file=blob.sha256))
    importer.tasks_import(path=tmp_path / "warm.jsonl", user=author)  # creates the environment, the tags
    (tmp_path / "one.jsonl").write_text(_task_lines("one", 4, with_file=blob.sha256))
    with CaptureQueriesContext(connection) as one_batch:
        report = importer.tasks_import(path=tmp_path / "one.jsonl", user=author, approve_as=admin)
    assert report.imported == 4 and report.rejected == 0, report.as_dict()
    per_batch = len(one_batch.captured_queries)
    # (one of them per import, not per batch: the environments the tasks went to, for the report)
    assert per_batch <= 29, "\n".join(query["sql"][:100] for query in one_batch.captured_queries)

    (tmp_path / "many.jsonl").write_text(_task_lines("many", 40, with_file=blob.sha256))
    with django_assert_max_num_queries(10 * per_batch):  # 10 batches of 4, ten times the queries of one
        report = importer.tasks_import(path=tmp_path / "many.jsonl", user=author, approve_as=admin)
    assert report.imported == 40 and report.rejected == 0
    assert Task.objects.filter(slug__startswith="many-", approved_version__isnull=False).count() == 40
    assert TaskVersion.objects.filter(task__slug__startswith="many-").count() == 40
    assert Task.tags.through.objects.filter(task__slug__startswith="many-").count() == 80
    version = TaskVersion.objects.get(task__slug="many-007")
    assert version.spec["files"] == [{"path": "data.csv", "sha256": blob.sha256}]
    assert version.sha256 == content_sha256(version.spec)


def test_a_batch_still_rejects_a_row_whose_file_was_never_uploaded_and_imports_the_rest(author, tmp_path, monkeypatch):
    monkeypatch.setattr(importer.store, "BATCH", 4)
    known = authoring_services.blob_store(data=b"known\n")
    lines = _task_lines("files", 3, with_file=known.sha256) + _task_lines("nofile", 1, with_file="0" * 64)
    (tmp_path / "rows.jsonl").write_text(lines)
    report = importer.tasks_import(path=tmp_path / "rows.jsonl", user=author)
    assert report.imported == 3 and report.rejected == 1
    rejected = report.as_dict()["rows"][3]
    assert rejected["where"] == "line 4" and rejected["pointer"] == "/files/0/sha256", rejected
    assert "never uploaded" in rejected["message"]


def test_importing_the_same_tasks_again_is_unchanged_at_a_constant_number_of_queries(author, tmp_path):
    """A pack imported into a database that has its tasks: each row is compared in memory with its task's
    latest version (no savepoint, lock or query per row), and only a changed row goes the whole way."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    blob = authoring_services.blob_store(data=b"a,b\n1,2\n")
    (tmp_path / "rows.jsonl").write_text(_task_lines("again", 40, with_file=blob.sha256))
    assert importer.tasks_import(path=tmp_path / "rows.jsonl", user=author).imported == 40
    (tmp_path / "four.jsonl").write_text(_task_lines("again", 4, with_file=blob.sha256))
    counts = {}
    for name, rows in (("four", 4), ("rows", 40)):  # one batch each
        with CaptureQueriesContext(connection) as queries:
            report = importer.tasks_import(path=tmp_path / f"{name}.jsonl", user=author)
        assert [line.status for line in report.lines] == ["unchanged"] * rows
        counts[rows] = len(queries.captured_queries)
    assert counts[40] == counts[4], counts
    assert TaskVersion.objects.filter(task__slug__startswith="again-").count() == 40

    changed = [json.loads(line) for line in _task_lines("again", 4, with_file=blob.sha256).splitlines()]
    changed[2]["prompt"] = "A new prompt"
    changed[3]["environment"] = {"id": "elsewhere", "version": 1}
    (tmp_path / "changed.jsonl").write_text("\n".join(json.dumps(row) for row in changed) + "\n")
    lines = importer.tasks_import(path=tmp_path / "changed.jsonl", user=author).lines
    assert [line.status for line in lines] == ["unchanged", "unchanged", "new_version", "rejected"]
    assert "exists in environment" in lines[3].message


def test_an_older_version_imported_again_is_unchanged_not_a_new_version_on_top(author, tmp_path):
    """An older pack imported again: a row that holds what an earlier version holds is that version, not a new
    one that quietly reverts the later work (before: v1's content came back as v3)."""
    (tmp_path / "v1.jsonl").write_text(_task_lines("old", 1))
    importer.tasks_import(path=tmp_path / "v1.jsonl", user=author)
    task = Task.objects.get(slug="old-000")
    authoring_services.task_version_create(
        task=task,
        author=author,
        base_version=1,
        content={**authoring_services.task_version_content(task.latest_version), "prompt": "Later work"},
    )
    line = importer.tasks_import(path=tmp_path / "v1.jsonl", user=author).lines[0]
    assert (line.status, line.version, line.message) == ("unchanged", 1, "v1 holds this content; old-000 is at v2")
    task.refresh_from_db()
    assert task.latest_version.number == 2 and task.latest_version.spec["prompt"] == "Later work"


def test_what_a_table_import_says_is_where_the_problem_is_and_no_more(author, tmp_path):
    """A JSONL line's error names its real column (the line end counted past it: "column 1" of the next line);
    a table with a header and no rows says so (it reported "0 ok, 0 rejected"); a table pandas cannot read is
    named by its file name, never by the server's folders."""
    (tmp_path / "rows.jsonl").write_text(
        '{"prompt": "Hi?", "criteria": "Greets"}\n{"prompt": "Bye?", "criteria": "Leaves"\n'
    )
    bad = importer.tasks_import(path=tmp_path / "rows.jsonl", user=author).lines[1]
    assert bad.where == "line 2" and bad.status == "rejected"
    assert "column 40" in bad.message, bad.message  # just past the line's 39 characters
    (tmp_path / "empty.csv").write_text("prompt,answer,criteria\n")
    with pytest.raises(importer.ImportFailed, match="empty.csv has no rows"):
        importer.tasks_import(path=tmp_path / "empty.csv", user=author)
    (tmp_path / "garbage.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(importer.ImportFailed) as failure:
        importer.tasks_import(path=tmp_path / "garbage.parquet", user=author)
    assert "garbage.parquet" in failure.value.message and str(tmp_path) not in failure.value.message
    assert all(str(tmp_path) not in detail["message"] for detail in failure.value.details)
