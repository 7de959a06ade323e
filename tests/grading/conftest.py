"""Fixtures for the grading app's Django tests (the engine's own tests live in tests/grading/engine)."""

from __future__ import annotations

import pytest

from authoring.models import Environment, EnvironmentVersion, Task, TaskVersion

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {
            "id": "says_42",
            "kind": "string_match",
            "points": 3,
            "target": "answer",
            "mode": "contains",
            "expected": "42",
        },
        {"id": "has_unit", "kind": "regex", "points": 2, "pattern": r"\bmeters?\b"},
    ],
}


@pytest.fixture
def task_version(author):
    environment = Environment.objects.create(slug="desk", name="Desk", owner=author)
    environment_version = EnvironmentVersion.objects.create(
        environment=environment,
        number=1,
        sha256="0" * 64,
        author=author,
        spec={"image": "python:3.12-slim", "network": "none", "tools": ["bash"], "files": []},
    )
    task = Task.objects.create(slug="answer-42", title="Answer 42", environment=environment, owner=author)
    spec = {
        "schema": "gymwright.task/v1",
        "id": "answer-42",
        "version": 1,
        "title": "Answer 42",
        "prompt": "What is 6 x 7, in meters?",
        "rubric": RUBRIC,
    }
    version = TaskVersion.objects.create(
        task=task,
        number=1,
        spec=spec,
        sha256="1" * 64,
        content_sha256="2" * 64,
        environment_version=environment_version,
        author=author,
    )
    Task.objects.filter(pk=task.pk).update(latest_version=version)
    task.latest_version = version
    return version
