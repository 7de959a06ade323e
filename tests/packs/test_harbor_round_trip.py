"""A Harbor task keeps every setting on the way in and goes out as it came.

Before, the import read only the verifier's timeout and the tags ([agent].timeout_sec 1800 became 600, memory,
CPUs, network, [metadata], [verifier.env] and [solution.env] were dropped), refused any build context, and the
export wrote a task Harbor could not run as the original (WORKDIR /workspace after the task's /app, the tests
swapped for a separate python:3.12-slim verifier, "write your final answer to /workspace/answer.txt" added to
its instruction). Now what Gymwright has a setting for is mapped to it, the rest is kept as metadata, and the
export writes task.toml back field by field (byte for byte when nothing was changed), with the task's own
Dockerfile, build context, instruction, solution and tests, Gymwright's grader beside them in tests/gymwright/.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tomllib

import pytest
from django.core.management import call_command

from authoring.models import Blob, Task
from packs import importer
from packs.archive.harbor import toml_with
from tests.support.harbor_tasks import (
    CONTEXT,
    DOCKERFILE,
    INSTRUCTION,
    SOLUTION_NOTES,
    SOLVE,
    TASK_TOML,
    TEST_SH,
    write_word_tally,
)
from tests.support.venvs import harbor_bin

pytestmark = pytest.mark.django_db

BASE = "registry.example/tally-base:1"  # never pulled here: the export is read, not run (see tests/sandbox)


@pytest.fixture
def imported(author, admin, tmp_path, settings):
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    write_word_tally(tmp_path / "dataset", base=BASE)
    harbor_init(tmp_path / "dataset", "from-init")
    report = importer.tasks_import(path=tmp_path / "dataset", user=author, approve_as=admin)
    assert [line.status for line in report.lines] == ["created"] * 2, [line.text() for line in report.lines]
    assert report.lines[1].message == (  # word-tally
        "solution/ has 1 file(s) beside solve.sh: kept for the export, but the oracle here runs solve.sh without "
        "them (Harbor puts them in /solution)"
    )
    return Task.objects.get(slug="word-tally").latest_version


def harbor_init(root, name):
    """A task as `harbor init` makes it, filled in."""
    done = subprocess.run(
        [harbor_bin(), "init", "--task", f"acme/{name}", "-o", str(root), "--no-pytest"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (root / name / "instruction.md").write_text("Write hello to /app/out.txt.\n")
    (root / name / "solution" / "solve.sh").write_text("#!/bin/bash\nset -euo pipefail\necho hello > /app/out.txt\n")
    (root / name / "tests" / "test.sh").write_text(
        "#!/bin/bash\ngrep -qx hello /app/out.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    )


def lint(folder):
    done = subprocess.run([harbor_bin(), "lint", "--json", str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return sorted((finding["rule"], finding["message"]) for finding in json.loads(done.stdout or "[]"))


def test_every_task_toml_setting_is_mapped_or_kept(imported):
    spec = imported.spec
    environment = imported.environment_version.spec
    # what Gymwright has a setting for
    assert environment["limits"]["timeout_s"] == 1800  # [agent].timeout_sec, not 600
    assert (environment["limits"]["cpus"], environment["limits"]["memory_mb"]) == (2, 3072)
    assert environment["limits"]["workspace_mb"] == 4096  # storage_mb
    assert environment["network"] == "none"  # allow_internet = false
    [check] = spec["rubric"]["checks"]
    assert check["timeout_s"] == 240  # [verifier].timeout_sec
    assert "export TALLY_MODE=strict\n" in check["run"]  # [verifier.env], a literal value
    assert "JUDGE_KEY" not in check["run"]  # a template of Harbor's host: never read into a sandbox
    # the rest, kept: [metadata] beside the task's own keys, and the whole file
    metadata = spec["metadata"]
    assert {key: metadata[key] for key in ("difficulty", "category", "expert_time_estimate_min")} == {
        "difficulty": "medium",
        "category": "text-processing",
        "expert_time_estimate_min": 12.5,
    }
    assert metadata["reviewed_on"] == "2026-03-01" and metadata["notes"]["tier"] == 2
    assert metadata["harbor"]["task_toml"] == TASK_TOML
    config = metadata["harbor"]["config"]
    assert config["x_lab"] == {"queue": "nightly", "weights": [0.5, 0.25]}
    assert config["solution"]["env"] == {"TALLY_LABEL": "words"}
    assert config["environment"]["gpus"] == 0
    # the build context, content-addressed with the environment
    files = {entry["path"]: entry for entry in environment["files"]}
    assert sorted(files) == sorted(CONTEXT) and {entry["role"] for entry in files.values()} == {"build"}
    for path, text in CONTEXT.items():
        assert Blob.objects.get(sha256=files[path]["sha256"]).file.open("rb").read() == text.encode()
    assert environment["dockerfile"] == DOCKERFILE.format(base=BASE)
    assert spec["solution"]["script"] == SOLVE and spec["prompt"] == INSTRUCTION


def test_the_export_writes_the_task_back_as_it_came_with_gymwrights_grader_beside(imported, tmp_path):
    """Checked with `harbor lint` and Harbor's own task loader (running it: tests/sandbox/test_import_harbor_rollout)."""
    call_command("export_pack", "harbor-round-trip", "--out", str(tmp_path / "pack.tar.gz"))
    with tarfile.open(tmp_path / "pack.tar.gz") as tar:
        tar.extractall(tmp_path / "out", filter="data")
    (pack,) = (tmp_path / "out").iterdir()
    # harbor lint finds in each exported folder what it finds in the original, and nothing more: a task as
    # `harbor init` makes it is clean both ways; word-tally shares its verifier's sandbox and has a table
    # Harbor does not know, as it came
    assert lint(pack / "tasks" / "from-init") == lint(tmp_path / "dataset" / "from-init") == []
    assert lint(pack / "tasks" / "word-tally") == lint(tmp_path / "dataset" / "word-tally")
    assert [rule for rule, _ in lint(pack / "tasks" / "word-tally")] == ["shared-verifier", "unknown-config-field"]
    assert (pack / "tasks" / "from-init" / "tests" / "Dockerfile").read_bytes() == (
        tmp_path / "dataset" / "from-init" / "tests" / "Dockerfile"
    ).read_bytes()  # its separate verifier's own image, kept
    task = pack / "tasks" / "word-tally"
    # task.toml: unchanged, byte for byte, so field by field
    assert (task / "task.toml").read_text() == TASK_TOML
    assert tomllib.loads((task / "task.toml").read_text()) == tomllib.loads(TASK_TOML)
    # same paths, same verifier: the task's own files where they were
    assert (task / "instruction.md").read_text() == INSTRUCTION  # no "/workspace/answer.txt" added
    assert (task / "environment" / "Dockerfile").read_text() == DOCKERFILE.format(base=BASE)  # WORKDIR /app last
    for path, text in CONTEXT.items():
        assert (task / "environment" / path).read_text() == text
    assert (task / "solution" / "solve.sh").read_text() == SOLVE and os.access(task / "solution" / "solve.sh", os.X_OK)
    assert (task / "solution" / "NOTES.md").read_text() == SOLUTION_NOTES
    assert (task / "tests" / "test.sh").read_text() == TEST_SH and os.access(task / "tests" / "test.sh", os.X_OK)
    assert not (task / "tests" / "Dockerfile").exists()  # no separate python:3.12-slim verifier swapped in
    # Gymwright's grader, added beside the tests
    grader = task / "tests" / "gymwright"
    assert {"grade.py", "grader.pyz", "test.sh", "task.json"} <= {path.name for path in grader.iterdir()}
    assert json.loads((grader / "task.json").read_text())["id"] == "word-tally"
    assert (grader / "grader-files" / ".harbor" / "tests" / "test.sh").read_text() == TEST_SH  # for its grade
    # Harbor reads the folder as the original: its own loader, the settings it runs the task with
    done = subprocess.run(
        [
            os.path.join(os.path.dirname(harbor_bin()), "python"),
            "-c",
            "import json, sys\nfrom pathlib import Path\nfrom harbor.models.task.task import Task\n"
            "t = Task(Path(sys.argv[1]))\nc = t.config\n"
            "print(json.dumps([c.agent.timeout_sec, c.verifier.timeout_sec, c.environment.cpus, "
            "c.environment.memory_mb, c.verifier.env, c.solution.env, t.instruction]))",
            str(task),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        1800.0,
        240.0,
        2,
        3072,
        {"TALLY_MODE": "strict", "JUDGE_KEY": "${JUDGE_KEY:-}"},
        {"TALLY_LABEL": "words"},
        INSTRUCTION,
    ]


def test_a_setting_changed_in_gymwright_is_written_over_its_own_key_and_nothing_else():
    """toml_with: the key's line replaced in its table, else added at the table's top, else the table added;
    every other line (comments, other tables, a key of the same name elsewhere) kept."""
    text = "# a comment\n[agent]\ntimeout_sec = 1800.0 # half an hour\n\n[verifier]\ntimeout_sec = 240.0\n"
    changed = toml_with(text, "agent", "timeout_sec", "900.0")
    assert changed == "# a comment\n[agent]\ntimeout_sec = 900.0\n\n[verifier]\ntimeout_sec = 240.0\n"
    added = toml_with(text, "verifier", "retries", "2")
    assert tomllib.loads(added)["verifier"] == {"retries": 2, "timeout_sec": 240.0}
    assert added.startswith("# a comment\n[agent]\ntimeout_sec = 1800.0 # half an hour\n")
    table = toml_with(text, "environment", "cpus", "4")
    assert tomllib.loads(table) == {**tomllib.loads(text), "environment": {"cpus": 4}}


def test_a_task_that_needs_the_network_is_refused_in_words_where_egress_is_off(author, tmp_path, settings):
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    online = TASK_TOML.replace("allow_internet = false", "allow_internet = true")
    write_word_tally(tmp_path / "off", base=BASE, name="needs-net", task_toml=online)
    settings.SANDBOX_EGRESS = False
    report = importer.tasks_import(path=tmp_path / "off", user=author)
    [line] = report.lines
    assert (line.where, line.status) == ("off/needs-net/task.toml", "rejected")
    assert line.message == (
        "needs network access ([environment] allow_internet = true in task.toml), and network egress is off "
        "on this server; an operator enables it with GYMWRIGHT_SANDBOX_EGRESS"
    )
    settings.SANDBOX_EGRESS = True
    report = importer.tasks_import(path=tmp_path / "off", user=author)
    assert [line.status for line in report.lines] == ["created"]
    assert Task.objects.get(slug="word-tally").latest_version.environment_version.spec["network"] == "egress"


def test_harbors_default_network_is_said_on_the_report_line_when_this_server_has_none(author, tmp_path, settings):
    """`harbor init` writes network_mode = "public" into every task.toml, and a task that sets nothing gets it:
    a task that does not say it needs the network is imported, and its report line says it runs without one."""
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    settings.SANDBOX_EGRESS = False
    default = TASK_TOML.replace("allow_internet = false\n", "")
    write_word_tally(tmp_path / "default", base=BASE, task_toml=default)
    [line] = importer.tasks_import(path=tmp_path / "default", user=author).lines
    assert line.status == "created"
    assert line.message.startswith("runs without network here: task.toml's network_mode is 'public' (Harbor's default)")
