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
"""

from __future__ import annotations

import logging
from functools import partial

from django.conf import settings
from django.db import transaction

from grading import services as grading_services
from grading.models import ExampleRun
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
    from sandbox import tasks

    limits = (run.task_version.spec.get("environment") or {}).get("limits") or {}
    soft = run.total * (float(limits.get("timeout_s") or 600) + EXAMPLE_MARGIN_S)
    transaction.on_commit(
        partial(
            tasks.example_answers_grade.apply_async,
            args=[run.pk],
            soft_time_limit=soft,
            time_limit=soft + services.HARD_TIME_LIMIT_EXTRA_S,
        )
    )


def example_answers_grade_in_sandbox(*, example_run_id: int) -> ExampleRun | None:
    """Grade a queued sandbox ExampleRun: each example as a rollout. None if another worker has it."""
    from grading.endpoints import judge_client_for
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
    judge = judge_client_for(version.rubric, max_age_s=settings.ENDPOINT_CACHE_S) if run.needs_judge else None
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
