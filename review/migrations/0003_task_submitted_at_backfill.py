"""Task.submitted_at (authoring 0006) for the tasks that exist: the time of the latest submission of each task's latest
version, which the review queue read from the submissions until then."""

from django.db import migrations
from django.db.models import OuterRef, Subquery


def backfill(apps, schema_editor):
    Task = apps.get_model("authoring", "Task")
    Submission = apps.get_model("review", "Submission")
    latest = (
        Submission.objects.filter(task_version=OuterRef("latest_version"))
        .order_by("-created_at")
        .values("created_at")[:1]
    )
    Task.objects.filter(latest_version__isnull=False).update(submitted_at=Subquery(latest))


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0002_submissions_comments_inbox"),
        ("authoring", "0006_task_submitted_at"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
