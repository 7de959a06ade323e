"""`/api/tasks/` costs the same queries for one task as for thirty, for each list it answers and each kind of reader
(issue 12)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from authoring.models import Task, TaskVersion
from tests.authoring.test_views import _bulk_tasks


def _listed(client, url: str, token: str) -> tuple[int, list[str]]:
    """The list's count, and the queries of a request (after one that warms the role caches)."""
    client.get(url, HTTP_AUTHORIZATION=f"Token {token}")
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200, response.content[:300]
    return response.json()["count"], [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("reader", ["author", "lab"])
@pytest.mark.parametrize(
    "url, counts",
    [
        ("/api/tasks/", (1, 30)),
        ("/api/tasks/?environment=shell&status=approved&tag=tag1&author=alice", (1, 6)),
        ("/api/tasks/?q=K-0000", (1, 10)),  # the search: any case, part of a slug
    ],
)
def test_the_task_api_list_costs_the_same_queries_for_one_task_as_for_thirty(
    client, author, lab, admin, environment, reader, url, counts
):
    from review.services import versions_approve_on_import

    _bulk_tasks(30, author, environment)
    versions_approve_on_import(versions=list(TaskVersion.objects.select_related("task")), admin=admin)
    token = Token.objects.create(user={"author": author, "lab": lab}[reader]).key
    thirty_count, thirty = _listed(client, url, token)
    Task.objects.exclude(slug="bulk-00001").delete()
    one_count, one = _listed(client, url, token)
    assert (one_count, thirty_count) == counts
    # the token with its user and roles, the count, the page's keys, those tasks' columns, their tags
    assert len(one) == len(thirty) == 5, "\n".join(thirty)
