"""Two worker hosts, set up as the README's "Growing past one machine" says, step by step.

The steps are read from README.md itself, so the test and the README cannot drift: the settings
steps 1-5 name are the ones each host is given, and each worker is started with step 6's command
line, as written (only its node name and concurrency filled in), from the repository's root.

Each "host" is a real Celery worker process with its own node name (`-n`), its own
GYMWRIGHT_DATA_DIR (secret-key file, judge cache, scratch) and its own sandbox folder; the two
share nothing but what the README lists: the database (DATABASE_URL, PostgreSQL, migrated once:
pytest-django's test database), the broker (CELERY_BROKER_URL, a private Redis database) and blob
storage (MEDIA_ROOT), plus the same SECRET_KEY. The task reads a workspace file from blob storage,
so a host that could not reach the blobs would fail it.

Each rollout's solution waits in its sandbox until the test has found that sandbox's folder under
one host's sandbox folder and let it go (a `go` file in its workspace): a sandbox made anywhere
else never finishes, and the test counts, per host, the sandboxes made in its folder.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from sandbox import services
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task
from tests.support.services import require_postgres
from tests.support.users import make_user
from tests.support.workers import ROOT, start_workers, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]

N = 32
CONCURRENCY = 2
WAIT_S = 240  # for each preview: 32 rollouts of about a second, two at a time on a busy machine
RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "mode": "contains", "expected": "42"},
        {"id": "file_says_42", "kind": "file_content", "points": 1, "path": "answer.txt", "contains": "42"},
    ],
}
# Waits (at most 60 s) until the test lets it go, then multiplies the blob's two numbers.
SCRIPT = (
    "echo > started; i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
    "[ -f go ] || { echo 'nobody found this sandbox in a host folder' >&2; exit 3; }; "
    "echo $(( $(head -n1 numbers.txt) * $(tail -n1 numbers.txt) )) > answer.txt"
)


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Growing past one machine", 1)[1].split("\n## ", 1)[0]


def readme_worker_command(name: str, concurrency: int) -> list[str]:
    """Step 6's command line, as written, with its node name and concurrency filled in."""
    # Step 6 also names the datasets queue's worker (`-n datasets1@%h -Q datasets`): the rollout worker is worker1.
    [command] = [c for c in re.findall(r"`(\.venv/bin/celery [^`]+)`", readme_section()) if "worker1@%h" in c]
    argv = shlex.split(command)
    assert argv.count("worker1@%h") == 1 and argv.count("--concurrency=N") == 1, argv
    return [
        {"worker1@%h": f"{name}@%h", "--concurrency=N": f"--concurrency={concurrency}"}.get(arg, arg) for arg in argv
    ]


def readme_settings() -> set[str]:
    """The variables steps 1-5 say to set on every host (`NAME` or `NAME=...`)."""
    steps = readme_section().split("\n6. ", 1)[0]
    return set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`", steps))


def _host(root: Path, name: str) -> dict[str, str]:
    """What README steps 4 and 5 set on one worker host besides the shared settings: its own local folders."""
    data_dir = root / name / "data"
    sandboxes = root / name / "sandboxes"  # not the default under the data folder: the setting must be read
    sandboxes.mkdir(parents=True)
    sandboxes.chmod(0o711)  # the sandbox user passes through to its workspace
    return {
        "GYMWRIGHT_DATA_DIR": str(data_dir),
        "GYMWRIGHT_SANDBOX_DIR": str(sandboxes),
        "SECRET_KEY": "the-same-secret-key-on-every-host",
    }


def _let_go(folders: dict[str, Path], seen: dict[str, set[str]]) -> None:
    """Each sandbox waiting under a host's sandbox folder is counted for that host and let go."""
    for host, folder in folders.items():
        for started in folder.glob("*/workspace/started"):
            gate = started.with_name("go")
            if not gate.exists():
                seen[host].add(started.parent.parent.name)
                gate.write_text("go\n")


def _outcome(preview_run: PreviewRun) -> list[tuple]:
    """What a user reads of each rollout, without timings."""
    rows = []
    for rollout in preview_run.rollouts.order_by("index"):
        checks = [
            (c["id"], c["status"], c.get("score"), c.get("awarded"))
            for c in (rollout.grade.document if rollout.grade_id else {}).get("checks", [])
        ]
        rows.append(
            (
                rollout.index,
                rollout.status,
                rollout.reward,
                rollout.passed,
                rollout.answer,
                rollout.error,
                tuple(checks),
            )
        )
    return rows


@pytest.mark.timeout(2 * WAIT_S + 240)  # two previews, and two workers' start (90 s each at most)
def test_two_worker_hosts_share_a_preview_and_give_the_results_of_one(
    request, transactional_db, django_user_model, redis_db, celery_producer, tmp_path
):
    from authoring.services import blob_store
    from grading.models import Grade

    require_postgres("README step 1: every host shares one PostgreSQL database")
    author = make_user(django_user_model, "ada", "author")
    blob = blob_store(data=b"6\n7\n")
    task = make_task(
        author=author,
        slug="from-blobs",
        rubric=RUBRIC,
        script=SCRIPT,
        limits={"timeout_s": 120},
        files=[{"path": "numbers.txt", "sha256": blob.sha256}],
    )
    version = task.latest_version
    root = Path(tempfile.mkdtemp(prefix="gw-hosts-"))
    root.chmod(0o711)  # the sandbox user passes through to each host's sandbox folder
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
    hosts = {name: _host(root, name) for name in ("host-a", "host-b")}
    shared = {"DATABASE_URL", "CELERY_BROKER_URL", "MEDIA_ROOT"}  # Workers gives every worker these
    assert readme_settings() == shared | set(hosts["host-a"]), readme_settings()  # each README setting, no other
    assert workers.environment()["DATABASE_URL"].startswith("postgres://")
    folders = {name: Path(env["GYMWRIGHT_SANDBOX_DIR"]) for name, env in hosts.items()}
    seen: dict[str, set[str]] = {name: set() for name in hosts}

    def finished(preview_run):
        def check():
            _let_go(folders, seen)
            return PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists()

        return check

    # One host alone: the reference results.
    workers.start(name="host-a", env=hosts["host-a"], command=readme_worker_command("host-a", CONCURRENCY))
    alone = services.preview_run_create(task_version=version, user=author, policy="oracle", n=N)
    wait_for(finished(alone), timeout=WAIT_S, what="the one-host preview to finish", workers=workers)
    assert (len(seen["host-a"]), len(seen["host-b"])) == (N, 0), seen

    # A second host joins; the same preview again is shared between them.
    workers.start(name="host-b", env=hosts["host-b"], command=readme_worker_command("host-b", CONCURRENCY))
    seen = {name: set() for name in hosts}
    shared_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=N)
    wait_for(finished(shared_run), timeout=WAIT_S, what="the two-host preview to finish", workers=workers)

    alone.refresh_from_db(), shared_run.refresh_from_db()
    assert _outcome(shared_run) == _outcome(alone), workers.logs()
    assert all(row[1:4] == ("done", 1.0, True) for row in _outcome(shared_run)), workers.logs()
    assert shared_run.status == "done" and shared_run.summary == alone.summary

    # Every rollout ran exactly once: one claim, one stored grade.
    rollouts = list(shared_run.rollouts.all())
    assert [r.attempts for r in rollouts] == [1] * N, workers.logs()
    grades = Grade.objects.filter(rollout_id__in=[r.pk for r in rollouts])
    assert sorted(grades.values_list("rollout_id", flat=True)) == sorted(r.pk for r in rollouts)

    # Both hosts took work (the worker field is "<node name>@<host>:<pid>"), each in its own sandbox folder:
    # as many sandboxes were made under a host's folder as it ran rollouts.
    by_host: dict[str, int] = {}
    for rollout in rollouts:
        node = rollout.worker.split("@", 1)[0]
        by_host[node] = by_host.get(node, 0) + 1
    assert set(by_host) == {"host-a", "host-b"}, (by_host, workers.logs())
    assert {name: len(sandboxes) for name, sandboxes in seen.items()} == by_host, (seen, by_host)
    assert not Rollout.objects.filter(status__in=[Rollout.Status.QUEUED, *Rollout.ACTIVE]).exists()
    assert not any(workers.sandbox_dir.iterdir())  # nothing ran in the tests' default folder
