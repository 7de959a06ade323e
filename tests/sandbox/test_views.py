"""Preview pages: start form, live progress fragment, rollout viewer, cancel, permissions."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sandbox import services, worker
from sandbox.models import PreviewRun
from tests.sandbox.factories import make_task
from tests.sandbox.test_services import WITH_BINARY


@pytest.fixture
def client_author(client, author):
    client.force_login(author)
    return client


def start_url(version):
    return reverse("sandbox:preview_start", args=[version.task.slug, version.number])


def test_the_task_page_has_the_preview_form_and_lists_recent_runs(client_author, version, author):
    services.preview_run_create(task_version=version, user=author, policy="nop", n=2)
    page = client_author.get(reverse("authoring:task_detail", args=[version.task.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    assert f'action="{start_url(version)}"' in html and 'name="policy"' in html and 'name="n"' in html
    assert 'name="probe_text"' in html and "nop" in html and "0/2" in html


def test_starting_a_preview_redirects_to_its_live_page(client_author, version):
    response = client_author.post(start_url(version), {"policy": "oracle", "n": "3"})
    preview_run = PreviewRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("sandbox:preview_detail", args=[preview_run.pk])
    assert preview_run.n == 3 and preview_run.rollouts.count() == 3
    page = client_author.get(response.url).content.decode()
    assert 'hx-trigger="every 1s"' in page and "0/3" in page and 'id="cancel-form"' in page


@pytest.mark.parametrize(
    "data, message",
    [
        ({"policy": "oracle", "n": "0"}, "N must be from 1 to 64."),
        ({"policy": "oracle", "n": "65"}, "N must be from 1 to 64."),
        ({"policy": "oracle", "n": "lots"}, "N must be a whole number from 1 to 64."),
        ({"policy": "sudo", "n": "1"}, "Select a valid choice"),
        ({"policy": "model", "n": "1"}, "No policy model is configured"),
    ],
)
def test_bad_input_is_a_form_error_not_a_crash(client_author, version, data, message, settings):
    settings.OPENAI_BASE_URL = ""
    response = client_author.post(start_url(version), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not PreviewRun.objects.exists()


def test_a_probe_preview_takes_its_text_from_the_form(client_author, version):
    client_author.post(start_url(version), {"policy": "probe", "probe_text": "Thought process:", "n": "1"})
    assert PreviewRun.objects.get().policy == "probe:Thought process:"


def test_the_progress_fragment_stops_polling_when_the_run_is_finished(sandbox_dir, client_author, version, author):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=1)
    url = reverse("sandbox:preview_progress", args=[preview_run.pk])
    assert 'hx-trigger="every 1s"' in client_author.get(url).content.decode()
    assert worker.rollout_execute(rollout_id=preview_run.rollouts.get().pk) == "done"  # a real bubblewrap rollout
    html = client_author.get(url).content.decode()
    assert "hx-trigger" not in html and 'data-count="done">1<' in html
    assert "the reference solution passes" in html and "1.000" in html


def test_a_rollout_shows_its_trajectory_beside_its_grade(sandbox_dir, client_author, author):
    version = make_task(author=author, script=WITH_BINARY).latest_version
    preview_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"  # a real bubblewrap rollout
    url = reverse("sandbox:rollout_detail", args=[rollout.pk])
    fragment = client_author.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and "<details" in fragment
    assert "echo 42 &gt; answer.txt" in fragment and "exit code: 0" in fragment  # a tool call's input and output
    assert 'data-check-id="says_42"' in fragment and "contains &#x27;42&#x27;" in fragment  # grade + explanation
    assert "answer.txt" in fragment and "Binary or too large" in fragment  # workspace files
    page = client_author.get(reverse("sandbox:preview_detail", args=[preview_run.pk]) + f"?rollout={rollout.pk}")
    assert 'data-check-id="report_exists"' in page.content.decode()
    assert client_author.get(url).status_code == 200  # a page of its own without htmx


def test_cancel_from_the_page(client_author, version, author):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="nop", n=2)
    response = client_author.post(reverse("sandbox:preview_cancel", args=[preview_run.pk]))
    assert response.status_code == 302
    preview_run.refresh_from_db()
    assert preview_run.status == "cancelled" and set(preview_run.rollouts.values_list("status", flat=True)) == {
        "cancelled"
    }


def test_members_without_a_role_see_nothing(client, nobody, version, author):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="nop", n=1)
    client.force_login(nobody)
    for url in (
        reverse("sandbox:preview_detail", args=[preview_run.pk]),
        reverse("sandbox:preview_progress", args=[preview_run.pk]),
        reverse("sandbox:rollout_detail", args=[preview_run.rollouts.get().pk]),
    ):
        assert client.get(url).status_code == 404
    assert client.post(start_url(version), {"policy": "nop", "n": "1"}).status_code == 404
    assert client.post(reverse("sandbox:preview_cancel", args=[preview_run.pk])).status_code == 404
    assert PreviewRun.objects.count() == 1 and not PreviewRun.objects.get().cancel_requested


def test_anonymous_visitors_are_sent_to_log_in(client, version):
    response = client.get(start_url(version))
    assert response.status_code == 302 and "/accounts/login/" in response.url


def test_tool_results_are_shown_under_their_call():
    from sandbox.selectors import trajectory_steps

    steps = trajectory_steps(TRAJECTORY)
    assert [s["role"] for s in steps] == ["system", "user", "assistant", "assistant"]
    bash = steps[2]["calls"][0]
    assert bash["name"] == "bash" and '"command": "echo 42 > answer.txt"' in bash["input"]
    assert bash["output"] == "exit code: 0" and bash["exec"]["exit_code"] == 0
    orphan = trajectory_steps([{"role": "tool", "tool_call_id": "nope", "name": "bash", "content": "hi"}])
    assert orphan[0]["output"] == "hi"


def test_the_task_pages_preview_list_polls_only_while_a_run_is_unfinished(client_author, version, author):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="nop", n=1)
    url = reverse("sandbox:task_previews", args=[version.task.slug])
    assert 'hx-trigger="every 2s"' in client_author.get(url).content.decode()
    services.preview_run_cancel(preview_run=preview_run, user=author)
    html = client_author.get(url).content.decode()
    assert "hx-trigger" not in html and "Cancelled" in html


def test_the_admin_lists_and_shows_previews_and_rollouts(client, version, author, django_user_model):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="nop", n=2)
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    rollout = preview_run.rollouts.first()
    for url in (
        "/admin/sandbox/previewrun/",
        f"/admin/sandbox/previewrun/{preview_run.pk}/change/",
        "/admin/sandbox/rollout/",
        f"/admin/sandbox/rollout/{rollout.pk}/change/",
        "/admin/grading/modelendpoint/",
        "/admin/grading/modelendpoint/add/",
    ):
        assert client.get(url).status_code == 200, url


def test_the_model_policy_is_offered_only_when_a_policy_model_is_configured(client_author, version, settings):
    settings.OPENAI_BASE_URL = ""
    html = client_author.get(reverse("authoring:task_detail", args=[version.task.slug])).content.decode()
    assert '<option value="model" disabled>' in html
    assert "no policy model is configured" in html and "GYMWRIGHT_POLICY_MODEL" in html

    settings.OPENAI_BASE_URL, settings.POLICY_MODEL = "http://127.0.0.1:9/v1", "policy"
    html = client_author.get(reverse("authoring:task_detail", args=[version.task.slug])).content.decode()
    assert '<option value="model">' in html and "no policy model is configured" not in html


def test_the_preview_form_offers_a_backend_choice_only_when_several_are_enabled(client_author, version, settings):
    settings.SANDBOX_BACKEND, settings.SANDBOX_BACKENDS_ALLOWED = "bubblewrap", ["bubblewrap"]
    assert 'name="backend"' not in client_author.get(start_url(version)).content.decode()

    settings.SANDBOX_BACKENDS_ALLOWED = ["docker", "bubblewrap"]
    html = client_author.get(start_url(version)).content.decode()
    assert '<option value="bubblewrap" selected>' in html and '<option value="docker">' in html
    client_author.post(start_url(version), {"policy": "nop", "n": "1", "backend": "docker"})
    assert PreviewRun.objects.get().backend == "docker"
    response = client_author.post(start_url(version), {"policy": "nop", "n": "1", "backend": "firecracker"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()


def test_the_preview_form_says_when_bubblewrap_would_not_use_the_environments_image(
    client_author, author, version, settings
):
    """bubblewrap runs a rollout on the server's own system: an environment built from a Dockerfile or an image
    is what ships only on docker, and the form says so before a preview is read as the task's behaviour."""
    from authoring import services as authoring_services
    from tests.sandbox.factories import make_task

    settings.SANDBOX_BACKEND, settings.SANDBOX_BACKENDS_ALLOWED = "bubblewrap", ["bubblewrap"]
    assert 'id="backend-image-note"' not in client_author.get(start_url(version)).content.decode()

    authoring_services.environment_create(
        slug="built",
        name="built",
        author=author,
        spec={
            "network": "none",
            "dockerfile": "FROM busybox\nRUN mkdir /app && echo hi > /app/data.txt\nWORKDIR /app\n",
        },
    )
    built = make_task(author=author, slug="built-task", environment_slug="built").latest_version
    html = client_author.get(start_url(built)).content.decode()
    assert 'id="backend-image-note"' in html and "the Dockerfile's steps are not run" in html
    assert "Choose docker" not in html  # not offered here
    html = client_author.get(reverse("authoring:task_detail", args=["built-task"])).content.decode()
    assert 'id="backend-image-note"' in html

    settings.SANDBOX_BACKENDS_ALLOWED = ["bubblewrap", "docker"]
    assert "Choose docker to preview it as it ships" in client_author.get(start_url(built)).content.decode()
    settings.SANDBOX_BACKEND, settings.SANDBOX_BACKENDS_ALLOWED = "docker", ["docker"]
    assert 'id="backend-image-note"' not in client_author.get(start_url(built)).content.decode()


#: A two-step episode as the harness records it (the shape `trajectory_steps` reads).
TRAJECTORY = [
    {"role": "system", "content": "You are an agent working in a Linux sandbox."},
    {"role": "user", "content": "What is six times seven?"},
    {
        "role": "assistant",
        "step": 1,
        "content": None,
        "usage": None,
        "duration_ms": 1,
        "tool_calls": [{"id": "c1", "name": "bash", "arguments": '{"command": "echo 42 > answer.txt"}'}],
    },
    {
        "role": "tool",
        "step": 1,
        "tool_call_id": "c1",
        "name": "bash",
        "arguments": '{"command": "echo 42 > answer.txt"}',
        "content": "exit code: 0",
        "is_error": False,
        "duration_ms": 12,
        "exec": {"exit_code": 0, "timed_out": False, "oom_killed": False},
    },
    {
        "role": "assistant",
        "step": 2,
        "content": None,
        "usage": None,
        "duration_ms": 1,
        "tool_calls": [{"id": "c2", "name": "submit", "arguments": '{"answer": "42"}'}],
    },
    {
        "role": "tool",
        "step": 2,
        "tool_call_id": "c2",
        "name": "submit",
        "arguments": '{"answer": "42"}',
        "content": "submitted",
        "is_error": False,
        "duration_ms": 0,
        "exec": None,
    },
]
