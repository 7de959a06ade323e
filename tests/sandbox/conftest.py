"""Fixtures for the sandbox app's Django tests (the runtime's own tests live in tests/sandbox/runtime)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from tests.sandbox.factories import make_task


@pytest.fixture
def task(author):
    return make_task(author=author)


@pytest.fixture
def version(task):
    return task.latest_version


@pytest.fixture
def enqueued(monkeypatch):
    """Rollout jobs sent to Celery, recorded instead of sent: [(rollout_id, options)]."""
    from sandbox.tasks import rollout_run

    sent = []

    def apply_async(args=None, kwargs=None, **options):
        sent.append((args[0], options))

    monkeypatch.setattr(rollout_run, "apply_async", apply_async)
    return sent


@pytest.fixture
def api(author):
    client = APIClient()
    client.force_authenticate(author)
    return client


__all__ = ["Group"]
