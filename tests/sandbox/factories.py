"""Test data for previews, made through the authoring services (so every task is a valid version)."""

from __future__ import annotations

from authoring import services as authoring_services

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "mode": "contains", "expected": "42"},
        {"id": "report_exists", "kind": "file_exists", "points": 1, "path": "answer.txt"},
    ],
}


def make_task(
    *,
    author,
    slug: str = "six-by-seven",
    script: str | None = "echo 42 > answer.txt",
    answer: str | None = "42",
    rubric: dict | None = None,
    limits: dict | None = None,
    environment_slug: str | None = None,
    files: list | None = None,
):
    """A task whose oracle (write answer.txt, answer 42) passes and whose nop fails."""
    from authoring.models import Environment

    environment_slug = environment_slug or f"env-{slug}"
    environment = Environment.objects.filter(slug=environment_slug).first()
    if environment is None:
        spec = {"network": "none"}
        if limits:
            spec["limits"] = {**authoring_services.DEFAULT_ENVIRONMENT_SPEC["limits"], **limits}
        environment = authoring_services.environment_create(
            slug=environment_slug, name=environment_slug, author=author, spec=spec
        )
    content = {
        "title": "Six by seven",
        "prompt": "What is six times seven? Write it to answer.txt too.",
        "rubric": rubric or RUBRIC,
        "solution": {"script": script, "answer": answer},
        "tags": ["maths"],
        "files": files or [],
    }
    return authoring_services.task_create(slug=slug, environment=environment, author=author, content=content)
