"""Gymwright beside Label Studio, both in their production shape, same machine, same client, in one run: bulk imports
in requests of 1,000 (issue 9: "match or beat Label Studio's rate") from one client and from 20 at once, then the
task-list API under one client and under 20 (issue 12: "keep the API lead"; issue 34 item 1).

Run: .venv/bin/python bench/bench_vs_labelstudio.py [--tasks 10000] [--rounds 2] [--clients 20] [--list-seconds 10]
     [--workers 4] [--label-studio PATH] [--baseline TREE]

Label Studio is not a dependency: `make labelstudio-venv` installs it (label-studio 1.23.2) and gunicorn into
var/labelstudio-venv. It runs as its deployment runs it (see LabelStudio below: production settings, DEBUG off,
PostgreSQL, migrated, a WSGI server of --workers processes); Gymwright runs as `make serve` does (gunicorn, --workers
workers, DEBUG off) on PostgreSQL. DATABASE_URL names the server: the script creates a database for each system,
`<name>_vsls_<run>` and `<name>_ls_<run>` (run_scratch: no other run names them), and drops them at the end.

Each round imports --tasks tasks into every system from one client, then --clients × 1,000 tasks from --clients
clients at once, alternating which system goes first; then the task list is driven by 1 and by --clients closed-loop
clients (bench_load.py's client) for --list-seconds each. Printed per system: wall seconds, tasks/s, requests'
p50/p95, requests/s and the CPU its server spent (gunicorn workers + their PostgreSQL backends), with the ratios
Gymwright / Label Studio and the load average before, during and after. With --baseline TREE (another checkout,
e.g. `git archive <rev> | tar x -C /tmp/base`), that tree's Gymwright runs too, on a database of its own, in the
same rounds, and its ratios are printed beside this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import run_scratch  # noqa: E402
from bench_load import (  # noqa: E402
    CLK_TCK,
    Server,
    _BackendCPU,
    _db_url,
    _free_port,
    _psql_admin,
    drive,
    gunicorn_ticks,
    postgres_url,
)
from bench_packs import rows  # noqa: E402
from other_work import OTHERS_QUIET, QUIET_LOAD, OtherWork  # noqa: E402

PER_REQUEST = 1000
LABEL_CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="verdict" toName="text">'
    '<Choice value="right"/><Choice value="wrong"/></Choices></View>'
)


class LabelStudio:
    """Label Studio as its deployment runs it: its production settings module (`core.settings.label_studio`, the one
    its Docker image sets) with DEBUG off, PostgreSQL (DJANGO_DB=default and the POSTGRE_* variables its settings
    read) in a database of this run's own, its migrations (`manage.py locked_migrate`, as its image's entrypoint runs
    them), `label-studio init` for the user and its token, then a WSGI server of `workers` processes on
    `core.wsgi:application` (gunicorn, one thread a process: its image's uWSGI runs 2 processes per core, 1 thread
    each, which on this 2-core machine is 4). No nginx in front: the API is all that is measured."""

    def __init__(self, executable: str, url: str, workers: int):
        import httpx
        import psycopg

        venv = Path(executable).parent
        package = next((venv.parent / "lib").glob("python3*/site-packages/label_studio"))
        parts = urlparse(url)
        self.database = parts.path.lstrip("/")
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(20)
        self.data = run_scratch.folder("labelstudio")
        self.log = open(self.data / "server.log", "wb")
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "DEBUG") and not key.startswith("GYMWRIGHT_")
        }
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "core.settings.label_studio",
                "DEBUG": "false",
                "DJANGO_DB": "default",
                "POSTGRE_NAME": self.database,
                "POSTGRE_USER": parts.username or "postgres",
                "POSTGRE_PASSWORD": parts.password or "",
                "POSTGRE_HOST": parts.hostname or "127.0.0.1",
                "POSTGRE_PORT": str(parts.port or 5432),
                "LABEL_STUDIO_BASE_DATA_DIR": str(self.data),
                # No reports to Sentry, no analytics, no version check over the network from a benchmark.
                "SENTRY_DSN": "",
                "FRONTEND_SENTRY_DSN": "",
                "COLLECT_ANALYTICS": "false",
                "LATEST_VERSION_CHECK": "false",
            }
        )
        python = str(venv / "python")
        for command in (
            [python, "manage.py", "locked_migrate"],
            [
                executable,
                "init",
                "--username",
                "bench@example.com",
                "--password",
                "bench-password",
                "--user-token",
                self.token,
                "--enable-legacy-api-token",  # this client sends the user's token, not a JWT
            ],
        ):
            subprocess.run(command, cwd=package, env=env, stdout=self.log, stderr=subprocess.STDOUT, check=True)
        self.proc = subprocess.Popen(
            [
                str(venv / "gunicorn"),
                "--chdir",
                str(package),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                "--timeout",
                "120",  # its uWSGI's harakiri
                "core.wsgi:application",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise SystemExit(f"Label Studio's gunicorn did not start: see {self.data / 'server.log'}")
        with psycopg.connect(url, autocommit=True) as db:
            enabled = db.execute("SELECT bool_and(legacy_api_tokens_enabled) FROM jwt_auth_jwtsettings").fetchone()[0]
        assert enabled, "label-studio init left legacy API tokens off"
        self.headers = {"Authorization": f"Token {self.token}"}
        project = httpx.post(
            f"{self.base}/api/projects",
            headers=self.headers,
            json={"title": "bench", "label_config": LABEL_CONFIG},
            timeout=60,
        )
        project.raise_for_status()
        self.project = project.json()["id"]

    def cpu_ticks(self) -> int:
        return gunicorn_ticks(self.proc.pid)

    def import_request(self, chunk: list[dict]) -> tuple[str, bytes]:
        tasks = [
            {"data": {"text": row["prompt"], "title": row["title"], "expected": row["solution"]["answer"]}}
            for row in chunk
        ]
        return f"/api/projects/{self.project}/import", json.dumps(tasks).encode()

    def imported(self, response, count: int) -> bool:
        return response.status_code == 201 and response.json()["task_count"] == count

    def list_path(self) -> str:
        return f"/api/tasks?project={self.project}&page=1&page_size=50"

    def stop(self) -> None:
        run_scratch.stop(self.proc)
        self.log.close()


class Gymwright:
    """`make serve`'s gunicorn (DEBUG off) on a fresh PostgreSQL database, with an admin's API token; the
    checkout at `root` (this one unless a baseline's)."""

    def __init__(self, url: str, workers: int, root: Path = ROOT):
        self.database = urlparse(url).path.lstrip("/")
        env = {**os.environ, "DATABASE_URL": url}
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=root, env=env, check=True)
        script = (
            "from django.contrib.auth.models import Group, User; "
            "from rest_framework.authtoken.models import Token; "
            "u = User.objects.create_user('bench-admin'); "
            "u.groups.add(Group.objects.get_or_create(name='admin')[0]); "
            "print(Token.objects.create(user=u).key)"
        )
        self.token = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
        self.headers = {"Authorization": f"Token {self.token}"}
        self.server = Server(url, workers, 60, root=root)
        self.base = self.server.base

    def cpu_ticks(self) -> int:
        return self.server.cpu_ticks()

    def import_request(self, chunk: list[dict]) -> tuple[str, bytes]:
        return "/api/imports/bulk/", json.dumps({"tasks": chunk}).encode()

    def imported(self, response, count: int) -> bool:
        return response.status_code == 200 and response.json()["imported"] == count

    def list_path(self) -> str:
        return "/api/tasks/?page=1"

    def stop(self) -> None:
        self.server.stop()


def _load1() -> float:
    return os.getloadavg()[0]


def bulk(system, tasks: list[dict], clients: int) -> dict:
    """`tasks` imported in requests of PER_REQUEST, sent by `clients` clients at once (each sends its next request
    when its last is answered): wall seconds, the requests' p50 and p95, the server's CPU (web and database)."""
    import httpx

    bodies = [system.import_request(tasks[start : start + PER_REQUEST]) for start in range(0, len(tasks), PER_REQUEST)]
    headers = {**system.headers, "Content-Type": "application/json"}
    times: list[float] = []

    async def run() -> None:
        todo = list(reversed(bodies))
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=system.base, headers=headers, limits=limits, timeout=600) as client:
            await client.get(system.list_path())  # warm: imports, a connection

            async def one() -> None:
                while todo:
                    path, body = todo.pop()
                    began = time.perf_counter()
                    response = await client.post(path, content=body)
                    times.append(time.perf_counter() - began)
                    assert system.imported(response, PER_REQUEST), response.text[:500]

            await asyncio.gather(*(one() for _ in range(clients)))

    web = system.cpu_ticks()
    with _BackendCPU(system.database) as database, OtherWork() as other:
        started = time.perf_counter()
        asyncio.run(run())
        wall = time.perf_counter() - started
    cpu = (system.cpu_ticks() - web) / CLK_TCK + database.seconds
    times.sort()
    return {
        "wall": wall,
        "p50": statistics.median(times) * 1000,
        "p95": times[int(0.95 * (len(times) - 1))] * 1000,
        "cpu": cpu,
        "load": _load1(),
        "others_cores": other.cores,
    }


def list_load(system, clients: int, seconds: float) -> dict:
    """The task-list API (a page of 50) under `clients` closed-loop clients for `seconds` (bench_load.py's client):
    p50, p95, requests/s, errors, and the server's CPU per request (web and database)."""
    asyncio.run(drive(system.base, system.list_path(), system.headers, {}, clients, 1.0))  # warm every worker
    web = system.cpu_ticks()
    with _BackendCPU(system.database) as database, OtherWork() as other:
        result = asyncio.run(drive(system.base, system.list_path(), system.headers, {}, clients, seconds))
    n = max(result["n"], 1)
    web_s = (system.cpu_ticks() - web) / CLK_TCK
    result["web_cpu_ms"] = web_s * 1000 / n
    result["db_cpu_ms"] = database.seconds * 1000 / n
    result["load"] = _load1()
    result["others_cores"] = other.cores
    return result


def _order(systems: dict, round_: int) -> list[str]:
    return list(systems) if round_ % 2 == 0 else list(reversed(systems))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks of each one-client import")
    parser.add_argument("--rounds", type=int, default=2, help="imports into each system (alternating order)")
    parser.add_argument("--clients", type=int, default=20, help="clients of the concurrent runs")
    parser.add_argument("--list-seconds", type=float, default=10.0, help="seconds of each task-list run")
    parser.add_argument("--workers", type=int, default=4, help="server processes of each system")
    parser.add_argument("--label-studio", default=str(ROOT / "var/labelstudio-venv/bin/label-studio"))
    parser.add_argument("--baseline", metavar="TREE", help="another Gymwright checkout to run in the same rounds")
    args = parser.parse_args()
    base_url = postgres_url()
    if not Path(args.label_studio).exists():  # an optional comparison: `make bench` goes on without it
        print(f"skipped: no Label Studio at {args.label_studio} (`make labelstudio-venv` installs it)")
        return 0
    if not Path(args.label_studio).with_name("gunicorn").exists():
        print(f"skipped: no gunicorn beside {args.label_studio} (`make labelstudio-venv` installs it)")
        return 0
    shown = subprocess.run(
        [str(Path(args.label_studio).with_name("pip")), "show", "label-studio"], capture_output=True, text=True
    ).stdout
    version = next((line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("Version")), "?")
    purposes = ["vsls", "ls"] + (["vslsbase"] if args.baseline else [])
    names = {purpose: run_scratch.database_name(base_url, purpose) for purpose in purposes}
    with _psql_admin(base_url) as admin:
        for name in names.values():
            admin.execute(f'CREATE DATABASE "{name}"')
    load_before = os.getloadavg()
    started: list = []
    seq: dict[str, list[dict]] = {}
    conc: dict[str, list[dict]] = {}
    lists: dict[tuple[str, int], dict] = {}
    try:
        systems = {"Gymwright": Gymwright(_db_url(base_url, names["vsls"]), args.workers)}
        started.append(systems["Gymwright"])
        if args.baseline:
            systems["baseline"] = Gymwright(
                _db_url(base_url, names["vslsbase"]), args.workers, root=Path(args.baseline).resolve()
            )
            started.append(systems["baseline"])
        systems["Label Studio"] = LabelStudio(args.label_studio, _db_url(base_url, names["ls"]), args.workers)
        started.append(systems["Label Studio"])
        print(f"# servers up; load average {os.getloadavg()}", flush=True)
        seq = {label: [] for label in systems}
        conc = {label: [] for label in systems}
        concurrent_tasks = args.clients * PER_REQUEST
        for round_ in range(args.rounds):
            for label in _order(systems, round_):
                tasks = [dict(row, id=f"r{round_}-{row['id']}") for row in rows(args.tasks)]
                r = bulk(systems[label], tasks, 1)
                seq[label].append(r)
                print(
                    f"  round {round_ + 1} {label}, 1 client: {args.tasks} tasks in {r['wall']:.2f} s "
                    f"({args.tasks / r['wall']:.0f} tasks/s), server CPU {r['cpu']:.2f} s, load {r['load']:.2f}, "
                    f"other work {r['others_cores']:.2f} cores",
                    flush=True,
                )
            for label in _order(systems, round_ + 1):
                tasks = [dict(row, id=f"c{round_}-{row['id']}") for row in rows(concurrent_tasks)]
                r = bulk(systems[label], tasks, args.clients)
                conc[label].append(r)
                print(
                    f"  round {round_ + 1} {label}, {args.clients} clients: {concurrent_tasks} tasks in "
                    f"{r['wall']:.2f} s ({concurrent_tasks / r['wall']:.0f} tasks/s), a request p50 {r['p50']:.0f} "
                    f"p95 {r['p95']:.0f} ms, server CPU {r['cpu']:.2f} s, load {r['load']:.2f}, other work "
                    f"{r['others_cores']:.2f} cores",
                    flush=True,
                )
        for position, clients in enumerate((1, args.clients)):
            for label in _order(systems, position):
                r = lists[(label, clients)] = list_load(systems[label], clients, args.list_seconds)
                print(
                    f"  task list API, {label}, {clients} client(s): p50 {r['p50']:.1f} ms p95 {r['p95']:.1f} ms, "
                    f"{r['rps']:.1f} req/s, errors {r['errors']}, web CPU {r['web_cpu_ms']:.1f} ms/req, db CPU "
                    f"{r['db_cpu_ms']:.1f} ms/req (n={r['n']}, load {r['load']:.2f}, other work {r['others_cores']:.2f} cores)",
                    flush=True,
                )
    finally:
        for system in started:
            system.stop()
        with _psql_admin(base_url) as admin:
            for name in names.values():
                run_scratch.drop_database(admin, name)
    loads = [load_before[0]] + [r["load"] for runs in (*seq.values(), *conc.values()) for r in runs]
    loads += [r["load"] for r in lists.values()]
    print(
        f"\n# Label Studio {version}: gunicorn {args.workers} processes on `core.wsgi` with its production settings "
        f"(core.settings.label_studio, DEBUG off), PostgreSQL, migrated; Gymwright: gunicorn {args.workers} workers "
        f"(`make serve`'s config, DEBUG off), PostgreSQL. Imports in requests of {PER_REQUEST}, median of "
        f"{args.rounds} round(s); task list {args.list_seconds:g} s per run."
    )
    # As bench_load.py judges: quiet when the load average was at most 2 before the run (its own clients and servers
    # then raise it) and other processes held under a quarter of a core during every measurement.
    busy = max(r["others_cores"] for r in [*lists.values()] + [r for v in (*seq.values(), *conc.values()) for r in v])
    quiet = load_before[0] <= QUIET_LOAD and busy <= OTHERS_QUIET
    print(
        f"# load average before {load_before[0]:.2f}, during {min(loads[1:]):.2f}–{max(loads[1:]):.2f}, after "
        f"{os.getloadavg()[0]:.2f}; other work up to {busy:.2f} cores during the measurements"
        + ("" if quiet else " — NOT A QUIET RUN: no goal judged on it")
    )

    def med(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    others = [label for label in systems if label != "Label Studio"]
    print("| | " + " | ".join(others) + " | Label Studio | " + " | ".join(f"{o} / Label Studio" for o in others) + " |")
    print("| --- " * (2 + 2 * len(others)) + "|")

    def row(what: str, values: dict[str, float], unit: str, fmt: str = "{:.2f}") -> None:
        cells = [fmt.format(values[label]) + unit for label in (*others, "Label Studio")]
        ratios = [f"{values[o] / values['Label Studio']:.2f}×" for o in others]
        print(f"| {what} | " + " | ".join(cells + ratios) + " |")

    n_conc = args.clients * PER_REQUEST
    row(f"bulk import of {args.tasks}, 1 client, wall", {k: med(v, "wall") for k, v in seq.items()}, " s")
    row("  same, tasks/s", {k: args.tasks / med(v, "wall") for k, v in seq.items()}, "", "{:.0f}")
    row("  same, server CPU (web + db)", {k: med(v, "cpu") for k, v in seq.items()}, " s")
    row(f"bulk import of {n_conc}, {args.clients} clients, wall", {k: med(v, "wall") for k, v in conc.items()}, " s")
    row("  same, tasks/s", {k: n_conc / med(v, "wall") for k, v in conc.items()}, "", "{:.0f}")
    row("  same, a request's p95", {k: med(v, "p95") for k, v in conc.items()}, " ms", "{:.0f}")
    row("  same, server CPU (web + db)", {k: med(v, "cpu") for k, v in conc.items()}, " s")
    for clients in (1, args.clients):
        got = {label: lists[(label, clients)] for label in systems}
        row(f"task list API (50 rows), {clients} client(s), req/s", {k: v["rps"] for k, v in got.items()}, "", "{:.1f}")
        row("  same, p50", {k: v["p50"] for k, v in got.items()}, " ms", "{:.1f}")
        row("  same, p95", {k: v["p95"] for k, v in got.items()}, " ms", "{:.1f}")
        row("  same, web CPU / request", {k: v["web_cpu_ms"] for k, v in got.items()}, " ms", "{:.1f}")
        row("  same, db CPU / request*", {k: v["db_cpu_ms"] for k, v in got.items()}, " ms", "{:.1f}")
    print(
        "* Label Studio opens a database connection per request (it sets no CONN_MAX_AGE); a backend that lives less "
        "than the 0.2 s between readings is missed, so its db CPU is a lower bound. Gymwright keeps its connections."
    )
    errors = sum(r["errors"] for r in lists.values())
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
