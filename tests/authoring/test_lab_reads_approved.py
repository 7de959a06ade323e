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


def _preview(version, user) -> tuple[PreviewRun, Rollout]:
    run = PreviewRun.objects.create(task_version=version, created_by=user, policy="oracle", n=1, backend="bubblewrap")
    return run, Rollout.objects.create(preview_run=run, index=0)


@pytest.fixture
def world(author, admin, environment):
    """`shipped`: v1 approved, then a v2 draft with a request for changes; `secret`: a draft only."""
    shipped = services.task_create(slug="shipped-task", environment=environment, author=author,
                                   content=task_content(title="Shipped title", prompt="Approved prompt ALPHA"))
    v1 = shipped.latest_version
    versions_approve_on_import(versions=[v1], admin=admin)
    shipped.refresh_from_db()
    v2, _ = services.task_version_create(task=shipped, author=author, base_version=1, message="draft note EPSILON",
                                         content=task_content(title="Shipped title", prompt="Draft prompt BETA"))
    Review.objects.create(task_version=v2, reviewer=admin, decision=Review.Decision.REQUEST_CHANGES,
                          comment="draft review GAMMA")
    secret = services.task_create(slug="secret-draft", environment=environment, author=author,
                                  content=task_content(title="Secret draft DELTA"))
    rubric = engine.parse_task(v1.spec).rubric
    grades = {number: grade_record(grade=engine.grade(rubric, answer="42", workspace=None, judge=None, sandbox=None),
                                   task_version=version, source="dry_run", user=author)
              for number, version in ((1, v1), (2, v2))}
    previews = {1: _preview(v1, author), 2: _preview(v2, author)}
    return {"shipped": shipped, "v1": v1, "v2": v2, "secret": secret, "grades": grades, "previews": previews}


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
    response = lab_api.post("/api/tasks/shipped-task/versions/1/previews/", {"policy": "oracle", "n": 1},
                            format="json")
    assert response.status_code == 403
    assert "authors, reviewers and admins" in response.json()["error"]["message"]
    assert not PreviewRun.objects.filter(created_by__username="lena").exists()
    review = lab_client.get("/review/tasks/shipped-task/")
    assert review.status_code == 403 and b"lab member reads approved tasks" in review.content
    assert lab_api.get("/api/tasks/shipped-task/comments/").status_code == 403
    assert lab_api.post("/api/tasks/shipped-task/comments/", {"body": "hi", "check_id": ""},
                        format="json").status_code == 403


def test_the_tag_filter_offers_a_lab_member_the_tags_of_approved_tasks_only(client, author, lab, world):
    services.task_version_create(task=world["secret"], author=author, base_version=1, content=task_content(
        title="Secret draft DELTA", tags=["maths", "secret-tag-zeta"]))
    options = {}
    for user in (author, lab):
        client.force_login(user)
        client.get("/")
        with CaptureQueriesContext(connection) as queries:
            page = client.get("/").content.decode()
        options[user.username] = (re.findall(r"<option(?: selected)?>([^<]*)</option>",
                                             page.split('name="tag"')[1].split("</select>")[0]), len(queries))
    assert options["alice"][0] == ["maths", "secret-tag-zeta"]
    assert options["lena"][0] == ["maths"]  # shipped-task's; the draft's own tag is not named
    assert options["lena"][1] == options["alice"][1]  # the same queries, each reader's own
