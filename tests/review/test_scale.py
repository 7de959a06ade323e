"""The queue and the inbox cost a constant number of queries at 10,000 tasks."""

import pytest
from django.db import connection
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from authoring.models import Task, TaskVersion
from review.models import InboxItem, Submission

N = 10_000


@pytest.fixture
def many_tasks_in_review(task, author, reviewer):
    """10,000 tasks in review (bulk-created), each with a submission, and an inbox item per task."""
    version1 = task.latest_version
    tag = task.tags.first()
    tasks = Task.objects.bulk_create(
        [
            Task(
                slug=f"bulk-{i:05d}",
                title=f"Bulk {i}",
                environment=task.environment,
                owner=author,
                status=Task.Status.IN_REVIEW,
            )
            for i in range(N)
        ]
    )
    versions = TaskVersion.objects.bulk_create(
        [
            TaskVersion(
                task=bulk,
                number=1,
                spec=version1.spec,
                sha256=version1.sha256,
                content_sha256=version1.content_sha256,
                environment_version=version1.environment_version,
                author=author,
            )
            for bulk in tasks
        ]
    )
    Task.objects.filter(slug__startswith="bulk-").update(
        latest_version=Subquery(TaskVersion.objects.filter(task=OuterRef("pk")).values("pk")[:1]), submitted_at=Now()
    )
    Task.tags.through.objects.bulk_create([Task.tags.through(task_id=bulk.pk, tag_id=tag.pk) for bulk in tasks])
    Submission.objects.bulk_create([Submission(task_version=version, submitted_by=author) for version in versions])
    InboxItem.objects.bulk_create(
        [InboxItem(recipient=author, actor=reviewer, task=bulk, kind="approved", version_number=1) for bulk in tasks]
    )
    return tasks


PAGES = [
    ("/review/", "reviewer", 12),
    ("/review/?environment=shell&tag=maths&older_than_days=0", "reviewer", 12),
    ("/api/review-queue/", "reviewer", 8),
    ("/inbox/", "author", 12),
    ("/api/inbox/", "author", 8),
]


def test_queue_and_inbox_queries_stay_constant_at_ten_thousand_tasks(client, many_tasks_in_review, author, reviewer):
    """Built once (10,000 rows each), every page checked against its ceiling."""
    for url, who, max_queries in PAGES:
        client.force_login({"reviewer": reviewer, "author": author}[who])
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, url
        assert "bulk-" in response.content.decode(), url
        assert len(queries) <= max_queries, (url, len(queries), [q["sql"][:120] for q in queries.captured_queries])


@pytest.mark.postgres
def test_a_reviewers_queue_and_navigation_count_never_read_the_version_table_through(
    client, many_tasks_in_review, reviewer
):
    """Asking "did this reviewer write the latest version?" by joining every task in review to its version read the
    whole version table, documents and all: 17-21 ms at 3,333 tasks in review, on every page a reviewer opened.
    The rule is asked of the versions the reviewer wrote (an index on the author)."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the statistics autovacuum keeps on a live database
    client.force_login(reviewer)
    with CaptureQueriesContext(connection) as queries:
        assert "bulk-" in client.get("/review/").content.decode()
    counted = [q["sql"] for q in queries.captured_queries if "COUNT" in q["sql"] and "authoring_task" in q["sql"]]
    keyed = [q["sql"] for q in queries.captured_queries if "OFFSET" in q["sql"]]
    assert len(counted) == 2 and len(keyed) == 1, queries.captured_queries  # the navigation's and the queue's
    for sql in counted + keyed:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "Seq Scan on authoring_taskversion" not in plan, plan
