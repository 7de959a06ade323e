"""Django's PostgreSQL backend, with a health check that costs no round trip while the connection is healthy.

With CONN_HEALTH_CHECKS, Django checks a kept connection before the first query of every request by
running `SELECT 1`: a round trip to the server on every page and API call (the web process and the
database both spend CPU on it, ~0.1 ms each, and under load it is one more wait in the queue).

Between requests the server sends a healthy, idle connection nothing. What kills a kept connection —
a terminated backend, a server restart or shutdown, an idle-session timeout — reaches the socket as
an error message and the end of the stream. So the check first asks the socket, without waiting,
whether anything arrived: nothing means the connection is as the last request left it (the common
case: no round trip); something means it is read, and a connection that the server ended is closed
and replaced before the request's first query. Anything else that arrived (a notice) falls back to
Django's own `SELECT 1`. A connection cut without a word (a network partition) is found by the
request's first query instead, which fails as it would have without a check; Django then closes it
at the end of that request (`close_if_unusable_or_obsolete`, which keeps Django's full check).
"""

from __future__ import annotations

import select

from django.db.backends.postgresql.base import DatabaseWrapper as PostgresDatabaseWrapper
from psycopg import OperationalError, pq

_READS = 4  # reads of what arrived unasked, at most, before the full check decides


class DatabaseWrapper(PostgresDatabaseWrapper):
    def close_if_health_check_failed(self):
        if self.pool or self.connection is None or not self.health_check_enabled or self.health_check_done:
            return super().close_if_health_check_failed()
        if not self._idle_connection_alive():
            self.close()
        self.health_check_done = True

    def _idle_connection_alive(self) -> bool:
        pgconn = self.connection.pgconn
        if pgconn.status != pq.ConnStatus.OK:
            return False
        if pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return self.is_usable()  # not as a request leaves it: ask the server
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
            if not poller.poll(0):
                return True  # the server sent nothing since the last query
            # An ended session is a message and then the end of the stream, which can arrive apart: read
            # what is there while more is (libpq marks the connection bad when it reads the end).
            for _ in range(_READS):
                pgconn.consume_input()
                if pgconn.status != pq.ConnStatus.OK or not poller.poll(0):
                    break
        except (OperationalError, OSError, ValueError):
            return False  # the server ended the session, or the socket is gone
        if pgconn.status != pq.ConnStatus.OK:
            return False
        return self.is_usable()  # something else arrived (a notice): the full check
