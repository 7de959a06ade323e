"""Grades stored under scoring rule 1 (issue 26): unscored checks were left out of `max` and an unscored
`required` check did not gate. Each grade gets `reward_upper` and `scoring_rule`; existing rows are rule 1,
then every one whose document allows it is totalled again under the current rule (its checks' statuses,
scores and points are all that needs, plus the rubric's aggregate for a group that was scored over unscored
children) and marked rule 2. What cannot be totalled again stays rule 1: the gates say "graded under the
old scoring rule — run it again", pack calibration leaves it out."""

from django.db import migrations, models

RULE = 2  # grading.engine.scoring.SCORING_RULE when this migration was written


def retotal_grades(apps, schema_editor):
    from grading.engine.models import flat_checks
    from grading.engine.scoring import retotal

    Grade = apps.get_model("grading", "Grade")
    CheckResult = apps.get_model("grading", "CheckResult")
    rows = Grade.objects.filter(scoring_rule=1).select_related("task_version").order_by("pk")
    for grade in rows.iterator(chunk_size=500):
        document = grade.document if isinstance(grade.document, dict) else None
        if document is None:
            continue
        spec = grade.task_version.spec if grade.task_version is not None else None
        rubric = spec.get("rubric") if isinstance(spec, dict) and isinstance(spec.get("rubric"), dict) else None
        try:
            again = retotal(document, rubric=rubric)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # stays rule 1: graded again or run again before anything relies on it
        Grade.objects.filter(pk=grade.pk).update(
            reward=again["reward"],
            reward_upper=again["reward_upper"],
            earned=again["earned"],
            max=again["max"],
            passed=again["passed"],
            gated=again["gated"],
            complete=again["complete"],
            document=again,
            scoring_rule=RULE,
        )
        results = {row.check_id: row for row in CheckResult.objects.filter(grade_id=grade.pk)}
        changed = []
        for check, _, _, _ in flat_checks(again["checks"]):
            row = results.get(check.get("id"))
            if row is None:
                continue
            status, score, awarded = check.get("status"), check.get("score"), check.get("awarded")
            if (row.status, row.score, row.awarded) != (status, score, awarded):
                row.status, row.score, row.awarded = status, score, awarded
                if status == "unscored":
                    row.explanation = check.get("explanation") or row.explanation
                changed.append(row)
        CheckResult.objects.bulk_update(changed, ["status", "score", "awarded", "explanation"])


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0005_job_enqueued_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="grade",
            name="reward_upper",
            field=models.FloatField(blank=True, null=True),
        ),
        # Existing rows were totalled under rule 1; new ones under the engine's current rule.
        migrations.AddField(
            model_name="grade",
            name="scoring_rule",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AlterField(
            model_name="grade",
            name="scoring_rule",
            field=models.PositiveSmallIntegerField(default=RULE),
        ),
        migrations.RunPython(retotal_grades, migrations.RunPython.noop, elidable=True),
    ]
