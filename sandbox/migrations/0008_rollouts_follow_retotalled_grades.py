"""After grading 0006 totalled stored grades again under scoring rule 2 (issue 26): each rollout's reward
and pass flag repeat its grade's again, and each finished preview run's summary is worked out again from
them, with the oldest scoring rule of its grades (`scoring_rule`: pack calibration leaves out a summary of
rule-1 grades)."""

from django.db import migrations
from django.db.models import OuterRef, Subquery


def follow_grades(apps, schema_editor):
    from sandbox.selectors import preview_run_summary

    Grade = apps.get_model("grading", "Grade")
    Rollout = apps.get_model("sandbox", "Rollout")
    PreviewRun = apps.get_model("sandbox", "PreviewRun")
    grade = Grade.objects.filter(pk=OuterRef("grade_id"))
    Rollout.objects.filter(grade__isnull=False).update(
        reward=Subquery(grade.values("reward")[:1]), passed=Subquery(grade.values("passed")[:1])
    )
    finished = PreviewRun.objects.filter(status__in=["done", "cancelled"]).only("id", "policy_kind")
    for run in finished.iterator(chunk_size=500):
        rows = list(
            Rollout.objects.filter(preview_run_id=run.pk).values(
                "status", "reward", "passed", "grade__complete", "grade__scoring_rule"
            )
        )
        PreviewRun.objects.filter(pk=run.pk).update(
            summary=preview_run_summary(policy_kind=run.policy_kind, rollouts=rows)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0006_grade_scoring_rule"),
        ("sandbox", "0007_remove_rollout_grade_document"),
    ]

    operations = [
        migrations.RunPython(follow_grades, migrations.RunPython.noop, elidable=True),
    ]
