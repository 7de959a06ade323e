"""Task packs at 10,000 tasks: import, bulk API, build, download — each beside its floor, in one run.

Run: .venv/bin/python bench/bench_packs.py [--baseline TREE] [--tasks N] [--builds 3] [--imports 1]
     [--profile DIR]
(needs DATABASE_URL=postgres://...; creates and drops its own test database). Prints, with the
load average:

* queries of an in-process import of 1,000 and 2,000 rows (constant per batch), and the time
  spent in SQL by statement kind;
* `manage.py import_tasks --approve-as` of a 10,000-row JSONL: wall and CPU seconds (CPU is the
  steadier figure on a shared machine);
* the bulk API in process (DRF's APIClient, no HTTP): 10,000 tasks posted 1,000 per request (the comparison with
  Label Studio, both over HTTP side by side, is bench_vs_labelstudio.py's; a figure published from another
  machine is no comparison);
* `manage.py export_pack` of the 10,000 approved tasks under `/usr/bin/time -v` (median wall and
  CPU time of the builds, peak RSS), and its ratio to `tar czf` of the same files written plainly;
* with --baseline, the same import and builds from another checkout (say, main before a change),
  interleaved with this tree's, and the ratios now / baseline;
* downloading a 200 MB pack through the API from gunicorn (one worker, as `make serve` runs it) with a
  streaming client: the worker's peak RSS growth over its warm RSS (its VmHWM, reset before the
  download).

--profile DIR adds one more import and one more build under py-spy (collapsed stacks in DIR,
left out of the figures), and records the bulk API requests (in process) while they are timed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
import run_scratch  # noqa: E402

os.environ.setdefault("GYMWRIGHT_DATA_DIR", str(run_scratch.folder("packs")))

TASKS = 10_000
DOWNLOAD_MB = 200


def rows(count: int) -> list[dict]:
    return [
        {
            "schema": "gymwright.task/v1",
            "id": f"bench-{i:05d}",
            "version": 1,
            "title": f"Bench task {i}",
            "prompt": f"What is {i} + {i}? Show your working.",
            "environment": {"id": "bench", "version": 1},
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "pass_threshold": 0.5,
                "checks": [
                    {"id": "right", "kind": "string_match", "points": 2, "mode": "contains", "expected": str(2 * i)},
                    {"id": "shows_working", "kind": "llm_judge", "points": 1, "criterion": "Shows the working."},
                ],
            },
            "solution": {"script": None, "answer": str(2 * i)},
            "tags": ["bench"],
            "metadata": {},
        }
        for i in range(count)
    ]


def py_spy(pid: int | None, out: Path, argv: list[str] = ()) -> list[str] | subprocess.Popen:
    """py-spy in "raw" (collapsed stacks) format: a prefix for argv, or a recorder attached to pid."""
    command = [
        str(Path(sys.executable).parent / "py-spy"),
        "record",
        "--format",
        "raw",
        "--rate",
        "200",
        "--subprocesses",
        "--nonblocking",
        "-o",
        str(out),
    ]
    if pid is None:
        return [*command, "--", *argv]
    recorder = subprocess.Popen([*command, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the measured work starts
    return recorder


def timed_child(argv: list[str], env: dict, cwd: Path = ROOT) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds (user + system), peak RSS in MB from /usr/bin/time -v, stdout)."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stdout}\n{done.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    cpu = sum(
        float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", done.stderr).group(1)) for kind in ("User", "System")
    )
    return wall, cpu, rss_kb // 1024, done.stdout


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def download_growth(*, env: dict, slug: str, version: str, token: str, sha256: str) -> tuple[int, int]:
    """Download a pack version through the API from gunicorn as `make serve` runs it (one worker, DEBUG
    off) with a streaming HTTP client, and read the worker's own peak resident memory: its high-water
    mark is reset after a warm-up request (clear_refs), so the peak is the download's. Returns (peak
    growth over the warm worker's RSS, in MB; bytes received)."""
    import hashlib

    import httpx
    from bench_load import Server

    saved = dict(os.environ)
    os.environ.update({key: env[key] for key in ("MEDIA_ROOT", "GYMWRIGHT_DATA_DIR") if key in env})
    try:
        server = Server(env["DATABASE_URL"], workers=1, conn_max_age=60)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=server.base, headers=headers, timeout=120) as client:
            assert client.get("/api/packs/").status_code == 200  # warm up: imports, URL resolver, connection
            (worker,) = server.worker_pids()
            Path(f"/proc/{worker}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
            rss_before = _status_kb(worker, "VmRSS")
            digest, received = hashlib.sha256(), 0
            with client.stream("GET", f"/api/packs/{slug}/versions/{version}/download/") as response:
                assert response.status_code == 200, response.status_code
                for chunk in response.iter_bytes(1 << 20):
                    digest.update(chunk)
                    received += len(chunk)
            peak = _status_kb(worker, "VmHWM")
        assert digest.hexdigest() == sha256, "the download's bytes differ from the archive"
        return max(0, peak - rss_before) // 1024, received
    finally:
        server.stop()


class _SkipDownload(Exception):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks to import and build ({TASKS})")
    parser.add_argument("--builds", type=int, default=3, help="builds to time (median; 3)")
    parser.add_argument(
        "--imports",
        type=int,
        default=1,
        help="imports of --tasks rows to time per tree (median; 1), alternating which tree goes first",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record py-spy profiles (collapsed stacks) of the import and one build into DIR",
    )
    parser.add_argument("--skip-download", action="store_true", help="leave out the 200 MB download measure")
    parser.add_argument(
        "--baseline",
        metavar="TREE",
        help="another checkout of Gymwright (e.g. `git worktree add /tmp/base main`, or `git archive`): "
        "its import_tasks and export_pack run side by side with this tree's, same database",
    )
    args = parser.parse_args()
    tasks_count = args.tasks
    baseline = Path(args.baseline).resolve() if args.baseline else None
    profile_dir = Path(args.profile).resolve() if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test.runner import DiscoverRunner
    from django.test.utils import setup_test_environment

    if connection.vendor != "postgresql":
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (the figures are for PostgreSQL)")
    setup_test_environment()
    # A database of this run's own (never the tests', never another run's), dropped at the end.
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = run_scratch.database_name(
        "/" + settings.DATABASES["default"]["NAME"], "packs"
    )
    runner = DiscoverRunner(verbosity=0, interactive=False)
    work = run_scratch.folder("packs-work")
    old_config = runner.setup_databases()
    load_before = os.getloadavg()
    try:
        from django.contrib.auth.models import Group, User

        from packs import importer

        admin = User.objects.create_user("bench-admin")
        admin.groups.add(Group.objects.get_or_create(name="admin")[0])
        lab = User.objects.create_user("bench-lab")
        lab.groups.add(Group.objects.get_or_create(name="lab")[0])
        settings.PACK_SCRATCH_DIR = work / "scratch"

        # ---- import: queries per batch (in process) at 1,000 and 2,000 rows
        def write_rows(count: int, prefix: str, tag: str) -> Path:
            path = work / f"{prefix}.jsonl"
            with open(path, "w") as handle:
                for row in rows(count):
                    row["id"] = row["id"].replace("bench", prefix)
                    row["tags"] = [tag]
                    handle.write(json.dumps(row) + "\n")
            return path

        def import_rows(count: int, prefix: str) -> tuple[float, int]:
            path = write_rows(count, prefix, "warm")
            executed: list[tuple[str, float]] = []

            def timed(run, sql, *args):
                started = time.perf_counter()
                try:
                    return run(sql, *args)
                finally:
                    executed.append((sql, time.perf_counter() - started))

            with connection.execute_wrapper(timed):
                started = time.perf_counter()
                report = importer.tasks_import(path=path, user=admin)
                elapsed = time.perf_counter() - started
            assert report.rejected == 0 and report.imported == count, report.as_dict()["rows"][:3]
            by_kind: dict[str, float] = {}
            for sql, seconds in executed:
                kind = " ".join(sql.split()[:3])[:60]
                by_kind[kind] = by_kind.get(kind, 0) + seconds
            print(
                f"  in process, {count} rows: {elapsed:.2f} s, {len(executed)} queries, "
                f"{sum(by_kind.values()):.2f} s in SQL (binding + server); most: "
                + ", ".join(
                    f"{kind} {seconds:.2f} s"
                    for kind, seconds in sorted(by_kind.items(), key=lambda pair: -pair[1])[:3]
                ),
                flush=True,
            )
            return elapsed, len(executed)

        _, queries_1k = import_rows(1_000, "warm")
        _, queries_2k = import_rows(2_000, "warmer")

        env = {
            **os.environ,
            "DATABASE_URL": re.sub(r"/[^/]+$", "/" + connection.settings_dict["NAME"], os.environ["DATABASE_URL"]),
            "MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "GYMWRIGHT_PACK_SCRATCH_DIR": str(work / "scratch"),
        }
        trees = {"now": ROOT, **({"baseline": baseline} if baseline else {})}

        # ---- import of tasks_count rows through `manage.py import_tasks`, each tree (the baseline's rows
        # carry another tag, so the builds below pack the current tree's first import only). Rounds alternate
        # which tree goes first: each import makes the tables 10,000 tasks larger for the next.
        import_runs: dict[str, list[tuple[float, float, int]]] = {label: [] for label in trees}
        for run in range(args.imports):
            order = list(trees.items()) if run % 2 == 0 else list(trees.items())[::-1]
            for label, tree in order:
                prefix, tag = ("bench", "bench") if label == "now" else ("base", "base")
                if run:
                    prefix, tag = f"{prefix}{run}", f"{tag}{run}"
                path = write_rows(tasks_count, prefix, tag)
                argv = [
                    sys.executable,
                    str(tree / "manage.py"),
                    "import_tasks",
                    str(path),
                    "--approve-as",
                    "bench-admin",
                ]
                import_runs[label].append(timed_child(argv, env, cwd=tree)[:3])
                print(
                    f"  import_tasks {tasks_count} rows {run + 1}, {label}: {import_runs[label][-1][0]:.2f} s "
                    f"wall, {import_runs[label][-1][1]:.2f} s CPU, load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        imports = {
            label: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
            for label, runs in import_runs.items()
        }
        if profile_dir:
            path = write_rows(tasks_count, "prof", "prof")
            argv = [sys.executable, "manage.py", "import_tasks", str(path), "--approve-as", "bench-admin"]
            timed_child(py_spy(None, profile_dir / "import.txt", argv), env)
            print(f"  import under py-spy -> {profile_dir / 'import.txt'}", flush=True)

        # ---- bulk API in process: tasks_count tasks, 1,000 per request
        from rest_framework.test import APIClient

        api = APIClient()
        api.force_authenticate(admin)
        bulk_rows = rows(tasks_count)
        recorder = py_spy(os.getpid(), profile_dir / "bulk_api.txt") if profile_dir else None
        started = time.perf_counter()
        for start in range(0, tasks_count, 1000):
            chunk = [
                dict(row, id=row["id"].replace("bench", "api"), tags=["api"]) for row in bulk_rows[start : start + 1000]
            ]
            response = api.post("/api/imports/bulk/", {"tasks": chunk}, format="json")
            assert response.status_code == 200 and response.json()["imported"] == len(chunk), response.content[:500]
        bulk_s = time.perf_counter() - started
        if recorder is not None:
            recorder.send_signal(signal.SIGINT)
            recorder.wait()
        print(f"  bulk API {tasks_count} tasks: {bulk_s:.2f} s", flush=True)
        from authoring.models import Task

        Task.objects.filter(slug__startswith="warm").update(approved_version=None)

        # ---- build: manage.py export_pack under /usr/bin/time -v, alternating the trees
        builds: dict[str, list[tuple[float, float, int]]] = {label: [] for label in trees}
        if args.builds == 0:
            return
        # For reference, tar czf of the same files written plainly is timed in every round beside the builds (the
        # machine's speed drifts minute to minute: a ratio of runs minutes apart measures the drift).
        plain = work / "plain"
        tar_runs = []

        def floor(run):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(["tar", "czf", str(work / f"floor-{run}.tar.gz"), "-C", str(plain), "."], check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            tar_runs.append(
                (time.perf_counter() - started, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            )
            print(f"  tar czf {run + 1}: {tar_runs[-1][0]:.2f} s wall, {tar_runs[-1][1]:.2f} s CPU", flush=True)

        for run in range(args.builds):
            for label, tree in trees.items():
                out = work / f"pack-{label}-{run}.tar.gz"
                argv = [
                    sys.executable,
                    str(tree / "manage.py"),
                    "export_pack",
                    f"bench-{label}",
                    "--tag",
                    "bench",
                    "--out",
                    str(out),
                ]
                wall, cpu, rss, printed = timed_child(argv, env, cwd=tree)
                builds[label].append((wall, cpu, rss))
                print(
                    f"  build {run + 1} {label}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss} MB, load "
                    f"{os.getloadavg()[0]:.2f} — {printed.strip()[:60]}",
                    flush=True,
                )
                if not plain.exists():
                    with tarfile.open(out) as tar:
                        tar.extractall(plain, filter="data")
            floor(run)
        if profile_dir:
            argv = [
                sys.executable,
                "manage.py",
                "export_pack",
                "bench-prof",
                "--tag",
                "bench",
                "--out",
                str(work / "pack-prof.tar.gz"),
            ]
            timed_child(py_spy(None, profile_dir / "build.txt", argv), env)
            print(f"  build under py-spy -> {profile_dir / 'build.txt'}", flush=True)
        files = sum(1 for path in plain.rglob("*") if path.is_file())

        # ---- download: a 200 MB archive through the API
        growth = {"stream": -1, "bytes": 0}
        if args.skip_download:
            raise _SkipDownload()
        from django.core.files.base import File
        from django.core.files.storage import default_storage

        from packs.models import PackVersion, TaskPack

        big = work / "big.bin"
        with open(big, "wb") as handle:
            for _ in range(DOWNLOAD_MB):
                handle.write(os.urandom(1 << 20))
        import hashlib

        digest = hashlib.sha256()
        with open(big, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        pack = TaskPack.objects.create(slug="bench-big", name="big")
        with open(big, "rb") as handle:
            name = default_storage.save("packs/bench-big/bench-big-1.0.0.tar.gz", File(handle))
        PackVersion.objects.create(
            pack=pack,
            version="1.0.0",
            major=1,
            minor=0,
            patch=0,
            status="ready",
            archive=name,
            size=big.stat().st_size,
            sha256=digest.hexdigest(),
            content_sha256="x",
            manifest={},
        )
        from rest_framework.authtoken.models import Token

        token = Token.objects.get_or_create(user=lab)[0].key
        growth["stream"], growth["bytes"] = download_growth(
            env=env, slug="bench-big", version="1.0.0", token=token, sha256=digest.hexdigest()
        )
    except _SkipDownload:
        pass
    finally:
        runner.teardown_databases(old_config)
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    def median(values):
        return statistics.median(values)

    print(
        f"\nload average before {load_before[0]:.2f} / after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs; "
        f"trees: {', '.join(f'{label} = {tree}' for label, tree in trees.items())}"
    )
    print(
        f"import {tasks_count} JSONL rows (manage.py import_tasks --approve-as, median of {args.imports}), "
        "target <= 5 s:"
    )
    for label, (wall, cpu) in imports.items():
        print(
            f"  {label}: {wall:.2f} s wall ({tasks_count / wall:.0f} tasks/s), {cpu:.2f} s CPU "
            f"(rounds: {', '.join(f'{r[0]:.2f}' for r in import_runs[label])} s)"
        )
    if baseline:
        print(
            f"  now / baseline: {imports['now'][0] / imports['baseline'][0]:.2f}x wall, "
            f"{imports['now'][1] / imports['baseline'][1]:.2f}x CPU"
        )
    print(
        f"  queries: {queries_1k} for 1,000 rows, {queries_2k} for 2,000 (constant per {importer.store.BATCH}-row batch)"
    )
    print(
        f"bulk API in process, {tasks_count} tasks in requests of 1,000: {bulk_s:.2f} s ({tasks_count / bulk_s:.0f} "
        "tasks/s; beside Label Studio over HTTP: bench_vs_labelstudio.py)"
    )
    tar_wall, tar_cpu = median(w for w, _ in tar_runs), median(c for _, c in tar_runs)
    print(
        f"build {tasks_count} tasks (export_pack, median of {args.builds}), targets <= 15 s, <= 500 MB (issue 28); "
        f"for reference, tar czf of the same {files} files, timed in each round: {tar_wall:.2f} s wall, "
        f"{tar_cpu:.2f} s CPU"
    )
    for label, runs in builds.items():
        wall, cpu, rss = median(r[0] for r in runs), median(r[1] for r in runs), max(r[2] for r in runs)
        walls = [r[0] / t[0] for r, t in zip(runs, tar_runs)]
        cpus = [r[1] / t[1] for r, t in zip(runs, tar_runs)]
        print(
            f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss} MB; / tar czf of the same round: "
            f"{median(walls):.2f}x wall ({', '.join(f'{w:.2f}' for w in walls)}), {median(cpus):.2f}x CPU "
            f"({', '.join(f'{c:.2f}' for c in cpus)})"
        )
    if baseline:
        now, base = builds["now"], builds["baseline"]
        print(
            f"  now / baseline: {median(r[0] for r in now) / median(r[0] for r in base):.2f}x wall, "
            f"{median(r[1] for r in now) / median(r[1] for r in base):.2f}x CPU"
        )
    if growth["bytes"]:
        print(
            f"download {DOWNLOAD_MB} MB through the API (gunicorn, 1 worker, {growth['bytes'] / 2**20:.0f} MB "
            f"received and checked): the worker's peak RSS growth {growth['stream']} MB  target <= 50 MB"
        )


if __name__ == "__main__":
    main()
