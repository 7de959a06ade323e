import pytest
from rest_framework.test import APIClient

from authoring import services
from tests.support.users import make_user  # noqa: F401 - re-exported for the tests here

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "has_number", "kind": "regex", "points": 1, "pattern": r"\d+"},
    ],
}




@pytest.fixture
def author(db, django_user_model):
    return make_user(django_user_model, "alice", "author")


@pytest.fixture
def other_author(db, django_user_model):
    return make_user(django_user_model, "bob", "author")


@pytest.fixture
def reviewer(db, django_user_model):
    return make_user(django_user_model, "rita", "reviewer")


@pytest.fixture
def admin_user(db, django_user_model):
    return make_user(django_user_model, "adam", "admin")


@pytest.fixture
def nobody(db, django_user_model):
    return make_user(django_user_model, "norole")


@pytest.fixture
def environment(author):
    return services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})


def task_content(**overrides):
    content = {"title": "Answer the question", "prompt": "What is *six* times seven?", "rubric": RUBRIC,
               "solution": {"script": None, "answer": "42"}, "tags": ["maths"]}
    content.update(overrides)
    return content


@pytest.fixture
def task(author, environment):
    return services.task_create(slug="six-times-seven", environment=environment, author=author, content=task_content())


@pytest.fixture
def api(author):
    client = APIClient()
    client.force_authenticate(author)
    return client
