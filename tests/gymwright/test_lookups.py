"""gymwright.fields.AnyOf: `field__any=values` finds the rows `field__in` does, with one array parameter on
PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from authoring.models import Environment, Task

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks(author):
    environment = Environment.objects.create(slug="any-env", name="Any", owner=author)
    return [Task.objects.create(slug=f"any-{i}", title="t", environment=environment, owner=author) for i in range(4)]


@pytest.mark.parametrize("values", [["any-1", "any-3", "nope"], [], ["any-0", "any-0"], ["it's", "a\\b", "{x,y}"]])
def test_it_finds_what_in_finds(tasks, values):
    assert sorted(Task.objects.filter(slug__any=values).values_list("pk", flat=True)) == sorted(
        Task.objects.filter(slug__in=values).values_list("pk", flat=True)
    )


def test_keys_and_updates(tasks):
    keys = [tasks[0].pk, tasks[2].pk]
    assert Task.objects.filter(pk__any=keys).update(title="changed") == 2
    assert sorted(Task.objects.filter(title="changed").values_list("pk", flat=True)) == sorted(keys)


def test_on_postgresql_the_values_are_one_parameter(tasks):
    with CaptureQueriesContext(connection) as queries:
        list(Task.objects.filter(slug__any=[f"any-{i}" for i in range(1000)]))
    sql = queries.captured_queries[0]["sql"]
    if connection.vendor == "postgresql":
        assert "= ANY(" in sql and " IN (" not in sql
    else:
        assert " IN (" in sql


def test_it_works_on_a_foreign_key(tasks):
    keys = [tasks[1].pk, tasks[3].pk]
    assert sorted(Task.tags.through.objects.filter(task_id__any=keys).values_list("task_id", flat=True)) == []
    tasks[1].tags.create(name="t1")
    assert list(Task.tags.through.objects.filter(task_id__any=keys).values_list("task_id", flat=True)) == [tasks[1].pk]
