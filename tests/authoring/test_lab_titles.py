"""A lab member's task search reads the approved version's title (Task.approved_title): on PostgreSQL a pg_trgm index
on the expression its `icontains` compiles to answers it (authoring/migrations/0008), as 0007's answer everyone
else's search. The titles a lab member is shown: tests/authoring/test_lab_reads_approved.py."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from authoring.models import Task, TaskVersion
from review.services import versions_approve_on_import
from tests.authoring.test_views import _bulk_tasks

INDEX = "task_approved_title_trgm"


@pytest.mark.postgres
def test_a_lab_members_search_is_answered_by_the_approved_title_index(client, author, admin, lab, environment):
    tasks = _bulk_tasks(300, author, environment)
    Task.objects.filter(slug="bulk-00007").update(title="Max IBUPROFEN per day")  # what v1 said when approved
    versions = list(TaskVersion.objects.filter(task__in=tasks).select_related("task"))
    versions_approve_on_import(versions=versions, admin=admin)
    Task.objects.filter(slug="bulk-00007").update(title="Renamed draft ZETA")  # as a later draft would
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'authoring_task' AND indexname = %s", [INDEX]
        )
        assert cursor.fetchone(), "migration 0008 made no index"
    token = Token.objects.create(user=lab).key
    with CaptureQueriesContext(connection) as queries:
        found = client.get("/api/tasks/?q=iBuProF", HTTP_AUTHORIZATION=f"Token {token}").json()
    searches = [query["sql"] for query in queries.captured_queries if " LIKE " in query["sql"]]
    assert [(row["slug"], row["title"]) for row in found["results"]] == [("bulk-00007", "Max IBUPROFEN per day")]
    assert client.get("/api/tasks/?q=zeta", HTTP_AUTHORIZATION=f"Token {token}").json()["count"] == 0
    counted = [sql for sql in searches if "COUNT(" in sql.upper()]
    assert counted, searches
    with connection.cursor() as cursor:
        # A table this small is cheapest read whole (test_search_index.py), or here, every task being approved,
        # through the approved_version index or the lab's list order (task_approved_order, on approved tasks only:
        # GIN scans are costed high on few rows). With 60,000 approved tasks the planner takes the trigram indexes
        # unprompted (measured: 6 ms against 32 ms for the whole table); here the other ways are taken away, in the
        # test's transaction, to see that the indexes answer this query.
        cursor.execute("SET enable_seqscan = off")
        for name, constraint in connection.introspection.get_constraints(cursor, Task._meta.db_table).items():
            if constraint["index"] and (
                constraint["columns"] == ["approved_version_id"] or name == "task_approved_order"
            ):
                cursor.execute(f"DROP INDEX {connection.ops.quote_name(name)}")
        try:
            for sql in counted:
                cursor.execute("EXPLAIN " + sql)
                plan = "\n".join(row[0] for row in cursor.fetchall())
                assert "Seq Scan on authoring_task" not in plan, plan
                for index in (INDEX, "task_slug_search_trgm"):
                    assert f"Bitmap Index Scan on {index}" in plan, plan
        finally:
            cursor.execute("RESET enable_seqscan")
