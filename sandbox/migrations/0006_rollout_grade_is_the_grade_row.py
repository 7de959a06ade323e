"""A rollout's grade is its grading.Grade row alone: the JSON copy `Rollout.grade_document` goes (0007).

First, rollouts that had the copy but no row (cancelled after they were graded: only finished ones were
stored as rows) get a Grade row and its check rows first, built from the copy as grade_record
builds them, so nothing saved is lost.
"""

from django.db import migrations


def grades_from_copies(apps, schema_editor):
    from grading import engine

    Rollout = apps.get_model("sandbox", "Rollout")
    Grade = apps.get_model("grading", "Grade")
    CheckResult = apps.get_model("grading", "CheckResult")
    only_copies = (
        Rollout.objects.filter(grade__isnull=True, grade_document__isnull=False)
        .select_related("preview_run")
        .only("id", "grade_document", "preview_run__task_version_id")
    )
    for rollout in only_copies.iterator(chunk_size=500):
        document = (
            rollout.grade_document if isinstance(rollout.grade_document, dict) else {"value": rollout.grade_document}
        )
        try:
            grade = engine.Grade.model_validate(document)
        except Exception:  # noqa: BLE001 - a copy the engine no longer reads: keep it whole, without check rows
            grade = None
        source = grade.model_dump() if grade is not None else document
        stored = Grade.objects.create(
            task_version_id=rollout.preview_run.task_version_id,
            rollout_id=rollout.id,
            source="rollout",
            reward=min(max(float(source.get("reward") or 0), 0.0), 1.0),
            earned=float(source.get("earned") or 0),
            max=float(source.get("max") or 0),
            passed=bool(source.get("passed")),
            gated=bool(source.get("gated")),
            complete=bool(source.get("complete", True)),
            document=document,
        )
        if grade is not None:
            CheckResult.objects.bulk_create(
                [
                    CheckResult(
                        grade=stored,
                        position=position,
                        depth=depth,
                        parent_check_id=parent,
                        check_id=check.id,
                        kind=check.kind,
                        title="",
                        status=check.status,
                        score=check.score,
                        points=check.points,
                        awarded=check.awarded,
                        required=check.required,
                        explanation=check.explanation,
                        votes=list(check.votes or []),
                        duration_ms=check.duration_ms,
                    )
                    for position, (check, parent, depth, _) in enumerate(engine.flat_checks(grade.checks))
                ]
            )
        Rollout.objects.filter(pk=rollout.pk).update(grade=stored)


class Migration(migrations.Migration):
    dependencies = [
        ("sandbox", "0005_rollout_enqueued_at"),
        ("grading", "0003_example_runs"),
    ]

    operations = [
        migrations.RunPython(grades_from_copies, migrations.RunPython.noop),
    ]
