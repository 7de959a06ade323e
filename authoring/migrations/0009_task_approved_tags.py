"""Task.approved_tags and Task.approved_at: the approved version's tags, and when it was approved, what a lab member is
shown, filters by and sorts on.

`Task.tags` follows every new version (authoring.services rewrites it) and `Task.updated_at` every version and
review, so a lab member's task list, tag menu, `?tag=` filter, task page and `/api/tasks/` showed, and found tasks by,
tags only a draft had, and dated an approved task by a draft's save. As `approved_title` (0008), the head keeps a
copy, set wherever `approved_version` is (review.services), and filled here: the tags from each approved version's
own document (as packs.services.selected_versions reads them), the time from the task's latest approval in its audit
log (both ways of approving write one), or its last update where there is none.
"""

from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce

CHUNK = 2000


def approved_fill(apps, schema_editor) -> None:
    Task, TaskVersion = apps.get_model("authoring", "Task"), apps.get_model("authoring", "TaskVersion")
    Tag, AuditEvent = apps.get_model("authoring", "Tag"), apps.get_model("authoring", "AuditEvent")
    approvals = (
        AuditEvent.objects.filter(
            verb="approve", content_type__app_label="authoring", content_type__model="task", object_id=OuterRef("pk")
        )
        .order_by("-created_at", "-id")
        .values("created_at")[:1]
    )
    approved = Task.objects.filter(approved_version__isnull=False)
    approved.update(approved_at=Coalesce(Subquery(approvals, output_field=models.DateTimeField()), F("updated_at")))

    through = Task.approved_tags.through
    tag_ids: dict[str, int] = {}
    versions = (
        TaskVersion.objects.filter(pk__in=approved.values("approved_version_id"))
        .order_by()
        .values_list("task_id", "spec__tags")
    )
    chunk: list[tuple[int, str]] = []

    def flush() -> None:
        names = {name for _, name in chunk if name not in tag_ids}
        if names:
            # every version's tags were made Tag rows when it was saved: a missing one is made here all the same
            Tag.objects.bulk_create([Tag(name=name) for name in sorted(names)], ignore_conflicts=True)
            tag_ids.update(Tag.objects.filter(name__in=names).values_list("name", "pk"))
        through.objects.bulk_create(
            [through(task_id=task_id, tag_id=tag_ids[name]) for task_id, name in chunk], ignore_conflicts=True
        )
        chunk.clear()

    for task_id, names in versions.iterator(chunk_size=CHUNK):
        if isinstance(names, list):  # a version's document holds its tags as a list of names (authoring.services)
            chunk.extend(
                (task_id, name)
                for name in dict.fromkeys(names)
                if isinstance(name, str) and 0 < len(name) <= Tag._meta.get_field("name").max_length
            )
        if len(chunk) >= CHUNK:
            flush()
    flush()


class Migration(migrations.Migration):
    dependencies = [
        ("authoring", "0008_task_approved_title"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="approved_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="approved_tags",
            field=models.ManyToManyField(blank=True, related_name="approved_tasks", to="authoring.tag"),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("approved_version__isnull", False)),
                fields=["-approved_at", "-id"],
                name="task_approved_order",
            ),
        ),
        migrations.RunPython(approved_fill, migrations.RunPython.noop, elidable=True),
    ]
