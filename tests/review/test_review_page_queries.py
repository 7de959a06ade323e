"""The review page costs the same number of queries whatever the size of what it shows: checks, comment threads
on them, attached files (with their diffs against the version the reviewer saw) and previews. A query per check,
thread or file would make a 200-check rubric's page 200 queries slower."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from authoring import services as authoring_services
from review import services
from tests.review.conftest import finished_preview, pass_gates, task_content

pytestmark = pytest.mark.django_db


def _task(slug: str, author, environment, reviewer, *, size: int):
    """A task in review whose v2 has `size` checks, `size` files (each changed from v1) and `size` comment threads
    (one per check, each with a reply), `size` previews, and a reviewer who has seen v1."""

    def files(generation: int) -> list[dict]:
        return [
            {
                "path": f"data/{index:03}.txt",
                "sha256": authoring_services.blob_store(data=f"{generation} {index}\n".encode()).sha256,
            }
            for index in range(size)
        ]

    checks = [
        {"id": f"says_{index}", "kind": "string_match", "points": 1, "mode": "contains", "expected": str(index)}
        for index in range(size)
    ]
    rubric = {"schema": "gymwright.rubric/v1", "pass_threshold": 0.5, "checks": checks}
    task = authoring_services.task_create(
        slug=slug, environment=environment, author=author, content=task_content(rubric=rubric, files=files(1))
    )
    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    services.review_visit_record(task_version=task.latest_version, reviewer=reviewer)
    version, _ = authoring_services.task_version_create(
        task=task, author=author, content=task_content(rubric=rubric, files=files(2)), base_version=1
    )
    pass_gates(version, author)
    for index in range(size):
        finished_preview(version, author, "oracle", [1.0])
        thread = services.comment_create(task=task, user=reviewer, body=f"why {index}?", check_id=f"says_{index}")
        services.comment_create(task=task, user=author, body="because", parent=thread)
    task.refresh_from_db()
    return task


def _queries(client, slug: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/review/tasks/{slug}/")
    assert response.status_code == 200, response.content[:500]
    return len(captured.captured_queries)


def test_the_review_page_s_queries_do_not_grow_with_checks_threads_files_or_previews(
    client, author, environment, reviewer
):
    small = _task("small-task", author, environment, reviewer, size=2)
    large = _task("large-task", author, environment, reviewer, size=12)
    client.force_login(reviewer)
    _queries(client, small.slug), _queries(client, large.slug)  # warm the per-process caches alike
    counts = {"small": _queries(client, small.slug), "large": _queries(client, large.slug)}
    assert counts["small"] == counts["large"], counts
