"""Fault: PostgreSQL drops the web server's connections (pg_terminate_backend on the test
database's backends only).

Requests go through Django's WSGI handler in this process, as gunicorn calls it: the real
request_started / request_finished signals run (the test client disconnects them), so the
connection is handled as in production. The database settings are production's
(settings.py: CONN_MAX_AGE 60 with CONN_HEALTH_CHECKS), not the tests' CONN_MAX_AGE 0
(tests/conftest.py): a kept connection is exactly the one a drop leaves dead.

What a user sees: a request whose connection dies under it gets the site's error page (503,
"try again", no traceback; JSON for the API), and the next request works.
"""

from __future__ import annotations

import json
from wsgiref.util import setup_testing_defaults

import pytest
from django.conf import settings as django_settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection

from tests.support.faults import DropWhenQuerying, database_backends_terminate
from tests.support.services import require_postgres
from tests.support.users import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def production_connections(monkeypatch):
    require_postgres("terminating backends needs PostgreSQL")
    connection.close()  # the next connect reads the settings below
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    yield
    connection.close()


@pytest.fixture
def session_cookie(client, django_user_model):
    from tests.sandbox.factories import make_task

    user = make_user(django_user_model, "ada", "author")
    make_task(author=user, slug="still-here")
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


def wsgi_get(path: str, cookie: str) -> tuple[int, dict, str]:
    environ: dict = {}
    setup_testing_defaults(environ)
    environ.update(
        PATH_INFO=path, REQUEST_METHOD="GET", HTTP_HOST="127.0.0.1", SERVER_NAME="127.0.0.1", HTTP_COOKIE=cookie
    )
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = int(status.split()[0]), dict(headers)

    response = WSGIHandler()(environ, start_response)
    try:
        body = b"".join(response).decode()
    finally:
        response.close()  # sends request_finished, as a WSGI server does
    return seen["status"], seen["headers"], body


def test_a_page_whose_connection_dies_in_flight_shows_the_error_page_and_the_next_works(
    production_connections, session_cookie
):
    status, _, body = wsgi_get("/", session_cookie)
    assert status == 200 and "still-here" in body
    drop = DropWhenQuerying("authoring_task")
    with connection.execute_wrapper(drop):
        status, headers, body = wsgi_get("/", session_cookie)
    assert drop.terminated, "the request never queried the task table"
    assert status == 503 and headers["Retry-After"] == "5"
    assert "Database unavailable" in body and "Try again" in body
    assert "Traceback" not in body and "OperationalError" not in body and "psycopg" not in body
    assert 'href="/static/' in body  # the site's own page, styled
    status, _, body = wsgi_get("/", session_cookie)
    assert status == 200 and "still-here" in body


def test_an_api_call_whose_connection_dies_in_flight_answers_the_json_error_and_the_next_works(
    production_connections, session_cookie
):
    drop = DropWhenQuerying("authoring_task")
    with connection.execute_wrapper(drop):
        status, headers, body = wsgi_get("/api/tasks/", session_cookie)
    assert drop.terminated
    assert status == 503 and headers["Content-Type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "database_unavailable" and "Try again" in error["message"]
    status, _, body = wsgi_get("/api/tasks/", session_cookie)
    assert status == 200 and "still-here" in body


def test_a_connection_dropped_between_requests_is_replaced_before_the_next(production_connections, session_cookie):
    status, _, _ = wsgi_get("/", session_cookie)
    assert status == 200 and connection.connection is not None  # kept for the next request
    assert database_backends_terminate()
    status, _, body = wsgi_get("/", session_cookie)  # the health check finds it dead and reconnects
    assert status == 200 and "still-here" in body
