"""Trigram indexes for the task search (`task_list`'s `q`: slug or title contains, in any case), on PostgreSQL.

Django compiles `slug__icontains=q` on PostgreSQL to `UPPER("slug"::text) LIKE UPPER('%q%')`, which no b-tree can
answer: every search read the whole task table. A pg_trgm GIN index on that same expression answers it (the planner
matches the index to the query by its expression, so the expression is taken from the backend's own `lookup_cast`).
Nothing is done on another database (SQLite, `make run`'s default): its search scans, as it always did.

pg_trgm is a trusted extension (PostgreSQL 13+): the database's owner may create it. Where the user that migrates
may not (or the server lacks the contrib package), the indexes are skipped with a warning that says how to add them
later, and search works as before, only slower: a missing index must not stop an upgrade.
"""

import warnings

from django.db import DatabaseError, migrations, transaction

SEARCHED = ("slug", "title")  # authoring.selectors.task_list: Q(slug__icontains=q) | Q(title__icontains=q)


def _index_name(column: str) -> str:
    return f"task_{column}_search_trgm"


def _extension_ready(schema_editor) -> bool:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        if cursor.fetchone():
            return True
    try:
        with transaction.atomic(using=connection.alias):  # a savepoint: a refusal must not abort the migration
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DatabaseError as exc:
        warnings.warn(
            f"The task search's trigram indexes were not created: CREATE EXTENSION pg_trgm failed "
            f"({' '.join(str(exc).split())}). Search still works, reading the whole task table. To add them, "
            f"have a superuser run `CREATE EXTENSION pg_trgm;` in database {connection.settings_dict['NAME']!r}, "
            f"then run `manage.py migrate authoring 0006 && manage.py migrate authoring`.",
            RuntimeWarning,
            stacklevel=1,
        )
        return False
    return True


def indexes_create(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or not _extension_ready(schema_editor):
        return
    Task = apps.get_model("authoring", "Task")
    table = schema_editor.quote_name(Task._meta.db_table)
    for column in SEARCHED:
        field = Task._meta.get_field(column)
        expression = connection.ops.lookup_cast("icontains", field.get_internal_type()) % schema_editor.quote_name(
            field.column
        )
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(_index_name(column))} "
            f"ON {table} USING gin (({expression}) gin_trgm_ops)"
        )


def indexes_drop(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for column in SEARCHED:  # the extension stays: other databases' objects, or an operator's, may use it
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(_index_name(column))}")


class Migration(migrations.Migration):
    dependencies = [
        ("authoring", "0006_task_submitted_at"),
    ]

    operations = [
        migrations.RunPython(indexes_create, indexes_drop, elidable=False),
    ]
