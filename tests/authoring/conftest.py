import pytest
from rest_framework.test import APIClient

from authoring import services

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "has_number", "kind": "regex", "points": 1, "pattern": r"\d+"},
    ],
}


@pytest.fixture
def environment(author):
    return services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})


def task_content(**overrides):
    content = {
        "title": "Answer the question",
        "prompt": "What is *six* times seven?",
        "rubric": RUBRIC,
        "solution": {"script": None, "answer": "42"},
        "tags": ["maths"],
    }
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
