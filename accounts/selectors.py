"""Reads of a member's account."""

from __future__ import annotations

from rest_framework.authtoken.models import Token


def api_token_get(*, user) -> Token | None:
    return Token.objects.filter(user=user).first()
