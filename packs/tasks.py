"""Celery jobs for packs: interfaces only, the work is in packs.services."""

from __future__ import annotations

import logging

from celery import Task, shared_task

from packs import services

logger = logging.getLogger(__name__)


class PackBuildTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        # The job itself blew up (database down mid-way, time limit): the version must say why.
        pack_version_id = (args or [None])[0] if args else kwargs.get("pack_version_id")
        if pack_version_id is None:
            return
        try:
            services.pack_version_fail(pack_version_id=int(pack_version_id),
                                       reason=f"the build job stopped: {type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001
            logger.exception("could not mark pack version %s as failed", pack_version_id)


@shared_task(bind=True, base=PackBuildTask, name="packs.pack_version_build", acks_late=True, ignore_result=True,
             soft_time_limit=3600, time_limit=3700)
def pack_version_build_job(self, pack_version_id: int) -> str:
    return services.pack_version_build(pack_version_id=int(pack_version_id)).status
