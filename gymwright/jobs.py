"""Sending Celery jobs, and getting them sent again when the broker could not take them or lost them.

Every job row (a rollout, a pack build, a pack check) records when its job message was sent (`enqueued_at`):

- A job is sent once its row commits (`send_on_commit`). A broker that cannot take it (down, restarting)
  never fails the request that saved the work: the rows are marked as waiting for the broker
  (`enqueued_at` NULL), the API answers 202 with their id and `waiting_for_broker`, the page says so.
- `broker_check` (each worker runs it at start and every GYMWRIGHT_BROKER_CHECK_S from its own timer,
  and `manage.py reap_rollouts` runs it) sends the jobs of waiting rows once the broker answers, and finds
  out whether the broker lost what it held: it keeps a canary message in a queue of its own that no
  worker reads. A broker that restarts without persistence (or is flushed) loses the canary with the
  job messages; a check that finds the canary gone has every queued row's job sent again. Duplicates do
  no harm: every job claims its row with a conditional UPDATE and walks away from one it cannot claim.

The apps say how to send their rows again with `resender_register` (their AppConfig.ready).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

# The queue the canary waits in: declared by the check, consumed by nobody (workers read their task queues).
CANARY_QUEUE = "gymwright.broker-canary"


def broker_errors() -> tuple[type[BaseException], ...]:
    """What a send raises when the broker cannot take a message: kombu wraps the transport's connection
    errors in OperationalError (after the publish retries); a socket may still fail underneath."""
    from kombu.exceptions import OperationalError

    return (OperationalError, ConnectionError, TimeoutError)


@dataclass(frozen=True)
class Job:
    """A Celery task and the options of its messages (time limits, a countdown)."""

    task: object  # a Celery task: .apply_async(args=[id], **options)
    options: dict | None = None


def send(job: Job, ids: Iterable[int], *, on_unsent: Callable[[list[int]], None]) -> list[int]:
    """Send `job` for each id now; the ids whose message the broker did not take. Those are passed to
    `on_unsent` (which marks their rows as waiting for the broker), and the broker's error is logged: the
    first refusal stops the sending (each one waits through the publish retries)."""
    ids = list(ids)
    for position, row_id in enumerate(ids):
        try:
            job.task.apply_async(args=[row_id], **(job.options or {}))
        except broker_errors() as exc:
            unsent = ids[position:]
            logger.warning(
                "the broker did not take %d %s job(s) (%s: %s); they wait for it: %s",
                len(unsent),
                getattr(job.task, "name", job.task),
                type(exc).__name__,
                exc,
                unsent,
            )
            on_unsent(unsent)
            return unsent
    return []


def send_on_commit(job: Job, ids: Iterable[int], *, on_unsent: Callable[[list[int]], None]) -> None:
    """`send` once the current transaction commits (never for rows a rollback removed); a broker that
    cannot take the jobs leaves their rows waiting (`on_unsent`), never an error for the caller."""
    ids = list(ids)
    transaction.on_commit(lambda: send(job, ids, on_unsent=on_unsent))


# ---------------------------------------------------------------------------------------------- resending


def resend(
    queryset,
    *,
    lost_before: datetime | None,
    job: Job | Callable[[dict], Job],
    on_unsent: Callable[[list[int]], None],
    update: Callable[..., int] | None = None,
    fields: tuple[str, ...] = (),
) -> list[int]:
    """Send again the jobs of the rows of `queryset` (the ones still waiting for their job: queued, not started)
    whose job waits for the broker (`enqueued_at` NULL) or was sent before `lost_before` (the broker lost it).
    Each re-send is claimed with a conditional UPDATE on the `enqueued_at` read, so of several checks at once one
    sends; the first refusal by the broker stops the round (the rest wait for the next). `job`: a Job, or a
    function of the row (its pk, enqueued_at and `fields`) that makes one; `update(queryset, **changes)`: how
    the rows are written (default: QuerySet.update). The ids re-sent."""
    from django.db.models import Q

    update = update or (lambda rows, **changes: rows.update(**changes))
    lost = Q(enqueued_at__isnull=True)
    if lost_before is not None:
        lost |= Q(enqueued_at__lt=lost_before)
    resent: list[int] = []
    for row in queryset.filter(lost).order_by("pk").values("pk", "enqueued_at", *fields):
        if update(queryset.filter(pk=row["pk"], enqueued_at=row["enqueued_at"]), enqueued_at=timezone.now()):
            if send(job(row) if callable(job) else job, [row["pk"]], on_unsent=on_unsent):
                break
            resent.append(row["pk"])
    return resent


# name -> resend(lost_before): send again the jobs of rows waiting for the broker and, when `lost_before`
# is a time, of every queued row whose message was sent before it (the broker lost it); the ids re-sent.
_resenders: dict[str, Callable[[datetime | None], list[int]]] = {}


def resender_register(name: str, resend: Callable[[datetime | None], list[int]]) -> None:
    _resenders[name] = resend


@dataclass
class BrokerCheck:
    lost: bool  # the canary was gone: the broker lost the messages it held (or never held one: a new broker)
    resent: dict[str, list[int]]


def _canary_present(app) -> bool:
    """Whether the canary is still in the broker; puts one there when it is not. Raises the broker's error
    when the broker does not answer."""
    from kombu import Exchange, Queue

    queue = Queue(
        CANARY_QUEUE,
        Exchange(CANARY_QUEUE, type="direct", durable=True),
        routing_key=CANARY_QUEUE,
        durable=True,
        auto_delete=False,
    )
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1)
        try:
            with connection.channel() as channel:
                count = queue(channel).queue_declare(passive=True)[1]
        except connection.channel_errors:  # no such queue: a Redis list is gone with its last message
            count = 0
        if count:
            return True
        # persistent (the default delivery mode): it outlives a broker restart exactly when job messages do
        with connection.Producer(serializer="json") as producer:
            producer.publish(
                {"canary": timezone.now().isoformat()},
                exchange=queue.exchange,
                routing_key=CANARY_QUEUE,
                declare=[queue],
                retry=False,
            )
        return False


def broker_check(*, now=None) -> BrokerCheck:
    """Send the jobs of rows waiting for the broker and, when the canary shows the broker lost its messages,
    of every queued row sent before now. Raises the broker's error when the broker does not answer (the
    rows keep waiting; the next check tries again). Safe from any number of processes at once: each resender
    claims a row's re-send with a conditional UPDATE."""
    from gymwright.celery import app

    now = now or timezone.now()
    lost = not _canary_present(app)
    if lost:
        logger.warning(
            "the broker has no canary: it lost the messages it held (restarted without persistence, "
            "or flushed), or it is new; sending the jobs of every queued row again"
        )
    resent = {}
    for name, resend in list(_resenders.items()):
        try:
            resent[name] = resend(now if lost else None)
        except Exception:  # one kind's failure must not keep the others waiting
            logger.exception("re-sending the %s jobs failed", name)
            resent[name] = []
    if any(resent.values()):
        logger.warning(
            "re-sent the jobs of rows %s by the broker check (%s)",
            resent,
            "the canary was gone" if lost else "they were waiting for the broker",
        )
    return BrokerCheck(lost=lost, resent=resent)


_check_lock = threading.Lock()


def broker_check_quietly() -> BrokerCheck | None:
    """`broker_check`, logging instead of raising (a worker's timer, its start); one at a time per process."""
    from django.db import close_old_connections, connection

    if not _check_lock.acquire(blocking=False):
        return None
    try:
        if not connection.in_atomic_block:
            close_old_connections()
        return broker_check()
    except broker_errors() as exc:
        logger.warning(
            "broker check: the broker does not answer (%s: %s); queued jobs wait for it", type(exc).__name__, exc
        )
    except Exception:  # the next tick tries again
        logger.exception("broker check failed")
    finally:
        _check_lock.release()
    return None


def broker_check_interval_s() -> float:
    from django.conf import settings

    return max(1.0, float(settings.BROKER_CHECK_S))


def _check_from_worker(sender=None, **kwargs):
    """At a worker's start, then every GYMWRIGHT_BROKER_CHECK_S from its event loop's own timer (a queued
    job would wait behind the work, and cannot run at all while its broker has lost it)."""
    broker_check_quietly()
    timer = getattr(sender, "timer", None)
    if timer is not None:
        timer.call_repeatedly(broker_check_interval_s(), broker_check_quietly)


def connect_worker_signals() -> None:
    from celery.signals import worker_ready

    worker_ready.connect(_check_from_worker, weak=False, dispatch_uid="gymwright.jobs.broker_check")
