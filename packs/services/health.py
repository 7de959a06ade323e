"""A dataset's health report, stored: an import of Harbor or Terminal-Bench tasks queues one (`dataset_check_start`),
a worker runs it (`dataset_check_run`: the gates of every task on the docker backend, packs.health.runner), and its
page shows it as it fills. `manage.py check_dataset` runs the same check on a folder without storing anything."""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from authoring.models import TaskVersion
from gymwright import jobs
from packs.health import runner
from packs.models import DatasetCheck

# The sources whose tasks get a health report when imported: their verifiers are the tasks' own (test.sh).
CHECKED_SOURCES = ("harbor", "terminal-bench")
HEARTBEAT_S = 10  # how often a running check writes its progress (and the report so far)


def dataset_check_start(*, report, user, source: str) -> DatasetCheck | None:
    """Queue the health report of what an import brought in (packs.importer.ImportReport), when it brought in Harbor
    or Terminal-Bench tasks; None for a dry run or any other source."""
    if report.dry_run:
        return None
    numbers = {(line.task, line.version) for line in report.lines if line.status != "rejected"}
    versions = {
        (slug, number): (pk, spec_source)
        for pk, slug, number, spec_source in TaskVersion.objects.filter(
            task__slug__in={slug for slug, _ in numbers}
        ).values_list("pk", "task__slug", "number", "spec__metadata__source")
        if (slug, number) in numbers
    }
    subjects = []
    for line in report.lines:  # in the import's order, its refusals among them
        if line.status == "rejected":
            subjects.append({"where": line.where, "slug": line.task or "", "message": line.message})
        elif versions.get((line.task, line.version), (None, None))[1] in CHECKED_SOURCES:
            subjects.append({"where": line.where, "task_version": versions[(line.task, line.version)][0]})
    if not any("task_version" in subject for subject in subjects):
        return None
    check = DatasetCheck.objects.create(
        source=str(source)[:300], created_by=user, subjects=subjects, enqueued_at=timezone.now()
    )
    jobs.send_on_commit(_job(), [check.pk], on_unsent=_wait_for_broker)
    return check


def _job() -> jobs.Job:
    from packs.tasks import dataset_check_run_job

    return jobs.Job(dataset_check_run_job)


def _wait_for_broker(check_ids: list[int]) -> None:
    DatasetCheck.objects.filter(pk__in=check_ids, status=DatasetCheck.Status.QUEUED).update(enqueued_at=None)


def dataset_checks_resend(lost_before=None) -> list[int]:
    """The broker check's resender for health reports (queued, their job waiting or lost)."""
    return jobs.resend(
        DatasetCheck.objects.filter(status=DatasetCheck.Status.QUEUED),
        lost_before=lost_before,
        job=_job(),
        on_unsent=_wait_for_broker,
    )


def _subjects(check: DatasetCheck):
    """The check's tasks as runner Subjects (their files read when each one's turn comes), refusals as entries."""
    from sandbox.worker import task_files

    for item in check.subjects:
        if "task_version" not in item:
            yield runner.rejected_entry(_Refusal(item.get("where", ""), item.get("message", ""), item.get("slug")))
            continue
        version = TaskVersion.objects.select_related("task").filter(pk=item["task_version"]).first()
        if version is None:
            yield {
                **runner.rejected_entry(_Refusal(item["where"], "its task version was deleted", None)),
                "reason": "not checked: its task version was deleted",
            }
            continue
        files, env_files = task_files(version)
        yield runner.Subject(item["where"], version.task.slug, version.spec, files, env_files)


class _Refusal:
    def __init__(self, where: str, message: str, slug: str | None):
        self.where, self.message, self.slug, self.pointer = where, message, slug, None


def _bounded(document: dict) -> dict:
    """The report within DATASET_CHECK_REPORT_MAX_MB: past it, each task keeps its verdict and reason only."""
    cap = settings.DATASET_CHECK_REPORT_MAX_MB * 1024 * 1024
    if len(json.dumps(document)) <= cap:
        return document
    slim = [
        {key: entry.get(key) for key in ("task", "where", "verdict", "reason", "seconds")}
        for entry in document["tasks"]
    ]
    return {**document, "tasks": slim, "truncated": "each task's gates, findings and rollouts were left out"}


def dataset_check_run(*, check_id: int) -> DatasetCheck | None:
    """Run a queued check (claimed with a conditional UPDATE: a redelivered job walks away) and store its report,
    writing what is done so far at most every HEARTBEAT_S."""
    claimed = DatasetCheck.objects.filter(pk=check_id, status=DatasetCheck.Status.QUEUED).update(
        status=DatasetCheck.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    if claimed != 1:
        return None
    check = DatasetCheck.objects.get(pk=check_id)
    probes = frozenset(name.removeprefix("hack:") for name in settings.DATASET_CHECK_PROBES if name)
    if probes and (problem := runner.probe_names_problem(probes)):
        dataset_check_fail(check_id=check_id, reason=f"GYMWRIGHT_DATASET_CHECK_PROBES {problem}: nothing was checked")
        check.refresh_from_db()
        return check
    limits = runner.HealthLimits(
        task_s=settings.DATASET_CHECK_TASK_S, total_s=settings.DATASET_CHECK_TOTAL_S, hacks=probes or None
    )
    entries: list[dict] = []
    last = [0.0]

    def on_entry(entry: dict) -> None:
        entries.append(entry)
        if time.monotonic() - last[0] >= HEARTBEAT_S:
            last[0] = time.monotonic()
            DatasetCheck.objects.filter(pk=check_id, status=DatasetCheck.Status.RUNNING).update(
                checked=len(entries),
                heartbeat_at=timezone.now(),
                document=_bounded(runner.report_document(entries, source=check.source, limits=limits)),
            )

    backend = _docker_backend()
    runner.check_subjects(_subjects(check), backend=backend, limits=limits, on_entry=on_entry)
    DatasetCheck.objects.filter(pk=check_id, status=DatasetCheck.Status.RUNNING).update(
        status=DatasetCheck.Status.DONE,
        checked=len(entries),
        document=_bounded(runner.report_document(entries, source=check.source, limits=limits)),
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )
    check.refresh_from_db()
    return check


def _docker_backend():
    from sandbox.runtime.backends import get_backend
    from sandbox.worker import _backend_options

    return get_backend("docker", **_backend_options("docker"))


def dataset_check_fail(*, check_id: int, reason: str) -> bool:
    """Finish a check whose job blew up (or whose worker died), with the reason; False when it had finished."""
    return bool(
        DatasetCheck.objects.filter(pk=check_id)
        .filter(Q(status=DatasetCheck.Status.QUEUED) | Q(status=DatasetCheck.Status.RUNNING))
        .update(status=DatasetCheck.Status.FAILED, error=reason[:2000], finished_at=timezone.now())
    )


def dataset_checks_reap_stale(*, now=None) -> int:
    """Fail the checks whose worker died: running with no report for longer than a task may take (each task's
    entry is a heartbeat), or queued and sent longer ago than that without a worker taking them."""
    from datetime import timedelta

    cutoff = (now or timezone.now()) - timedelta(seconds=settings.DATASET_CHECK_TASK_S + 300)
    return DatasetCheck.objects.filter(
        Q(status=DatasetCheck.Status.RUNNING, heartbeat_at__lt=cutoff)
        | Q(status=DatasetCheck.Status.QUEUED, enqueued_at__lt=cutoff)
    ).update(
        status=DatasetCheck.Status.FAILED,
        error="the check stopped reporting (its worker died or its job was lost): import the dataset again, or run "
        "manage.py check_dataset on it",
        finished_at=timezone.now(),
    )
