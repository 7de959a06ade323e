"""Keys-first pagination: a deep page costs what the first page costs (issue 12, "Deep pages")."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from authoring import services
from authoring.models import Task
from gymwright.pagination import KeysFirstPaginator, keys_first
from tests.authoring.test_views import _bulk_tasks


@pytest.fixture
def environment(author):
    return services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})


def test_keys_first_returns_the_same_rows_in_the_same_order_as_slicing(author, environment):
    _bulk_tasks(60, author, environment)
    queryset = Task.objects.select_related("latest_version").prefetch_related("tags").order_by("-updated_at", "-id")
    for bottom, top in ((0, 25), (25, 50), (50, 60), (59, 80)):
        assert [t.pk for t in keys_first(queryset, bottom, top)] == [t.pk for t in queryset[bottom:top]]
    # filters through a multi-valued relation, and deferred columns, survive the refetch
    tagged = queryset.filter(tags__name="tag3").defer("latest_version__spec")
    rows = keys_first(tagged, 0, 5)
    assert [t.pk for t in rows] == [t.pk for t in tagged[:5]]
    assert all("spec" not in t.latest_version.__dict__ for t in rows)
    page = KeysFirstPaginator(queryset, 25).page(3)
    assert [t.pk for t in page] == [t.pk for t in queryset[50:60]] and page.has_previous()


def test_a_deep_api_page_sends_no_join_that_grows_with_the_offset(client, author, environment):
    """Page 100's joined query fetches exactly its page of rows (by id), never the rows before the offset."""
    _bulk_tasks(5_020, author, environment)
    token = Token.objects.create(user=author)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/tasks/?page=100", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200 and len(response.json()["results"]) == 50
    joined = [q["sql"] for q in queries.captured_queries if "JOIN" in q["sql"] and "authoring_task" in q["sql"]]
    assert joined, queries.captured_queries
    for sql in joined:
        assert "OFFSET" not in sql.upper(), sql
    # the offset is taken on the task table alone, ordered by the indexed columns
    keyed = [q["sql"] for q in queries.captured_queries if "OFFSET" in q["sql"].upper()]
    assert len(keyed) == 1 and "JOIN" not in keyed[0].upper(), keyed
    # and the version's document is not read for a list
    assert not any('"spec"' in sql for sql in joined), joined


def test_list_rows_match_the_task_serializer_field_for_field(author, environment):
    """The task list's plain rows (page and API) say exactly what TaskOutput says of the same task."""
    from authoring.apis import TaskOutput, task_row_output
    from authoring.selectors import task_list, task_rows

    _bulk_tasks(7, author, environment)
    tasks = list(task_list(user=author))
    rows = {row["pk"]: row for row in task_rows([t.pk for t in tasks])}
    assert len(rows) == 7
    for task in tasks:
        assert task_row_output(rows[task.pk]) == dict(TaskOutput(task).data)
    # and the API page is those rows, in the list's order
    client_rows = keys_first(task_list(user=author), 0, 50, rows=task_rows)
    assert [r["slug"] for r in client_rows] == [t.slug for t in tasks]


def test_the_task_rows_escape_every_stored_value(client, author, environment):
    """The task list's rows (templates/authoring/_task_rows.html): nothing stored is raw HTML."""
    from authoring.models import Tag

    _bulk_tasks(1, author, environment)
    task = Task.objects.get()
    hostile = '"><img src=x onerror=alert(1)>'
    Task.objects.filter(pk=task.pk).update(title=f"T {hostile}")
    task.tags.set([Tag.objects.create(name=f"tag{hostile}"[:64])])
    client.force_login(author)
    page = client.get("/").content.decode()
    assert "<img src=x" not in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert f'href="/tasks/{task.slug}/"' in page
