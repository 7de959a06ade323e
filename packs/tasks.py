"""Celery jobs for packs: interfaces only, the work is in packs.services.

Builds whose worker died (or whose job was lost) are reaped as rollouts are (sandbox.tasks),
without Celery beat: once when a worker starts, then every half stale period from that
worker's own timer, and by `manage.py reap_pack_builds`; so are the scratch folders of builds
no process runs any more (a worker killed mid-build), each host its own.
"""

from __future__ import annotations

import logging

from celery import Task, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import close_old_connections, connection

from packs import services
from packs.services import health

logger = logging.getLogger(__name__)


def _failing_its_row(fail, id_name: str, what: str) -> type[Task]:
    """A job base class whose `on_failure` ends the job's row with the reason: the job itself blew up (database
    down mid-way, storage gone, a time limit), and the row must say why, or its page waits on it for ever."""

    class FailsItsRow(Task):
        def on_failure(self, exc, task_id, args, kwargs, einfo):
            row_id = (args or [None])[0] if args else kwargs.get(id_name)
            if row_id is None:
                return
            try:
                fail(int(row_id), f"{what} stopped: {type(exc).__name__}: {exc}")
            except Exception:
                logger.exception("could not mark %s %s as failed", id_name, row_id)

    return FailsItsRow


PackBuildTask = _failing_its_row(
    lambda row_id, reason: services.pack_version_fail(pack_version_id=row_id, reason=reason),
    "pack_version_id",
    "the build job",
)
PackVerificationTask = _failing_its_row(
    lambda row_id, reason: services.pack_verification_fail(verification_id=row_id, reason=reason),
    "verification_id",
    "the check",
)


@shared_task(
    bind=True,
    base=PackBuildTask,
    name="packs.pack_version_build",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=3600,
    time_limit=3700,
)
def pack_version_build_job(self, pack_version_id: int) -> str:
    return services.pack_version_build(pack_version_id=int(pack_version_id)).status


@shared_task(
    bind=True,
    base=PackVerificationTask,
    name="packs.pack_verification_run",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=3600,
    time_limit=3700,
)
def pack_verification_run_job(self, verification_id: int) -> None:
    services.pack_verification_run(verification_id=int(verification_id))


DatasetCheckTask = _failing_its_row(
    lambda row_id, reason: health.dataset_check_fail(check_id=row_id, reason=reason),
    "check_id",
    "the health check",
)


@shared_task(
    bind=True,
    base=DatasetCheckTask,
    name="packs.dataset_check_run",
    queue=settings.DATASET_CHECK_QUEUE,  # a check holds its worker for hours: a queue and worker of its own
    acks_late=True,
    ignore_result=True,
    # every task's budget plus the whole run's: the run itself stops taking tasks at DATASET_CHECK_TOTAL_S
    soft_time_limit=settings.DATASET_CHECK_TOTAL_S + settings.DATASET_CHECK_TASK_S + 60,
    time_limit=settings.DATASET_CHECK_TOTAL_S + settings.DATASET_CHECK_TASK_S + 120,
)
def dataset_check_run_job(self, check_id: int) -> None:
    health.dataset_check_run(check_id=int(check_id))


@shared_task(name="packs.pack_versions_reap_stale", ignore_result=True)
def pack_versions_reap_stale() -> list[int]:
    return services.pack_versions_reap_stale()


def _reap_quietly() -> None:
    if not connection.in_atomic_block:
        close_old_connections()
    try:
        services.pack_versions_reap_stale()
    except Exception:  # reaping is best effort; the next tick retries
        logger.exception("reaping stale pack builds failed")
    try:
        health.dataset_checks_reap_stale()
    except Exception:
        logger.exception("reaping stale health checks failed")
    try:  # after the reap: the builds it failed leave their scratch folders to this host's next pass at most
        services.pack_scratch_reap()
    except Exception:
        logger.exception("removing orphaned pack scratch folders failed")


def reap_interval_s() -> float:
    return max(2.0, settings.PACK_BUILD_STALE_AFTER_S / 2)


@worker_ready.connect
def _reap_from_worker(sender=None, **kwargs):
    """Reap at start-up, then periodically from the worker's own event-loop timer (a queued reap job
    would wait behind the builds it is meant to check on)."""
    _reap_quietly()
    timer = getattr(sender, "timer", None)
    if timer is not None:
        timer.call_repeatedly(reap_interval_s(), _reap_quietly)
