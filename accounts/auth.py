"""Who a request is: the session's user (Django's model backend) or an API token's (DRF's token authentication),
each loaded with its roles in one query compiled once per process (gymwright.sql).

Every signed-in request loads its user, and nearly every one then reads its roles (the navigation, the
permission checks). Django's ModelBackend builds and compiles `User.objects.get(pk=...)` each time, and DRF's
token authentication `Token.objects.select_related("user").get(key=...)`; these run the same queries, prepared,
with the roles read beside the user (`permissions.with_roles`). Signing in, the rule that an inactive user is
refused, and the answers to a bad token are Django's and DRF's.
"""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication as DrfTokenAuthentication
from rest_framework.authtoken.models import Token

from accounts import permissions
from gymwright.sql import Prepared

_user = Prepared(lambda pk: permissions.with_roles(get_user_model()._default_manager.filter(pk=pk)), pk=int)
_token = Prepared(
    lambda key: permissions.with_roles(Token.objects.select_related("user").filter(key=key), user_field="user_id"),
    key=str,
)

# The keys DRF makes (Token.generate_key: 20 random bytes as hex). Any other text in the header names no token,
# and is refused as an unknown key is, without a query (PostgreSQL refuses a NUL in a parameter: a 500).
_TOKEN_KEY = re.compile(r"[0-9a-f]{40}")


class ModelBackend(DjangoModelBackend):
    def get_user(self, user_id):
        if not isinstance(user_id, int):  # auth.get_user hands over the session's key as the pk field reads it
            return super().get_user(user_id)
        users = _user(pk=user_id)
        return permissions.roles_known(users[0]) if users and self.user_can_authenticate(users[0]) else None


class TokenAuthentication(DrfTokenAuthentication):
    def authenticate_credentials(self, key):
        tokens = _token(key=key) if _TOKEN_KEY.fullmatch(key) else []
        if not tokens:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token = tokens[0]
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return permissions.roles_known(token.user, flags_from=token), token
