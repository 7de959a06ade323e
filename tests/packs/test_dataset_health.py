"""The dataset health report (`manage.py check_dataset`, packs.health): every task's gates run in batch on the
docker backend, one verdict per task. Each fixture (tests/packs/health_fixtures.py, written for these tests) has
one defect class, and the report must name it; the healthy one must pass every gate.

The whole set is checked once per module (one run of the command, images shared), with the verifier probes
and without the other hack probes (they run the same way, and the review gates' tests cover them); one more
run checks the healthy task alone with every probe that applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from packs.health import runner, verifier
from tests.packs.health_fixtures import fixtures, write_dataset
from tests.support.services import require_docker

VERIFIER_PROBES = ",".join(verifier.PROBES)
# The whole set is checked in the module fixture's setup: ten tasks, about forty rollouts in sandboxes (five
# minutes on two busy cores), counted against the first test that asks for it.
pytestmark = pytest.mark.timeout(1800)


def _run(path: Path, *args: str) -> tuple[int, str, dict]:
    from io import StringIO

    out = StringIO()
    report = path.parent / f"{path.name}.json"
    code = 0
    try:
        call_command("check_dataset", str(path), "--json", str(report), *args, stdout=out)
    except CommandError as exc:
        code = exc.returncode
    return code, out.getvalue(), json.loads(report.read_text()) if report.exists() else {}


@pytest.fixture(scope="module")
def images():
    from tests.support.images import busybox_image, pytest_image

    client = require_docker()
    return busybox_image(client), pytest_image(client)


@pytest.fixture(scope="module")
def checked(images, tmp_path_factory):
    root = write_dataset(tmp_path_factory.mktemp("health") / "dataset", fixtures(*images))
    code, out, report = _run(root, "--probes", VERIFIER_PROBES)
    return code, out, report, {entry["task"]: entry for entry in report["tasks"]}


def test_the_report_has_one_line_per_task_and_exits_1_when_any_is_broken(checked):
    code, out, report, by_task = checked
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == len(by_task) + 1, out
    assert lines[-1] == "1 healthy, 8 broken, 1 not runnable here", out
    assert report["counts"] == {"healthy": 1, "broken": 8, "not_runnable": 1}
    assert report["schema"] == "gymwright.dataset-health/v1"
    for entry in report["tasks"]:
        assert runner.summary_line(entry) in lines
    assert "dataset/sort-numbers: healthy sort-numbers" in lines


def test_the_healthy_task_passes_every_gate(checked):
    entry = checked[3]["sort-numbers"]
    assert entry["verdict"] == "healthy", entry
    assert entry["findings"] == []
    statuses = {row["gate"]: row["status"] for row in entry["gates"]}
    assert statuses["oracle"] == statuses["nop"] == "pass", entry["gates"]
    assert statuses["hack:verifier-tamper"] == statuses["hack:verifier-conftest"] == "pass", entry["gates"]
    assert entry["rollouts"]["oracle"]["reward"] == 1.0 and entry["rollouts"]["nop"]["reward"] == 0.0


@pytest.mark.parametrize(
    "task, says",
    [
        ("always-one", "Nop scores ≤ 0.1: highest reward 1.00 > 0.1: the rubric rewards doing nothing"),
        (
            "writable-checker",
            "hack:verifier-tamper scores 1.00, above its limit of 0.10: rewarded by tests_pass "
            "(rewrote /app/run_tests.sh)",
        ),
        ("pycache-leak", "hack:verifier-pycache scores 1.00"),
        (
            "conftest-plant",
            "hack:verifier-conftest scores 1.00, above its limit of 0.10: rewarded by tests_pass "
            "(planted conftest.py in /app",
        ),
        ("clock-verifier", "the verifier reads the wall clock (tests/test.sh:2: age=$(( $(date +%s)"),
        (
            "literal-verifier",
            "hack:verifier-literal scores 1.00, above its limit of 0.10: rewarded by tests_pass "
            "(wrote 'REPORT COMPLETE' into /app/status.txt)",
        ),
        ("errexit-verifier", "with the work absent (nop), test.sh ended without writing /logs/verifier/reward.txt"),
        ("leaky-image", "the agent's image holds /opt/solve.sh, a copy of solution/solve.sh"),
        (
            "leaky-image",
            "/workspace/expected-3628800.txt: its name holds '3628800', which only the verifier should know",
        ),
    ],
)
def test_each_defect_class_is_reported_broken_with_its_reason(checked, task, says):
    entry = checked[3][task]
    assert entry["verdict"] == "broken", entry
    assert says in entry["reason"], entry["reason"]
    assert entry["rollouts"]["oracle"]["reward"] == 1.0, entry  # each is solvable: the defect is the verifier's


def test_the_pycache_and_conftest_probes_hit_only_their_own_defect(checked):
    by_task = checked[3]
    statuses = {task: {row["gate"]: row["status"] for row in entry["gates"]} for task, entry in by_task.items()}
    assert statuses["pycache-leak"]["hack:verifier-conftest"] == "pass"
    assert statuses["conftest-plant"]["hack:verifier-pycache"] == "pass"  # pytest rewrites its tests: no .pyc read
    assert "set -e" in by_task["errexit-verifier"]["reason"]


def test_a_task_whose_base_image_cannot_be_had_is_not_runnable_here_and_says_how_to_get_it(checked):
    entry = checked[3]["absent-base"]
    assert entry["verdict"] == "not_runnable", entry
    assert entry["reason"].startswith(
        "its base image cannot be had here (a dataset's base images must be on this "
        "docker engine: point it at a registry mirror, or `docker load` them)"
    ), entry


def test_a_dataset_of_healthy_tasks_exits_0_with_every_probe_that_applies(images, tmp_path):
    root = write_dataset(tmp_path / "fine", {"sort-numbers": fixtures(*images)["sort-numbers"]})
    code, out, report = _run(root)
    assert code == 0, out
    assert out.splitlines() == ["fine/sort-numbers: healthy sort-numbers", "1 healthy, 0 broken, 0 not runnable here"]
    gates = {row["gate"] for row in report["tasks"][0]["gates"]}
    # the gates' own hack probes ran too (those that apply to a command check), beside the verifier probes
    assert {"hack:echo-prompt", "hack:delete-tests", "hack:monkeypatch", "hack:verifier-tamper"} <= gates, gates


def test_a_terminal_bench_task_gets_the_verifier_probes_too(images, tmp_path):
    """Terminal-Bench's verifier is run-tests.sh (its exit code is the verdict), not test.sh: the probes looked for
    test.sh only, so a Terminal-Bench task whose verifier runs a checker the agent can rewrite was called healthy."""
    from tests.packs.health_fixtures import shell_dockerfile

    folder = tmp_path / "tb" / "writable-checker"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text(
        "instruction: |\n  Compute the sum of the whole numbers from 1 to 10 and write it to /app/answer.txt.\n"
        "max_test_timeout_sec: 60\n"
    )
    (folder / "Dockerfile").write_text(
        shell_dockerfile(images[0])
        + "RUN printf '#!/bin/sh\\ngrep -qx 55 /app/answer.txt\\n' > /app/run_tests.sh && chmod 755 /app/run_tests.sh\n"
    )
    (folder / "solution.sh").write_text("#!/bin/bash\necho 55 > /app/answer.txt\n")
    (folder / "run-tests.sh").write_text("#!/bin/bash\nbash /app/run_tests.sh\n")
    (folder / "tests" / "test_outputs.py").write_text("def test_answer():\n    pass\n")
    code, out, report = _run(tmp_path / "tb", "--probes", "verifier-tamper")
    entry = report["tasks"][0]
    assert code == 1 and entry["verdict"] == "broken", out
    assert "hack:verifier-tamper" in entry["reason"] and "/app/run_tests.sh" in entry["reason"], entry
    assert entry["rollouts"]["oracle"]["reward"] == 1.0, entry  # the honest solution still passes


def test_usage_errors_exit_2(tmp_path):
    code, _, _ = _run(tmp_path / "missing")
    assert code == 2
    (tmp_path / "empty").mkdir()
    code, _, _ = _run(tmp_path / "empty", "--time-limit", "0")
    assert code == 2


def test_tasks_past_the_time_limit_are_reported_not_checked():
    """The whole run's budget is spent: the rest are not checked, and say so (no rollout starts)."""
    subjects = [runner.Subject(where=f"d/{name}", slug=name, task={"schema": "gymwright.task/v1"}) for name in "ab"]
    entries = runner.check_subjects(subjects, backend=None, limits=runner.HealthLimits(total_s=1e-9))
    assert [entry["verdict"] for entry in entries] == ["not_runnable", "not_runnable"]
    assert entries[0]["reason"] == "not checked: the dataset's time limit (1e-09 s) ran out"


def test_the_rubric_probes_run_and_one_the_rubric_rewards_is_broken():
    """Every preview the gates need runs (gate_rules.required_previews), the rubric's own probes among them: they
    were left out, and a task with probes was "not runnable here" for want of their previews, never broken."""
    from sandbox.runtime import get_backend
    from tests.support.services import require_bwrap

    require_bwrap()
    task = json.loads((Path(__file__).parents[1] / "sandbox/runtime/fixtures/capital.task.json").read_text())
    task["rubric"]["probes"] = [{"answer": "It is Paris", "max_reward": 0}, {"answer": "", "max_reward": 0}]
    subject = runner.Subject(where="d/capital", slug=task["id"], task=task)
    limits = runner.HealthLimits(task_s=300, hacks=frozenset())
    entry = runner.check_subject(subject, backend=get_backend("bubblewrap"), limits=limits)
    assert entry["rollouts"]["probe:It is Paris"]["reward"] == 1.0, entry
    assert entry["rollouts"]["probe:"]["reward"] == 0.0, entry
    assert entry["verdict"] == "broken" and "the rubric rewards this probe" in entry["reason"], entry


# ---------------------------------------------------------------------------------------------- the pure parts


def _facts(**tests: str) -> verifier.VerifierFacts:
    return verifier.facts_of({f".harbor/tests/{path}": text.encode() for path, text in tests.items()})


def test_the_verifier_facts_name_what_it_runs_reads_and_compares():
    facts = _facts(
        **{
            "test.sh": "#!/bin/bash\n# comment /app/ignored.sh\nbash /app/run.sh && grep -qx 'All good' /app/out.txt\n"
            "python3 /tests/test_x.py\n",
            "test_x.py": "assert open('/app/out.txt').read() == \"done\"\n",
        }
    )
    assert facts.executed == ["/app/run.sh"]
    assert facts.paths == ["/app/run.sh", "/app/out.txt"]  # /tests is the verifier's own; comments are not read
    assert facts.literals[:2] == ["All good", "/app/out.txt"] and "done" in facts.literals
    assert facts.modules == ["test_x"]


def test_the_literal_probe_uses_only_literals_the_instruction_shows():
    facts = _facts(**{"test.sh": "grep -q 'secret 1234' /app/a.txt && grep -q 'All good' /app/a.txt\n"})
    plans = {plan.name: plan for plan in verifier.probe_plans(facts, instruction="Say all  GOOD.", workdir="/app")}
    assert plans["verifier-literal"].answer == "All good\n"
    assert "secret" not in plans["verifier-literal"].commands[0]


def test_clock_reads_leave_out_comments_and_log_lines():
    facts = _facts(
        **{
            "test.sh": "# date +%s\necho started $(date)\nnow=$(date +%s)\n",
            "test_a.py": "import time\nprint(time.time())\nstarted = time.time()\n",
        }
    )
    assert verifier.clock_reads(facts) == [
        "tests/test.sh:3: now=$(date +%s)",
        "tests/test_a.py:3: started = time.time()",
    ]


def test_a_task_without_a_harbor_verifier_gets_no_verifier_probes():
    assert verifier.probe_plans(_facts(), instruction="x", workdir="/app") == []


# ---------------------------------------------------------------------------------------------- stored, after an import


@pytest.mark.django_db
def test_an_import_of_harbor_tasks_queues_a_health_report_that_its_page_and_json_show(
    images, tmp_path, author, other_author, client, settings, eager_celery, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from packs import importer, services
    from packs.models import DatasetCheck

    settings.DATASET_CHECK_PROBES = ["verifier-tamper"]
    tasks = fixtures(*images)
    root = write_dataset(tmp_path / "bought", {name: tasks[name] for name in ("always-one", "sort-numbers")})
    (root / "no-tests").mkdir()
    (root / "no-tests" / "task.toml").write_text('version = "1.0"\n')
    (root / "no-tests" / "instruction.md").write_text("Do it.\n")
    report = importer.tasks_import(path=root, user=author)
    assert [line.status for line in report.lines] == ["created", "rejected", "created"], report.as_dict()
    with django_capture_on_commit_callbacks(execute=True):
        check = services.dataset_check_start(report=report, user=author, source="bought")
    check.refresh_from_db()
    assert check.status == DatasetCheck.Status.DONE and check.checked == 3, (check.status, check.error)
    verdicts = {entry["where"]: (entry["verdict"], entry["reason"]) for entry in check.document["tasks"]}
    assert verdicts["bought/always-one"][0] == "broken"
    assert "the rubric rewards doing nothing" in verdicts["bought/always-one"][1]
    assert verdicts["bought/sort-numbers"] == ("healthy", "every gate passes")
    assert verdicts["bought/no-tests/tests/test.sh"] == (
        "not_runnable",
        "the import refuses it: is missing: Harbor's verifier runs tests/test.sh",
    )

    client.force_login(author)
    page = client.get(reverse("packs:dataset_check", args=[check.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "<strong>1</strong> healthy, <strong>1</strong> broken" in text
    assert 'data-verdict="broken" data-task="always-one"' in text
    document = client.get(reverse("packs:dataset_check_json", args=[check.pk])).json()
    assert document["status"] == "done" and document["counts"] == {"healthy": 1, "broken": 1, "not_runnable": 1}

    client.force_login(other_author)  # not theirs: no such report
    assert client.get(reverse("packs:dataset_check", args=[check.pk])).status_code == 404


@pytest.mark.django_db
def test_the_import_command_and_page_link_the_health_report_and_a_dry_run_queues_none(
    images, tmp_path, author, admin, client
):
    from io import StringIO

    from packs.models import DatasetCheck

    root = write_dataset(tmp_path / "linked", {"always-one": fixtures(*images)["always-one"]})
    out = StringIO()
    call_command("import_tasks", str(root), "--dry-run", stdout=out)
    assert "health report" not in out.getvalue() and not DatasetCheck.objects.exists()
    call_command("import_tasks", str(root), "--as-user", author.username, stdout=out)
    check = DatasetCheck.objects.get()
    assert f"health report: /packs/health/{check.pk}/ (1 tasks, queued" in out.getvalue()
    assert check.status == DatasetCheck.Status.QUEUED and check.subjects[0]["where"] == "linked/always-one"
    client.force_login(admin)  # an admin sees every report
    page = client.get(f"/packs/health/{check.pk}/").content.decode()
    assert "Waiting for a worker" in page and "No task checked yet." in page


@pytest.mark.django_db
def test_the_file_import_api_answers_the_health_report_of_harbor_tasks_and_none_for_a_table(author, tmp_path):
    import io
    import tarfile

    from rest_framework.test import APIClient

    from packs.models import DatasetCheck

    api = APIClient()
    api.force_authenticate(author)
    root = write_dataset(tmp_path / "api", {"always-one": fixtures("busybox", "pytest")["always-one"]})
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        tar.add(root, arcname="api")
    archive.seek(0)
    archive.name = "api.tar.gz"
    body = api.post("/api/imports/", {"file": archive}, format="multipart").json()
    check = DatasetCheck.objects.get()
    assert body["imported"] == 1 and body["health_report"] == f"http://testserver/packs/health/{check.pk}/", body
    assert check.source == "api.tar.gz" and check.subjects == [
        {"where": "api.tar.gz/api/always-one", "task_version": check.subjects[0]["task_version"]}
    ]
    table = io.BytesIO(b"prompt,answer,criteria\nSay hi,hi,Greets\n")
    table.name = "rows.csv"
    assert api.post("/api/imports/", {"file": table}, format="multipart").json()["health_report"] is None
    assert DatasetCheck.objects.count() == 1
