"""Task packs at 10,000 tasks: import, build, download — each beside its floor, in one run.

Run: .venv/bin/python bench/bench_packs.py   (needs DATABASE_URL=postgres://...; creates and drops
its own test database). Prints:

* import of a 10,000-row JSONL through the import service (bulk inserts), and queries per
  1,000-row batch at 1,000 vs 10,000 rows (constant per batch);
* `manage.py export_pack` of the 10,000 approved tasks under `/usr/bin/time -v` (median wall
  time of 3 builds, peak RSS), and its ratio to `tar czf` of the same files written plainly;
* downloading a 200 MB pack through the API: the web process's peak RSS growth, beside reading
  the same file into memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
os.environ.setdefault("GYMWRIGHT_DATA_DIR", "/tmp/gymwright-bench-packs")

TASKS = 10_000
DOWNLOAD_MB = 200


def rows(count: int) -> list[dict]:
    return [{"schema": "gymwright.task/v1", "id": f"bench-{i:05d}", "version": 1, "title": f"Bench task {i}",
             "prompt": f"What is {i} + {i}? Show your working.",
             "environment": {"id": "bench", "version": 1},
             "rubric": {"schema": "gymwright.rubric/v1", "pass_threshold": 0.5, "checks": [
                 {"id": "right", "kind": "string_match", "points": 2, "mode": "contains", "expected": str(2 * i)},
                 {"id": "shows_working", "kind": "llm_judge", "points": 1, "criterion": "Shows the working."}]},
             "solution": {"script": None, "answer": str(2 * i)}, "tags": ["bench"], "metadata": {}}
            for i in range(count)]


def py_spy(pid: int | None, out: Path, argv: list[str] = ()) -> list[str] | subprocess.Popen:
    """py-spy in "raw" (collapsed stacks) format: a prefix for argv, or a recorder attached to pid."""
    command = [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw", "--rate", "200",
               "--nonblocking", "-o", str(out)]
    if pid is None:
        return [*command, "--", *argv]
    recorder = subprocess.Popen([*command, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the measured work starts
    return recorder


def timed_child(argv: list[str], env: dict) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB from /usr/bin/time -v, stdout)."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stdout}\n{done.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    return wall, rss_kb // 1024, done.stdout


DOWNLOAD_CHILD = r"""
import os, resource, sys, hashlib
sys.path.insert(0, os.getcwd())
import django; django.setup()
from django.conf import settings
settings.ALLOWED_HOSTS = ["*"]
from django.test import Client
from django.contrib.auth.models import User
from django.core.files.storage import default_storage
from packs.models import PackVersion
mode, slug, version = sys.argv[1:4]
pack_version = PackVersion.objects.get(pack__slug=slug, version=version)
client = Client(); client.force_login(User.objects.get(username="bench-lab"))
client.get("/api/packs/")  # warm up: imports, URL resolver, session
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
digest = hashlib.sha256()
if mode == "stream":
    response = client.get(f"/api/packs/{slug}/versions/{version}/download/")
    for chunk in response.streaming_content:
        digest.update(chunk)
else:  # the floor to beat: the whole archive read into memory
    with default_storage.open(pack_version.archive.name, "rb") as handle:
        data = handle.read()
    digest.update(data)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert digest.hexdigest() == pack_version.sha256
print((after - before) // 1024)
"""


class _SkipDownload(Exception):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks to import and build ({TASKS})")
    parser.add_argument("--builds", type=int, default=3, help="builds to time (median; 3)")
    parser.add_argument("--profile", metavar="DIR",
                        help="record py-spy profiles (collapsed stacks) of the import and one build into DIR")
    parser.add_argument("--skip-download", action="store_true", help="leave out the 200 MB download measure")
    args = parser.parse_args()
    tasks_count = args.tasks
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
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "bench_packs"  # never the tests' database
    runner = DiscoverRunner(verbosity=0, interactive=False)
    work = Path(tempfile.mkdtemp(prefix="bench-packs-"))
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

        # ---- import: queries per batch at 1,000 and 10,000 rows, then the 10,000-row timing
        def import_rows(count: int, prefix: str, approve: bool, profile: Path | None = None) -> tuple[float, int, object]:
            path = work / f"{prefix}.jsonl"
            with open(path, "w") as handle:
                for row in rows(count):
                    row["id"] = row["id"].replace("bench", prefix)
                    handle.write(json.dumps(row) + "\n")
            executed: list[tuple[str, float]] = []

            def timed(run, sql, *args):
                started = time.perf_counter()
                try:
                    return run(sql, *args)
                finally:
                    executed.append((sql, time.perf_counter() - started))

            recorder = py_spy(os.getpid(), profile) if profile else None
            with connection.execute_wrapper(timed):
                started = time.perf_counter()
                report = importer.tasks_import(path=path, user=admin, approve_as=admin if approve else None)
                elapsed = time.perf_counter() - started
            if recorder is not None:
                recorder.send_signal(signal.SIGINT)
                recorder.wait()
            assert report.rejected == 0 and report.imported == count, report.as_dict()["rows"][:3]
            if profile:
                by_kind: dict[str, float] = {}
                for sql, seconds in executed:
                    kind = " ".join(sql.split()[:3])[:60]
                    by_kind[kind] = by_kind.get(kind, 0) + seconds
                print(f"  import of {count}: {elapsed:.2f} s, of which {sum(by_kind.values()):.2f} s in SQL "
                      "(binding + server):", flush=True)
                for kind, seconds in sorted(by_kind.items(), key=lambda pair: -pair[1])[:8]:
                    print(f"    {seconds:6.2f} s  {kind}", flush=True)
            return elapsed, len(executed), report

        small_s, small_queries, _ = import_rows(1_000, "warm", False)
        import_s, import_queries, _ = import_rows(tasks_count, "bench", True,
                                                  profile_dir / "import.txt" if profile_dir else None)
        per_batch_small = small_queries / 1
        per_batch_large = import_queries / max(1, tasks_count // importer.BATCH)
        from authoring.models import Task
        Task.objects.filter(slug__startswith="warm-").update(approved_version=None)

        # ---- build: manage.py export_pack under /usr/bin/time -v, 3 times
        env = {**os.environ, "DATABASE_URL": re.sub(r"/[^/]+$", "/" + connection.settings_dict["NAME"],
                                                    os.environ["DATABASE_URL"]),
               "MEDIA_ROOT": str(settings.MEDIA_ROOT), "GYMWRIGHT_PACK_SCRATCH_DIR": str(work / "scratch")}
        builds = []
        if args.builds == 0:
            return
        for run in range(args.builds + (1 if profile_dir else 0)):
            out = work / f"pack-{run}.tar.gz"
            argv = [sys.executable, "manage.py", "export_pack", "bench-pack", "--tag", "bench", "--out", str(out)]
            if run == args.builds:  # one more build under the profiler, left out of the figures
                wall, _, _ = timed_child(py_spy(None, profile_dir / "build.txt", argv), env)
                print(f"  build under py-spy: {wall:.2f} s -> {profile_dir / 'build.txt'}", flush=True)
                continue
            wall, rss, printed = timed_child(argv, env)
            builds.append((wall, rss))
            print(f"  build {run + 1}: {wall:.2f} s, peak RSS {rss} MB — {printed.strip()[:90]}", flush=True)
        build_s = statistics.median(wall for wall, _ in builds)
        build_rss = max(rss for _, rss in builds)

        # ---- floor: tar czf of the same files, written plainly
        plain = work / "plain"
        with tarfile.open(work / "pack-0.tar.gz") as tar:
            tar.extractall(plain, filter="data")
        tar_times = []
        for run in range(3):
            started = time.perf_counter()
            subprocess.run(["tar", "czf", str(work / f"floor-{run}.tar.gz"), "-C", str(plain), "."], check=True)
            tar_times.append(time.perf_counter() - started)
        tar_s = statistics.median(tar_times)
        files = sum(1 for path in plain.rglob("*") if path.is_file())

        # ---- download: a 200 MB archive through the API
        growth = {"stream": -1, "read_all": -1}
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
        PackVersion.objects.create(pack=pack, version="1.0.0", major=1, minor=0, patch=0, status="ready", archive=name,
                                   size=big.stat().st_size, sha256=digest.hexdigest(), content_sha256="x",
                                   manifest={})
        for mode in ("stream", "read_all"):
            done = subprocess.run([sys.executable, "-c", DOWNLOAD_CHILD, mode, "bench-big", "1.0.0"], capture_output=True,
                                  text=True, env=env, cwd=ROOT)
            if done.returncode != 0:
                raise SystemExit(done.stderr[-3000:])
            growth[mode] = int(done.stdout.strip().splitlines()[-1])
    except _SkipDownload:
        pass
    finally:
        runner.teardown_databases(old_config)
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    print(f"\nload average before {load_before[0]:.2f} / after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    print(f"import {tasks_count} JSONL rows (bulk, approved): {import_s:.2f} s ({tasks_count / import_s:.0f} tasks/s)  "
          "target <= 5 s")
    print(f"  queries per 1,000-row batch: {per_batch_small:.0f} at 1,000 rows, {per_batch_large:.0f} at 10,000 rows "
          f"(1,000 rows imported in {small_s:.2f} s)")
    print(f"build {tasks_count} tasks (export_pack, median of {args.builds}): {build_s:.2f} s, peak RSS {build_rss} MB  "
          f"targets <= 15 s, <= 500 MB")
    print(f"tar czf of the same {files} files: {tar_s:.2f} s; ratio build / tar czf = {build_s / tar_s:.2f}x  "
          "target <= 3x")
    print(f"download {DOWNLOAD_MB} MB through the API: peak RSS growth {growth['stream']} MB streamed vs "
          f"{growth['read_all']} MB reading it into memory  target <= 50 MB")


if __name__ == "__main__":
    main()
