"""Pages and API under load: gunicorn (DEBUG off) on PostgreSQL with 10,000 tasks × 3 versions and
50,000 graded rollouts, driven by N concurrent clients on loopback (issue 12).

Run: .venv/bin/python bench/bench_load.py [--clients 20] [--duration 30] [--workers 4] [--urls NAME,...]
     [--compare-conn-max-age] [--client raw|httpx] [--compare-clients] [--compare-search-index] [--db NAME]
     [--baseline TREE]

DATABASE_URL must name a PostgreSQL server (the script creates and drops a database of this run's own,
`<name>_load_<run>`; with --db NAME it uses that database, seeding it when empty, and keeps it: a second run,
or bench_page_cpu.py --db NAME, reuses the seed). For every URL it prints p50, p95,
requests per second, errors, and the CPU that the gunicorn workers and the PostgreSQL backends
spent per request (read from /proc before and after), plus side-by-side ratios: each page
against `/api/tasks/`, page 100 against page 1, and with --compare-conn-max-age persistent
database connections (the default, 60 s) against a connection per request (0), and with
--compare-search-index the search URLs with the task search's trigram indexes against without them
(dropped for that run, made again after).

The load client is one asyncio process of N closed-loop clients on bare streams (`--client httpx`:
the httpx client the earlier figures used), so it shares the machine's cores with the server: the
load average and the client's own CPU per request are printed with the figures, and
--compare-clients runs every URL with both clients side by side. "web CPU" counts every gunicorn
worker, recycled ones too (their time reaches the master's cutime when it reaps them).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import run_scratch  # noqa: E402
from other_work import OTHERS_QUIET, QUIET_LOAD, OtherWork, cpu_ticks, proc_stat  # noqa: E402

TASKS = 10_000
VERSIONS = 3
ROLLOUTS = 50_000
RUN_SIZE = 64
# The pack list's seed: packs of ready versions, each with the manifest a 1,000-task pack stores (it names every
# task: ~130 kB of JSON), which a list must never read.
PACKS = 200
PACK_VERSIONS = 3
PACK_MANIFEST_TASKS = 1_000
# A word of one task's title (the template's, "Explain safe ibuprofen dosing"), and the start of 10 slugs.
SEARCH_WORD, SEARCH_SLUG = "ibuprofen", "load-0421"
PASSWORD = "bench-load-pw-1"
# Task pages that differ (issue 34 item 2): DISTINCT_TASKS tasks made through the services, each with its own rubric
# (2 to 15 checks of different kinds, some grouped, and its own threshold), prompt and a preview run of
# DISTINCT_ROLLOUTS rollouts graded on different answers, so no page shares a cached rubric table, prompt or grade.
DISTINCT_TASKS = 200
DISTINCT_ROLLOUTS = 8
DISTINCT_PREFIX = "page-"
REVIEWER = "bench-reviewer"
import logging  # noqa: E402

logging.getLogger("httpx").setLevel(logging.WARNING)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def postgres_url() -> str:
    """DATABASE_URL, which the benchmarks need to name a PostgreSQL server; exits (2) saying so otherwise."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        print("DATABASE_URL must name a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/gymwright")
        raise SystemExit(2)
    return url


def _db_url(base: str, name: str) -> str:
    parts = urlparse(base)
    return urlunparse(parts._replace(path=f"/{name}"))


def _psql_admin(base: str):
    import psycopg

    return psycopg.connect(_db_url(base, "postgres"), autocommit=True)


def _setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
    os.environ.setdefault("GYMWRIGHT_DATA_DIR", str(run_scratch.folder("load")))
    import django

    django.setup()


def columns(model, skip=("id",)) -> list[str]:
    return [f.column for f in model._meta.concrete_fields if f.column not in skip]


def clone_sql(model, overrides: dict[str, str], source: str, extra_from: str = "", where: str = "") -> str:
    """INSERT … SELECT copying row `source` of `model`'s table once per row of `extra_from`, with `overrides`."""
    cols = columns(model)
    exprs = [overrides.get(c, f"src.{c}") for c in cols]
    table = model._meta.db_table
    return (
        f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
        f"FROM {table} src {extra_from} WHERE src.id = {source} {where}"
    )


def seed(url: str) -> dict:
    """Migrate and seed through the services for one real task, then clone it in SQL (seconds, not hours)."""
    _setup_django(url)
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0, interactive=False)
    from authoring import services
    from authoring.demo import DEMO_ENVIRONMENT, DEMO_TASKS
    from authoring.models import Task, TaskVersion
    from grading import engine
    from grading.services import grade_record
    from packs.models import PackVersion, TaskPack
    from review.models import Submission
    from sandbox.models import PreviewRun, Rollout

    user = User.objects.filter(username="bench").first()
    reviewer = User.objects.filter(username=REVIEWER).first()
    if user is not None and reviewer is not None and Task.objects.filter(slug__startswith="load-").count() >= TASKS:
        packs = TaskPack.objects.filter(slug__startswith="load-pack-").count()
        if packs == 0:  # kept from before the packs were seeded: add them
            _seed_packs(user)
            with connection.cursor() as cur:
                cur.execute("VACUUM ANALYZE")
        elif packs < PACKS:
            raise SystemExit(
                f"{connection.settings_dict['NAME']} holds {packs} of {PACKS} packs: drop it (or run without --db)"
            )
        distinct = _seed_distinct(user)
        token = Token.objects.get_or_create(user=user)[0]
        run = PreviewRun.objects.filter(n=RUN_SIZE).order_by("id").first()
        rollout = Rollout.objects.filter(preview_run=run).first()
        return {
            "token": token.key,
            "reviewer_token": Token.objects.get_or_create(user=reviewer)[0].key,
            "task": "load-00042",
            "run": run.pk,
            "rollout": rollout.pk,
            "distinct": distinct,
        }
    if user is not None:
        raise SystemExit(f"{connection.settings_dict['NAME']} holds an older seed: drop it (or run without --db)")

    user = User.objects.create_user("bench", password=PASSWORD)
    for role in ("author", "reviewer", "admin"):
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    token = Token.objects.get_or_create(user=user)[0]
    # The review queue is a reviewer's: the tasks in review that others wrote (a third of the seed), each with
    # the submission that sent it, oldest first.
    reviewer = User.objects.create_user(REVIEWER, password=PASSWORD)
    reviewer.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    reviewer_token = Token.objects.get_or_create(user=reviewer)[0]
    environment = services.environment_create(
        slug=DEMO_ENVIRONMENT["slug"], name=DEMO_ENVIRONMENT["name"], author=user, spec=DEMO_ENVIRONMENT["spec"]
    )
    demo = next(d for d in DEMO_TASKS if d["slug"] == "ibuprofen-dosing")
    files = [
        {"path": p, "sha256": services.blob_store(data=t.encode()).sha256} for p, t in sorted(demo["files"].items())
    ]
    template = services.task_create(
        slug="load-template",
        environment=environment,
        author=user,
        content={**demo["content"], "files": files, "tags": demo["tags"]},
    )
    version = template.latest_version
    rubric = engine.parse_task(version.spec).rubric
    answer = "Take 200-400 mg every 4 to 6 hours with food; do not exceed 1200 mg a day without a doctor."
    graded = engine.grade(rubric, answer=answer, workspace=None, judge=None, sandbox=None)

    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            clone_sql(
                Task,
                {
                    "slug": "'load-' || lpad(g::text, 5, '0')",
                    "title": "'Load task ' || g",
                    "latest_version_id": "NULL",
                    "approved_version_id": "NULL",
                    "status": "(ARRAY['draft','in_review','approved'])[1 + g % 3]",
                    "created_at": "now() - (g || ' minutes')::interval",
                    "updated_at": "now() - (g || ' minutes')::interval",
                },
                str(template.pk),
                f", generate_series(0, {TASKS - 1}) g",
            )
        )
        cur.execute(
            f"INSERT INTO {Task.tags.through._meta.db_table} (task_id, tag_id) "
            f"SELECT t.id, x.tag_id FROM authoring_task t, {Task.tags.through._meta.db_table} x "
            f"WHERE t.slug LIKE 'load-0%%' AND x.task_id = {template.pk}"
        )
        cur.execute(
            clone_sql(
                TaskVersion,
                {"task_id": "t.id", "number": "n", "parent_id": "NULL", "message": "'version ' || n"},
                str(version.pk),
                f", authoring_task t, generate_series(1, {VERSIONS}) n",
                "AND t.slug LIKE 'load-0%%'",
            )
        )
        cur.execute(
            "UPDATE authoring_task t SET latest_version_id = v.id FROM authoring_taskversion v "
            f"WHERE v.task_id = t.id AND v.number = {VERSIONS} AND t.slug LIKE 'load-0%%'"
        )
        cur.execute(
            f"INSERT INTO {Submission._meta.db_table} (task_version_id, submitted_by_id, gates, "
            "override_reason, created_at) SELECT t.latest_version_id, t.owner_id, '[]'::jsonb, '', "
            "t.updated_at FROM authoring_task t WHERE t.status = 'in_review' AND t.slug LIKE 'load-0%%'"
        )
    runs_needed = -(-ROLLOUTS // RUN_SIZE)
    first = TaskVersion.objects.filter(task__slug__startswith="load-0", number=VERSIONS).order_by("task__slug")
    run_template = PreviewRun.objects.create(
        task_version=first[0],
        created_by=user,
        policy="oracle",
        n=RUN_SIZE,
        backend="bubblewrap",
        status=PreviewRun.Status.DONE,
        summary={"n": RUN_SIZE, "done": RUN_SIZE, "errors": 0},
    )
    rollout_template = Rollout.objects.create(
        preview_run=run_template,
        index=0,
        status=Rollout.Status.DONE,
        attempts=1,
        answer=answer,
        reward=graded.reward,
        passed=graded.passed,
        steps=3,
        duration_ms=1200,
        trajectory=[{"type": "message", "role": "assistant", "content": answer}],
    )
    grade = grade_record(
        grade=graded, task_version=first[0], source="rollout", user=user, rollout_id=rollout_template.pk
    )
    Rollout.objects.filter(pk=rollout_template.pk).update(grade=grade)
    with connection.cursor() as cur:
        cur.execute(
            clone_sql(
                PreviewRun,
                {"task_version_id": "v.id"},
                str(run_template.pk),
                f", (SELECT id FROM authoring_taskversion WHERE number = {VERSIONS} AND task_id IN "
                f"(SELECT id FROM authoring_task WHERE slug LIKE 'load-0%%') ORDER BY id "
                f"LIMIT {runs_needed - 1} OFFSET 1) v",
            )
        )
        cur.execute(
            clone_sql(
                Rollout,
                {"preview_run_id": "r.id", "index": "i", "grade_id": "NULL"},
                str(rollout_template.pk),
                f", sandbox_previewrun r, generate_series(0, {RUN_SIZE - 1}) i",
                f"AND (r.id <> {run_template.pk} OR i > 0)",
            )
        )
        grade_cols = columns(type(grade))
        cur.execute(
            clone_sql(
                type(grade),
                {"rollout_id": "ro.id", "task_version_id": "r.task_version_id"},
                str(grade.pk),
                ", sandbox_rollout ro JOIN sandbox_previewrun r ON r.id = ro.preview_run_id",
                "AND ro.grade_id IS NULL",
            )
        )
        cur.execute(
            f"UPDATE sandbox_rollout ro SET grade_id = g.id FROM {type(grade)._meta.db_table} g "
            "WHERE g.rollout_id = ro.id AND ro.grade_id IS NULL"
        )
        check_model = type(grade).check_results.rel.related_model
        cr = check_model._meta.db_table
        cols = columns(check_model)
        exprs = ["g.id" if c == "grade_id" else f"src.{c}" for c in cols]
        cur.execute(
            f"INSERT INTO {cr} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM {cr} src, "
            f"{type(grade)._meta.db_table} g WHERE src.grade_id = {grade.pk} AND g.id <> {grade.pk}"
        )
    _seed_packs(user)
    distinct = _seed_distinct(user)
    with connection.cursor() as cur:
        # What autovacuum does to a live database after a bulk load: planner statistics, and the
        # visibility map that lets an index-only scan (the list's keys, a deep page's offset) skip the
        # table; without it page 100 fetched 8,700 heap rows to step over 5,000 index entries. And the search's
        # trigram indexes' counts, which only VACUUM updates: before it, the planner read the table for a search.
        cur.execute("VACUUM ANALYZE")
    del grade_cols
    print(
        f"seeded {Task.objects.count()} tasks, {TaskVersion.objects.count()} versions, "
        f"{Rollout.objects.count()} rollouts, {TaskPack.objects.count()} packs of {PackVersion.objects.count()} "
        f"versions in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    return {
        "token": token.key,
        "reviewer_token": reviewer_token.key,
        "task": "load-00042",
        "run": run_template.pk,
        "rollout": rollout_template.pk,
        "distinct": distinct,
    }


def _seed_packs(user) -> None:
    """PACKS packs of PACK_VERSIONS ready versions each (1.0.0, 1.1.0, ...), every version with a manifest of
    PACK_MANIFEST_TASKS tasks as a build stores it (archive.manifest_summary): one written, the rest cloned in SQL."""
    from django.db import connection

    from packs import archive
    from packs.models import PackVersion, TaskPack

    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {TaskPack._meta.db_table} (slug, name, description, licence, created_by_id, "
            f"created_at) SELECT 'load-pack-' || lpad(g::text, 3, '0'), 'Load pack ' || g, 'A pack of the "
            f"load seed', 'proprietary', {user.pk}, now() FROM generate_series(0, {PACKS - 1}) g"
        )
    first = TaskPack.objects.get(slug="load-pack-000")
    tasks = [
        {
            "id": f"load-{i:05d}",
            "version": VERSIONS,
            "sha256": hashlib.sha256(str(i).encode()).hexdigest(),
            "split": archive.split_of(f"load-{i:05d}", 0.1),
        }
        for i in range(PACK_MANIFEST_TASKS)
    ]
    counts = {"tasks": len(tasks), "test": sum(t["split"] == "test" for t in tasks)}
    counts["train"] = counts["tasks"] - counts["test"]
    manifest = {
        "schema": archive.PACK_SCHEMA,
        "name": first.name,
        "slug": first.slug,
        "version": "1.0.0",
        "description": first.description,
        "licence": first.licence,
        "counts": counts,
        "test_ratio": 0.1,
        "difficulty": {name: 0 for name in archive.DIFFICULTY_BINS},
        "canary": archive.canary_guid(first.slug),
        "tasks": tasks,
        "content_sha256": "0" * 64,
    }
    template = PackVersion.objects.create(
        pack=first,
        version="1.0.0",
        major=1,
        minor=0,
        patch=0,
        status=PackVersion.Status.READY,
        created_by=user,
        selection={"environment": None, "tags": [], "tasks": [], "test_ratio": 0.1},
        progress_done=len(tasks),
        progress_total=len(tasks),
        size=40_000_000,
        sha256="0" * 64,
        content_sha256="0" * 64,
        manifest=manifest,
    )
    with connection.cursor() as cur:
        cur.execute(
            clone_sql(
                PackVersion,
                {"pack_id": "p.id", "version": "'1.' || m || '.0'", "minor": "m"},
                str(template.pk),
                f", {TaskPack._meta.db_table} p, generate_series(0, {PACK_VERSIONS - 1}) m",
                f"AND NOT (p.id = {first.pk} AND m = 0)",
            )
        )


def _distinct_rubric(i: int, base: dict) -> dict:
    """Task i's rubric: the template's checks and 0 to 12 more of its own (string, regex and number checks with
    expectations of their own; every fifth task's grouped, with one of the four aggregates), its own threshold."""
    extra = []
    for j in range(i % 13):
        word = f"w{i}x{j}"
        if j % 3 == 0:
            extra.append({"id": f"says_{word}", "kind": "string_match", "points": 1 + j % 4, "expected": word})
        elif j % 3 == 1:
            extra.append({"id": f"cites_{word}", "kind": "regex", "points": 2, "pattern": rf"\b{word}\b\s?\d+"})
        else:
            extra.append({"id": f"counts_{word}", "kind": "number", "points": 1, "expected": i + j, "tolerance": j % 3})
    if extra and i % 5 == 0:
        aggregate = ("all", "any", "mean", "min")[i // 5 % 4]
        extra = [{"id": f"group_{i}", "kind": "group", "points": 3, "aggregate": aggregate, "checks": extra}]
    return {**base, "pass_threshold": round(0.5 + (i % 5) / 10, 1), "checks": list(base["checks"]) + extra}


def _distinct_answer(i: int, k: int, base: str) -> str:
    """Rollout k of task i: a different part of the template's answer and of the task's own words, so the grades
    differ from rollout to rollout and from task to task."""
    words = [f"w{i}x{j} {i + j}" for j in range(i % 13) if (j + k) % 3]
    sentences = base.split(". ")
    return ". ".join(sentences[: 1 + (i + k) % len(sentences)]) + " " + " ".join(words) + f" ({i + k} mg)"


def _seed_distinct(user) -> list[str]:
    """DISTINCT_TASKS tasks (DISTINCT_PREFIX + number) through the services, each with a preview run of
    DISTINCT_ROLLOUTS graded rollouts; kept when already there. Returns their slugs."""
    import copy

    from django.db import connection

    from authoring import services
    from authoring.demo import DEMO_ENVIRONMENT, DEMO_TASKS
    from authoring.models import Environment, Task
    from grading import engine
    from grading.services import grade_record
    from sandbox.models import PreviewRun, Rollout

    slugs = [f"{DISTINCT_PREFIX}{i:03d}" for i in range(DISTINCT_TASKS)]
    have = Task.objects.filter(slug__in=slugs).count()
    if have == DISTINCT_TASKS:
        return slugs
    if have:
        raise SystemExit(f"the seed holds {have} of {DISTINCT_TASKS} distinct tasks: drop it (or run without --db)")
    t0 = time.perf_counter()
    environment = Environment.objects.get(slug=DEMO_ENVIRONMENT["slug"])
    demo = next(d for d in DEMO_TASKS if d["slug"] == "ibuprofen-dosing")
    for i, slug in enumerate(slugs):
        content = copy.deepcopy(demo["content"])
        content.update(
            # Not the template's title: the search benchmarks count on one task whose title says SEARCH_WORD.
            title=f"Distinct task {i}: dosing for a lay reader",
            prompt=content["prompt"] + f"\n\nVariant {i}: name " + ", ".join(f"`w{i}x{j}`" for j in range(i % 13)),
            rubric=_distinct_rubric(i, content["rubric"]),
            tags=demo["tags"] + [f"variant-{i % 7}"],
            files=[],
        )
        version = services.task_create(slug=slug, environment=environment, author=user, content=content).latest_version
        rubric = engine.parse_task(version.spec).rubric
        run = PreviewRun.objects.create(
            task_version=version,
            created_by=user,
            policy="oracle",
            n=DISTINCT_ROLLOUTS,
            backend="bubblewrap",
            status=PreviewRun.Status.DONE,
            summary={"n": DISTINCT_ROLLOUTS, "done": DISTINCT_ROLLOUTS, "errors": 0},
        )
        for k in range(DISTINCT_ROLLOUTS):
            answer = _distinct_answer(i, k, content["solution"]["answer"])
            graded = engine.grade(rubric, answer=answer, workspace=None, judge=None, sandbox=None)
            rollout = Rollout.objects.create(
                preview_run=run,
                index=k,
                status=Rollout.Status.DONE,
                attempts=1,
                answer=answer,
                reward=graded.reward,
                passed=graded.passed,
                steps=1 + k % 4,
                duration_ms=900 + 37 * k,
                trajectory=[{"type": "message", "role": "assistant", "content": answer}],
            )
            grade = grade_record(grade=graded, task_version=version, source="rollout", user=user, rollout_id=rollout.pk)
            Rollout.objects.filter(pk=rollout.pk).update(grade=grade)
    # Older than the load tasks, so the lists' first pages (`/`, /api/tasks/) show what they showed before these.
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE authoring_task SET created_at = now() - interval '60 days', updated_at = now() - interval "
            "'60 days' WHERE slug LIKE %s",
            [f"{DISTINCT_PREFIX}%"],
        )
    print(
        f"seeded {DISTINCT_TASKS} distinct tasks with {DISTINCT_ROLLOUTS} graded rollouts each in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    return slugs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def gunicorn_ticks(master: int) -> int:
    """CPU ticks of a gunicorn's workers so far: the live ones', plus those of workers that exited (recycled after
    max_requests), which the kernel adds to the master's cutime/cstime when the master reaps them. The master's own
    time is not counted: it serves no request."""
    stat = proc_stat(master)
    reaped = int(stat[1][13]) + int(stat[1][14]) if stat is not None else 0
    return reaped + sum(cpu_ticks(_children(master)).values())


def _cpu_spent(before: dict[int, int], after: dict[int, int]) -> float:
    """Seconds of CPU between two readings, over the processes present in both (a process that
    exited or a pid that was reused in between would make the difference meaningless)."""
    return sum(max(after[pid] - before[pid], 0) for pid in before.keys() & after.keys()) / CLK_TCK


def _postgres_pids(database: str) -> list[int]:
    """The PostgreSQL backends serving `database` (their process title names it), not other clients'."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if title.startswith("postgres: ") and f" {database} " in title:
                pids.append(int(entry.name))
    return pids


class Server:
    def __init__(self, url: str, workers: int, conn_max_age: int, root: Path = ROOT):
        """gunicorn serving the checkout at `root` (this one by default; another for a side-by-side run)."""
        self.port = _free_port()
        self.database = urlparse(url).path.lstrip("/")
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(run_scratch.folder("gunicorn") / "gunicorn.log", "wb")
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DEBUG": "false",
            "DB_CONN_MAX_AGE": str(conn_max_age),
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": str(workers),
            "GUNICORN_ACCESS_LOG": "/dev/null",
            "STATIC_ROOT": str(run_scratch.folder("static")),  # each server (checkout) its own
        }
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=root, env=env, check=True
        )
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "--config", "python:gymwright.gunicorn_conf"],
            cwd=root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.base}/accounts/login/", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise SystemExit("gunicorn did not start")

    def worker_pids(self) -> list[int]:
        return _children(self.proc.pid)

    def cpu_ticks(self) -> int:
        """CPU ticks of every gunicorn worker so far (`gunicorn_ticks`)."""
        return gunicorn_ticks(self.proc.pid)

    def stop(self) -> None:
        run_scratch.stop(self.proc)
        self.log.close()


NO_SEARCH_INDEX = "no trigram index"


def _search_indexes(*, drop: bool) -> None:
    """The task search's trigram indexes dropped, or made again, by authoring migration 0007's own steps; made
    again, with their statistics (VACUUM ANALYZE, as after the seed)."""
    import importlib

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("authoring.migrations.0007_task_search_trigram_indexes")
    with connection.schema_editor() as editor:
        (migration.indexes_drop if drop else migration.indexes_create)(apps, editor)
    if not drop:
        with connection.cursor() as cur:
            cur.execute("VACUUM ANALYZE authoring_task")
    connection.close()


def login_cookies(base: str, username: str = "bench") -> dict:
    import httpx

    with httpx.Client(base_url=base) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        r = client.post(
            "/accounts/login/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base}/accounts/login/"},
        )
        assert r.status_code == 302, r.status_code
        return dict(client.cookies)


async def drive(
    base: str,
    path: str | list[str],
    headers: dict,
    cookies: dict,
    clients: int,
    duration: float,
    client: str = "raw",
    once: bool = False,
) -> dict:
    """`clients` closed-loop clients for `duration` seconds. Given a list of paths, the clients take them in turn
    (client c's k-th request is paths[(c + k × clients) mod len]), so together they sweep the list; with `once`
    (raw client only) each path is requested once, by whichever client is free next, and `duration` is ignored."""
    if client == "raw":
        return await drive_raw(base, path, headers, cookies, clients, duration, once)
    if once:
        raise ValueError("once: the raw client only")
    import httpx

    paths = [path] if isinstance(path, str) else path

    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + duration

    async def one(client, c):
        nonlocal errors
        k = 0
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            try:
                r = await client.get(paths[(c + k * clients) % len(paths)])
                k += 1
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - start)
            errors += not ok

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers=headers, cookies=cookies, limits=limits, timeout=30) as client:
        await client.get(paths[0])  # warm
        began = time.perf_counter()
        await asyncio.gather(*(one(client, c) for c in range(clients)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "n": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p95": latencies[int(0.95 * (len(latencies) - 1))] * 1000,
    }


async def drive_raw(
    base: str, path: str | list[str], headers: dict, cookies: dict, clients: int, duration: float, once: bool = False
) -> dict:
    """The same closed loop as `drive` with httpx, on bare asyncio streams: a GET written by hand, the
    response read by its Content-Length (or chunks), the connection kept while the server keeps it.
    It spends a fraction of httpx's CPU per request, which on a 2-core machine is CPU the server gets
    back (`client_cpu_ms` says how much each client took)."""
    parts = urlparse(base)
    host, port = parts.hostname, parts.port or 80
    fields = [f"Host: {host}:{port}", "Accept: */*", "Connection: keep-alive"]
    fields += [f"{key}: {value}" for key, value in headers.items()]
    if cookies:
        fields.append("Cookie: " + "; ".join(f"{key}={value}" for key, value in cookies.items()))
    requests = [
        ("\r\n".join([f"GET {one_path} HTTP/1.1", *fields]) + "\r\n\r\n").encode()
        for one_path in ([path] if isinstance(path, str) else path)
    ]
    pending = list(reversed(requests)) if once else []
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + duration

    async def fetch(connection, request):
        reader, writer = connection
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        fields = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "content-length" in fields:
            await reader.readexactly(int(fields["content-length"]))
        elif fields.get("transfer-encoding") == "chunked":
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                await reader.readexactly(size + 2)
                if size == 0:
                    break
        else:
            await reader.read()
            fields["connection"] = "close"
        return status, fields.get("connection", "").lower() != "close"

    async def one(c):
        nonlocal errors
        connection = None
        k = 0
        while pending if once else time.perf_counter() < stop_at:
            request = pending.pop() if once else requests[(c + k * clients) % len(requests)]
            k += 1
            start = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection(host, port)
                status, keep = await asyncio.wait_for(fetch(connection, request), 30)
                ok = status == 200
            except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                ok, keep = False, False
            if not keep and connection is not None:
                connection[1].close()
                connection = None
            latencies.append(time.perf_counter() - start)
            errors += not ok
        if connection is not None:
            connection[1].close()

    began = time.perf_counter()
    await asyncio.gather(*(one(c) for c in range(clients)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "n": len(latencies),
        "errors": errors,
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p95": latencies[int(0.95 * (len(latencies) - 1))] * 1000,
    }


class _BackendCPU:
    """CPU seconds of one database's PostgreSQL backends over a `with` block. A backend can come and
    go inside it (a recycled gunicorn worker closes its connection, the new one opens another), so
    the backends are read every 0.2 s: one born inside counts from zero, one that exits loses at
    most its last 0.2 s."""

    def __init__(self, database: str):
        self.database, self.first, self.last, self.seconds = database, {}, {}, 0.0
        self._stop = None

    def _read(self) -> None:
        for pid, ticks in cpu_ticks(_postgres_pids(self.database)).items():
            self.first.setdefault(pid, ticks if self._stop is None else 0)
            self.last[pid] = ticks

    def __enter__(self):
        import threading

        self._read()  # the backends alive before the block: counted from here
        self._stop = threading.Event()

        def poll():
            while not self._stop.wait(0.2):
                self._read()

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._read()
        self.seconds = sum(max(self.last[pid] - self.first[pid], 0) for pid in self.last) / CLK_TCK


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(
    server: Server,
    path: str | list[str],
    headers: dict,
    cookies: dict,
    clients: int,
    duration: float,
    client: str = "raw",
    once: bool = False,
    warm: str | None = None,
) -> dict:
    """The figures of one run (after a second of `warm`, or of `path` itself, to open every database connection), with `others_cores`: the cores that processes other than this run's own (its server and client,
    the services it drives) kept busy meanwhile (bench/other_work.py; the load average cannot tell other work from
    the run's own 20 clients and 4 workers, which by themselves hold it near 4–5 on 2 cores)."""
    asyncio.run(drive(server.base, warm or path, headers, cookies, clients, 1.0, client))
    database = _BackendCPU(server.database)
    web_before, client_before = server.cpu_ticks(), _self_cpu_s()
    with database, OtherWork() as other:
        result = asyncio.run(drive(server.base, path, headers, cookies, clients, duration, client, once))
    web_after, client_after = server.cpu_ticks(), _self_cpu_s()
    web_s, client_s = (web_after - web_before) / CLK_TCK, client_after - client_before
    result["web_cpu_ms"] = web_s * 1000 / max(result["n"], 1)
    result["db_cpu_ms"] = database.seconds * 1000 / max(result["n"], 1)
    result["client_cpu_ms"] = client_s * 1000 / max(result["n"], 1)
    result["others_cores"] = other.cores
    result["load"] = os.getloadavg()[0]
    return result


def _drive_url(
    server: Server,
    sessions: dict,
    ids: dict,
    path: str,
    api: bool,
    as_reviewer: bool,
    args,
    label: str,
    name: str,
    client: str,
) -> dict:
    """`path` driven by args.clients clients for args.duration seconds, as the bench user or the reviewer; the
    figures printed on a line and returned."""
    import httpx

    headers = {"Authorization": f"Token {ids['reviewer_token' if as_reviewer else 'token']}"} if api else {}
    cookies = {} if api else sessions[as_reviewer]
    probe = httpx.get(server.base + (path if isinstance(path, str) else path[0]), headers=headers, cookies=cookies)
    if probe.status_code != 200 or ("review" in path and "load-" not in probe.text):
        raise SystemExit(f"{path} answered {probe.status_code} on {server.base} (or the reviewer's queue is empty)")
    r = measure(server, path, headers, cookies, args.clients, args.duration, client)
    print(
        f"{label:16} {name:28} p50 {r['p50']:7.1f} ms  p95 {r['p95']:7.1f} ms  {r['rps']:6.1f} req/s  "
        f"errors {r['errors']:3d}  web CPU {r['web_cpu_ms']:5.1f} ms/req  db CPU {r['db_cpu_ms']:5.1f} ms/req  "
        f"client CPU {r['client_cpu_ms']:4.1f} ms/req  (n={r['n']}, load {r['load']:.2f}, other work "
        f"{r['others_cores']:.2f} cores)",
        flush=True,
    )
    return r


DISTINCT_PAGES = f"task pages ({DISTINCT_TASKS} distinct)"
FIRST_VIEWS = f"first views ({DISTINCT_TASKS} pages)"
# The goals of issue 12 for 20 clients: p95 of a page, of an API list; "about 8 ms of CPU per page".
PAGE_GOAL_MS, API_GOAL_MS, PAGE_CPU_GOAL_MS = 150, 100, 8


def first_views(server: Server, cookies: dict, ids: dict, args, label: str, client: str) -> dict:
    """Each distinct task page viewed once, by args.clients clients taking the next page as they come free, on a
    server whose workers have served only the warm task page: the per-process caches (rubric table, grade facts,
    prompt HTML kept per version in Django's cache, deleted here first) are cold for every one of these pages."""
    from django.core.cache import cache

    from authoring.models import TaskVersion
    from authoring.prompt_html import RENDERER_VERSION

    hashes = TaskVersion.objects.filter(task__slug__in=ids["distinct"]).values_list("sha256", flat=True)
    cache.delete_many([f"gymwright:prompt-html:{RENDERER_VERSION}:{sha}" for sha in hashes])
    paths = [f"/tasks/{slug}/" for slug in ids["distinct"]]
    # Warmed on another task page: the workers' compile-once work (prepared queries, templates) done, as in a server
    # that has been running.
    r = measure(server, paths, {}, cookies, args.clients, 0, "raw", once=True, warm=f"/tasks/{ids['task']}/")
    print(
        f"{label:16} {FIRST_VIEWS:28} p50 {r['p50']:7.1f} ms  p95 {r['p95']:7.1f} ms  {r['rps']:6.1f} req/s  "
        f"errors {r['errors']:3d}  web CPU {r['web_cpu_ms']:5.1f} ms/req  db CPU {r['db_cpu_ms']:5.1f} ms/req  "
        f"(n={r['n']}, {args.clients} clients, each page once; load {r['load']:.2f}, other work "
        f"{r['others_cores']:.2f} cores)",
        flush=True,
    )
    return r


def _distinct_report(results: dict, first: str, load_before: float) -> None:
    """The distinct pages and their first views against the one warm task page, and the page goals on them."""
    warm = results.get((first, "task page"))
    spread = results.get((first, DISTINCT_PAGES))
    cold = results.get((first, FIRST_VIEWS))
    for name_, r in ((DISTINCT_PAGES, spread), (FIRST_VIEWS, cold)):
        if r and warm:
            print(
                f"{name_:28} / one warm task page: p50 {r['p50'] / warm['p50']:.2f}×  p95 {r['p95'] / warm['p95']:.2f}×"
                f"  web CPU {r['web_cpu_ms'] / max(warm['web_cpu_ms'], 0.001):.2f}×"
            )
    # Judged only on a quiet machine: a load average of at most QUIET_LOAD before the run (the run's own clients and
    # workers then raise it to 4–5 on 2 cores), and other processes holding under OTHERS_QUIET cores meanwhile.
    others = max((r["others_cores"] for r in (warm, spread, cold) if r), default=0.0)
    quiet = load_before <= QUIET_LOAD and others <= OTHERS_QUIET
    why = f"load average {load_before:.2f} before the run, other work up to {others:.2f} cores during it"
    for name_, r in ((DISTINCT_PAGES, spread), (FIRST_VIEWS, cold)):
        if not r:
            continue
        verdict = (
            ("met" if r["p95"] <= PAGE_GOAL_MS else "not met")
            + f" (p95 ≤ {PAGE_GOAL_MS} ms), "
            + ("met" if r["web_cpu_ms"] <= PAGE_CPU_GOAL_MS else "not met")
            + f" (web CPU ≤ {PAGE_CPU_GOAL_MS} ms)"
        )
        print(
            f"goal for {name_}: "
            + (f"{verdict}; {why}" if quiet else f"not judged ({why}); the figures would say: {verdict}")
        )


def _finish(args, base_url: str, name: str, results: dict) -> int:
    """The load average after, the seeded database dropped unless kept; 1 when any request failed."""
    print(f"load average after: {os.getloadavg()}")
    if not args.db:
        with _psql_admin(base_url) as admin:
            run_scratch.drop_database(admin, name)
    return 1 if any(r["errors"] for r in results.values()) else 0


def side_by_side(args, url: str, ids: dict, urls: dict, baseline: Path, base_url: str, name: str) -> int:
    """Every URL on this checkout and on `baseline`, both served on the same seed, one after the other (which goes
    first alternates from URL to URL, so the machine's drift falls on both): the ratios now / baseline."""
    servers = {"now": Server(url, args.workers, 60), "baseline": Server(url, args.workers, 60, root=baseline)}
    results: dict[tuple[str, str], dict] = {}
    print(
        f"# side by side with {baseline}: {args.clients} clients ({args.client}) × {args.duration:g} s per URL and "
        f"tree, gunicorn {args.workers} workers each, DEBUG off, PostgreSQL; load average before: "
        f"{os.getloadavg()}",
        flush=True,
    )
    try:
        sessions = {
            label: {False: login_cookies(server.base), True: login_cookies(server.base, REVIEWER)}
            for label, server in servers.items()
        }
        for position, (name_, (path, api, as_reviewer)) in enumerate(urls.items()):
            for label in ("now", "baseline") if position % 2 == 0 else ("baseline", "now"):
                results[(label, name_)] = _drive_url(
                    servers[label], sessions[label], ids, path, api, as_reviewer, args, label, name_, args.client
                )
    finally:
        for server in servers.values():
            server.stop()
    print(
        f"\n| URL ({args.clients} clients) | p95 now | p95 baseline | now / baseline | web CPU now | baseline "
        "| now / baseline | db CPU now | baseline |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name_ in urls:
        now, before = results[("now", name_)], results[("baseline", name_)]
        print(
            f"| {name_} | {now['p95']:.0f} ms | {before['p95']:.0f} ms | {now['p95'] / before['p95']:.2f}× | "
            f"{now['web_cpu_ms']:.1f} ms | {before['web_cpu_ms']:.1f} ms | "
            f"{now['web_cpu_ms'] / max(before['web_cpu_ms'], 0.001):.2f}× | {now['db_cpu_ms']:.1f} ms | "
            f"{before['db_cpu_ms']:.1f} ms |"
        )
    return _finish(args, base_url, name, results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per URL")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--urls", default="", help="comma-separated names to run (default: all)")
    parser.add_argument("--compare-conn-max-age", action="store_true")
    parser.add_argument(
        "--db",
        metavar="NAME",
        help="use this database (seeded when empty) and keep it, instead of one of the run's own",
    )
    parser.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="load client: bare asyncio streams (default; a fraction of httpx's CPU per request) or httpx",
    )
    parser.add_argument(
        "--compare-clients", action="store_true", help="also run every URL with the other client, side by side"
    )
    parser.add_argument(
        "--compare-search-index",
        action="store_true",
        help="also run the search URLs (?q=) without the task search's trigram indexes (dropped for "
        "that run, made again after)",
    )
    parser.add_argument(
        "--baseline",
        metavar="TREE",
        help="another checkout (e.g. `git archive REV | tar x -C /tmp/base`) served beside this one "
        "on the same seed: each URL is driven on both, one after the other, order alternating",
    )
    args = parser.parse_args()

    base_url = postgres_url()
    name = args.db or run_scratch.database_name(base_url, "load")
    url = _db_url(base_url, name)
    with _psql_admin(base_url) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            admin.execute(f'CREATE DATABASE "{name}"')
    ids = seed(url)
    from django.db import connections

    connections.close_all()
    # name: (path, API?, as the reviewer?): the review queue is a reviewer's, 3,333 tasks long
    urls = {
        "task list /": ("/", False, False),
        "task page": (f"/tasks/{ids['task']}/", False, False),
        DISTINCT_PAGES: ([f"/tasks/{slug}/" for slug in ids["distinct"]], False, False),
        "preview page (64 rollouts)": (f"/previews/{ids['run']}/", False, False),
        "rollout page": (f"/previews/rollouts/{ids['rollout']}/", False, False),
        "/api/tasks/": ("/api/tasks/", True, False),
        "/api/tasks/?page=100": ("/api/tasks/?page=100", True, False),
        "review queue": ("/review/", False, True),
        "pack list": ("/packs/", False, False),
        "/api/packs/": ("/api/packs/", True, False),
        "/api/review-queue/": ("/api/review-queue/", True, True),
        f"search /?q={SEARCH_WORD}": (f"/?q={SEARCH_WORD}", False, False),
        f"search /?q={SEARCH_SLUG}": (f"/?q={SEARCH_SLUG}", False, False),
        f"/api/tasks/?q={SEARCH_WORD}": (f"/api/tasks/?q={SEARCH_WORD}", True, False),
    }
    wanted = [u.strip() for u in args.urls.split(",") if u.strip()]
    if args.baseline:
        return side_by_side(
            args,
            url,
            ids,
            {k: v for k, v in urls.items() if not wanted or k in wanted},
            Path(args.baseline).resolve(),
            base_url,
            name,
        )
    load_before = os.getloadavg()[0]
    other_client = "httpx" if args.client == "raw" else "raw"
    configs = (
        [("conn_max_age=60", 60, args.client)]
        + ([("conn_max_age=0", 0, args.client)] if args.compare_conn_max_age else [])
        + ([(f"client={other_client}", 60, other_client)] if args.compare_clients else [])
        + ([(NO_SEARCH_INDEX, 60, args.client)] if args.compare_search_index else [])
    )
    results: dict[tuple[str, str], dict] = {}
    first_label = configs[0][0]
    print(
        f"# {args.clients} clients ({args.client}) × {args.duration:g} s per URL, gunicorn {args.workers} workers, "
        f"DEBUG off, PostgreSQL; load average before: {os.getloadavg()}",
        flush=True,
    )
    for label, conn_max_age, client in configs:
        if label == NO_SEARCH_INDEX:
            _search_indexes(drop=True)
        server = Server(url, args.workers, conn_max_age)
        try:
            sessions = {False: login_cookies(server.base), True: login_cookies(server.base, REVIEWER)}
            if label == first_label and (not wanted or DISTINCT_PAGES in wanted):
                results[(label, FIRST_VIEWS)] = first_views(server, sessions[False], ids, args, label, client)
            for name_, (path, api, as_reviewer) in urls.items():
                if (wanted and name_ not in wanted) or (label == NO_SEARCH_INDEX and "?q=" not in path):
                    continue
                results[(label, name_)] = _drive_url(
                    server, sessions, ids, path, api, as_reviewer, args, label, name_, client
                )
        finally:
            server.stop()
            if label == NO_SEARCH_INDEX:
                _search_indexes(drop=False)
    print("\n# ratios (same run)")
    first = configs[0][0]
    api = results.get((first, "/api/tasks/"))
    for (label, name_), r in results.items():
        if label == first and api and name_ != "/api/tasks/":
            print(
                f"{name_:28} / api list: p95 {r['p95'] / api['p95']:.2f}×  "
                f"web CPU {r['web_cpu_ms'] / max(api['web_cpu_ms'], 0.001):.2f}×"
            )
    _distinct_report(results, first, load_before)
    p1, p100 = results.get((first, "/api/tasks/")), results.get((first, "/api/tasks/?page=100"))
    if p1 and p100:
        print(
            f"/api/tasks/ page 100 / page 1: p95 {p100['p95'] / p1['p95']:.2f}×  "
            f"db CPU {p100['db_cpu_ms'] / max(p1['db_cpu_ms'], 0.001):.2f}×"
        )
    for other_label, _, other_client in configs[1:]:
        for (label, name_), r in results.items():
            other = results.get((other_label, name_))
            if label == first and other and other_label == NO_SEARCH_INDEX:
                print(
                    f"{name_:28} with / without the trigram index: p50 {r['p50'] / other['p50']:.2f}×  "
                    f"p95 {r['p95'] / other['p95']:.2f}×  "
                    f"db CPU {r['db_cpu_ms'] / max(other['db_cpu_ms'], 0.001):.2f}×"
                )
            elif label == first and other:
                what = (
                    f"{args.client} / {other_client} client"
                    if other_client != args.client
                    else "persistent / per-request connections"
                )
                print(
                    f"{name_:28} {what}: p50 {r['p50'] / other['p50']:.2f}×  p95 {r['p95'] / other['p95']:.2f}×  "
                    f"client CPU {r['client_cpu_ms'] / max(other['client_cpu_ms'], 0.001):.2f}×"
                )
    return _finish(args, base_url, name, results)


if __name__ == "__main__":
    sys.exit(main())
