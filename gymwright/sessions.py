"""The database session store, reading a session with a query compiled once (gymwright.sql).

Every signed-in request loads its session: Django's store builds and compiles
`Session.objects.get(session_key=..., expire_date__gt=now)` each time. This store reads the same
row through a prepared query and compares the expiry in Python (the same rule: a session that has
expired is not loaded, and its key is dropped). Writing, creating and deleting are Django's.
"""

from __future__ import annotations

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from gymwright.sql import Prepared

_session_row = Prepared(lambda key: Session.objects.filter(session_key=key).values_list("session_data", "expire_date"),
                        key=str)


class SessionStore(DatabaseSessionStore):
    def load(self):
        key = self.session_key
        if not key:  # nothing to look up (Django's query would find nothing either)
            self._session_key = None
            return {}
        rows = _session_row(key=key)
        if not rows or rows[0][1] <= timezone.now():
            self._session_key = None
            return {}
        return self.decode(rows[0][0])
