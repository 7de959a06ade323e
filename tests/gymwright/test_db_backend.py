"""The PostgreSQL backend's health check (gymwright/db/postgresql): a kept connection is checked before each
request's first query without a round trip while it is healthy, and one the server ended is replaced."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from tests.support.faults import database_backends_terminate
from tests.support.services import require_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def kept_connection(monkeypatch):
    """A connection kept between requests with health checks on, as production's settings keep it, and a count
    of the round-trip checks (Django's `SELECT 1`) made on it."""
    require_postgres("the health check is PostgreSQL's")
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    round_trips = []
    wrapper = connections["default"]
    real = wrapper.is_usable
    monkeypatch.setattr(wrapper, "is_usable", lambda: round_trips.append(1) or real())
    connection.ensure_connection()
    connection.health_check_enabled = True
    yield round_trips
    connection.close()


def next_request():
    """What Django does between two requests (request_finished, then request_started): the connection is kept,
    and the next first query checks it."""
    connection.close_if_unusable_or_obsolete()


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_healthy_kept_connection_is_checked_without_a_round_trip(kept_connection):
    first = backend_pid()
    for _ in range(3):
        next_request()
        assert backend_pid() == first  # the same connection, kept
    assert kept_connection == []  # and never a SELECT 1


def test_a_connection_the_server_ended_is_replaced_before_the_first_query(kept_connection):
    first = backend_pid()
    next_request()
    assert first in database_backends_terminate()
    assert backend_pid() != first  # a new connection answered the request's first query
    # Found by the socket; where the end of the stream came a moment after the message, by one SELECT 1.
    assert len(kept_connection) <= 1


def test_a_connection_left_inside_a_transaction_is_checked_by_the_server(kept_connection):
    next_request()
    raw = connection.connection
    raw.execute("BEGIN")  # not how a request leaves a connection: the full check decides
    connection.close_if_health_check_failed()
    assert kept_connection == [1]
    raw.execute("ROLLBACK")
