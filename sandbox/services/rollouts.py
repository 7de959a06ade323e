"""Rollouts' status machine: claim, heartbeat, fail, re-queue, and the reaper of stale rollouts and
lost job messages (see `sandbox.services`)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from authoring.models import TaskVersion
from grading.engine.text import storable_text
from gymwright import jobs
from sandbox.models import PreviewRun, Rollout
from sandbox.services.previews import (
    _claimed,
    _rollout_job,
    _rollouts_wait_for_broker,
    preview_run_refresh,
    rollout_time_limits,
)

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Rollouts: claim, progress, finish


def rollout_claim(*, rollout_id: int, worker: str) -> int | None:
    """Claim a queued rollout for `worker`; the claim's attempt number, or None if someone else has it."""
    now = timezone.now()
    claimed = Rollout.objects.filter(pk=rollout_id, status=Rollout.Status.QUEUED).update(
        status=Rollout.Status.RUNNING,
        worker=worker[:200],
        attempts=F("attempts") + 1,
        started_at=now,
        heartbeat_at=now,
        progress={"phase": "starting"},
        error="",
    )
    if claimed != 1:
        return None
    [(attempts, preview_run_id, run_status)] = _claimed(rollout_id=rollout_id)
    # A claimed rollout means its run is under way: one conditional UPDATE (by the run's first claim), no recount.
    if run_status == PreviewRun.Status.QUEUED:
        PreviewRun.objects.filter(pk=preview_run_id, status=PreviewRun.Status.QUEUED).update(
            status=PreviewRun.Status.RUNNING
        )
    return attempts


def claimed_rollout(rollout_id: int, attempt: int):
    """The rollout row, only while this claim still holds it."""
    return Rollout.objects.filter(pk=rollout_id, attempts=attempt, status__in=Rollout.ACTIVE)


def rollout_heartbeat(
    *,
    rollout_id: int,
    attempt: int,
    progress: dict | None = None,
    steps: int | None = None,
    phase_grading: bool = False,
) -> bool:
    """Record that the claim is alive (and its progress). False when the claim was lost."""
    changes: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if progress is not None:
        changes["progress"] = progress
    if steps is not None:
        changes["steps"] = steps
    if phase_grading:
        return (
            bool(
                Rollout.objects.filter(pk=rollout_id, attempts=attempt, status=Rollout.Status.RUNNING).update(
                    status=Rollout.Status.GRADING, **changes
                )
            )
            or claimed_rollout(rollout_id, attempt).exists()
        )
    return bool(claimed_rollout(rollout_id, attempt).update(**changes))


def rollout_fail(*, rollout_id: int, reason: str, attempt: int | None = None, stale_before=None) -> bool:
    """Mark a not-yet-finished rollout as error with `reason`. With `attempt`, only that claim's;
    with `stale_before`, only if it has not beaten since."""
    queryset = Rollout.objects.filter(pk=rollout_id)
    if stale_before is not None:
        queryset = queryset.filter(_not_beaten_since(stale_before))
    if attempt is not None:
        queryset = queryset.filter(attempts=attempt, status__in=Rollout.ACTIVE)
    else:
        queryset = queryset.filter(status__in=[Rollout.Status.QUEUED, *Rollout.ACTIVE])
    now = timezone.now()
    failed = queryset.update(
        status=Rollout.Status.ERROR,
        error=storable_text(reason or "failed without a reason")[:5000],
        finished_at=now,
        heartbeat_at=now,
    )
    if failed:
        logger.warning("rollout %s failed: %s", rollout_id, reason)
        preview_run_id = Rollout.objects.filter(pk=rollout_id).values_list("preview_run_id", flat=True).first()
        preview_run_refresh(preview_run_id=preview_run_id)
    return bool(failed)


def rollout_requeue(
    *, rollout_id: int, attempt: int, note: str, countdown: float | None = None, stale_before=None
) -> bool:
    """Put this claim's rollout back in the queue (a transient failure, a dead worker), with a new job.

    `stale_before`: only if the claim has not beaten since then (the reaper's check, repeated
    inside the UPDATE so that a worker that beat in the meantime keeps its rollout).
    """
    with transaction.atomic():
        queryset = Rollout.objects.filter(pk=rollout_id, attempts=attempt, status__in=Rollout.ACTIVE)
        if stale_before is not None:
            queryset = queryset.filter(_not_beaten_since(stale_before))
        requeued = queryset.update(
            status=Rollout.Status.QUEUED,
            worker="",
            heartbeat_at=None,
            progress={"note": note[:500]},
            enqueued_at=timezone.now() + timedelta(seconds=countdown or 0),
        )
        if requeued:
            rollout = Rollout.objects.select_related("preview_run__task_version").get(pk=rollout_id)
            soft, hard = rollout_time_limits(rollout.preview_run.task_version)
            jobs.send_on_commit(
                _rollout_job(soft=soft, hard=hard, countdown=countdown),
                [rollout_id],
                on_unsent=_rollouts_wait_for_broker,
            )
    return bool(requeued)


def _not_beaten_since(moment) -> Q:
    return Q(heartbeat_at__lt=moment) | Q(heartbeat_at__isnull=True, started_at__lt=moment)


def rollouts_reap_stale(*, stale_after_s: float | None = None, now=None) -> dict:
    """Rollouts whose worker stopped beating: re-queue once, then fail with "worker lost"; the same for the
    sandbox runs of example answers (sandbox.example_answers.example_runs_reap_stale).

    Also asks the docker backend to remove containers whose rollout is over, so a
    dead worker leaves nothing running behind. Safe to run from any number of
    processes at once: every change is a conditional UPDATE.
    """
    stale_after_s = settings.ROLLOUT_STALE_AFTER_S if stale_after_s is None else stale_after_s
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=stale_after_s)
    stale = list(
        Rollout.objects.filter(status__in=Rollout.ACTIVE)
        .filter(_not_beaten_since(cutoff))
        .values("pk", "attempts", "worker")
    )
    result = {"requeued": [], "failed": []}
    for row in stale:
        reason = f"worker lost: {row['worker'] or 'a worker'} stopped responding for more than {stale_after_s:g} s"
        if row["attempts"] < Rollout.MAX_ATTEMPTS:
            if rollout_requeue(
                rollout_id=row["pk"], attempt=row["attempts"], note=f"re-queued ({reason})", stale_before=cutoff
            ):
                result["requeued"].append(row["pk"])
                logger.warning("re-queued stale rollout %s (%s)", row["pk"], reason)
        elif rollout_fail(rollout_id=row["pk"], attempt=row["attempts"], reason=reason, stale_before=cutoff):
            result["failed"].append(row["pk"])
    result["resent"] = _resend_lost_messages(now=now)
    result["containers_removed"] = _reap_containers()
    from sandbox.example_answers import example_runs_reap_stale

    # Sandbox runs of example answers are rollouts too: reaped on the same timer.
    result["example_runs"] = example_runs_reap_stale(now=now)
    return result


def _resend_lost_messages(*, now, lost_before=None) -> list[int]:
    """Send again the jobs of QUEUED rollouts nobody claimed whose message the broker did not take (waiting for
    it: `enqueued_at` NULL), was sent more than ROLLOUT_REQUEUE_AFTER_S ago (lost without a trace), or was sent
    before `lost_before` (the broker check found that the broker lost its messages). A message that was only
    slow does no harm: the claim lets one job run and the other walks away."""
    cutoff = now - timedelta(seconds=settings.ROLLOUT_REQUEUE_AFTER_S)
    if lost_before is not None:
        cutoff = max(cutoff, lost_before)
    versions: dict[int, TaskVersion] = {}

    def job(row) -> jobs.Job:
        version_id = row["preview_run__task_version_id"]
        if version_id not in versions:
            versions[version_id] = TaskVersion.objects.only("id", "spec").get(pk=version_id)
        soft, hard = rollout_time_limits(versions[version_id])
        return _rollout_job(soft=soft, hard=hard)

    resent = jobs.resend(
        Rollout.objects.filter(status=Rollout.Status.QUEUED, preview_run__cancel_requested=False),
        lost_before=cutoff,
        job=job,
        on_unsent=_rollouts_wait_for_broker,
        fields=("preview_run__task_version_id",),
    )
    if resent:
        logger.warning("re-sent the job messages of %d queued rollouts nobody claimed: %s", len(resent), resent)
    return resent


def rollouts_resend(lost_before=None) -> list[int]:
    """The broker check's resender (gymwright.jobs): rollouts waiting for the broker, or lost by it."""
    return _resend_lost_messages(now=timezone.now(), lost_before=lost_before)


def _reap_containers() -> int:
    """Remove sandboxes left behind by dead workers: docker containers on the engine, or
    bubblewrap directories and cgroups on this host (each worker host reaps its own)."""
    try:
        if settings.SANDBOX_BACKEND == "docker":
            from sandbox.runtime.backends.docker import reap_containers

            return len(reap_containers() or [])
        from sandbox.runtime.backends.bubblewrap import reap_bubblewrap

        return len(reap_bubblewrap(settings.SANDBOX_WORK_DIR) or [])
    except Exception:  # the engine may be down; the next reap tries again
        logger.exception("could not reap sandboxes")
        return 0
