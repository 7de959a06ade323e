"""What the review page shows as evidence for one exact version: its latest previews with their
calibration, checks that do not discriminate, and a warning when only older versions were previewed."""

from __future__ import annotations

from authoring.models import TaskVersion
from grading.engine.calibration import non_discriminating
from grading.models import CheckResult
from sandbox.models import PreviewRun, Rollout

MIN_ROLLOUTS_FOR_DISCRIMINATION = 8


def version_previews(*, task_version: TaskVersion, limit: int = 10) -> list[PreviewRun]:
    """This version's latest preview runs (newest first), each with `rewards` of its rollouts."""
    runs = list(
        PreviewRun.objects.filter(task_version=task_version)
        .select_related("created_by")
        .order_by("-created_at", "-id")[:limit]
    )
    rewards: dict[int, list] = {run.pk: [] for run in runs}
    for row in Rollout.objects.filter(preview_run__in=runs).values("preview_run_id", "reward"):
        rewards[row["preview_run_id"]].append(row["reward"])
    for run in runs:
        run.rewards = [r for r in rewards[run.pk] if r is not None]
    return runs


def older_previews_only(*, task_version: TaskVersion) -> TaskVersion | None:
    """When this version has no preview but an earlier one does: the newest such earlier version."""
    if PreviewRun.objects.filter(task_version=task_version).exists():
        return None
    run = (
        PreviewRun.objects.filter(
            task_version__task_id=task_version.task_id, task_version__number__lt=task_version.number
        )
        .select_related("task_version")
        .order_by("-task_version__number")
        .first()
    )
    return run.task_version if run else None


def discrimination(*, task_version: TaskVersion) -> dict:
    """Flags from the latest finished preview of this version with at least 8 graded rollouts:
    {"run": PreviewRun | None, "flags": {check_id: CheckDiscrimination}}."""
    for run in PreviewRun.objects.filter(
        task_version=task_version, status=PreviewRun.Status.DONE, n__gte=MIN_ROLLOUTS_FOR_DISCRIMINATION
    ).order_by("-created_at", "-id")[:5]:
        grade_ids = list(
            Rollout.objects.filter(preview_run=run, grade__isnull=False).values_list("grade_id", flat=True)
        )
        if len(grade_ids) < MIN_ROLLOUTS_FOR_DISCRIMINATION:
            continue
        per_grade: dict[int, dict] = {grade_id: {} for grade_id in grade_ids}
        for row in CheckResult.objects.filter(grade_id__in=grade_ids).values("grade_id", "check_id", "status", "score"):
            per_grade[row["grade_id"]][row["check_id"]] = (
                row["score"] if row["status"] == CheckResult.Status.SCORED else None
            )
        flags = {
            item.check_id: item
            for item in non_discriminating(per_grade.values(), min_rollouts=MIN_ROLLOUTS_FOR_DISCRIMINATION)
        }
        return {"run": run, "flags": {check_id: item for check_id, item in flags.items() if item.flag}}
    return {"run": None, "flags": {}}
