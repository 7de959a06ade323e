"""A preview of a task whose environment asks for network egress is refused,
with the reason and the setting named, when its backend cannot give egress."""

from __future__ import annotations

import pytest

from authoring import services as authoring_services
from gymwright.errors import DomainError
from sandbox import services, worker
from sandbox.models import PreviewRun
from tests.sandbox.factories import RUBRIC


@pytest.fixture
def egress_version(author, settings):
    settings.SANDBOX_EGRESS = True  # saved while the operator allowed it
    environment = authoring_services.environment_create(
        slug="net", name="net", author=author, spec={"network": "egress"}
    )
    content = {
        "title": "Fetch",
        "prompt": "Fetch it.",
        "rubric": RUBRIC,
        "solution": {"script": "echo 42 > answer.txt", "answer": "42"},
        "tags": [],
        "files": [],
    }
    task = authoring_services.task_create(slug="fetch", environment=environment, author=author, content=content)
    return task.latest_version


def test_a_preview_is_refused_when_egress_is_off(egress_version, author, settings, enqueued):
    settings.SANDBOX_EGRESS = False
    with pytest.raises(DomainError) as caught:
        services.preview_run_create(task_version=egress_version, user=author, policy="oracle", n=1)
    assert caught.value.details[0]["pointer"] == "/environment/network"
    assert "GYMWRIGHT_SANDBOX_EGRESS" in caught.value.message
    assert not PreviewRun.objects.exists() and enqueued == []


def test_a_docker_preview_needs_the_operator_named_network(egress_version, author, settings, enqueued):
    settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap", "docker"]
    settings.SANDBOX_DOCKER_NETWORK = ""
    with pytest.raises(DomainError) as caught:
        services.preview_run_create(task_version=egress_version, user=author, policy="oracle", n=1, backend="docker")
    assert "GYMWRIGHT_SANDBOX_DOCKER_NETWORK" in caught.value.message
    settings.SANDBOX_DOCKER_NETWORK = "operator-egress"
    run = services.preview_run_create(task_version=egress_version, user=author, policy="oracle", n=1, backend="docker")
    assert run.backend == "docker"


def test_the_preview_api_and_form_answer_400_with_the_reason(egress_version, author, api, client, settings):
    settings.SANDBOX_EGRESS = False
    url = f"/api/tasks/{egress_version.task.slug}/versions/{egress_version.number}/previews/"
    response = api.post(url, {"policy": "oracle", "n": 1}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["details"][0]["pointer"] == "/environment/network"
    assert "GYMWRIGHT_SANDBOX_EGRESS" in error["message"]

    client.force_login(author)
    page = client.post(
        f"/previews/start/{egress_version.task.slug}/v{egress_version.number}/", {"policy": "oracle", "n": "1"}
    )
    assert page.status_code == 400
    assert "GYMWRIGHT_SANDBOX_EGRESS" in page.content.decode()
    assert not PreviewRun.objects.exists()


def test_the_worker_gives_bubblewrap_the_operators_egress_policy(settings):
    from sandbox.runtime.egress_filter import EgressPolicy

    settings.SANDBOX_EGRESS = False
    assert "egress" not in worker._backend_options("bubblewrap")
    settings.SANDBOX_EGRESS = True
    settings.SANDBOX_EGRESS_ALLOW = ["127.0.0.1:8080", "10.9.0.0/16"]
    policy = worker._backend_options("bubblewrap")["egress"]
    assert isinstance(policy, EgressPolicy) and [str(e.network) for e in policy.allow] == [
        "127.0.0.1/32",
        "10.9.0.0/16",
    ]
    settings.SANDBOX_EGRESS_ALLOW = ["localhost:80"]
    from sandbox.runtime import SandboxError

    with pytest.raises(SandboxError) as caught:
        worker._backend_options("bubblewrap")
    assert "GYMWRIGHT_SANDBOX_EGRESS_ALLOW" in str(caught.value) and caught.value.permanent
