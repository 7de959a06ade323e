"""Who a request is (accounts.auth): the session's user and an API token's, each read with its roles in one query."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from accounts import permissions
from accounts.auth import ModelBackend
from tests.support.users import make_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("roles", [(), ("author",), ("reviewer", "lab"), ("author", "reviewer", "admin", "lab")])
def test_the_session_backend_reads_the_users_roles_with_the_user(django_user_model, roles):
    user = make_user(django_user_model, "roles-" + "-".join(roles), *roles)
    user.groups.add(Group.objects.get_or_create(name="not-a-role")[0])  # a group that is not a role stays out
    with CaptureQueriesContext(connection) as queries:
        loaded = ModelBackend().get_user(user.pk)
        assert permissions.roles_of(loaded) == set(roles)
    assert len(queries) == 1


def test_a_superuser_is_an_admin_with_the_roles_read_with_the_user(django_user_model):
    boss = django_user_model.objects.create_superuser("boss", password="pw-boss-1")
    with CaptureQueriesContext(connection) as queries:
        assert permissions.roles_of(ModelBackend().get_user(boss.pk)) == {"admin"}
    assert len(queries) == 1


def test_a_token_request_reads_the_token_its_user_and_roles_in_one_query(client, reviewer, settings):
    token = Token.objects.create(user=reviewer)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/review-queue/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    auth_queries = [q["sql"] for q in queries if "authtoken_token" in q["sql"] or "auth_group" in q["sql"]]
    assert len(auth_queries) == 1, auth_queries
    assert response.wsgi_request.user == reviewer


@pytest.mark.parametrize("key", ["0" * 40, "not-a-key", "A" * 40, "ab\x00cd" + "0" * 34, "é" * 40, "0" * 41])
def test_an_unknown_or_malformed_token_is_refused_with_drfs_answer(client, author, key):
    Token.objects.create(user=author)
    response = client.get("/api/tasks/", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 401
    assert "Invalid token" in response.json()["error"]["message"]


def test_an_inactive_users_token_is_refused(client, author):
    token = Token.objects.create(user=author)
    type(author).objects.filter(pk=author.pk).update(is_active=False)
    response = client.get("/api/tasks/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 401
    assert "inactive" in response.json()["error"]["message"]
