"""Celery jobs for previews: interfaces only, the work is in sandbox.services (state) and sandbox.worker (execution).

`rollout_run` takes a rollout id (JSON), and is safe to deliver twice: the
service claims the row with a conditional UPDATE and walks away when it is
not queued. Stale rollouts (their worker died) and queued rollouts whose message
was lost are reaped without Celery beat: once when a worker starts, then every
half period from that worker's own timer, and by `manage.py reap_rollouts`.
"""

from __future__ import annotations

import logging
import os

from celery import Task, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import close_old_connections, connection

from sandbox import services, worker

logger = logging.getLogger(__name__)


class RolloutTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        # Reached when the job itself blew up (database down mid-way, hard time limit in
        # the parent process): the rollout must still say why it stopped.
        rollout_id = (args or [None])[0] if args else kwargs.get("rollout_id")
        if rollout_id is None:
            return
        try:
            services.rollout_fail(rollout_id=int(rollout_id), reason=worker.failure_reason(exc))
        except Exception:  # the reaper will get it
            logger.exception("could not mark rollout %s as failed", rollout_id)


# Defaults for a job sent without options; preview_run_create sends each with its task's own limits.
_DEFAULT_SOFT_LIMIT_S = 600 + services.TIME_LIMIT_MARGIN_S


@shared_task(
    bind=True,
    base=RolloutTask,
    name="sandbox.rollout_run",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=_DEFAULT_SOFT_LIMIT_S,
    time_limit=_DEFAULT_SOFT_LIMIT_S + services.HARD_TIME_LIMIT_EXTRA_S,
)
def rollout_run(self, rollout_id: int) -> str:
    # No reap here: a sweep after every job cost each rollout a scan; the worker's timer reaps.
    outcome = worker.rollout_execute(rollout_id=int(rollout_id), worker=f"{self.request.hostname}:{os.getpid()}")
    _release_connection()
    return outcome


class ExampleAnswersJob(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        from grading import services as grading_services

        example_run_id = kwargs.get("example_run_id", args[0] if args else None)
        if example_run_id is not None:
            grading_services.example_answers_fail(
                example_run_id=int(example_run_id), error=f"Grading failed: {worker.failure_reason(exc)}"
            )


# A redelivered message finds the run claimed and walks away; example_run_enqueue sends the time limits.
@shared_task(base=ExampleAnswersJob, name="sandbox.example_answers_grade", acks_late=True, ignore_result=True)
def example_answers_grade(example_run_id: int) -> None:
    from sandbox.example_answers import example_answers_grade_in_sandbox

    example_answers_grade_in_sandbox(example_run_id=int(example_run_id))
    _release_connection()


@shared_task(name="sandbox.rollouts_reap_stale", ignore_result=True)
def rollouts_reap_stale() -> dict:
    return services.rollouts_reap_stale()


def _release_connection() -> None:
    # Outside a request nothing closes a broken or idle connection for us; inside a
    # transaction (eager jobs in tests) the connection is not ours to close.
    if not connection.in_atomic_block:
        close_old_connections()


def _reap_quietly() -> None:
    _release_connection()
    try:
        result = services.rollouts_reap_stale()
        if result["requeued"] or result["failed"]:
            logger.warning("reaped stale rollouts: %s", result)
    except Exception:  # reaping is best effort; the next occasion retries
        logger.exception("reaping stale rollouts failed")
    finally:
        _release_connection()


def reap_interval_s() -> float:
    return max(2.0, min(settings.ROLLOUT_STALE_AFTER_S, settings.ROLLOUT_REQUEUE_AFTER_S) / 2)


@worker_ready.connect
def _reap_from_worker(sender=None, **kwargs):
    """Reap at start-up, then periodically from the worker's own event-loop timer.

    The reap is a few indexed UPDATEs, cheap enough for the consumer's timer, and a
    worker with every pool slot busy still reaps (a queued reap job would wait).
    """
    _reap_quietly()
    timer = getattr(sender, "timer", None)
    if timer is not None:
        timer.call_repeatedly(reap_interval_s(), _reap_quietly)
