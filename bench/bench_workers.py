"""Lean workers (issue 12): N oracle rollouts through the whole preview path against the ideal.

    DATABASE_URL=postgres://...   # the server for a database of the run's own; the broker is a redis-server of its own
    .venv/bin/python bench/bench_workers.py [--rollouts 32] [--workers 2] [--rounds 2] [--task tiny|demo]
                                            [--profile FILE]

Side by side in one run, alternating, --rounds times:
  ideal: the same task's oracle rollouts run straight through `sandbox.runtime.run_rollout`
         (bubblewrap) on a pool of --workers processes: sandboxes, the episode and grading,
         nothing else;
  real:  a preview of N oracle rollouts on a real Celery worker (prefork, --workers processes)
         on Redis and PostgreSQL: enqueue, claim, heartbeats, progress, storing the trajectory,
         workspace and grade, the run's summary; from preview_run_create to the run's DONE.
Prints each wall time, the ratio real / ideal (goal <= 1.15x) and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")

import run_scratch  # noqa: E402
from bench_load import _db_url, _psql_admin  # noqa: E402


def _own_database() -> tuple[str, str]:
    """DATABASE_URL's server, in a database of this run's own (`<name>_workers_<run>`): the workers and this process
    read DATABASE_URL, so it is set before Django starts. (The server's URL, the database's name.)"""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/gymwright")
    name = run_scratch.database_name(url, "workers")
    with _psql_admin(url) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = _db_url(url, name)
    return url, name


_SPEC: dict | None = None
_WORK_DIR: str | None = None


_FILES: dict | None = None


def _init_ideal(spec: dict, work_dir: str, files: dict | None = None) -> None:
    global _SPEC, _WORK_DIR, _FILES
    _SPEC, _WORK_DIR, _FILES = spec, work_dir, files


def _one_ideal(_index: int) -> float:
    from grading.engine import parse_task
    from sandbox.runtime import get_backend, make_policy, run_rollout

    task = parse_task(_SPEC)
    result = run_rollout(
        task,
        policy=make_policy("oracle", task=task),
        backend=get_backend("bubblewrap", work_dir=_WORK_DIR),
        files=_FILES,
    )
    assert result.error is None and result.grade.passed, result.error
    return result.grade.reward


def ideal(pool: ProcessPoolExecutor, n: int) -> float:
    started = time.perf_counter()
    rewards = list(pool.map(_one_ideal, range(n)))
    assert rewards == [1.0] * n
    return time.perf_counter() - started


def real(task_version, user, n: int) -> float:
    from sandbox import services
    from sandbox.models import PreviewRun

    preview_run = services.preview_run_create(task_version=task_version, user=user, policy="oracle", n=n)
    # Waited for as a page does (it polls a run's progress every second; here every 0.25 s), and timed by the run's
    # own record, from its creation to the moment the last rollout finished it: a 20 ms poll loop spent CPU on the
    # same two cores as the rollouts, and rounded the time up to its poll.
    while not PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists():
        time.sleep(0.25)
    preview_run.refresh_from_db()
    elapsed = (preview_run.finished_at - preview_run.created_at).total_seconds()
    assert preview_run.summary["counts"]["done"] == n and preview_run.summary["pass_rate"] == 1.0, preview_run.summary
    return elapsed, timeline(preview_run)


def timeline(preview_run) -> dict:
    """Where a run's wall time went, from its rows: each rollout's claim to its stored result, and the gap between a
    worker process's stored result and its next claim (Celery's delivery of the next job, and the claim)."""
    rows = sorted(preview_run.rollouts.values_list("worker", "started_at", "finished_at"), key=lambda r: (r[0], r[1]))
    held = [(finished - started).total_seconds() for _, started, finished in rows]
    gaps = [(b[1] - a[2]).total_seconds() for a, b in zip(rows, rows[1:]) if a[0] == b[0]]
    first = min(started for _, started, _ in rows)
    return {
        "held_ms": statistics.median(held) * 1000,
        "gap_ms": statistics.median(gaps) * 1000 if gaps else 0.0,
        "first_claim_ms": (first - preview_run.created_at).total_seconds() * 1000,
        "last_to_done_ms": (preview_run.finished_at - max(f for _, _, f in rows)).total_seconds() * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--task",
        choices=("tiny", "demo"),
        default="tiny",
        help="tiny: the tests' six-by-seven task (an oracle rollout of ~15 ms, so the bookkeeping "
        "shows); demo: fizzbuzz-implementation as `make run` loads it (command and python checks "
        "in the sandbox, as a real task)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="record the worker's processes with py-spy during the measured rounds (collapsed stacks)",
    )
    args = parser.parse_args()
    server, name = _own_database()
    try:
        # A Redis of the run's own: the benchmark empties its broker, and must never empty another's.
        with run_scratch.redis_server() as broker_url:
            os.environ["CELERY_BROKER_URL"] = broker_url
            return _bench(args)
    finally:
        from django.db import connections

        connections.close_all()
        with _psql_admin(server) as admin:
            run_scratch.drop_database(admin, name)


def _bench(args) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tests.sandbox.factories import make_task

    suffix = uuid.uuid4().hex[:8]
    user = get_user_model().objects.create_user(f"bench-{suffix}")
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get_or_create(name="author")[0])
    files = None
    if args.task == "demo":
        from authoring import services as authoring_services
        from authoring.demo import DEMO_ENVIRONMENT, DEMO_TASKS, demo_file_refs, demo_task_document

        demo = next(d for d in DEMO_TASKS if d["slug"] == "fizzbuzz-implementation")
        for text in demo["files"].values():
            authoring_services.blob_store(data=text.encode())
        environment = authoring_services.environment_create(
            slug=f"bench-workers-env-{suffix}", name="bench", author=user, spec=DEMO_ENVIRONMENT["spec"]
        )
        task = authoring_services.task_create(
            slug=f"bench-workers-{suffix}",
            environment=environment,
            author=user,
            content={**demo["content"], "files": demo_file_refs(demo), "tags": demo["tags"]},
        )
        files = demo_task_document("fizzbuzz-implementation")[1]
    else:
        task = make_task(author=user, slug=f"bench-workers-{suffix}")
    version = task.latest_version

    work_dir = Path(tempfile.mkdtemp(prefix="gw-bench-workers-"))
    work_dir.chmod(0o755)
    log_path = work_dir / "worker.log"
    env = {
        **os.environ,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "GYMWRIGHT_SANDBOX_BACKEND": "bubblewrap",
        "GYMWRIGHT_SANDBOX_DIR": str(work_dir / "worker"),
        "OPENAI_BASE_URL": "",
        "PYTHONUNBUFFERED": "1",
    }
    (work_dir / "worker").mkdir()
    (work_dir / "worker").chmod(0o755)
    (work_dir / "ideal").mkdir()
    (work_dir / "ideal").chmod(0o755)
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("celery")),
                "-A",
                "gymwright",
                "worker",
                "-P",
                "prefork",
                "-c",
                str(args.workers),
                "-n",
                f"bench-{suffix}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    rows = []
    try:
        deadline = time.monotonic() + 120
        while b" ready." not in log_path.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                print(log_path.read_text(errors="replace"))
                return 1
            time.sleep(0.2)
        time.sleep(2)  # the worker's first reap and pool start
        with ProcessPoolExecutor(
            args.workers, initializer=_init_ideal, initargs=(version.spec, str(work_dir / "ideal"), files)
        ) as pool:
            ideal(pool, args.workers)  # warm up: imports, first sandboxes
            real(version, user, args.workers)  # warm up the worker's processes
            recorder = None
            if args.profile:
                recorder = subprocess.Popen(
                    [
                        str(Path(sys.executable).with_name("py-spy")),
                        "record",
                        "--format",
                        "raw",
                        "--rate",
                        "250",
                        "--subprocesses",
                        "--nonblocking",
                        "-o",
                        args.profile,
                        "--pid",
                        str(worker.pid),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)
            for round_number in range(1, args.rounds + 1):
                ideal_s = ideal(pool, args.rollouts)
                real_s, parts = real(version, user, args.rollouts)
                rows.append((round_number, ideal_s, real_s, parts))
            if recorder is not None:
                recorder.send_signal(signal.SIGINT)
                recorder.wait()
        load = os.getloadavg()
    finally:
        run_scratch.stop(worker)
        shutil.rmtree(work_dir, ignore_errors=True)
        task.delete()  # the bench user and environment stay, like any author's

    print(f"{args.rollouts} oracle rollouts of the {args.task} task, {args.workers} worker processes, bubblewrap")
    print(
        "| round | ideal (runtime only) | real (preview through Celery + PostgreSQL) | real / ideal | a rollout held "
        "(claim to stored), median | a worker's gap to its next claim, median | create to first claim | last "
        "stored to run done |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for round_number, ideal_s, real_s, parts in rows:
        print(
            f"| {round_number} | {ideal_s:.2f} s | {real_s:.2f} s | {real_s / ideal_s:.2f}x | {parts['held_ms']:.0f} ms "
            f"| {parts['gap_ms']:.1f} ms | {parts['first_claim_ms']:.0f} ms | {parts['last_to_done_ms']:.0f} ms |"
        )
    overhead = statistics.median((real_s - ideal_s) * args.workers / args.rollouts for _, ideal_s, real_s, _ in rows)
    print(f"bookkeeping per rollout (median of (real - ideal) x workers / rollouts): {overhead * 1000:.0f} ms")
    print(f"goal: real / ideal <= 1.15x; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
