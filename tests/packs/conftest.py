"""Approved tasks to pack, made through the authoring services (so every one is a valid version)."""

from __future__ import annotations

import pytest

from authoring import services as authoring_services
from review import services as review_services
from tests.support.users import make_user

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_answer", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "no_shouting", "kind": "regex", "points": -1, "pattern": "[A-Z]{5,}"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains how the answer was found."},
    ],
}


def _admin():
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.filter(username="gate-admin").first()
    return admin or make_user(get_user_model(), "gate-admin", "admin")


def make_approved(
    *,
    author,
    reviewer,
    slug: str,
    environment_slug: str = "shell",
    answer: str = "42",
    tags=("maths",),
    rubric: dict | None = None,
    files: list | None = None,
    examples: list | None = None,
):
    from authoring.models import Environment

    environment = Environment.objects.filter(slug=environment_slug).first()
    if environment is None:
        environment = authoring_services.environment_create(
            slug=environment_slug, name=environment_slug, author=author, spec={"network": "none"}
        )
    task = authoring_services.task_create(
        slug=slug,
        environment=environment,
        author=author,
        content={
            "title": f"Task {slug}",
            "prompt": f"What is six times seven? ({slug})",
            "rubric": rubric or RUBRIC,
            "solution": {"script": None, "answer": answer},
            "tags": list(tags),
            "files": files or [],
            "examples": examples or [],
        },
    )
    # The sanity gates need previews; an admin's audited override stands in for them here.
    review_services.task_submit(task=task, user=_admin(), override_reason="packs tests: approved without previews")
    review_services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
    task.refresh_from_db()
    return task


@pytest.fixture
def approved_tasks(author, reviewer):
    return [make_approved(author=author, reviewer=reviewer, slug=f"task-{i:02d}") for i in range(12)]


def build_and_verify(pack_version_id: int):
    """`pack_version_build`, then its check run here as a worker would run the job the build sends (its own job,
    sent once the build's rows commit: a test's transaction never commits, and no worker listens)."""
    from django.test import TestCase

    from packs import services
    from packs.models import PackVerification

    with TestCase.captureOnCommitCallbacks(execute=False) as sent:
        pack_version = services.pack_version_build(pack_version_id=pack_version_id)
    assert len(sent) <= 1, sent  # the check's job, when the build was published
    for verification in PackVerification.objects.filter(
        pack_version_id=pack_version_id, status=PackVerification.Status.QUEUED
    ):
        services.pack_verification_run(verification_id=verification.pk)
    pack_version.refresh_from_db()
    return pack_version
