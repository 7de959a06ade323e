"""Fault: PostgreSQL drops the web server's connections, through the real production server.

tests/gymwright/test_fault_database_drop.py calls Django's WSGI handler in the test process; this
starts what `make serve` starts (collectstatic, then gunicorn with gymwright.gunicorn_conf: sync
workers forked from a preloaded app, DEBUG off) with two workers, against the test database, with
production's database settings (settings.py's defaults: CONN_MAX_AGE 60 with CONN_HEALTH_CHECKS;
DB_CONN_MAX_AGE is not set). Requests are real HTTP requests from a user signed in through the
login form. The server's connections carry an application_name of their own (PGAPPNAME), so the
test finds exactly the server's backends in pg_stat_activity.

Both workers are made to hold a connection deterministically: the test holds an exclusive lock on
the task table from a connection of its own, sends two requests at once and waits until two of the
server's backends wait on that lock. A sync worker serves one request at a time, so the two
requests are in two different workers; the lock is then released.

A drop in flight is deterministic the same way: the request waits on the lock inside its query (its
connection in use), and the test terminates the server's backends at that moment, then releases
the lock.

What a user sees:
- all the server's connections dropped between requests: nothing; the next page and API call on
  each worker are answered normally (the health check reconnects);
- a connection dropped under a page: the site's styled error page, 503 "Database unavailable ...
  Try again" with Retry-After, no traceback; the next requests, on both workers, work;
- the same under an API call: the JSON error envelope, code `database_unavailable`, 503.
Never a 500; gunicorn neither restarts nor loses a worker.
"""

from __future__ import annotations

import json
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection

from tests.support.faults import database_backends_terminate
from tests.support.servers import gunicorn_serving, sign_in
from tests.support.services import require_postgres
from tests.support.users import make_user
from tests.support.workers import test_database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-drop-gunicorn-1"
APP_NAME = "gw-test-drop-gunicorn"  # PGAPPNAME of the server's database connections
WORKERS = 2
TASK_TABLE = "authoring_task"  # read by / and /api/tasks/


def _psql(autocommit: bool = True):
    import psycopg

    return psycopg.connect(test_database_url().replace("postgres://", "postgresql://", 1), autocommit=autocommit)


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, tmp_path_factory):
    """gunicorn as `make serve` runs it, two workers, on the test database; one for the module: the
    tests also show that it keeps serving, with the same workers, across several drops."""
    require_postgres("terminating backends needs PostgreSQL")
    tmp = tmp_path_factory.mktemp("gunicorn-drop")
    # PGAPPNAME names the server's database connections; DB_CONN_MAX_AGE unset: production's 60 s
    with gunicorn_serving(tmp, workers=WORKERS, env={"PGAPPNAME": APP_NAME, "DB_CONN_MAX_AGE": None}) as server:
        yield server


@pytest.fixture
def server(gunicorn):
    """The server, checked after the test: the same workers, all alive, no worker crash or timeout in
    its log, and no 5xx in its access log but the 503 of a lost connection."""
    workers = gunicorn.booted_workers()
    log_start, access_start = len(gunicorn.log_text()), gunicorn.access_log.stat().st_size
    yield gunicorn
    connection.close()  # database_backends_terminate also ends this process's connection
    log = gunicorn.log_text()[log_start:]
    assert gunicorn.proc.poll() is None, log
    assert gunicorn.booted_workers() == workers, f"gunicorn booted a new worker:\n{log}"
    gone = [pid for pid in workers if not Path(f"/proc/{pid}").exists()]
    assert not gone, f"gunicorn workers {gone} are gone:\n{log}"
    for sign in (
        "Worker exiting",
        "WORKER TIMEOUT",
        "Exception in worker process",
        "was sent SIGKILL",
        "was sent code",
        "Shutting down",
    ):
        assert sign not in log, log
    with open(gunicorn.access_log, "rb") as f:
        f.seek(access_start)
        statuses = re.findall(r'"[A-Z]+ [^"]*" (\d{3}) ', f.read().decode(errors="replace"))
    assert statuses and all(s in {"200", "302", "503"} for s in statuses), statuses


@pytest.fixture
def cookie(server, django_user_model) -> str:
    """A signed-in author with a task, signed in through gunicorn's login form: the session cookie."""
    from tests.sandbox.factories import make_task

    user = make_user(django_user_model, "ada", "author", password=PASSWORD)
    make_task(author=user, slug="still-here")
    with httpx.Client(base_url=server.base, timeout=10) as client:
        sign_in(client, username="ada", password=PASSWORD)
        name = django_settings.SESSION_COOKIE_NAME
        return f"{name}={client.cookies[name]}"


def server_backends(watcher, *, waiting: bool = False) -> list[int]:
    sql = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s" + (
        " AND wait_event_type = 'Lock'" if waiting else ""
    )
    return [row[0] for row in watcher.execute(sql, [APP_NAME])]


def wait_for(what, check, timeout: float = 15):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextmanager
def requests_held_in_their_query(base: str, cookie: str, paths: list[str]):
    """Sends a GET for each path at once while the task table is locked, and yields once each request
    waits on the lock inside its query, one per worker: (the watcher connection, the results, which
    fill in once the lock is released on leaving)."""
    results: dict[str, httpx.Response | BaseException] = {}

    def get(path):
        try:
            results[path] = httpx.get(base + path, headers={"Cookie": cookie}, timeout=20)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            results[path] = exc

    with _psql() as watcher, _psql(autocommit=False) as locker:
        locker.execute(f"LOCK TABLE {TASK_TABLE} IN ACCESS EXCLUSIVE MODE")
        threads = [threading.Thread(target=get, args=(path,), daemon=True) for path in paths]
        try:
            for thread in threads:
                thread.start()

            def held():
                if results:  # answered without reaching the task table: an error, say which
                    pytest.fail(
                        "answered before reaching the task table: "
                        + "; ".join(
                            f"GET {p}: {r.status_code} {r.text[:1500]}"
                            if isinstance(r, httpx.Response)
                            else f"GET {p}: {r!r}"
                            for p, r in results.items()
                        )
                    )
                return len(server_backends(watcher, waiting=True)) == len(paths)

            wait_for(f"{len(paths)} requests waiting on the task table", held)
            yield watcher, results
        finally:
            locker.rollback()  # releases the lock
            for thread in threads:
                thread.join(timeout=30)
    for path in paths:
        assert isinstance(results.get(path), httpx.Response), (path, results.get(path))


def on_both_workers(base: str, cookie: str) -> dict[str, httpx.Response]:
    """GET / and /api/tasks/ at once: a sync worker serves one request at a time, so with the first
    held in its query the second is served by the other worker."""
    paths = ["/", "/api/tasks/"]
    with requests_held_in_their_query(base, cookie, paths) as (_, results):
        pass
    return results


def assert_served(responses: dict[str, httpx.Response]) -> None:
    for path, r in responses.items():
        assert r.status_code == 200, (path, r.status_code, r.text[:2000])
        assert "still-here" in r.text and "Traceback" not in r.text, (path, r.text[:2000])


def assert_no_internals(body: str) -> None:
    for leak in ("Traceback", "OperationalError", "InterfaceError", "psycopg", 'File "/'):
        assert leak not in body, (leak, body[:2000])


def test_a_drop_between_requests_goes_unnoticed_both_workers_reconnect_and_answer_200(server, cookie):
    assert_served(on_both_workers(server.base, cookie))
    with _psql() as watcher:
        before = server_backends(watcher)
    assert len(before) == WORKERS, before  # each worker kept its connection (CONN_MAX_AGE 60)
    terminated = database_backends_terminate()  # this process's own connections too
    assert set(before) <= set(terminated), (before, terminated)

    # The first request on each worker after the drop: the health check finds the kept
    # connection dead and reconnects before the request's first query.
    assert_served(on_both_workers(server.base, cookie))
    with _psql() as watcher:
        after = server_backends(watcher)
    assert len(after) == WORKERS and not set(after) & set(before), (before, after)
    for _ in range(3):
        assert_served(
            {
                path: httpx.get(server.base + path, headers={"Cookie": cookie}, timeout=10)
                for path in ("/", "/api/tasks/")
            }
        )


def drop_in_flight(base: str, cookie: str, path: str) -> httpx.Response:
    """GET path with its connection terminated while the request is inside a query (waiting on the
    task-table lock); every connection of the server is terminated, the other worker's too."""
    with requests_held_in_their_query(base, cookie, [path]) as (watcher, results):
        assert not results, "the request finished before its connection was dropped"
        victims = server_backends(watcher)
        assert len(victims) == WORKERS, victims  # the other worker still holds its kept connection
        for pid in victims:
            watcher.execute("SELECT pg_terminate_backend(%s)", [pid])
        wait_for("the server's backends to end", lambda: not server_backends(watcher))
    return results[path]


def test_a_page_whose_connection_dies_in_flight_shows_the_503_error_page_and_the_next_requests_work(server, cookie):
    assert_served(on_both_workers(server.base, cookie))
    r = drop_in_flight(server.base, cookie, "/")
    assert r.status_code == 503, (r.status_code, r.text[:2000])
    assert r.headers["Retry-After"] == "5" and r.headers["Content-Type"].startswith("text/html")
    assert "Database unavailable" in r.text and "Try again" in r.text
    assert_no_internals(r.text)
    assert 'href="/static/' in r.text  # the site's own page, styled
    # Without restarting gunicorn: the next page and API call, one on each worker, work.
    assert_served(on_both_workers(server.base, cookie))


def test_an_api_call_whose_connection_dies_in_flight_answers_the_json_503_and_the_next_requests_work(server, cookie):
    assert_served(on_both_workers(server.base, cookie))
    r = drop_in_flight(server.base, cookie, "/api/tasks/")
    assert r.status_code == 503, (r.status_code, r.text[:2000])
    assert r.headers["Content-Type"] == "application/json" and r.headers["Retry-After"] == "5"
    error = json.loads(r.text)["error"]
    assert error["code"] == "database_unavailable" and "Try again" in error["message"]
    assert_no_internals(r.text)
    assert_served(on_both_workers(server.base, cookie))
