"""Test users with roles (groups), shared by every app's tests: make_user, and one fixture per role
(registered for every test in tests/conftest.py)."""

import pytest
from django.contrib.auth.models import Group


def make_user(django_user_model, username: str, *roles: str, password: str | None = None):
    user = django_user_model.objects.create_user(username=username, password=password or f"pw-{username}")
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _user_fixture(name: str, username: str, *roles: str):
    def fixture(db, django_user_model):
        return make_user(django_user_model, username, *roles)

    fixture.__doc__ = f"{username}, with the role {roles[0]}" if roles else f"{username}, signed in with no role"
    return pytest.fixture(fixture, name=name)


author = _user_fixture("author", "alice", "author")
other_author = _user_fixture("other_author", "bob", "author")
reviewer = _user_fixture("reviewer", "rita", "reviewer")
admin = _user_fixture("admin", "adam", "admin")
lab = _user_fixture("lab", "lena", "lab")
nobody = _user_fixture("nobody", "norole")
