"""Fixtures for the review app's tests: the authoring fixtures (an environment, a task); users with roles
come from tests/support/users.py."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.authoring.conftest import RUBRIC, environment, task, task_content  # noqa: F401


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def second_reviewer(db, django_user_model):
    from tests.support.users import make_user

    return make_user(django_user_model, "ravi", "reviewer")


__all__ = ["RUBRIC", "api_client", "task_content", "finished_preview", "pass_gates"]


def finished_preview(version, user, policy: str, rewards: list, pass_threshold: float = 0.5):
    """A finished preview run of `version` whose rollouts ended with `rewards` (None: no grade)."""
    from django.utils import timezone

    from sandbox.models import PreviewRun, Rollout

    kind, _, argument = policy.partition(":")
    run = PreviewRun.objects.create(
        task_version=version,
        created_by=user,
        policy=policy,
        policy_kind=kind,
        policy_argument=argument,
        n=len(rewards),
        backend="bubblewrap",
        status=PreviewRun.Status.DONE,
        finished_at=timezone.now(),
    )
    Rollout.objects.bulk_create(
        [
            Rollout(
                preview_run=run,
                index=index,
                status=Rollout.Status.DONE if reward is not None else Rollout.Status.ERROR,
                reward=reward,
                passed=None if reward is None else reward >= pass_threshold,
            )
            for index, reward in enumerate(rewards)
        ]
    )
    return run


def pass_gates(version, user):
    """The previews the gates need, finished and as they should be: the oracle passes, nop,
    probes and hack probes fail."""
    from grading.engine import gate_rules

    finished_preview(version, user, "oracle", [1.0, 1.0, 1.0])
    finished_preview(version, user, "nop", [0.0, 0.0, 0.0])
    for probe in version.rubric.get("probes") or []:
        finished_preview(version, user, f"probe:{probe['answer']}", [0.0])
    for policy in gate_rules.hack_policies(version.spec):
        finished_preview(version, user, policy, [0.0])


@pytest.fixture
def submitted(task, author):
    """The task's v1, with passing gates, in review."""
    from review import services

    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    task.refresh_from_db()
    return task
