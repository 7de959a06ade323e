"""gymwright.bulk: COPY on PostgreSQL, bulk_create elsewhere, the same rows either way; keys handed out before
the rows exist; the pipeline that writes on a second thread; the probe of existing keys."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from authoring.models import AuditEvent, Environment, Tag, Task
from gymwright.bulk import Pipeline, bulk_insert_rows, ids_reserve, keys_of, saved_instances

pytestmark = pytest.mark.django_db

# What COPY's text format must escape, and what JSON must keep: backslashes, tabs, newlines,
# carriage returns, quotes, non-ASCII, and text that looks like COPY's own markers.
AWKWARD = 'tab\there, new\nline, cr\r, back\\slash, \\N, \\., "quoted", é 漢字 🙂, \u2028'


@pytest.fixture
def environment(author):
    return Environment.objects.create(slug="bulk-env", name="Bulk", owner=author)


TASK_COLUMNS = ("id", "slug", "title", "environment_id", "owner_id")


def _task_rows(environment, author, slugs, title="t"):
    keys = ids_reserve(Task, len(slugs))
    return [(key, slug, title, environment.pk, author.pk) for key, slug in zip(keys, slugs)]


def test_it_inserts_rows_with_reserved_keys_and_awkward_text_intact(author, environment):
    rows = _task_rows(environment, author, [f"bulk-{i}" for i in range(3)])
    rows = [(*row[:2], f"{AWKWARD} {i}"[:200], *row[3:]) for i, row in enumerate(rows)]
    keys = [row[0] for row in rows]
    assert len(set(keys)) == 3 and keys == sorted(keys)
    bulk_insert_rows(Task, TASK_COLUMNS, rows)
    stored = {task.pk: task for task in Task.objects.filter(slug__startswith="bulk-")}
    assert sorted(stored) == keys
    for i, key in enumerate(keys):
        assert stored[key].title == f"{AWKWARD} {i}"[:200]
        assert stored[key].status == Task.Status.DRAFT  # the field's default
        assert stored[key].created_at is not None and stored[key].updated_at is not None
    # a row saved afterwards the ordinary way takes the next free key, on SQLite as on PostgreSQL
    later = Task.objects.create(slug="bulk-later", title="later", environment=environment, owner=author)
    assert later.pk > max(keys)
    assert ids_reserve(Task, 2)[0] > later.pk and ids_reserve(Task, 0) == []


def test_saved_instances_are_the_rows_as_written(author, environment):
    rows = _task_rows(environment, author, ["inst-0", "inst-1"])
    bulk_insert_rows(Task, TASK_COLUMNS, rows)
    made = saved_instances(Task, TASK_COLUMNS, rows)
    assert [(task.pk, task.slug, task.status, task.owner_id) for task in made] == [
        (row[0], row[1], Task.Status.DRAFT, author.pk) for row in rows
    ]
    assert not made[0]._state.adding and made[0]._state.db == "default"
    assert made[0].environment == environment  # a related object loads as from a query


def test_json_columns_round_trip_exactly(author, environment):
    task = Task.objects.create(slug="bulk-json", title="t", environment=environment, owner=author)
    data = {"text": AWKWARD, "nested": [1, 2.5, None, True, {"k": "v\\n"}], "empty": {}}
    bulk_insert_rows(
        AuditEvent,
        ("actor_id", "verb", "object_id", "summary", "content_type_id", "data"),
        [(author.pk, AuditEvent.Verb.IMPORT, task.pk, AWKWARD[:300], ContentType.objects.get_for_model(Task).pk, data)],
    )
    stored = AuditEvent.objects.get(object_id=task.pk, verb=AuditEvent.Verb.IMPORT)
    assert stored.data == data and stored.summary == AWKWARD[:300]


def test_rows_nobody_reads_back_go_in_as_tuples_numbered_by_the_database(author, environment):
    rows = _task_rows(environment, author, [f"link-{i}" for i in range(2)])
    bulk_insert_rows(Task, TASK_COLUMNS, rows)
    tasks = saved_instances(Task, TASK_COLUMNS, rows)
    tags = [Tag.objects.create(name=f"bulk-tag-{i}") for i in range(2)]
    bulk_insert_rows(Task.tags.through, ("task_id", "tag_id"), [(task.pk, tag.pk) for task in tasks for tag in tags])
    assert sorted(tasks[0].tags.values_list("name", flat=True)) == ["bulk-tag-0", "bulk-tag-1"]
    assert Task.tags.through.objects.filter(task__in=tasks).count() == 4
    # fields left out take their defaults; auto_now_add the batch's time; JSON serialised
    content_type = ContentType.objects.get_for_model(Task)
    bulk_insert_rows(
        AuditEvent,
        ("actor_id", "verb", "content_type_id", "object_id", "summary"),
        [(author.pk, AuditEvent.Verb.IMPORT, content_type.pk, tasks[0].pk, AWKWARD[:300])],
    )
    bulk_insert_rows(
        AuditEvent,
        ("actor_id", "verb", "content_type_id", "object_id", "summary", "data"),
        [(None, AuditEvent.Verb.IMPORT, content_type.pk, tasks[1].pk, "s", {"k": AWKWARD})],
    )
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
    bulk_insert_rows(
        AuditEvent,
        ("actor_id", "verb", "content_type_id", "object_id", "summary", "data"),
        [
            (author.pk, AuditEvent.Verb.IMPORT, content_type.pk, task.pk, summary, data)
            for summary in ("given", "serialised")
        ],
        json_text={"data": ['{"a":{},"b":[1,2.5,"given"]}', None]},
    )
    given, serialised = (
        AuditEvent.objects.get(object_id=task.pk, summary=summary).data for summary in ("given", "serialised")
    )
    assert serialised == data
    if connection.vendor == "postgresql":  # COPY takes the text as it is; bulk_create serialises the values
        assert given == {"a": {}, "b": [1, 2.5, "given"]}
    else:
        assert given == data


def test_nothing_to_insert_costs_nothing():
    with CaptureQueriesContext(connection) as queries:
        bulk_insert_rows(Task, TASK_COLUMNS, [])
        assert ids_reserve(Task, 0) == [] and keys_of(Task, "slug", []) == {}
    assert len(queries) == 0


@pytest.mark.postgres
def test_on_postgresql_it_is_one_copy_counted_like_any_statement(author, environment):
    rows = _task_rows(environment, author, [f"copy-{i}" for i in range(50)])
    with CaptureQueriesContext(connection) as queries:
        bulk_insert_rows(Task, TASK_COLUMNS, rows)
    statements = [query["sql"] for query in queries.captured_queries]
    assert len(statements) == 1 and statements[0].startswith('COPY "authoring_task"'), statements
    assert "50 rows" in statements[0]


def test_keys_of_finds_the_existing_ones_by_their_unique_field(author, environment):
    tasks = [Task.objects.create(slug=f"probe-{i}", title="t", environment=environment, owner=author) for i in range(3)]
    found = keys_of(Task, "slug", ["probe-2", "nope", "probe-0", "probe-0", "another'; DROP TABLE x; --"])
    assert found == {"probe-2": tasks[2].pk, "probe-0": tasks[0].pk}
    with pytest.raises(ValueError, match="not unique"):
        keys_of(Task, "title", ["t"])


def test_a_pipeline_writes_in_order_and_rows_may_point_at_rows_written_later(author, environment):
    """A task row points at its version, the version at its task: both written, then their keys checked
    (on PostgreSQL by the pipeline's thread, inside the caller's transaction)."""
    from authoring.models import EnvironmentVersion, TaskVersion

    env_version = EnvironmentVersion.objects.create(
        environment=environment, number=1, spec={}, sha256="0" * 64, author=author
    )
    with transaction.atomic():
        with Pipeline() as pipeline:
            for n in range(3):  # chunks: each one's tasks first, pointing at versions not yet written
                rows = _task_rows(environment, author, [f"pipe-{n}-{i}" for i in range(2)])
                version_keys = ids_reserve(TaskVersion, len(rows))
                pipeline.insert(
                    Task, (*TASK_COLUMNS, "latest_version_id"), [(*row, key) for row, key in zip(rows, version_keys)]
                )
                pipeline.insert(
                    TaskVersion,
                    (
                        "id",
                        "task_id",
                        "number",
                        "spec",
                        "sha256",
                        "content_sha256",
                        "environment_version_id",
                        "author_id",
                    ),
                    [
                        (key, row[0], 1, {"n": n}, "1" * 64, "2" * 64, env_version.pk, author.pk)
                        for row, key in zip(rows, version_keys)
                    ],
                    json_text={"spec": [None, '{"given":1}']},
                )
                pipeline.check_constraints()
            pipeline.wait()
            assert Task.objects.filter(slug__startswith="pipe-").count() == 6  # this thread sees them after wait
    tasks = Task.objects.filter(slug__startswith="pipe-").select_related("latest_version")
    assert len(tasks) == 6 and all(task.latest_version.task_id == task.pk for task in tasks)
    specs = sorted(task.latest_version.spec.get("n", -1) for task in tasks)
    # COPY stores the text given for the second row of each chunk; bulk_create serialises the values
    assert specs == ([-1, -1, -1, 0, 1, 2] if connection.vendor == "postgresql" else [0, 0, 1, 1, 2, 2])


@pytest.mark.postgres
def test_a_pipeline_raises_its_threads_error_in_the_caller_and_the_transaction_rolls_back(author, environment):
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            with Pipeline() as pipeline:
                # a task pointing at a version that never comes: refused when the keys are checked
                rows = _task_rows(environment, author, ["orphan"])
                pipeline.insert(Task, (*TASK_COLUMNS, "latest_version_id"), [(*rows[0], 10**9)])
                pipeline.check_constraints()
                pipeline.wait()
    assert not Task.objects.filter(slug="orphan").exists()


def test_a_pipeline_drops_its_queue_when_the_caller_fails_and_restores_thread_switching(author, environment):
    import sys

    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError, match="caller failed"):
        with transaction.atomic():
            with Pipeline() as pipeline:
                pipeline.insert(Task, TASK_COLUMNS, _task_rows(environment, author, ["dropped"]))
                raise RuntimeError("caller failed")
    assert not Task.objects.filter(slug="dropped").exists()
    assert sys.getswitchinterval() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_pipeline_refuses_to_start_outside_a_transaction():
    with pytest.raises(RuntimeError, match="inside a transaction"):
        with Pipeline():
            pass
