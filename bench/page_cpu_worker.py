"""One checkout's side of bench_page_cpu.py --baseline: run as `python bench/page_cpu_worker.py TREE DB_URL`.

Imports TREE's code (its gymwright and its bench/bench_load.py, whose seed it runs on DB_URL: migrated and seeded
when empty, kept when seeded), signs in bench_load's users, prints the seed's ids as one JSON line, then answers
one JSON request a line on stdin, {"url": ..., "n": 20}, with {"ms": CPU per request, "status": ..., "queries":
queries of one request}. The parent alternates the two checkouts URL by URL, so both are measured in the same
minutes of a shared machine.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> int:
    tree, url = Path(sys.argv[1]).resolve(), sys.argv[2]
    sys.path[:0] = [str(tree / "bench"), str(tree)]
    out = sys.stdout
    sys.stdout = sys.stderr  # the seed's prints; stdout carries the answers
    import bench_load

    ids = bench_load.seed(url)
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    settings.ALLOWED_HOSTS = ["*"]
    clients, tokens = {}, {"bench": ids["token"], bench_load.REVIEWER: ids["reviewer_token"]}
    for username in tokens:
        clients[username] = Client()
        clients[username].force_login(User.objects.get(username=username))
    out.write(json.dumps({k: v for k, v in ids.items() if k != "distinct"}) + "\n")
    out.flush()
    for line in sys.stdin:
        ask = json.loads(line)
        path = ask["url"]
        username = bench_load.REVIEWER if "review" in path else "bench"
        extra = {"HTTP_AUTHORIZATION": f"Token {tokens[username]}"} if path.startswith("/api/") else {}
        client = clients[username]
        for _ in range(ask.get("warm", 2)):
            client.get(path, **extra)
        with CaptureQueriesContext(connection) as queries:
            status = client.get(path, **extra).status_code
        sql = [q["sql"] for q in queries.captured_queries]  # before the next request clears the log
        start = time.process_time()
        for _ in range(ask["n"]):
            client.get(path, **extra)
        ms = (time.process_time() - start) * 1000 / ask["n"]
        answer = {"ms": ms, "status": status, "queries": len(sql)}
        if ask.get("sql"):
            answer["sql"] = sql
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
