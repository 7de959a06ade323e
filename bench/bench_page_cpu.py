"""CPU per request of the hot pages, in process (Django test client), on bench_load.py's seed.

Run: DATABASE_URL=postgres://... .venv/bin/python bench/bench_page_cpu.py [--profile URL]

Seeds a database of this run's own as bench/bench_load.py does, or uses `--db NAME` (bench_load.py --db NAME's,
seeded when empty, kept), and drops its own at the end: 10,000 tasks ×
3 versions, 50,000 graded rollouts and 200 packs. For each URL it prints the CPU time of this process per
request (time.process_time, min and median of 6 batches of 20 after 5 warm-up requests): steadier
than wall time on a shared machine, and free of the network and of gunicorn. Then the CPU of the first and the
second view of each of the seed's 200 distinct task pages against the one warm task page. With --profile URL it
prints the top functions by CPU time for that URL (cProfile with a CPU clock; BENCH_PROFILE_N requests,
40 by default, BENCH_SORT and BENCH_TOP as pstats takes them; BENCH_CALLERS a pattern whose callers to print).

With --baseline TREE (another checkout, e.g. `git worktree add --detach /tmp/base COMMIT` or `git archive`) each
checkout runs in a process of its own (bench/page_cpu_worker.py) on a seed of its own schema (this run's database
and `<it>_base`, both kept with --db), and the URLs are timed alternating between the two, --rounds times
(which goes first alternating): CPU per request and queries per request side by side, with now / baseline.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="")
    parser.add_argument("--db", metavar="NAME", help="a bench_load.py seed to use (made when missing) and keep")
    parser.add_argument("--baseline", metavar="TREE", help="another checkout timed beside this one")
    parser.add_argument("--rounds", type=int, default=4, help="with --baseline: timings per URL and checkout")
    args = parser.parse_args()
    if args.baseline:
        return side_by_side(args)
    base_url = bench_load.postgres_url()
    name = args.db or bench_load.run_scratch.database_name(base_url, "load")
    with bench_load._psql_admin(base_url) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        return _measure(args, bench_load.seed(bench_load._db_url(base_url, name)))  # reuses an existing seed
    finally:
        if not args.db:
            from django.db import connections

            connections.close_all()
            with bench_load._psql_admin(base_url) as admin:
                bench_load.run_scratch.drop_database(admin, name)


def _measure(args, ids: dict) -> int:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    settings.ALLOWED_HOSTS = ["*"]
    clients = {}
    for username in ("bench", bench_load.REVIEWER):  # the review queue is the reviewer's (bench_load.seed)
        clients[username] = Client()
        clients[username].force_login(User.objects.get(username=username))
    tokens = {"bench": ids["token"], bench_load.REVIEWER: ids["reviewer_token"]}
    urls = [
        "/",
        f"/tasks/{ids['task']}/",
        f"/previews/{ids['run']}/",
        f"/previews/rollouts/{ids['rollout']}/",
        "/review/",
        "/packs/",
        "/api/packs/",
        "/api/tasks/",
        "/api/tasks/?page=100",
        "/api/review-queue/",
        f"/?q={bench_load.SEARCH_WORD}",
        f"/?q={bench_load.SEARCH_SLUG}",
        f"/api/tasks/?q={bench_load.SEARCH_WORD}",
    ]
    print(f"# CPU per request, in process; load average {os.getloadavg()}")
    for url in urls:
        username = bench_load.REVIEWER if "review" in url else "bench"
        client = clients[username]
        extra = {"HTTP_AUTHORIZATION": f"Token {tokens[username]}"} if url.startswith("/api/") else {}
        if client.get(url, **extra).status_code != 200:
            print(f"{url:32} skipped (not 200 on this checkout)")
            continue
        for _ in range(4):
            client.get(url, **extra)
        batches = []
        for _ in range(6):
            start = time.process_time()
            for _ in range(20):
                client.get(url, **extra)
            batches.append((time.process_time() - start) * 1000 / 20)
        batches.sort()
        print(f"{url:32} min {batches[0]:6.2f} ms  median {batches[3]:6.2f} ms CPU/request")
    _distinct_pages(clients["bench"], ids)
    if args.profile:
        username = bench_load.REVIEWER if "review" in args.profile else "bench"
        client = clients[username]
        extra = {"HTTP_AUTHORIZATION": f"Token {tokens[username]}"} if args.profile.startswith("/api/") else {}
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        for _ in range(int(os.environ.get("BENCH_PROFILE_N", "40"))):
            client.get(args.profile, **extra)
        profile.disable()
        stats = pstats.Stats(profile)
        stats.sort_stats(os.environ.get("BENCH_SORT", "tottime")).print_stats(int(os.environ.get("BENCH_TOP", "30")))
        if os.environ.get("BENCH_CALLERS"):  # who calls these functions (a pstats pattern, e.g. "functional.py:249")
            stats.print_callers(os.environ["BENCH_CALLERS"])
    print(f"load average after: {os.getloadavg()}")
    return 0


def side_by_side(args) -> int:
    """This checkout and args.baseline, each in a worker process on its own seed, alternating URL by URL."""
    import json
    import statistics
    import subprocess

    base_url = bench_load.postgres_url()
    here = Path(__file__).resolve().parent.parent
    name = args.db or bench_load.run_scratch.database_name(base_url, "load")
    names = {"now": name, "baseline": f"{name}_base"}
    with bench_load._psql_admin(base_url) as admin:
        for db in names.values():
            if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
                admin.execute(f'CREATE DATABASE "{db}"')
    trees = {"now": here, "baseline": Path(args.baseline).resolve()}
    workers = {}
    try:
        for label, tree in trees.items():
            python = tree / ".venv" / "bin" / "python"
            workers[label] = subprocess.Popen(
                [
                    str(python if python.exists() else sys.executable),
                    str(here / "bench" / "page_cpu_worker.py"),
                    str(tree),
                    bench_load._db_url(base_url, names[label]),
                ],
                cwd=tree,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "DEBUG": "0"},
            )
        ids = {label: json.loads(w.stdout.readline()) for label, w in workers.items()}

        def ask(label: str, url: str, n: int = 20) -> dict:
            workers[label].stdin.write(json.dumps({"url": url, "n": n}) + "\n")
            workers[label].stdin.flush()
            return json.loads(workers[label].stdout.readline())

        pages = {
            "/": lambda i: "/",
            "task page": lambda i: f"/tasks/{i['task']}/",
            "preview page (64 rollouts)": lambda i: f"/previews/{i['run']}/",
            "rollout page": lambda i: f"/previews/rollouts/{i['rollout']}/",
            "/review/": lambda i: "/review/",
            "/packs/": lambda i: "/packs/",
            "/api/tasks/": lambda i: "/api/tasks/",
        }
        print(
            f"# CPU per request in process, {args.rounds} rounds of 20 per URL and checkout, alternating; "
            f"baseline {trees['baseline']}; load average before {os.getloadavg()}"
        )
        print(f"{'page':28} {'now ms':>8} {'base ms':>8} {'now/base':>8}   queries now / base")
        for label, url_of in pages.items():
            times = {"now": [], "baseline": []}
            queries = {}
            for r in range(args.rounds):
                for side in ("now", "baseline") if r % 2 == 0 else ("baseline", "now"):
                    answer = ask(side, url_of(ids[side]))
                    if answer["status"] != 200:
                        raise SystemExit(f"{side} {url_of(ids[side])}: {answer['status']}")
                    times[side].append(answer["ms"])
                    queries[side] = answer["queries"]
            now, base = statistics.median(times["now"]), statistics.median(times["baseline"])
            print(f"{label:28} {now:8.2f} {base:8.2f} {now / base:7.2f}×   {queries['now']} / {queries['baseline']}")
        print(f"load average after: {os.getloadavg()}")
    finally:
        for w in workers.values():
            w.stdin.close()
            w.wait(timeout=60)
        if not args.db:
            with bench_load._psql_admin(base_url) as admin:
                for db in names.values():
                    bench_load.run_scratch.drop_database(admin, db)
    return 0


def _distinct_pages(client, ids: dict) -> None:
    """The CPU of each of bench_load.DISTINCT_TASKS different task pages (own rubric, prompt and grades) viewed for
    the first time in this process (the prompt HTML kept in Django's cache deleted first), then a second time, against
    the one warm task page: per-version and per-grade caches are cold on a first view, as on a busy server where a
    worker meets a task it has not shown lately."""
    from django.core.cache import cache

    from authoring.models import TaskVersion
    from authoring.prompt_html import RENDERER_VERSION

    hashes = TaskVersion.objects.filter(task__slug__in=ids["distinct"]).values_list("sha256", flat=True)
    cache.delete_many([f"gymwright:prompt-html:{RENDERER_VERSION}:{sha}" for sha in hashes])
    warm = f"/tasks/{ids['task']}/"
    for _ in range(5):
        client.get(warm)
    warm_ms = []
    for _ in range(40):
        start = time.process_time()
        client.get(warm)
        warm_ms.append((time.process_time() - start) * 1000)
    sweeps = []
    for _ in range(2):
        times = []
        for slug in ids["distinct"]:
            start = time.process_time()
            response = client.get(f"/tasks/{slug}/")
            times.append((time.process_time() - start) * 1000)
            assert response.status_code == 200, (slug, response.status_code)
        sweeps.append(sorted(times))
    warm_ms.sort()
    w50 = warm_ms[len(warm_ms) // 2]
    for label, times in zip(("first views", "second views"), sweeps, strict=True):
        p50, p95 = times[len(times) // 2], times[int(0.95 * (len(times) - 1))]
        print(
            f"{len(times)} distinct task pages, {label}: CPU p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  "
            f"(one warm task page p50 {w50:.2f} ms: {p50 / w50:.2f}× at p50)"
        )


if __name__ == "__main__":
    sys.exit(main())
