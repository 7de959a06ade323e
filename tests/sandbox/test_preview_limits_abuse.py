"""The per-user limits on starting rollouts, tried on every path that starts them (issue 27): the preview form, the
API's previews, Run gates (its page and the API) and the example answers that run in the sandbox (a version saved,
"Grade again" on the task page and through the API). test_limits_abuse.py holds the form's and the API's; here the
others, each held to both limits: the cap on rollouts in flight (GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT) and the rate of
starts (GYMWRIGHT_PREVIEW_RATE).

Found: a sandbox run of example answers counted against the cap but not the rate, and "Grade again" replaces the
version's run, so an author could start the sandbox again and again (each time the last run finished) without
limit. Each such run now counts as a start, kept in the audit log where a replaced run cannot take it away.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from authoring import services as authoring_services
from authoring.models import AuditEvent
from grading.models import ExampleRun
from sandbox import services
from sandbox.models import PreviewRun
from tests.sandbox.factories import make_task
from tests.sandbox.test_example_answers_sandbox import coding_task_with_examples

pytestmark = pytest.mark.django_db


def previews_url(version):
    return f"/api/tasks/{version.task.slug}/versions/{version.number}/previews/"


def grade_again_page(version):
    return f"/grading/tasks/{version.task.slug}/versions/{version.number}/examples/run/"


def grade_again_api(version):
    return f"/api/tasks/{version.task.slug}/versions/{version.number}/examples/run/"


def example_run(version) -> ExampleRun:
    return ExampleRun.objects.get(task_version=version)


def finish(version) -> None:
    """The version's run of example answers graded (as a sandbox worker would leave it)."""
    ExampleRun.objects.filter(task_version=version).update(status=ExampleRun.Status.DONE, finished_at=timezone.now())


def test_run_gates_is_held_to_the_cap_on_rollouts_in_flight(api, version, author, client, settings, enqueued):
    """The page starts what fits (oracle ×3) and says why it stopped; the API refuses what does not fit (429)."""
    settings.PREVIEW_MAX_ROLLOUTS_IN_FLIGHT = 4
    client.force_login(author)
    page = client.post(f"/tasks/{version.task.slug}/gates/run/", follow=True).content.decode()
    assert "GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT" in page
    assert list(PreviewRun.objects.filter(created_by=author).values_list("policy", "n")) == [("oracle", 3)]
    response = api.post(f"/api/tasks/{version.task.slug}/versions/{version.number}/gates/run/")
    assert response.status_code == 429, response.content
    assert response.json()["error"]["code"] == "too_many_rollouts"
    assert PreviewRun.objects.filter(created_by=author).count() == 1


def test_a_sandbox_run_of_examples_counts_against_the_cap_on_every_path(api, author, client, settings):
    """The cap counts a sandbox run of example answers against previews, and previews against "Grade again" (the
    page's and the API's): over it the run fails at once saying so, and nothing is sent to a worker."""
    settings.PREVIEW_MAX_ROLLOUTS_IN_FLIGHT = 4
    version = coding_task_with_examples(author).latest_version
    assert example_run(version).status == ExampleRun.Status.QUEUED  # 3 rollouts in flight
    refused = api.post(previews_url(version), {"policy": "nop", "n": 2}, format="json")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_rollouts"

    finish(version)
    assert api.post(previews_url(version), {"policy": "nop", "n": 2}, format="json").status_code == 201
    client.force_login(author)
    assert client.post(grade_again_page(version)).status_code == 302
    run = example_run(version)
    assert run.status == ExampleRun.Status.ERROR and run.error.startswith("Not graded: You have 2 rollouts queued")
    response = api.post(grade_again_api(version))
    assert response.status_code == 202 and response.json()["status"] == "error", response.content
    assert "GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT" in example_run(version).error

    for preview_run in PreviewRun.objects.filter(created_by=author):
        services.preview_run_cancel(preview_run=preview_run, user=author)
    assert client.post(grade_again_page(version)).status_code == 302
    assert example_run(version).status == ExampleRun.Status.QUEUED


def test_a_sandbox_run_of_examples_counts_against_the_rate_on_every_path(api, author, client, settings, enqueued):
    """Each sandbox run of example answers is a start, whichever path made it (a version saved, "Grade again" on
    the page and through the API), and counts with the previews'; "Grade again" replacing the run does not take
    its start away. Over the rate a run fails at once saying so, and a preview is refused (429)."""
    settings.PREVIEW_RATE = "3/hour"
    task = coding_task_with_examples(author)
    version = task.latest_version
    assert example_run(version).status == ExampleRun.Status.QUEUED  # 1: the version saved
    finish(version)
    client.force_login(author)
    assert client.post(grade_again_page(version)).status_code == 302  # 2: the page's "Grade again"
    assert example_run(version).status == ExampleRun.Status.QUEUED
    finish(version)
    assert api.post(grade_again_api(version)).status_code == 202  # 3: the API's
    assert example_run(version).status == ExampleRun.Status.QUEUED
    finish(version)
    assert ExampleRun.objects.filter(task_version__task=task).count() == 1  # each run replaced the last

    refused = api.post(previews_url(version), {"policy": "nop", "n": 1}, format="json")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "throttled"
    assert int(refused["Retry-After"]) > 0
    assert client.post(grade_again_page(version)).status_code == 302
    run = example_run(version)
    assert run.status == ExampleRun.Status.ERROR and "GYMWRIGHT_PREVIEW_RATE: 3/hour" in run.error, run.error
    response = api.post(grade_again_api(version))
    assert response.status_code == 202 and response.json()["status"] == "error"
    assert "GYMWRIGHT_PREVIEW_RATE" in example_run(version).error
    saved, _ = authoring_version(task, author)
    assert example_run(saved).status == ExampleRun.Status.ERROR and "GYMWRIGHT_PREVIEW_RATE" in example_run(saved).error
    assert AuditEvent.objects.filter(actor=author, verb=AuditEvent.Verb.PREVIEW).count() == 3  # refusals: no start

    # the window: starts older than the hour no longer count
    AuditEvent.objects.filter(actor=author).update(created_at=timezone.now() - timedelta(hours=1, seconds=1))
    assert client.post(grade_again_page(saved)).status_code == 302
    assert example_run(saved).status == ExampleRun.Status.QUEUED


def test_previews_count_against_the_rate_of_sandbox_runs_of_examples(api, author, settings, enqueued):
    settings.PREVIEW_RATE = "2/hour"
    other = make_task(author=author, slug="other-task")
    for _ in range(2):
        assert api.post(previews_url(other.latest_version), {"policy": "nop", "n": 1}, format="json").status_code == 201
    version = coding_task_with_examples(author).latest_version
    run = example_run(version)
    assert run.status == ExampleRun.Status.ERROR and run.error.startswith("Not graded: You have started 2 previews")


def authoring_version(task, author):
    """A new version of `task` saved by `author` (its example answers are graded anew, as on every save)."""
    task.refresh_from_db()
    content = {**authoring_services.task_version_content(task.latest_version), "title": "Fizzbuzz, retitled"}
    return authoring_services.task_version_create(
        task=task, author=author, content=content, base_version=task.latest_version.number
    )
