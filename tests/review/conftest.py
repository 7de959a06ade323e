"""Fixtures for the review app's tests: the authoring fixtures (users with roles, a task)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.authoring.conftest import (RUBRIC, admin_user, author, environment, nobody, other_author,  # noqa: F401
                                      reviewer, task, task_content)


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def second_reviewer(db, django_user_model):
    from tests.support.users import make_user

    return make_user(django_user_model, "ravi", "reviewer")


__all__ = ["RUBRIC", "api_client", "task_content"]
