import django.db.models.deletion
from django.db import migrations, models


def copy_from_authoring(apps, schema_editor):
    """authoring 0010 kept an environment's judge on Environment.judge_endpoint: the choices made there move here
    before authoring 0011 drops that column."""
    Environment = apps.get_model("authoring", "Environment")
    EnvironmentJudge = apps.get_model("grading", "EnvironmentJudge")
    EnvironmentJudge.objects.bulk_create(
        EnvironmentJudge(environment_id=environment_id, endpoint_id=endpoint_id)
        for environment_id, endpoint_id in Environment.objects.filter(judge_endpoint__isnull=False).values_list(
            "pk", "judge_endpoint_id"
        )
    )


def copy_back_to_authoring(apps, schema_editor):
    """Unapplied (after authoring 0011, which gives the column back): the choices go back to the column."""
    Environment = apps.get_model("authoring", "Environment")
    EnvironmentJudge = apps.get_model("grading", "EnvironmentJudge")
    for environment_id, endpoint_id in EnvironmentJudge.objects.filter(endpoint__isnull=False).values_list(
        "environment_id", "endpoint_id"
    ):
        Environment.objects.filter(pk=environment_id).update(judge_endpoint_id=endpoint_id)


class Migration(migrations.Migration):
    dependencies = [
        ("authoring", "0010_environment_judge_endpoint"),
        ("grading", "0006_grade_scoring_rule"),
    ]

    operations = [
        migrations.CreateModel(
            name="EnvironmentJudge",
            fields=[
                (
                    "environment",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="judge_choice",
                        serialize=False,
                        to="authoring.environment",
                    ),
                ),
                (
                    "endpoint",
                    models.ForeignKey(
                        blank=True,
                        limit_choices_to={"role": "judge"},
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="environment_judges",
                        to="grading.modelendpoint",
                    ),
                ),
            ],
        ),
        migrations.RunPython(copy_from_authoring, copy_back_to_authoring),
    ]
