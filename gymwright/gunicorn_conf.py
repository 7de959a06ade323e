"""gunicorn settings for `make serve` (override any with GUNICORN_CMD_ARGS or the variables below)."""

from __future__ import annotations

import gc
import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
# Synchronous workers: pages are short, CPU-bound renders; 2 per core plus one is gunicorn's advice.
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() * 2 + 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
# Recycle workers now and then so that slow leaks cannot grow without bound. Not too often: a fresh
# worker compiles its templates and URL patterns again on its first requests (at 200 requests/s, 2,000
# recycled one of four workers every ~10 s, each a spike in the slowest requests).
max_requests = 10_000
max_requests_jitter = 1_000
# Load Django once in the master and fork the workers from it: a worker recycled under load serves
# at once instead of spending a second importing the app while its share of requests queue behind
# it, and the workers share the loaded code's memory. Nothing opens a connection at import time
# (database, cache and broker connections are made per worker, on first use).
preload_app = True


def pre_fork(server, worker):
    """Freeze what the master loaded (Django, the apps, their modules) before a worker is forked from it:
    the garbage collector of each worker then never walks those objects again, which is CPU on every
    full collection (a tenth of a 1,000-task bulk import's, measured side by side) and keeps the pages
    of memory they sit on shared between the workers (Python's advice for gc.freeze and fork)."""
    gc.freeze()


# gunicorn 27's runtime control socket defaults to one path per user (~/.gunicorn/gunicorn.ctl), so two
# servers on a host (`make serve` beside a test run, two sites) take it from each other; nothing here uses
# gunicornc. GUNICORN_CMD_ARGS="--control-socket PATH" gives one server its own, if wanted.
control_socket_disable = True
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-")
wsgi_app = "gymwright.wsgi:application"
