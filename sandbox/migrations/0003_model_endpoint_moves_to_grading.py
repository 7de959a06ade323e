"""ModelEndpoint now lives in grading (grading/0002 took over and renamed its table): drop only the state."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0002_preview_run_rollout"),
        ("grading", "0002_model_endpoint"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ModelEndpoint")],
            database_operations=[],
        ),
    ]
