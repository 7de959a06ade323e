"""The grade copy goes once every rollout's grade is a row (0006): one table change per transaction."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0006_rollout_grade_is_the_grade_row"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="rollout",
            name="grade_document",
        ),
    ]
