"""gymwright.bulk: COPY on PostgreSQL, bulk_create elsewhere, the same rows either way."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext

from authoring.models import AuditEvent, Environment, Tag, Task
from gymwright.bulk import bulk_insert, bulk_insert_rows

pytestmark = pytest.mark.django_db

# What COPY's text format must escape, and what JSON must keep: backslashes, tabs, newlines,
# carriage returns, quotes, non-ASCII, and text that looks like COPY's own markers.
AWKWARD = 'tab\there, new\nline, cr\r, back\\slash, \\N, \\., "quoted", é 漢字 🙂, \u2028'


@pytest.fixture
def environment(author):
    return Environment.objects.create(slug="bulk-env", name="Bulk", owner=author)


def test_it_inserts_rows_with_their_keys_and_awkward_text_intact(author, environment):
    tasks = bulk_insert([Task(slug=f"bulk-{i}", title=f"{AWKWARD} {i}", environment=environment, owner=author)
                         for i in range(3)])
    assert all(task.pk for task in tasks) and len({task.pk for task in tasks}) == 3
    assert [task.pk for task in tasks] == sorted(task.pk for task in tasks)  # in the order given, as bulk_create
    stored = {task.pk: task for task in Task.objects.filter(slug__startswith="bulk-")}
    for i, task in enumerate(tasks):
        assert stored[task.pk].title == f"{AWKWARD} {i}"[:200]
        assert stored[task.pk].status == Task.Status.DRAFT  # the field's default
        assert stored[task.pk].created_at is not None and stored[task.pk].updated_at is not None
        assert not task._state.adding
    # a row saved afterwards the ordinary way takes the next free key: the sequence moved on
    later = Task.objects.create(slug="bulk-later", title="later", environment=environment, owner=author)
    assert later.pk > max(task.pk for task in tasks)


def test_json_columns_round_trip_exactly(author, environment):
    task = Task.objects.create(slug="bulk-json", title="t", environment=environment, owner=author)
    data = {"text": AWKWARD, "nested": [1, 2.5, None, True, {"k": "v\\n"}], "empty": {}}
    events = bulk_insert([AuditEvent(actor=author, verb=AuditEvent.Verb.IMPORT, object_id=task.pk, summary=AWKWARD[:300],
                                     content_type=ContentType.objects.get_for_model(Task), data=data)])
    stored = AuditEvent.objects.get(pk=events[0].pk)
    assert stored.data == data and stored.summary == AWKWARD[:300]


def test_rows_nobody_reads_back_go_in_as_tuples_numbered_by_the_database(author, environment):
    tasks = bulk_insert([Task(slug=f"link-{i}", title="t", environment=environment, owner=author) for i in range(2)])
    tags = [Tag.objects.create(name=f"bulk-tag-{i}") for i in range(2)]
    bulk_insert_rows(Task.tags.through, ("task_id", "tag_id"), [(task.pk, tag.pk) for task in tasks for tag in tags])
    assert sorted(tasks[0].tags.values_list("name", flat=True)) == ["bulk-tag-0", "bulk-tag-1"]
    assert Task.tags.through.objects.filter(task__in=tasks).count() == 4
    # fields left out take their defaults; auto_now_add the batch's time; JSON serialised
    content_type = ContentType.objects.get_for_model(Task)
    bulk_insert_rows(AuditEvent, ("actor_id", "verb", "content_type_id", "object_id", "summary"),
                     [(author.pk, AuditEvent.Verb.IMPORT, content_type.pk, tasks[0].pk, AWKWARD[:300])])
    bulk_insert_rows(AuditEvent, ("actor_id", "verb", "content_type_id", "object_id", "summary", "data"),
                     [(None, AuditEvent.Verb.IMPORT, content_type.pk, tasks[1].pk, "s", {"k": AWKWARD})])
    first, second = (AuditEvent.objects.get(object_id=task.pk, content_type=content_type) for task in tasks)
    assert (first.actor_id, first.summary, first.data) == (author.pk, AWKWARD[:300], {})
    assert first.created_at is not None and second.created_at >= first.created_at
    assert (second.actor_id, second.data) == (None, {"k": AWKWARD})
    with CaptureQueriesContext(connection) as queries:
        bulk_insert_rows(Task.tags.through, ("task_id", "tag_id"), [])
    assert len(queries) == 0


def test_json_already_serialised_is_stored_as_given(author, environment):
    """An import hands over each document's canonical JSON (the text it hashed); None: serialise it here."""
    task = Task.objects.create(slug="bulk-text", title="t", environment=environment, owner=author)
    content_type = ContentType.objects.get_for_model(Task)
    data = {"b": [1, 2.5, AWKWARD], "a": {}}
    events = bulk_insert([AuditEvent(actor=author, verb=AuditEvent.Verb.IMPORT, object_id=task.pk, summary="s",
                                     content_type=content_type, data=value) for value in (data, data)],
                         json_text={"data": ['{"a":{},"b":[1,2.5,"given"]}', None]})
    given, serialised = (AuditEvent.objects.get(pk=event.pk).data for event in events)
    assert serialised == data
    if connection.vendor == "postgresql":  # COPY takes the text as it is; bulk_create serialises the values
        assert given == {"a": {}, "b": [1, 2.5, "given"]}
    else:
        assert given == data


def test_nothing_to_insert_costs_nothing():
    with CaptureQueriesContext(connection) as queries:
        assert bulk_insert([]) == []
    assert len(queries) == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's; elsewhere it is bulk_create")
def test_on_postgresql_it_is_one_copy_counted_like_any_statement(author, environment):
    with CaptureQueriesContext(connection) as queries:
        bulk_insert([Task(slug=f"copy-{i}", title="t", environment=environment, owner=author) for i in range(50)])
    statements = [query["sql"] for query in queries.captured_queries]
    assert len(statements) == 2, statements  # the keys, then the rows
    assert statements[0].startswith("SELECT nextval(") and statements[1].startswith('COPY "authoring_task"')
    assert "50 rows" in statements[1]
