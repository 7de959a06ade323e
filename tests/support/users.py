"""Test users with roles (groups), shared by every app's tests."""

from django.contrib.auth.models import Group


def make_user(django_user_model, username: str, *roles: str, password: str | None = None):
    user = django_user_model.objects.create_user(username=username, password=password or f"pw-{username}")
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user
