"""The Harbor task folders of a pack built the way a lab builds one (`manage.py export_pack`, through the
packs services, from approved task versions in the database) pass `harbor lint`, for tasks that use
what an environment can have: a Dockerfile, environment files (one for the grader only), a setup
script, custom tools, and task files of every role; and each part lands where Harbor's agent and
verifier need it."""

from __future__ import annotations

import json
import subprocess
import tarfile
import tomllib

import pytest
from django.core.management import call_command

from authoring import services as authoring_services
from tests.packs.conftest import make_approved
from tests.support.venvs import harbor_bin

pytestmark = pytest.mark.django_db

DOCKERFILE = "FROM python:3.12-slim\nRUN pip install --no-cache-dir openpyxl==3.1.5\n"
# A setup script as authors write them: a comment, a loop over several lines, a continued line.
SETUP = (
    "# the ledger the tools read\nmkdir -p /workspace/ledger\nfor month in jan feb; do\n"
    '  echo "$month,0" > /workspace/ledger/$month.csv\ndone\necho ready \\\n  > /workspace/.setup-done\n'
)
TOOL = {
    "name": "query_ledger",
    "description": "Sum a month of the ledger.",
    "parameters": {"type": "object", "properties": {"month": {"type": "string"}}},
    "command": "python /env/tools/ledger.py",
}
RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "total", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "report", "kind": "file_exists", "points": 1, "path": "report.md"},
        {"id": "tests_pass", "kind": "command", "points": 3, "run": "sh checks/grade.sh", "expect_exit": 0},
        {"id": "clear", "kind": "llm_judge", "points": 1, "criterion": "Explains the total."},
    ],
}


@pytest.fixture
def pack_dir(author, reviewer, tmp_path):
    blobs = {
        name: authoring_services.blob_store(data=data)
        for name, data in {
            "ledger.py": b"import json, sys\nprint(json.load(sys.stdin))\n",
            "key.txt": b"grader-only key\n",
            "table.csv": b"a,b\n1,2\n",
            "grade.sh": b"#!/bin/sh\nexit 0\n",
            "notes.md": b"notes\n",
        }.items()
    }
    authoring_services.environment_create(
        slug="ledger-desk",
        name="Ledger desk",
        author=author,
        spec={
            "dockerfile": DOCKERFILE,
            "setup": SETUP,
            "network": "none",
            "custom_tools": [TOOL],
            "tools": ["bash", "read_file", "write_file", "submit"],
            "files": [
                {"path": "tools/ledger.py", "sha256": blobs["ledger.py"].sha256},
                {"path": "keys/key.txt", "sha256": blobs["key.txt"].sha256, "role": "grader"},
            ],
        },
    )
    make_approved(
        author=author,
        reviewer=reviewer,
        slug="ledger-total",
        environment_slug="ledger-desk",
        rubric=RUBRIC,
        files=[
            {"path": "notes.md", "sha256": blobs["notes.md"].sha256},
            {"path": "data/table.csv", "sha256": blobs["table.csv"].sha256, "role": "protected"},
            {"path": "checks/grade.sh", "sha256": blobs["grade.sh"].sha256, "role": "grader"},
        ],
    )
    make_approved(author=author, reviewer=reviewer, slug="plain-answer")  # the default image, text only
    call_command("export_pack", "harbor-real", "--out", str(tmp_path / "pack.tar.gz"))
    with tarfile.open(tmp_path / "pack.tar.gz") as tar:
        tar.extractall(tmp_path / "out", filter="data")
    (folder,) = (tmp_path / "out").iterdir()
    return folder


def test_harbor_lint_passes_every_task_of_a_pack_exported_from_the_database(pack_dir):
    tasks = sorted(str(path) for path in (pack_dir / "tasks").iterdir())
    assert [path.rsplit("/", 1)[1] for path in tasks] == ["ledger-total", "plain-answer"]
    done = subprocess.run([harbor_bin(), "lint", "--json", *tasks], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == []


def test_each_part_of_an_environment_lands_where_harbors_agent_and_verifier_need_it(pack_dir):
    task = pack_dir / "tasks" / "ledger-total"
    names = {path.relative_to(task).as_posix() for path in task.rglob("*") if path.is_file()}
    # the agent's image: workspace and protected files, the environment's files but the grader's key
    assert {
        "environment/workspace/notes.md",
        "environment/workspace/data/table.csv",
        "environment/env/tools/ledger.py",
        "environment/setup.sh",
    } <= names
    assert not any(name.startswith("environment/") and name.endswith(("grade.sh", "key.txt")) for name in names)
    # the verifier's: grader and protected files for the workspace, every environment file for /env
    assert {
        "tests/grader-files/checks/grade.sh",
        "tests/grader-files/data/table.csv",
        "tests/env-files/tools/ledger.py",
        "tests/env-files/keys/key.txt",
    } <= names
    # the setup script is run whole, as the sandbox runs it (its lines joined by && lost the loop)
    assert (task / "environment" / "setup.sh").read_text() == SETUP
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith(DOCKERFILE) and "COPY setup.sh /tmp/gymwright-setup.sh\n" in dockerfile
    # run as written: no #! line, so bash where the image has it (as Harbor runs a task's scripts), else sh
    assert dockerfile.index("COPY workspace/") < dockerfile.index(
        "RUN if command -v bash >/dev/null 2>&1; then bash /tmp/gymwright-setup.sh; else sh /tmp/gymwright-setup.sh; fi"
    )
    # the agent learns of the custom tool and how to call it
    instruction = (task / "instruction.md").read_text()
    assert (
        "`query_ledger`: Sum a month of the ledger." in instruction and "`python /env/tools/ledger.py`" in instruction
    )
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["verifier"]["env"] == {
        name: f"${{{name}:-}}"
        for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GYMWRIGHT_JUDGE_MODEL", "GYMWRIGHT_JUDGE_MAX_CHARS")
    }
    assert config["verifier"]["network_mode"] == "public" and config["environment"]["network_mode"] == "no-network"
