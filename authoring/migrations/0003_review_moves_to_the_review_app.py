"""Review moves to the review app. Its table and rows stay: here the model only leaves
authoring's migration state; review.0001 takes it over and renames the table."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("authoring", "0002_task_approved_version"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Review")],
            database_operations=[],
        ),
    ]
