from django.db import migrations


class Migration(migrations.Migration):
    """An environment's judge is grading's data now (grading.EnvironmentJudge): grading 0007 copies the choices made
    on this column first, then it goes."""

    dependencies = [
        ("authoring", "0011_environment_judge_validation"),
        ("grading", "0007_environment_judge"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="environment",
            name="judge_endpoint",
        ),
    ]
