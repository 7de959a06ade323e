"""Abuse suite for operator ceilings: an author cannot ask for more memory, processes, disk, output or
time than the server allows, cannot pick a backend the operator did not allow, and cannot flood the
workers with previews (a throttle on starts and a cap on rollouts in flight per user)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from authoring import services as authoring_services
from authoring.models import AuditEvent
from gymwright.errors import DomainError
from sandbox import services
from tests.sandbox.factories import make_task
from tests.support.users import make_user

pytestmark = pytest.mark.django_db


def previews_url(version):
    return f"/api/tasks/{version.task.slug}/versions/{version.number}/previews/"


@pytest.fixture(autouse=True)
def fresh_throttle_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.parametrize(
    "key, value, variable",
    [
        ("memory_mb", 262144, "GYMWRIGHT_MAX_MEMORY_MB"),
        ("pids", 65536, "GYMWRIGHT_MAX_PIDS"),
        ("workspace_mb", 1 << 20, "GYMWRIGHT_MAX_DISK_MB"),
        ("tmp_mb", 1 << 20, "GYMWRIGHT_MAX_DISK_MB"),
        ("output_cap_bytes", 1 << 30, "GYMWRIGHT_MAX_OUTPUT_CAP_MB"),
        ("timeout_s", 86400, "GYMWRIGHT_MAX_TIMEOUT_S"),
        ("exec_timeout_s", 86400, "GYMWRIGHT_MAX_TIMEOUT_S"),
    ],
)
def test_limits_over_the_ceilings_are_refused_at_save_with_the_field_named(author, key, value, variable):
    spec = {"network": "none", "limits": {**authoring_services.DEFAULT_ENVIRONMENT_SPEC["limits"], key: value}}
    with pytest.raises(DomainError) as caught:
        authoring_services.environment_create(slug="greedy", name="Greedy", author=author, spec=spec)
    assert [detail["pointer"] for detail in caught.value.details] == [f"/limits/{key}"]
    assert variable in caught.value.message and "ceiling" in caught.value.message


def test_the_api_refuses_an_environment_over_a_ceiling_in_the_error_envelope(api):
    response = api.post(
        "/api/environments/",
        {
            "slug": "greedy",
            "name": "Greedy",
            "spec": {"network": "none", "limits": {"cpus": 1, "memory_mb": 262144, "timeout_s": 600, "max_steps": 30}},
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "over_ceiling"
    assert [detail["pointer"] for detail in error["details"]] == ["/limits/memory_mb"]


def test_a_version_saved_under_a_higher_ceiling_is_refused_at_preview(author, settings):
    task = make_task(author=author, limits={"memory_mb": 2048})
    settings.SANDBOX_MAX_MEMORY_MB = 1024
    with pytest.raises(DomainError) as caught:
        services.preview_run_create(task_version=task.latest_version, user=author, policy="nop", n=1)
    assert caught.value.details[0]["pointer"] == "/environment/limits/memory_mb"
    assert "GYMWRIGHT_MAX_MEMORY_MB" in caught.value.message


def test_the_api_accepts_only_the_allowed_backends(api, version, settings):
    settings.SANDBOX_BACKEND = "bubblewrap"
    settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap"]
    response = api.post(previews_url(version), {"policy": "nop", "n": 1, "backend": "docker"}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "backend_not_allowed" and "GYMWRIGHT_SANDBOX_BACKENDS" in error["message"]
    assert [detail["pointer"] for detail in error["details"]] == ["/backend"]
    assert (
        api.post(previews_url(version), {"policy": "nop", "n": 1, "backend": "bubblewrap"}, format="json").status_code
        == 201
    )


def test_rollouts_in_flight_are_capped_per_user(api, version, author, django_user_model, settings, client):
    settings.PREVIEW_MAX_ROLLOUTS_IN_FLIGHT = 3
    assert api.post(previews_url(version), {"policy": "nop", "n": 2}, format="json").status_code == 201
    response = api.post(previews_url(version), {"policy": "nop", "n": 2}, format="json")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "too_many_rollouts" and "GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT" in error["message"]
    assert error["details"][0]["pointer"] == "/n"
    # The web form says the same, with the same status.
    client.force_login(author)
    page = client.post(f"/previews/start/{version.task.slug}/v{version.number}/", {"policy": "nop", "n": 2})
    assert page.status_code == 429 and b"GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT" in page.content
    # Another user has their own allowance; cancelling frees this user's.
    other = make_user(django_user_model, "bo", "author")
    assert services.preview_run_create(task_version=version, user=other, policy="nop", n=3).n == 3
    for preview_run in version.preview_runs.filter(created_by=author):
        services.preview_run_cancel(preview_run=preview_run, user=author)
    assert api.post(previews_url(version), {"policy": "nop", "n": 3}, format="json").status_code == 201


def test_preview_starts_through_the_api_are_throttled_per_user(api, version, settings, enqueued):
    settings.PREVIEW_RATE = "2/hour"
    for _ in range(2):
        assert api.post(previews_url(version), {"policy": "nop", "n": 1}, format="json").status_code == 201
    response = api.post(previews_url(version), {"policy": "nop", "n": 1}, format="json")
    assert response.status_code == 429 and response.json()["error"]["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
    assert api.get(previews_url(version)).status_code == 200  # reading is not throttled


def test_the_start_rate_holds_on_every_path_that_starts_previews(
    api, version, author, client, settings, django_user_model, enqueued
):
    """The form and Run gates start previews too: each start counts, in the database (shared by every web
    process and host), whichever path made it; over the rate each path answers 429 or says so."""
    from sandbox.models import PreviewRun

    settings.PREVIEW_RATE = "3/hour"
    client.force_login(author)
    form_url = f"/previews/start/{version.task.slug}/v{version.number}/"
    assert client.post(form_url, {"policy": "nop", "n": "1"}).status_code == 302  # 1: the form
    assert api.post(previews_url(version), {"policy": "nop", "n": 1}, format="json").status_code == 201  # 2
    # Run gates starts what it can (oracle, then the rest) and stops at the rate with the reason
    page = client.post(f"/tasks/{version.task.slug}/gates/run/", follow=True).content.decode()
    assert "GYMWRIGHT_PREVIEW_RATE" in page
    assert PreviewRun.objects.filter(created_by=author).count() == 3
    refused = client.post(form_url, {"policy": "nop", "n": "1"})
    assert refused.status_code == 429 and b"GYMWRIGHT_PREVIEW_RATE" in refused.content
    assert int(refused["Retry-After"]) > 0
    response = api.post(previews_url(version), {"policy": "nop", "n": 1}, format="json")
    assert response.status_code == 429 and response.json()["error"]["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
    api_gates = api.post(f"/api/tasks/{version.task.slug}/versions/{version.number}/gates/run/")
    assert api_gates.status_code == 429, api_gates.content
    assert PreviewRun.objects.filter(created_by=author).count() == 3
    # the count is the user's own, and the window's: starts older than the hour no longer count
    other = make_user(django_user_model, "bo", "author")
    assert services.preview_run_create(task_version=version, user=other, policy="nop", n=1)
    AuditEvent.objects.filter(actor=author, verb=AuditEvent.Verb.PREVIEW).update(
        created_at=timezone.now() - timedelta(hours=1, seconds=1)
    )  # each start is counted by its "started a preview" event
    assert api.post(previews_url(version), {"policy": "nop", "n": 1}, format="json").status_code == 201


def test_a_preview_rate_that_does_not_parse_is_refused_at_start_with_the_variable_named():
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import gymwright.settings"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GYMWRIGHT_PREVIEW_RATE": "lots"},
    )
    assert result.returncode != 0 and "GYMWRIGHT_PREVIEW_RATE" in result.stderr


def test_a_cache_url_that_is_not_redis_is_refused_with_the_variable_named():
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import gymwright.settings"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GYMWRIGHT_CACHE_URL": "memcached://127.0.0.1:11211"},
    )
    assert result.returncode != 0 and "GYMWRIGHT_CACHE_URL" in result.stderr
