"""A session cookie is input anyone sends, signed in or not: a key Django never makes is no session,
never a server error (gymwright.sessions)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

HOSTILE_KEYS = [
    '"\\000aaaaaaaaaaaa"',  # a quoted cookie's octal escape: a NUL, which PostgreSQL refuses (it answered 500)
    '"aaaaaaaa\\000"',
    "a" * 100_000,  # far over the column's 40 characters
    "AAAAAAAAAAAAAAAA",  # not among the characters Django makes
    "aaaa'; DROP TABLE django_session; --",
    "é" * 50,
    "short",
]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_a_hostile_session_cookie_is_no_session(key):
    response = Client(HTTP_COOKIE=f"sessionid={key}").get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]  # signed out, not a 500
    assert Client(HTTP_COOKIE=f"sessionid={key}").get("/accounts/login/").status_code == 200


def test_a_signed_in_session_still_loads(client, author):
    client.force_login(author)
    assert client.get("/").status_code == 200
