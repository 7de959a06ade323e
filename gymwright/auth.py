"""The model backend, loading the signed-in user with a query compiled once (gymwright.sql).

Every signed-in request loads its user: Django's ModelBackend builds and compiles
`User.objects.get(pk=...)` each time. This backend runs the same query, prepared. Signing in,
permissions and the rule that an inactive user is refused are Django's.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend

from gymwright.sql import Prepared

_user = Prepared(lambda pk: get_user_model()._default_manager.filter(pk=pk), pk=int)


class ModelBackend(DjangoModelBackend):
    def get_user(self, user_id):
        if not isinstance(user_id, int):  # auth.get_user hands over the session's key as the pk field reads it
            return super().get_user(user_id)
        users = _user(pk=user_id)
        return users[0] if users and self.user_can_authenticate(users[0]) else None
