"""gymwright.sql.Prepared: a queryset compiled once, run again with new parameters, giving what the
ORM gives; and the session store and auth backend built on it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.auth import ModelBackend
from authoring.models import AuditEvent, Environment, Tag, Task
from gymwright.sessions import SessionStore
from gymwright.sql import Prepared

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {key: value for key, value in obj.__dict__.items() if key != "_state"}


@pytest.fixture
def tasks(author, other_author):
    environment = Environment.objects.create(slug="sql-env", name="SQL", owner=author)
    made = [
        Task.objects.create(
            slug=f"sql-{i}", title=f"Task {i}", environment=environment, owner=author if i % 2 else other_author
        )
        for i in range(5)
    ]
    tag = Tag.objects.create(name="sql-tag")
    made[1].tags.add(tag)
    return made


def test_a_model_query_gives_the_objects_the_orm_gives_with_their_joined_rows(tasks):
    by_slug = Prepared(
        lambda slug: Task.objects.select_related("environment", "owner", "latest_version").filter(slug=slug), slug=str
    )
    for task in tasks[:3]:  # compiled once, run three times with three values
        [mine] = by_slug(slug=task.slug)
        theirs = Task.objects.select_related("environment", "owner", "latest_version").get(slug=task.slug)
        assert _fields(mine) == _fields(theirs)
        assert _fields(mine.environment) == _fields(theirs.environment)
        assert _fields(mine.owner) == _fields(theirs.owner) and mine.owner.username in ("alice", "bob")
        assert mine.latest_version is None
        with CaptureQueriesContext(connection) as queries:
            _ = mine.environment.slug, mine.owner.username  # joined: read without a query
        assert len(queries) == 0
        assert not mine._state.adding and mine._state.db == "default"
    assert by_slug(slug="no-such-task") == []
    assert len(by_slug._compiled) == 1


def test_values_lists_counts_slices_and_a_parameter_used_twice(tasks, author, other_author):
    titles = Prepared(
        lambda owner_id: Task.objects.filter(owner_id=owner_id).order_by("slug").values_list("slug", "title"),
        owner_id=int,
    )
    assert titles(owner_id=author.pk) == list(
        Task.objects.filter(owner=author).order_by("slug").values_list("slug", "title")
    )
    assert [slug for slug, _ in titles(owner_id=other_author.pk)] == ["sql-0", "sql-2", "sql-4"]
    flat = Prepared(
        lambda owner_id: Task.objects.filter(owner_id=owner_id).order_by("-slug").values_list("slug", flat=True)[:2],
        owner_id=int,
    )
    assert flat(owner_id=other_author.pk) == ["sql-4", "sql-2"]
    either = Prepared(
        lambda user_id: Task.objects.exclude(owner_id=user_id).exclude(environment__owner_id=user_id),
        count=True,
        user_id=int,
    )
    for user in (author, other_author):
        assert either(user_id=user.pk) == (Task.objects.exclude(owner=user).exclude(environment__owner=user).count())
    assert either(user_id=author.pk) == 0 and either(user_id=other_author.pk) == 2
    assert either(user_id=author.pk + 1000) == 5
    tagged = Prepared(lambda name: Task.objects.filter(tags__name=name), count=True, name=str)
    assert tagged(name="sql-tag") == 1 and tagged(name="none") == 0


def test_a_bigint_column_keeps_the_drivers_wrapping(tasks, author):
    content_type = ContentType.objects.get_for_model(Task)
    for task in tasks[:2]:
        AuditEvent.objects.create(
            actor=author, verb=AuditEvent.Verb.CREATE, content_type=content_type, object_id=task.pk, summary=task.slug
        )
    about = Prepared(
        lambda content_type_id, object_id: AuditEvent.objects.filter(
            content_type_id=content_type_id, object_id=object_id
        ).select_related("actor"),
        content_type_id=int,
        object_id=int,
    )
    for task in tasks[:2]:
        [event] = about(content_type_id=content_type.pk, object_id=task.pk)
        assert event.summary == task.slug and event.actor.username == "alice"


def test_every_run_is_a_logged_query(tasks):
    count = Prepared(lambda owner_id: Task.objects.filter(owner_id=owner_id), count=True, owner_id=int)
    with CaptureQueriesContext(connection) as queries:
        count(owner_id=1)
        count(owner_id=2)
    assert len(queries) == 2 and "COUNT" in queries[0]["sql"]


def test_queries_it_cannot_prepare_fail_loudly_at_their_first_call(tasks):
    with pytest.raises(ValueError, match="'q' is not among"):  # icontains wraps the value in %...%
        Prepared(lambda q: Task.objects.filter(title__icontains=q).values_list("pk"), q=str)(q="x")
    with pytest.raises(TypeError, match="prefetch_related"):
        Prepared(lambda slug: Task.objects.prefetch_related("tags").filter(slug=slug), slug=str)(slug="sql-1")
    with pytest.raises(TypeError, match="values_list"):
        Prepared(lambda slug: Task.objects.filter(slug=slug).values("pk"), slug=str)(slug="sql-1")
    with pytest.raises(TypeError, match="int, SmallInt or str"):
        Prepared(lambda when: Task.objects.filter(created_at__lt=when), when=timezone.datetime)
    ok = Prepared(lambda slug: Task.objects.filter(slug=slug).values_list(Count("pk")), slug=str)
    with pytest.raises(TypeError, match="expected"):
        ok(slug="sql-1", other=2)


def test_the_session_store_loads_a_live_session_and_drops_an_expired_one():
    live = SessionStore()
    live["answer"] = 42
    live.create()
    assert SessionStore(live.session_key)["answer"] == 42
    Session.objects.filter(session_key=live.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    expired = SessionStore(live.session_key)
    assert expired.get("answer") is None and expired.session_key is None  # a new session, as Django's store
    assert SessionStore("no-such-key").get("answer") is None


def test_the_backend_loads_the_user_and_refuses_an_inactive_one(author):
    backend = ModelBackend()
    loaded = backend.get_user(author.pk)
    fields = {key: value for key, value in _fields(loaded).items() if "gymwright_role" not in key}
    assert fields == _fields(get_user_model().objects.get(pk=author.pk))
    assert backend.get_user(author.pk + 1000) is None
    get_user_model().objects.filter(pk=author.pk).update(is_active=False)
    assert backend.get_user(author.pk) is None


def test_a_signed_in_page_is_served_with_the_prepared_session_and_user(client, author):
    client.force_login(author)
    response = client.get("/")
    assert response.status_code == 200 and response.wsgi_request.user.username == "alice"
    get_user_model().objects.filter(pk=author.pk).update(is_active=False)
    assert client.get("/").status_code == 302  # signed out: an inactive user is not loaded


@pytest.mark.postgres
def test_on_postgresql_it_runs_as_a_server_side_prepared_statement_with_djangos_errors(tasks):
    from django.db import DatabaseError

    count = Prepared(lambda owner_id: Task.objects.filter(owner_id=owner_id), count=True, owner_id=int)
    count(owner_id=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        statements = [row[0] for row in cursor.fetchall()]
    assert any('COUNT("authoring_task"."id")' in statement and "$1" in statement for statement in statements)
    broken = Prepared(lambda slug: Task.objects.filter(slug=slug).extra(where=["1/0 = 1"]).values_list("pk"), slug=str)
    with pytest.raises(DatabaseError):  # psycopg's error, wrapped as Django wraps it
        broken(slug="sql-1")


def test_a_list_parameter_compiles_once_per_length_and_an_empty_list_reads_nothing(tasks):
    from gymwright.sql import PreparedIn

    slugs = PreparedIn(
        lambda keys, owner_id: (
            Task.objects.filter(pk__in=keys, owner_id=owner_id).order_by("slug").values_list("slug", flat=True)
        ),
        "keys",
        item=int,
        owner_id=int,
    )
    owner = tasks[1].owner_id
    keys = [task.pk for task in tasks]
    assert slugs(keys=keys, owner_id=owner) == ["sql-1", "sql-3"]
    assert slugs(keys=keys[:2], owner_id=owner) == ["sql-1"] and slugs(keys=keys[2:4], owner_id=owner) == ["sql-3"]
    assert sorted(slugs._by_length) == [2, 5]
    with CaptureQueriesContext(connection) as queries:
        assert slugs(keys=[], owner_id=owner) == []
    assert len(queries) == 0
    counted = PreparedIn(lambda keys: Task.objects.filter(pk__in=keys), "keys", item=int, count=True)
    assert counted(keys=keys[:3]) == 3 and counted(keys=[]) == 0


def test_a_sliced_query_takes_its_bounds_at_each_call(tasks, author):
    ordered = Task.objects.order_by("slug")
    page = Prepared(lambda: ordered.values_list("slug", flat=True), sliced=True)
    for offset, limit in ((0, 2), (2, 2), (4, 2), (1, 3), (5, 10)):
        assert page(offset=offset, limit=limit) == list(ordered.values_list("slug", flat=True)[offset : offset + limit])
    owned = Prepared(
        lambda owner_id: ordered.filter(owner_id=owner_id).select_related("owner"), sliced=True, owner_id=int
    )
    assert [t.slug for t in owned(owner_id=author.pk, offset=1, limit=1)] == ["sql-3"]
    assert len(page._compiled) == 1 and len(owned._compiled) == 1
    with pytest.raises(TypeError, match="expected"):
        page(offset=0)  # both bounds, every call
    with pytest.raises(TypeError, match="not sliced"):
        Prepared(lambda: ordered, count=True, sliced=True)


def test_an_optional_filter_compiles_once_for_each_combination_given(tasks, author, other_author):
    def build(owner_id=None, slug=None):
        queryset = Task.objects.order_by("slug")
        if owner_id is not None:
            queryset = queryset.filter(owner_id=owner_id)
        if slug is not None:
            queryset = queryset.filter(slug=slug)
        return queryset.values_list("slug", flat=True)

    slugs = Prepared(build, optional=["owner_id", "slug"], owner_id=int, slug=str)
    everything = [t.slug for t in sorted(tasks, key=lambda t: t.slug)]
    assert slugs() == everything and slugs(slug="", owner_id=None) == everything
    assert slugs(owner_id=author.pk) == ["sql-1", "sql-3"]
    assert slugs(owner_id=other_author.pk) == ["sql-0", "sql-2", "sql-4"]
    assert slugs(slug="sql-2") == ["sql-2"] and slugs(slug="sql-2", owner_id=author.pk) == []
    assert len(slugs._compiled) == 4  # none, owner, slug, both
    counted = Prepared(build, count=True, optional=["owner_id", "slug"], owner_id=int, slug=str)
    assert counted() == 5 and counted(owner_id=author.pk) == 2
    with pytest.raises(TypeError, match="optional names parameters"):
        Prepared(build, optional=["nope"], owner_id=int)


def test_execute_wrappers_see_a_prepared_query_as_any_other(tasks):
    seen = []

    def spy(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    count = Prepared(lambda owner_id: Task.objects.filter(owner_id=owner_id), count=True, owner_id=int)
    with connection.execute_wrapper(spy):
        assert count(owner_id=tasks[0].owner_id) == 3
    assert len(seen) == 1 and "authoring_task" in seen[0]


def test_a_small_integer_column_takes_a_smallint_parameter(db, author):
    """An int marker is outside a SmallIntegerField's range, where the ORM drops the lookup (EmptyResultSet)."""
    from gymwright.sql import SmallInt
    from sandbox.models import Rollout

    attempts = Prepared(lambda attempts: Rollout.objects.filter(attempts=attempts), count=True, attempts=SmallInt)
    assert attempts(attempts=1) == 0  # compiles, and runs
    from django.core.exceptions import EmptyResultSet

    with pytest.raises(EmptyResultSet):
        Prepared(lambda attempts: Rollout.objects.filter(attempts=attempts), count=True, attempts=int)(attempts=1)


def test_a_value_past_the_prepared_range_is_answered_as_the_orm_answers_it(tasks, client, author):
    """An id from a URL can be any number: one the statement cannot take (past 64 bits for SQLite, past the column's
    type for PostgreSQL) goes through the queryset, where it matches nothing, as the ORM says."""
    by_pk = Prepared(lambda pk: Task.objects.filter(pk=pk), pk=int)
    counted = Prepared(lambda pk: Task.objects.filter(pk=pk), count=True, pk=int)
    page = Prepared(
        lambda owner_id: Task.objects.filter(owner_id=owner_id).order_by("pk").values_list("pk", flat=True),
        sliced=True,
        owner_id=int,
    )
    for huge in (10**20, -(10**20), 2**31, 2**63):
        assert by_pk(pk=huge) == [] and counted(pk=huge) == 0 and page(owner_id=huge, offset=0, limit=5) == []
    assert [t.pk for t in by_pk(pk=tasks[0].pk)] == [tasks[0].pk]
    client.force_login(author)
    for url in (
        "/previews/99999999999999999999/",
        "/previews/rollouts/99999999999999999999/",
        "/previews/99999999999999999999/progress/",
        "/api/previews/99999999999999999999/",
        "/api/rollouts/99999999999999999999/",
    ):
        assert client.get(url).status_code == 404, url
    assert client.post("/api/previews/99999999999999999999/cancel/").status_code == 404
