"""The database session store, reading a session with a query compiled once (gymwright.sql).

Every signed-in request loads its session: Django's store builds and compiles
`Session.objects.get(session_key=..., expire_date__gt=now)` each time. This store reads the same
row through a prepared query and compares the expiry in Python (the same rule: a session that has
expired is not loaded, and its key is dropped). Writing, creating and deleting are Django's.

A session key comes from a cookie anyone can send. Django accepts any text of 8 characters or more;
one holding a NUL reached PostgreSQL, which refuses it, and the request answered 500 (signed in or
not). Only the keys Django makes (lowercase letters and digits, at most the column's 40) are looked
up here: any other cookie is no session, as an unknown key is.
"""

from __future__ import annotations

import re

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from gymwright.sql import Prepared

_session_row = Prepared(
    lambda key: Session.objects.filter(session_key=key).values_list("session_data", "expire_date"), key=str
)


_KEY = re.compile(r"[a-z0-9]{8,40}")  # django.contrib.sessions.backends.base.VALID_KEY_CHARS, Session.session_key


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key):
        return bool(key) and _KEY.fullmatch(key) is not None

    def load(self):
        key = self.session_key
        if not key:  # no valid key was given: nothing to look up
            self._session_key = None
            return {}
        rows = _session_row(key=key)
        if not rows or rows[0][1] <= timezone.now():
            self._session_key = None
            return {}
        return self.decode(rows[0][0])
