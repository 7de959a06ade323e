"""The task search (`/?q=`, `/api/tasks/?q=`) on PostgreSQL is answered by pg_trgm indexes on the expression the
ORM's `icontains` compiles to (authoring/migrations/0007), with the same results; on SQLite the migration does
nothing (issue 12)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from authoring.models import Task
from tests.authoring.test_views import _bulk_tasks

ROOT = Path(__file__).resolve().parents[2]
MIGRATION = importlib.import_module("authoring.migrations.0007_task_search_trigram_indexes")
INDEXES = {"task_slug_search_trgm", "task_title_search_trgm"}


def _trigram_indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'authoring_task' AND indexname LIKE '%%search_trgm'"
        )
        return {name for (name,) in cursor.fetchall()}


def _searched(client, url: str, token: str | None = None) -> tuple[list[str], list[str]]:
    """The slugs `url` lists, and the SQL of its queries that search (LIKE)."""
    extra = {"HTTP_AUTHORIZATION": f"Token {token}"} if token else {}
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **extra)
    assert response.status_code == 200, response.content[:300]
    if token:
        slugs = [row["slug"] for row in response.json()["results"]]
    else:
        slugs = sorted(
            {
                slug
                for slug in Task.objects.values_list("slug", flat=True)
                if f'href="/tasks/{slug}/"' in response.content.decode()
            }
        )
    return sorted(slugs), [q["sql"] for q in queries.captured_queries if " LIKE " in q["sql"]]


@pytest.fixture
def searchable(author, environment):
    """300 tasks, and a few whose slug or title holds what the tests search for."""
    _bulk_tasks(300, author, environment)
    titles = {
        "bulk-00007": "Max IBUPROFEN per day",
        "bulk-00011": "Dose: ibuprofen syrup",
        "bulk-00012": "100% sure",
        "bulk-00013": "under_score",
    }
    for slug, title in titles.items():
        Task.objects.filter(slug=slug).update(title=title)
    Task.objects.filter(slug="bulk-00020").update(slug="ibuprofen-dosing")
    return Token.objects.create(user=author).key


@pytest.mark.postgres  # trigram indexes are PostgreSQL's: skips with the how-to, fails in CI
@pytest.mark.parametrize("url", ["/?q=iBuProF", "/api/tasks/?q=ibuprofen"])
def test_the_search_is_answered_by_the_trigram_indexes(client, author, searchable, url):
    assert _trigram_indexes() == INDEXES
    client.force_login(author)
    slugs, searches = _searched(client, url, searchable if url.startswith("/api/") else None)
    assert slugs == ["bulk-00007", "bulk-00011", "ibuprofen-dosing"]
    assert searches, "the search sent no LIKE"
    with connection.cursor() as cursor:
        # 300 rows: a sequential scan is cheaper, as it is for a real table this small; the plan the planner takes
        # where it is not (a big table, with the index statistics VACUUM keeps) is the one it takes here.
        cursor.execute("SET enable_seqscan = off")
        try:
            plans = []
            for sql in searches:
                cursor.execute("EXPLAIN " + sql)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
        finally:
            cursor.execute("RESET enable_seqscan")
    counted = [plan for plan, sql in zip(plans, searches) if "COUNT(" in sql.upper()]
    assert counted, searches
    for plan in plans:
        assert "Seq Scan on authoring_task" not in plan, plan
    for plan in counted:  # the page's count reads the matches through both indexes, never the table
        assert all(f"Bitmap Index Scan on {name}" in plan for name in INDEXES), plan


@pytest.mark.parametrize(
    "q, expected",
    [
        ("iBuProF", ["bulk-00007", "bulk-00011", "ibuprofen-dosing"]),  # any case, part of a word, slug or title
        ("dosing", ["ibuprofen-dosing"]),
        ("0% s", ["bulk-00012"]),  # LIKE's wildcards are searched as they are typed
        ("r_s", ["bulk-00013"]),
        ("%", ["bulk-00012"]),
        ("bulk-0029", [f"bulk-0029{i}" for i in range(10)]),
        ("zz", []),
    ],
)
def test_the_search_finds_the_same_tasks_on_every_database(client, author, searchable, q, expected):
    client.force_login(author)
    assert _searched(client, f"/?q={q.replace('%', '%25')}")[0] == expected
    assert _searched(client, f"/api/tasks/?q={q.replace('%', '%25')}", searchable)[0] == expected


@pytest.mark.postgres  # trigram indexes are PostgreSQL's: skips with the how-to, fails in CI
def test_a_database_user_who_may_not_create_the_extension_migrates_with_a_warning_and_no_index(db):
    """The extension is the database owner's to create (it is trusted); where the migrating user may not, the
    migration says so and how to add the indexes later, and does not stop the upgrade."""
    role = f"gw_no_create_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:  # all inside the test's transaction: rolled back after it
        cursor.execute("DROP EXTENSION pg_trgm CASCADE")  # and with it the indexes
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        cursor.execute(f"SET ROLE {role}")
        try:
            with pytest.warns(
                RuntimeWarning,
                match=r"CREATE EXTENSION pg_trgm.*permission denied.*superuser run "
                r"`CREATE EXTENSION pg_trgm;`.*migrate authoring 0006",
            ):
                with connection.schema_editor() as editor:
                    MIGRATION.indexes_create(apps, editor)
        finally:
            cursor.execute("RESET ROLE")
    assert _trigram_indexes() == set()
    # the way the warning gives: with the extension there, the migration makes the indexes
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION pg_trgm")
    with connection.schema_editor() as editor:
        MIGRATION.indexes_create(apps, editor)
    assert _trigram_indexes() == INDEXES
    with connection.schema_editor() as editor:
        MIGRATION.indexes_drop(apps, editor)
    assert _trigram_indexes() == set()


def test_on_sqlite_the_migration_does_nothing(tmp_path):
    """`make run`'s database: the migration applies, and no index or extension is asked for."""
    database = tmp_path / "gymwright.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "GYMWRIGHT_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "authoring", "-v", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Applying authoring.0007_task_search_trigram_indexes... OK" in done.stdout
    assert "RuntimeWarning" not in done.stderr
    import sqlite3

    with sqlite3.connect(database) as sqlite:
        assert sqlite.execute("SELECT name FROM sqlite_master WHERE name LIKE '%trgm%'").fetchall() == []
