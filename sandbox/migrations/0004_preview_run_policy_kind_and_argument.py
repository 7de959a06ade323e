"""A preview run's policy kind and argument in their own columns, filled from the policy string."""

from django.db import migrations, models

WITH_ARGUMENT = ("probe", "hack")


def split_policies(apps, schema_editor):
    PreviewRun = apps.get_model("sandbox", "PreviewRun")
    for preview_run in PreviewRun.objects.only("id", "policy").iterator():
        kind, _, argument = preview_run.policy.partition(":")
        PreviewRun.objects.filter(pk=preview_run.pk).update(
            policy_kind=kind, policy_argument=argument if kind in WITH_ARGUMENT else ""
        )


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0003_model_endpoint_moves_to_grading"),
    ]

    operations = [
        migrations.AddField(
            model_name="previewrun",
            name="policy_kind",
            field=models.CharField(default="", help_text="oracle, nop, probe, model, hack, ...", max_length=20),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="previewrun",
            name="policy_argument",
            field=models.TextField(blank=True, default="", help_text="The probe text or the hack name."),
        ),
        migrations.AlterField(
            model_name="previewrun",
            name="policy",
            field=models.CharField(help_text='"oracle", "nop", "probe:TEXT", "hack:NAME" or "model".', max_length=2100),
        ),
        migrations.RunPython(split_policies, migrations.RunPython.noop),
    ]
