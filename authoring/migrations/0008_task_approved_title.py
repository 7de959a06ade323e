"""Task.approved_title: the title of the version a reviewer approved, what a lab member is shown and searches.

`Task.title` follows every new version, so a lab member's task list, search, task page and `/api/tasks/` showed (and
found tasks by) the title of a draft no reviewer had approved. The version's own title is in its spec, which lists do
not read (it is large): the head keeps a copy, set wherever `approved_version` is (review.services), and filled here
from each approved version's spec.

On PostgreSQL a pg_trgm index on the search's expression answers a lab member's search as 0007's answer everyone
else's (named apart from 0007's `*_search_trgm`, which are the ones every reader's search uses). Where 0007 could not
create the extension it warned how to add it (`migrate authoring 0006 && migrate authoring` runs this one again too);
until then this index is skipped as well.
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Left

INDEX = "task_approved_title_trgm"


def approved_titles_fill(apps, schema_editor) -> None:
    Task, TaskVersion = apps.get_model("authoring", "Task"), apps.get_model("authoring", "TaskVersion")
    title = (
        TaskVersion.objects.filter(pk=OuterRef("approved_version_id"))
        .annotate(title=Left(KeyTextTransform("title", "spec"), 200))
        .values("title")[:1]
    )
    Task.objects.filter(approved_version__isnull=False).update(
        approved_title=Coalesce(Subquery(title, output_field=models.CharField()), models.Value(""))
    )


def _trigram_ready(schema_editor) -> bool:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        return cursor.fetchone() is not None


def index_create(apps, schema_editor) -> None:
    if not _trigram_ready(schema_editor):
        return
    connection = schema_editor.connection
    Task = apps.get_model("authoring", "Task")
    field = Task._meta.get_field("approved_title")
    # the expression `approved_title__icontains` compiles to (authoring.selectors.task_list), as 0007 does
    expression = connection.ops.lookup_cast("icontains", field.get_internal_type()) % schema_editor.quote_name(
        field.column
    )
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(INDEX)} ON "
        f"{schema_editor.quote_name(Task._meta.db_table)} USING gin (({expression}) gin_trgm_ops)"
    )


def index_drop(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(INDEX)}")


class Migration(migrations.Migration):
    dependencies = [
        ("authoring", "0007_task_search_trigram_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="approved_title",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.RunPython(approved_titles_fill, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(index_create, index_drop, elidable=False),
    ]
