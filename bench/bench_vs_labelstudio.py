"""Gymwright beside Label Studio, same machine, same client, in one run: a bulk import of N tasks in
requests of 1,000 (issue 9: "match or beat Label Studio's rate"), then the task-list API under one
client (issue 12: "keep the API lead").

Run: .venv/bin/python bench/bench_vs_labelstudio.py [--tasks 10000] [--rounds 2] [--label-studio PATH]
     [--baseline TREE]

Label Studio is not a dependency: install it into a virtualenv of its own first, e.g.
`python3.11 -m venv var/labelstudio-venv && var/labelstudio-venv/bin/pip install label-studio`
(measured with label-studio 1.23.2). It runs as a new user starts it (`label-studio start`: its own
server, SQLite in a scratch folder); Gymwright runs as `make serve` does (gunicorn, DEBUG off) on
PostgreSQL (DATABASE_URL; the script creates and drops `<name>_vsls`). Each round imports into both,
alternating which goes first. Printed per system: wall seconds, tasks/s, and the CPU seconds its
server spent (gunicorn workers + their PostgreSQL backends; Label Studio's process, SQLite inside it),
with the ratios Gymwright / Label Studio and the load average. With --baseline TREE (another checkout,
e.g. `git archive <rev> | tar x -C /tmp/base`), that tree's Gymwright runs too, on a database of its own,
in the same rounds, and its ratios are printed beside this tree's.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sqlite3
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
    Server,
    _children,
    _cpu_spent,
    _cpu_ticks,
    _db_url,
    _free_port,
    _postgres_pids,
    _psql_admin,
    postgres_url,
)
from bench_packs import rows  # noqa: E402

PER_REQUEST = 1000
LABEL_CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="verdict" toName="text">'
    '<Choice value="right"/><Choice value="wrong"/></Choices></View>'
)


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += _children(current)
    return found


class LabelStudio:
    """`label-studio start` in a scratch folder, with a user whose legacy API token we set."""

    def __init__(self, executable: str):
        import httpx

        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(20)
        self.data = run_scratch.folder("labelstudio")
        self.log = open(self.data / "server.log", "wb")
        env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
        env.update({"LABEL_STUDIO_BASE_DATA_DIR": str(self.data), "DJANGO_DB": "sqlite"})
        self.proc = subprocess.Popen(
            [
                executable,
                "start",
                "--no-browser",
                "-p",
                str(self.port),
                "--username",
                "bench@example.com",
                "--password",
                "bench-password",
                "--user-token",
                self.token,
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
            raise SystemExit(f"label-studio did not start: see {self.data / 'server.log'}")
        # Label Studio 1.2x turns legacy tokens off for a new organisation; this client sends one.
        with sqlite3.connect(self.data / "label_studio.sqlite3") as db:
            db.execute("UPDATE jwt_auth_jwtsettings SET legacy_api_tokens_enabled = 1")
        self.headers = {"Authorization": f"Token {self.token}"}
        project = httpx.post(
            f"{self.base}/api/projects",
            headers=self.headers,
            json={"title": "bench", "label_config": LABEL_CONFIG},
            timeout=60,
        )
        project.raise_for_status()
        self.project = project.json()["id"]

    def pids(self) -> list[int]:
        return _tree(self.proc.pid)

    def import_tasks(self, client, chunk: list[dict]) -> None:
        tasks = [
            {"data": {"text": row["prompt"], "title": row["title"], "expected": row["solution"]["answer"]}}
            for row in chunk
        ]
        response = client.post(f"/api/projects/{self.project}/import", headers=self.headers, json=tasks, timeout=600)
        assert response.status_code == 201 and response.json()["task_count"] == len(chunk), response.text[:500]

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

    def pids(self) -> list[int]:
        return self.server.worker_pids() + _postgres_pids(self.database)

    def import_tasks(self, client, chunk: list[dict]) -> None:
        response = client.post("/api/imports/bulk/", headers=self.headers, json={"tasks": chunk}, timeout=600)
        assert response.status_code == 200 and response.json()["imported"] == len(chunk), response.text[:500]

    def list_path(self) -> str:
        return "/api/tasks/?page=1"

    def stop(self) -> None:
        self.server.stop()


def bulk(system, tasks: list[dict]) -> tuple[float, float]:
    """(wall seconds, server CPU seconds) to import `tasks` in requests of PER_REQUEST."""
    import httpx

    with httpx.Client(base_url=system.base) as client:
        client.get(system.list_path(), headers=system.headers)  # warm: imports, connections
        before = _cpu_ticks(system.pids())
        started = time.perf_counter()
        for start in range(0, len(tasks), PER_REQUEST):
            system.import_tasks(client, tasks[start : start + PER_REQUEST])
        wall = time.perf_counter() - started
        return wall, _cpu_spent(before, _cpu_ticks(system.pids()))


def list_requests(system, count: int) -> tuple[float, float]:
    """(p50 milliseconds, server CPU milliseconds per request) of `count` sequential list requests."""
    import httpx

    with httpx.Client(base_url=system.base) as client:
        for _ in range(5):
            assert client.get(system.list_path(), headers=system.headers).status_code == 200
        before = _cpu_ticks(system.pids())
        times = []
        for _ in range(count):
            started = time.perf_counter()
            response = client.get(system.list_path(), headers=system.headers)
            times.append(time.perf_counter() - started)
            assert response.status_code == 200
        cpu = _cpu_spent(before, _cpu_ticks(system.pids()))
    return statistics.median(times) * 1000, cpu / count * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2, help="imports into each system (alternating order)")
    parser.add_argument("--list-requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers for Gymwright")
    parser.add_argument("--label-studio", default=str(ROOT / "var/labelstudio-venv/bin/label-studio"))
    parser.add_argument("--baseline", metavar="TREE", help="another Gymwright checkout to run in the same rounds")
    args = parser.parse_args()
    base_url = postgres_url()
    if not Path(args.label_studio).exists():  # an optional comparison: `make bench` goes on without it
        print(f"skipped: no Label Studio at {args.label_studio} (install it as this script's docstring says)")
        return 0
    shown = subprocess.run(
        [str(Path(args.label_studio).with_name("pip")), "show", "label-studio"], capture_output=True, text=True
    ).stdout
    version = next((line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("Version")), "?")
    names = [
        run_scratch.database_name(base_url, purpose) for purpose in ("vsls", "vslsbase")[: 1 + bool(args.baseline)]
    ]
    with _psql_admin(base_url) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
    load_before = os.getloadavg()
    started: list = []
    try:
        systems = {"Gymwright": Gymwright(_db_url(base_url, names[0]), args.workers)}
        started.append(systems["Gymwright"])
        if args.baseline:
            systems["baseline"] = Gymwright(
                _db_url(base_url, names[1]), args.workers, root=Path(args.baseline).resolve()
            )
            started.append(systems["baseline"])
        systems["Label Studio"] = LabelStudio(args.label_studio)
        started.append(systems["Label Studio"])
        results: dict[str, list[tuple[float, float]]] = {label: [] for label in systems}
        for round_ in range(args.rounds):
            for label in list(systems) if round_ % 2 == 0 else list(reversed(systems)):
                tasks = [dict(row, id=f"r{round_}-{row['id']}") for row in rows(args.tasks)]
                wall, cpu = bulk(systems[label], tasks)
                results[label].append((wall, cpu))
                print(
                    f"  round {round_ + 1} {label}: {wall:.2f} s wall ({args.tasks / wall:.0f} tasks/s), "
                    f"server CPU {cpu:.2f} s, load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        lists = {label: list_requests(system, args.list_requests) for label, system in systems.items()}
    finally:
        for system in started:
            system.stop()
        with _psql_admin(base_url) as admin:
            for name in names:
                run_scratch.drop_database(admin, name)
    median = {
        label: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for label, runs in results.items()
    }
    gw, ls = median["Gymwright"], median["Label Studio"]
    print(
        f"\n# {args.tasks} tasks in requests of {PER_REQUEST}, median of {args.rounds} round(s); Label Studio "
        f"{version} (`label-studio start`, SQLite); Gymwright gunicorn {args.workers} workers on PostgreSQL"
    )
    print(f"# load average before {load_before}, after {os.getloadavg()}")
    print("| | Gymwright | Label Studio | Gymwright / Label Studio |")
    print("| --- | --- | --- | --- |")
    print(
        f"| bulk import, wall | {gw[0]:.2f} s ({args.tasks / gw[0]:.0f}/s) | {ls[0]:.2f} s "
        f"({args.tasks / ls[0]:.0f}/s) | {gw[0] / ls[0]:.2f}× |"
    )
    print(f"| bulk import, server CPU | {gw[1]:.2f} s | {ls[1]:.2f} s | {gw[1] / ls[1]:.2f}× |")
    (gp50, gcpu), (lp50, lcpu) = lists["Gymwright"], lists["Label Studio"]
    print(f"| task list API (50 rows), 1 client, p50 | {gp50:.1f} ms | {lp50:.1f} ms | {gp50 / lp50:.2f}× |")
    print(f"| task list API, server CPU / request | {gcpu:.1f} ms | {lcpu:.1f} ms | {gcpu / lcpu:.2f}× |")
    if args.baseline:
        base = median["baseline"]
        bp50, bcpu = lists["baseline"]
        print(f"\n# baseline = {args.baseline}, in the same rounds")
        print("| | baseline | baseline / Label Studio | Gymwright / baseline |")
        print("| --- | --- | --- | --- |")
        print(f"| bulk import, wall | {base[0]:.2f} s | {base[0] / ls[0]:.2f}× | {gw[0] / base[0]:.2f}× |")
        print(f"| bulk import, server CPU | {base[1]:.2f} s | {base[1] / ls[1]:.2f}× | {gw[1] / base[1]:.2f}× |")
        print(f"| task list API, p50 | {bp50:.1f} ms | {bp50 / lp50:.2f}× | {gp50 / bp50:.2f}× |")
        print(f"| task list API, server CPU / request | {bcpu:.1f} ms | {bcpu / lcpu:.2f}× | {gcpu / bcpu:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
