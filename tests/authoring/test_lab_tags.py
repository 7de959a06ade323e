"""A lab member is shown, filters by and sorts on the approved version's tags, status and time: Task.tags, Task.status
and Task.updated_at follow every new draft, so the task list, its tag menu and `?tag=` filter, the task page and
`/api/tasks/` showed a lab member tags only a draft had ("Draft" for an approved task with a newer draft), and found
tasks by them. The titles: tests/authoring/test_lab_reads_approved.py."""

from __future__ import annotations

import importlib
import re

import pytest
from django.apps import apps
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from authoring import services
from authoring.models import AuditEvent, Task
from review import services as review_services
from review.services import versions_approve_on_import
from tests.authoring.conftest import task_content

APPROVED_TAGS = ["approved-only", "maths"]
DRAFT_TAGS = ["maths", "secret-draft-tag"]  # v2 adds secret-draft-tag and drops approved-only


@pytest.fixture
def world(author, admin, environment):
    """`tagged`: v1 (APPROVED_TAGS) approved on import, then a v2 draft with DRAFT_TAGS; `plain`: approved after it."""
    tagged = services.task_create(
        slug="tagged-task",
        environment=environment,
        author=author,
        content=task_content(title="Tagged", tags=APPROVED_TAGS),
    )
    versions_approve_on_import(versions=[tagged.latest_version], admin=admin)
    plain = services.task_create(
        slug="plain-task", environment=environment, author=author, content=task_content(title="Plain", tags=[])
    )
    versions_approve_on_import(versions=[plain.latest_version], admin=admin)
    tagged.refresh_from_db()
    services.task_version_create(
        task=tagged, author=author, base_version=1, content=task_content(title="Tagged", tags=DRAFT_TAGS)
    )
    return {"tagged": Task.objects.get(slug="tagged-task"), "plain": Task.objects.get(slug="plain-task")}


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _rows(client, url: str) -> dict[str, tuple[str, list[str]]]:
    """The task list at `url`: each row's slug, its status badge and its tag badges."""
    page = client.get(url).content.decode()
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S):
        slug = re.search(r'<a href="/tasks/([a-z0-9-]+)/"><strong>', row)
        if slug:
            cells = re.findall(r'<td class="long-text">(.*?)</td>', row, flags=re.S)
            rows[slug[1]] = (
                re.search(r'<span class="badge ([a-z_]+)">', row)[1],
                re.findall(r'<span class="badge">([^<]*)</span>', cells[2]),
            )
    return rows


def _tag_options(client) -> list[str]:
    page = client.get("/").content.decode()
    return re.findall(r"<option(?: selected)?>([^<]*)</option>", page.split('name="tag"')[1].split("</select>")[0])


def test_a_lab_members_list_shows_and_filters_by_the_approved_tags_and_status(client, lab, world):
    client.force_login(lab)
    assert _rows(client, "/")["tagged-task"] == ("approved", APPROVED_TAGS)
    assert _tag_options(client) == APPROVED_TAGS  # the draft's tag is not offered
    assert _rows(client, "/?tag=secret-draft-tag") == {}
    assert list(_rows(client, "/?tag=approved-only")) == ["tagged-task"]
    assert list(_rows(client, "/?tag=approved-only&q=tagged")) == ["tagged-task"]  # the search's own query
    assert _rows(client, "/?tag=secret-draft-tag&q=tagged") == {}
    # the status menu: what a lab member is shown; the draft's place in review finds nothing
    assert list(_rows(client, "/?status=approved")) == ["plain-task", "tagged-task"]
    assert _rows(client, "/?status=draft") == {} and _rows(client, "/?status=draft&q=task") == {}
    page = client.get("/").content.decode()
    statuses = re.findall(r'<option value="([a-z_]+)"', page.split('name="status"')[1].split("</select>")[0])
    assert statuses == ["approved", "archived"]


def test_a_lab_members_api_and_task_page_show_the_approved_tags_status_and_time(client, lab, world):
    api = _api(lab)
    approved_at = world["tagged"].approved_at
    assert approved_at is not None and world["tagged"].updated_at > approved_at  # the draft came after
    rows = {row["slug"]: row for row in api.get("/api/tasks/").json()["results"]}
    detail = api.get("/api/tasks/tagged-task/").json()
    for shown in (rows["tagged-task"], detail):
        assert (shown["tags"], shown["status"]) == (APPROVED_TAGS, "approved")
        assert parse_datetime(shown["updated_at"]) == approved_at
    assert [row["slug"] for row in api.get("/api/tasks/?tag=approved-only").json()["results"]] == ["tagged-task"]
    assert api.get("/api/tasks/?tag=secret-draft-tag").json()["count"] == 0
    assert api.get("/api/tasks/?status=draft").json()["count"] == 0
    client.force_login(lab)
    page = client.get("/tasks/tagged-task/").content.decode()
    assert "secret-draft-tag" not in page and '<span class="badge">approved-only</span>' in page
    assert '<span class="badge approved">Approved</span>' in page and "v1 approved" in page
    assert '<span class="badge draft">' not in page


def test_a_lab_members_list_is_in_order_of_approval(client, lab, author, world):
    """`tagged-task` was approved first; its draft made it the latest update, which a lab member is not shown."""
    client.force_login(lab)
    assert list(_rows(client, "/")) == ["plain-task", "tagged-task"]
    assert [row["slug"] for row in _api(lab).get("/api/tasks/").json()["results"]] == ["plain-task", "tagged-task"]
    assert list(_rows(client, "/?q=task")) == ["plain-task", "tagged-task"]
    client.force_login(author)
    assert list(_rows(client, "/")) == ["tagged-task", "plain-task"]


def test_an_author_still_sees_and_filters_by_the_drafts_tags_and_status(client, author, world):
    client.force_login(author)
    assert _rows(client, "/")["tagged-task"] == ("draft", DRAFT_TAGS)
    assert "secret-draft-tag" in _tag_options(client)
    assert list(_rows(client, "/?tag=secret-draft-tag")) == ["tagged-task"]
    assert _rows(client, "/?tag=approved-only") == {}
    detail = _api(author).get("/api/tasks/tagged-task/").json()
    assert (detail["tags"], detail["status"]) == (DRAFT_TAGS, "draft")
    assert parse_datetime(detail["updated_at"]) == world["tagged"].updated_at
    page = client.get("/tasks/tagged-task/").content.decode()
    assert '<span class="badge">secret-draft-tag</span>' in page and '<span class="badge draft">Draft</span>' in page


def test_a_reviewers_approval_records_the_versions_tags_and_a_task_in_review_is_approved_to_a_lab_member(
    client, author, admin, reviewer, lab, world
):
    tagged = world["tagged"]
    review_services.task_submit(task=tagged, user=admin, override_reason="tests: no previews")
    client.force_login(lab)
    assert _rows(client, "/")["tagged-task"] == ("approved", APPROVED_TAGS)  # v2 is in review: not shown
    review_services.review_create(task_version=tagged.latest_version, reviewer=reviewer, decision="approve")
    tagged.refresh_from_db()
    assert sorted(tagged.approved_tags.values_list("name", flat=True)) == DRAFT_TAGS
    assert _rows(client, "/")["tagged-task"] == ("approved", DRAFT_TAGS)
    assert list(_rows(client, "/")) == ["tagged-task", "plain-task"]  # approved last
    assert _tag_options(client) == DRAFT_TAGS
    detail = _api(lab).get("/api/tasks/tagged-task/").json()
    assert detail["tags"] == DRAFT_TAGS and parse_datetime(detail["updated_at"]) == tagged.approved_at
    # and a v3 draft after it retags nothing a lab member reads
    services.task_version_create(
        task=tagged, author=author, base_version=2, content=task_content(title="Tagged", tags=["third-draft-tag"])
    )
    assert _rows(client, "/")["tagged-task"] == ("approved", DRAFT_TAGS)


def test_an_archived_task_is_archived_to_a_lab_member(client, lab, world):
    Task.objects.filter(slug="tagged-task").update(status=Task.Status.ARCHIVED)
    client.force_login(lab)
    assert _rows(client, "/")["tagged-task"][0] == "archived"
    assert list(_rows(client, "/?status=archived")) == ["tagged-task"]
    assert list(_rows(client, "/?status=approved")) == ["plain-task"]
    assert _api(lab).get("/api/tasks/tagged-task/").json()["status"] == "archived"


def test_the_migration_fills_the_approved_tags_and_time_from_the_approved_version(world):
    migration = importlib.import_module("authoring.migrations.0009_task_approved_tags")
    approval = AuditEvent.objects.filter(verb=AuditEvent.Verb.APPROVE, object_id=world["tagged"].pk).get()
    Task.approved_tags.through.objects.all().delete()
    Task.objects.update(approved_at=None)
    Task.tags.through.objects.filter(tag__name="approved-only").delete()  # no longer anyone's tag but v1's
    migration.approved_fill(apps, None)  # it uses no schema editor (SQLite opens none in a transaction)
    tagged, plain = Task.objects.get(slug="tagged-task"), Task.objects.get(slug="plain-task")
    assert sorted(tagged.approved_tags.values_list("name", flat=True)) == APPROVED_TAGS  # v1's document's
    assert list(plain.approved_tags.all()) == []
    assert tagged.approved_at == approval.created_at
    # a task approved without an audit event is dated by its last update
    AuditEvent.objects.filter(object_id=plain.pk).delete()
    Task.objects.update(approved_at=None)
    migration.approved_fill(apps, None)
    plain.refresh_from_db()
    assert plain.approved_at == plain.updated_at
