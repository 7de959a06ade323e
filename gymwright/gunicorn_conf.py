"""gunicorn settings for `make serve` (override any with GUNICORN_CMD_ARGS or the variables below)."""

from __future__ import annotations

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
# Synchronous workers: pages are short, CPU-bound renders; 2 per core plus one is gunicorn's advice.
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() * 2 + 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
max_requests = 2000  # recycle workers now and then so that slow leaks cannot grow without bound
max_requests_jitter = 200
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-")
wsgi_app = "gymwright.wsgi:application"
