"""Takes over authoring's Review model and its rows (authoring.0003 released it):
the model enters this app's state on the existing table, which is then renamed."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="review", model="review").exists():
        ContentType.objects.filter(app_label="authoring", model="review").update(app_label="review")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("authoring", "0003_review_moves_to_the_review_app"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Review",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "decision",
                            models.CharField(
                                choices=[
                                    ("approve", "Approve"),
                                    ("request_changes", "Request changes"),
                                    ("comment", "Comment"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("comment", models.TextField(blank=True)),
                        ("check_comments", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "reviewer",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="reviews",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "task_version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="reviews",
                                to="authoring.taskversion",
                            ),
                        ),
                    ],
                    options={"ordering": ["-created_at"], "db_table": "authoring_review"},
                ),
            ],
            database_operations=[],
        ),
        # authoring_review -> review_review, rows and all.
        migrations.AlterModelTable(name="review", table=None),
        migrations.RunPython(move_content_type, migrations.RunPython.noop),
    ]
