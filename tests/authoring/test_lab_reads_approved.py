"""A lab member reads approved work only: tasks a reviewer approved and, of them, the approved versions,
with their previews, grades and reviews. Drafts stay unseen (404, as if they did not exist), the review
workspace is refused (403) and nothing can be started. Authors, reviewers and admins read everything."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from authoring import services
from grading import engine
from grading.services import grade_record
from review.models import Review
from review.services import versions_approve_on_import
from sandbox.models import PreviewRun, Rollout
from tests.authoring.conftest import task_content


def _graded(version, user, source: str, rollout_id: int | None = None):
    rubric = engine.parse_task(version.spec).rubric
    return grade_record(
        grade=engine.grade(rubric, answer="42", workspace=None, judge=None, sandbox=None),
        task_version=version,
        source=source,
        user=user,
        rollout_id=rollout_id,
    )


def _preview(version, user) -> tuple[PreviewRun, Rollout]:
    run = PreviewRun.objects.create(task_version=version, created_by=user, policy="oracle", n=1, backend="bubblewrap")
    rollout = Rollout.objects.create(preview_run=run, index=0, status=Rollout.Status.DONE)
    rollout.grade = _graded(version, user, "rollout", rollout.pk)
    Rollout.objects.filter(pk=rollout.pk).update(grade=rollout.grade)
    return run, rollout


@pytest.fixture
def world(author, admin, environment):
    """`shipped`: v1 approved, then a v2 draft with a new title and a request for changes; `secret`: a draft only.
    Each version of `shipped` has a graded preview rollout and a dry run's grade of its author's."""
    shipped = services.task_create(
        slug="shipped-task",
        environment=environment,
        author=author,
        content=task_content(title="Shipped title", prompt="Approved prompt ALPHA"),
    )
    v1 = shipped.latest_version
    versions_approve_on_import(versions=[v1], admin=admin)
    shipped.refresh_from_db()
    v2, _ = services.task_version_create(
        task=shipped,
        author=author,
        base_version=1,
        message="draft note EPSILON",
        content=task_content(title="Renamed draft THETA", prompt="Draft prompt BETA"),
    )
    Review.objects.create(
        task_version=v2, reviewer=admin, decision=Review.Decision.REQUEST_CHANGES, comment="draft review GAMMA"
    )
    secret = services.task_create(
        slug="secret-draft", environment=environment, author=author, content=task_content(title="Secret draft DELTA")
    )
    previews = {1: _preview(v1, author), 2: _preview(v2, author)}
    grades = {number: rollout.grade for number, (_, rollout) in previews.items()}
    dry_run_grades = {1: _graded(v1, author, "dry_run"), 2: _graded(v2, author, "dry_run")}
    return {
        "shipped": shipped,
        "v1": v1,
        "v2": v2,
        "secret": secret,
        "grades": grades,
        "previews": previews,
        "dry_run_grades": dry_run_grades,
    }


@pytest.fixture
def lab_client(client, lab):
    client.force_login(lab)
    return client


@pytest.fixture
def lab_api(lab):
    api = APIClient()
    api.force_authenticate(lab)
    return api


def test_the_task_list_shows_a_lab_member_approved_tasks_only(lab_client, lab_api, world):
    page = lab_client.get("/").content.decode()
    assert "shipped-task" in page and "secret-draft" not in page and "Secret draft DELTA" not in page
    rows = lab_api.get("/api/tasks/").json()["results"]
    assert [row["slug"] for row in rows] == ["shipped-task"]
    assert rows[0]["latest_version"] == 1  # the newest version they may read, not the v2 draft
    environment = lab_client.get(f"/environments/{world['shipped'].environment.slug}/").content.decode()
    assert "shipped-task" in environment and "secret-draft" not in environment


def test_an_author_still_sees_every_task_and_the_latest_draft(client, author, world):
    client.force_login(author)
    page = client.get("/").content.decode()
    assert "shipped-task" in page and "secret-draft" in page
    page = client.get("/tasks/shipped-task/").content.decode()
    assert "Draft prompt BETA" in page and "draft note EPSILON" in page


def test_a_draft_task_is_not_found_for_a_lab_member(lab_client, lab_api, world):
    assert lab_client.get("/tasks/secret-draft/").status_code == 404
    assert lab_api.get("/api/tasks/secret-draft/").status_code == 404
    assert lab_api.get("/api/tasks/secret-draft/versions/1/").status_code == 404


def test_a_lab_member_reads_the_approved_version_not_the_later_draft(lab_client, lab_api, world):
    page = lab_client.get("/tasks/shipped-task/").content.decode()
    assert "Approved prompt ALPHA" in page and "Draft prompt BETA" not in page
    assert "draft review GAMMA" not in page  # reviews of the draft are not shown either
    assert "draft note EPSILON" not in page and "shipped-task v1" in page  # nor its line in the activity list
    assert 'name="policy"' not in page  # no preview start form: a lab member starts nothing
    assert lab_api.get("/api/tasks/shipped-task/").json()["latest_version"] == 1
    assert [v["number"] for v in lab_api.get("/api/tasks/shipped-task/versions/").json()["results"]] == [1]
    history = lab_client.get("/tasks/shipped-task/versions/").content.decode()
    assert "Draft prompt BETA" not in history and "/tasks/shipped-task/versions/2/" not in history
    assert lab_api.get("/api/tasks/shipped-task/versions/1/").status_code == 200
    assert lab_api.get("/api/tasks/shipped-task/versions/2/").status_code == 404
    assert lab_client.get("/tasks/shipped-task/versions/2/").status_code == 404
    assert lab_client.get("/tasks/shipped-task/diff/?a=1&b=2").status_code == 404


def test_previews_and_grades_of_the_draft_are_not_found_for_a_lab_member(lab_client, lab_api, world):
    (run1, rollout1), (run2, rollout2) = world["previews"][1], world["previews"][2]
    assert lab_api.get(f"/api/previews/{run1.pk}/").status_code == 200
    assert lab_api.get(f"/api/previews/{run2.pk}/").status_code == 404
    assert lab_api.get(f"/api/rollouts/{rollout1.pk}/").status_code == 200
    assert lab_api.get(f"/api/rollouts/{rollout2.pk}/").status_code == 404
    assert lab_client.get(f"/previews/{run2.pk}/").status_code == 404
    assert lab_client.get(f"/previews/rollouts/{rollout2.pk}/").status_code == 404
    assert lab_api.get(f"/api/grades/{world['grades'][1].pk}/").status_code == 200
    assert lab_api.get(f"/api/grades/{world['grades'][2].pk}/").status_code == 404
    previews = lab_client.get("/previews/tasks/shipped-task/").content.decode()
    assert f"/previews/{run1.pk}/" in previews and f"/previews/{run2.pk}/" not in previews


def test_a_lab_member_starts_no_preview_and_is_refused_the_review_workspace(lab_client, lab_api, world):
    response = lab_api.post("/api/tasks/shipped-task/versions/1/previews/", {"policy": "oracle", "n": 1}, format="json")
    assert response.status_code == 403
    assert "authors, reviewers and admins" in response.json()["error"]["message"]
    assert not PreviewRun.objects.filter(created_by__username="lena").exists()
    review = lab_client.get("/review/tasks/shipped-task/")
    assert review.status_code == 403 and b"lab member reads approved tasks" in review.content
    assert lab_api.get("/api/tasks/shipped-task/comments/").status_code == 403
    assert (
        lab_api.post("/api/tasks/shipped-task/comments/", {"body": "hi", "check_id": ""}, format="json").status_code
        == 403
    )


def test_the_tag_filter_offers_a_lab_member_the_tags_of_approved_tasks_only(client, author, lab, world):
    services.task_version_create(
        task=world["secret"],
        author=author,
        base_version=1,
        content=task_content(title="Secret draft DELTA", tags=["maths", "secret-tag-zeta"]),
    )
    options = {}
    for user in (author, lab):
        client.force_login(user)
        client.get("/")
        with CaptureQueriesContext(connection) as queries:
            page = client.get("/").content.decode()
        options[user.username] = (
            re.findall(r"<option(?: selected)?>([^<]*)</option>", page.split('name="tag"')[1].split("</select>")[0]),
            len(queries),
        )
    assert options["alice"][0] == ["maths", "secret-tag-zeta"]
    assert options["lena"][0] == ["maths"]  # shipped-task's; the draft's own tag is not named
    assert options["lena"][1] == options["alice"][1]  # the same queries, each reader's own


def _listed(client, url: str) -> list[str]:
    """The task slugs the task list at `url` links."""
    return re.findall(r'<a href="/tasks/([a-z0-9-]+)/"><strong>', client.get(url).content.decode())


def test_a_lab_member_is_shown_and_searches_the_approved_title_never_a_later_drafts(lab_client, lab_api, world):
    """The head's title follows every new version: the list, the search, the task page, the preview pages and
    the API showed a lab member the title of a draft no reviewer approved, and found the task by its words."""
    (run1, rollout1) = world["previews"][1]
    for url in (
        "/",
        "/?q=shipped+title",
        "/tasks/shipped-task/",
        f"/previews/{run1.pk}/",
        f"/previews/rollouts/{rollout1.pk}/",
    ):
        page = lab_client.get(url).content.decode()
        assert "Shipped title" in page and "THETA" not in page, url
    for url in ("/api/tasks/", "/api/tasks/?q=shipped+title"):
        assert [(row["slug"], row["title"]) for row in lab_api.get(url).json()["results"]] == [
            ("shipped-task", "Shipped title")
        ], url
    assert lab_api.get("/api/tasks/shipped-task/").json()["title"] == "Shipped title"
    # words only the draft's title has find nothing
    assert _listed(lab_client, "/?q=theta") == [] and _listed(lab_client, "/?q=renamed+draft") == []
    assert lab_api.get("/api/tasks/?q=THETA").json()["count"] == 0


def test_an_author_is_shown_and_searches_the_latest_title(client, author, world):
    client.force_login(author)
    assert _listed(client, "/?q=theta") == ["shipped-task"] and _listed(client, "/?q=shipped+title") == []
    page = client.get("/tasks/shipped-task/").content.decode()
    assert "Renamed draft THETA" in page


def test_a_review_that_approves_a_later_version_shows_a_lab_member_its_title(lab_api, author, admin, reviewer, world):
    """The other way a version is approved (a reviewer's review; the fixture's v1 was approved on import), and a
    draft after it that the lab member is not shown."""
    from review import services as review_services

    shipped = world["shipped"]
    review_services.task_submit(task=shipped, user=admin, override_reason="tests: no previews")
    review_services.review_create(task_version=world["v2"], reviewer=reviewer, decision="approve")
    assert lab_api.get("/api/tasks/shipped-task/").json()["title"] == "Renamed draft THETA"
    shipped.refresh_from_db()
    services.task_version_create(
        task=shipped,
        author=author,
        base_version=2,
        content=task_content(title="Third title IOTA", prompt="Draft prompt KAPPA"),
    )
    assert [row["title"] for row in lab_api.get("/api/tasks/").json()["results"]] == ["Renamed draft THETA"]
    assert lab_api.get("/api/tasks/?q=iota").json()["count"] == 0
    assert lab_api.get("/api/tasks/?q=theta").json()["count"] == 1


def test_the_migration_fills_each_approved_title_from_its_approved_versions_spec(world):
    import importlib

    from django.apps import apps

    from authoring.models import Task

    migration = importlib.import_module("authoring.migrations.0008_task_approved_title")
    Task.objects.update(approved_title="")
    migration.approved_titles_fill(apps, None)  # (it uses no schema editor, which SQLite cannot open in a transaction)
    assert dict(Task.objects.values_list("slug", "approved_title")) == {
        "shipped-task": "Shipped title",
        "secret-draft": "",
    }


def test_a_dry_runs_grade_is_its_authors_and_an_admins_only(client, author, other_author, reviewer, admin, lab, world):
    """A dry run grades the rubric as it was in its author's editor (unsaved): its grade is the dry run's, as the
    dry run itself is (`/grading/dry-run/<id>/`), whatever version the panel sat on, even an approved one."""
    api = APIClient()
    for user, expected in ((author, 200), (admin, 200), (other_author, 404), (reviewer, 404), (lab, 404)):
        client.force_login(user)
        api.force_authenticate(user)
        for number, grade in world["dry_run_grades"].items():
            assert client.get(f"/grading/grades/{grade.pk}/").status_code == expected, (user.username, number)
            assert api.get(f"/api/grades/{grade.pk}/").status_code == expected, (user.username, number)


def test_a_preview_rollouts_grade_follows_its_task_version(client, other_author, reviewer, lab, world):
    api = APIClient()
    for user, readable in ((other_author, {1, 2}), (reviewer, {1, 2}), (lab, {1})):
        client.force_login(user)
        api.force_authenticate(user)
        for number, grade in world["grades"].items():
            expected = 200 if number in readable else 404
            assert client.get(f"/grading/grades/{grade.pk}/").status_code == expected, (user.username, number)
            assert api.get(f"/api/grades/{grade.pk}/").status_code == expected, (user.username, number)
