"""Example answers graded in the sandbox: a rubric whose checks run there (command, python, tests,
`stdout:` targets) cannot grade its example answers in a dry run, so each example is graded as a
rollout would be: a fresh sandbox with the task's files and the example's files in its workspace,
an agent that only submits the example's answer, then the rollout's own grading (links removed,
protected files restored, grader files added, checks in the sandbox).

grading.services creates the ExampleRun and calls `example_run_enqueue` (registered in
sandbox.apps); the job (`sandbox.tasks.example_answers_grade`) calls `example_answers_grade_in_sandbox`.
A run counts against its requester's cap of rollouts in flight (GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT), one
rollout per example, and as one start against their rate (GYMWRIGHT_PREVIEW_RATE), as a preview does; it
grades its examples one at a time (one sandbox at a time).

Its job is sent as rollouts' are (gymwright.jobs): once the run commits, and a broker that cannot take it
leaves the run waiting for the broker (`enqueued_at` NULL) for the broker check to send (`example_runs_resend`,
registered in sandbox.apps). The rollout reaper (`sandbox.services.rollouts_reap_stale`, on every worker's
timer) also fails the runs no worker finished in time (`example_runs_reap_stale`): a run whose worker died
would otherwise hold its requester's rollouts in flight until someone opened its page.
"""

from __future__ import annotations

import logging

from django.conf import settings

from authoring.models import TaskVersion
from grading import services as grading_services
from grading.models import ExampleRun
from gymwright import jobs
from gymwright.errors import DomainError

logger = logging.getLogger(__name__)

# Per example: the environment's time limit plus this, for the sandbox's start, the grading and the copy.
EXAMPLE_MARGIN_S = 120


def example_run_enqueue(run: ExampleRun) -> None:
    """Queue `run` for a sandbox worker after commit; over the requester's cap or rate it fails at once, saying so
    (the author grades the examples again once some rollouts have finished, or later)."""
    from sandbox import services

    user = run.requested_by
    try:
        if user is not None:
            services.rollouts_in_flight_check(user=user, n=run.total, example_run_id=run.pk)
            services.preview_rate_check(user=user)
    except DomainError as exc:
        grading_services.example_answers_fail(example_run_id=run.pk, error=f"Not graded: {exc.message}")
        return
    if user is not None:  # a start of rollouts, as a preview is: the rate counts it (preview_rate_check)
        from authoring.models import AuditEvent
        from authoring.services import audit_record

        version = run.task_version
        audit_record(
            actor=user,
            verb=AuditEvent.Verb.PREVIEW,
            target=version.task,
            summary=f"{version.task.slug} v{version.number} with its example answers × {run.total}",
            data={"example_run": run.pk, "version": version.number, "n": run.total},
        )
    jobs.send_on_commit(
        _example_job(run.task_version.spec, run.total),
        [run.pk],
        on_unsent=grading_services.example_runs_wait_for_broker,
    )


def _example_job(spec: dict, total: int) -> jobs.Job:
    """The job of a sandbox run of `total` examples, with time limits for that many rollouts."""
    from sandbox import services, tasks

    limits = (spec.get("environment") or {}).get("limits") or {}
    soft = total * (float(limits.get("timeout_s") or 600) + EXAMPLE_MARGIN_S)
    return jobs.Job(
        tasks.example_answers_grade,
        {"soft_time_limit": soft, "time_limit": soft + services.HARD_TIME_LIMIT_EXTRA_S},
    )


def example_runs_resend(lost_before=None) -> list[int]:
    """The broker check's resender (gymwright.jobs) for sandbox runs of example answers that wait for the
    broker, or whose message it lost; the ids re-sent."""
    specs: dict[int, dict] = {}

    def job(row) -> jobs.Job:
        version_id = row["task_version_id"]
        if version_id not in specs:
            specs[version_id] = TaskVersion.objects.only("id", "spec").get(pk=version_id).spec
        return _example_job(specs[version_id], row["total"])

    return jobs.resend(
        ExampleRun.objects.filter(status=ExampleRun.Status.QUEUED, needs_sandbox=True),
        lost_before=lost_before,
        job=job,
        on_unsent=grading_services.example_runs_wait_for_broker,
        fields=("task_version_id", "total"),
    )


def example_runs_reap_stale(*, now=None) -> dict:
    """What the rollout reaper does for rollouts, for sandbox runs of example answers: the jobs of queued runs
    nobody claimed whose message the broker did not take or lost (sent more than GYMWRIGHT_ROLLOUT_REQUEUE_AFTER_S
    ago) are sent again, and a run no worker finished in time (its worker died, or none took it) is failed,
    saying so (grading.services.example_run_fail_if_stale, the rule the task page applies)."""
    from datetime import timedelta

    from django.utils import timezone

    now = now or timezone.now()
    resent = example_runs_resend(lost_before=now - timedelta(seconds=settings.ROLLOUT_REQUEUE_AFTER_S))
    failed = []
    unfinished = ExampleRun.objects.filter(
        needs_sandbox=True, status__in=[ExampleRun.Status.QUEUED, ExampleRun.Status.RUNNING]
    ).select_related("task_version")
    for run in unfinished:
        if grading_services.example_run_fail_if_stale(run=run, now=now).status == ExampleRun.Status.ERROR:
            failed.append(run.pk)
    if failed:
        logger.warning("failed sandbox runs of example answers no worker finished: %s", failed)
    return {"resent": resent, "failed": failed}


def example_answers_grade_in_sandbox(*, example_run_id: int) -> ExampleRun | None:
    """Grade a queued sandbox ExampleRun: each example as a rollout. None if another worker has it."""
    from grading.endpoints import judge_client_for, judge_environment_of
    from grading.engine import parse_task
    from sandbox.runtime import SandboxError
    from sandbox.runtime.backends import get_backend
    from sandbox.runtime.policies import SubmitPolicy
    from sandbox.runtime.rollout import run_rollout
    from sandbox.worker import _backend_options, task_files

    run = grading_services.example_answers_claim(example_run_id=example_run_id)
    if run is None:
        return None
    version = run.task_version
    task = parse_task(version.spec)
    files, env_files = task_files(version)
    judge = (
        judge_client_for(version.rubric, environment=judge_environment_of(version), max_age_s=settings.ENDPOINT_CACHE_S)
        if run.needs_judge
        else None
    )
    try:
        backend = get_backend(settings.SANDBOX_BACKEND, **_backend_options(settings.SANDBOX_BACKEND))
    except SandboxError as exc:
        grading_services.example_answers_fail(
            example_run_id=run.pk, error=f"The sandbox is not available: {exc.message}"
        )
        return None
    results = []
    for index, example in enumerate(version.spec.get("examples") or []):
        start_files = {item["path"]: item["content"].encode("utf-8") for item in example.get("files") or []}
        result = run_rollout(
            task,
            policy=SubmitPolicy(example["answer"], "example"),
            backend=backend,
            files=files,
            env_files=env_files,
            judge=judge,
            start_files=start_files,
        )
        if result.grade is None:
            results.append(
                grading_services.example_result(
                    example, None, error=f"its rollout ended without a grade: {result.error or result.stop_reason}"
                )
            )
        else:
            results.append(grading_services.example_result(example, result.grade.to_document()))
        grading_services.example_answers_progress(example_run_id=run.pk, graded=index + 1)
    return grading_services.example_answers_finish(example_run_id=run.pk, results=results)
