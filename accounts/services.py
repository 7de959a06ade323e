"""Writes to a member's account."""

from __future__ import annotations

from django.db import transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def api_token_rotate(*, user) -> Token:
    """A new API token for `user`; the old one stops working at once."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)
