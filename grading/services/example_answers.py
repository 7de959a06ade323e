"""Example answers, the rubric's own tests: graded for each new task version, at once, by a worker or (checks
that run in the sandbox) by the grader the sandbox app registers."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.permissions import can_review
from grading import engine
from grading.endpoints import judge_client_for, judge_config_for, judge_environment_of
from grading.engine import example_answers as engine_examples
from grading.models import ExampleRun
from grading.services.dry_runs import _dry_run_process_limits, _dry_run_stale_after_s, _write_workspace
from grading.services.rubrics import rubric_parse
from gymwright import jobs
from gymwright.errors import DomainError, NotAllowed

logger = logging.getLogger(__name__)


# The sandbox app grades example answers whose checks run in the sandbox (grading cannot import it):
# `example_sandbox_grader_register(enqueue)`, where enqueue(example_run) queues its job after commit.
_SANDBOX_GRADERS: list[Callable[[ExampleRun], None]] = []


def example_sandbox_grader_register(enqueue: Callable[[ExampleRun], None]) -> None:
    if enqueue not in _SANDBOX_GRADERS:
        _SANDBOX_GRADERS.append(enqueue)


def _examples_need_sandbox(rubric: dict) -> bool:
    """Whether a rubric's example answers are graded in the sandbox: it has checks that run there
    (command, python, tests, stdout targets) and this installation can (a sandbox grader is registered)."""
    return bool(_SANDBOX_GRADERS) and "sandbox" in engine_examples.rubric_needs(rubric)


def example_answers_schedule(*, versions, bulk: bool = False) -> None:
    """Grade the example answers of new task versions (authoring's version-created hook).

    A rubric without judge checks (or with no judge configured) is graded at once, like a dry
    run, in one bounded child process for all of a version's examples; one with judge checks
    and a judge is graded by a worker (enqueued after commit), and so is every version of a bulk
    import; one with checks that run in the sandbox by a sandbox worker, each example as a rollout.
    Versions without examples get no run.
    """
    if not bulk:
        for version in versions:
            example_answers_run(task_version=version)
        return
    # An import's batch: new versions (no earlier runs), one INSERT for their runs, graded by workers;
    # the judge configuration comes from this process's cache, not a lookup per version.
    now = timezone.now()
    # whose judge grades them: looked up only for the versions whose examples a judge grades (none in most imports)
    environments = _environments_of(
        [v for v in versions if v.spec.get("examples") and "judge" in engine_examples.rubric_needs(v.rubric)]
    )
    runs = ExampleRun.objects.bulk_create(
        [
            ExampleRun(
                task_version=version,
                total=len(version.spec["examples"]),
                enqueued_at=now,
                needs_judge=_examples_need_judge(
                    version.spec.get("rubric") or {}, environment=environments.get(version.task_id), max_age_s=60
                ),
                needs_sandbox=_examples_need_sandbox(version.spec.get("rubric") or {}),
                requested_by_id=version.author_id,
            )
            for version in versions
            if version.spec.get("examples")
        ]
    )
    if runs:
        from grading import tasks

        for run in runs:
            if run.needs_sandbox:
                _SANDBOX_GRADERS[0](run)
        jobs.send_on_commit(
            jobs.Job(tasks.example_answers_grade),
            [run.id for run in runs if not run.needs_sandbox],
            on_unsent=example_runs_wait_for_broker,
        )


def example_runs_wait_for_broker(example_run_ids: list[int]) -> None:
    """The broker did not take these runs' jobs: they wait for it, and the broker check sends them."""
    ExampleRun.objects.filter(pk__in=example_run_ids, status=ExampleRun.Status.QUEUED).update(enqueued_at=None)


def example_runs_resend(lost_before=None) -> list[int]:
    """The broker check's resender for example answers graded by workers."""
    from grading import tasks

    # runs graded in the sandbox are sent by sandbox.example_answers with their own time limits, not here
    return jobs.resend(
        ExampleRun.objects.filter(status=ExampleRun.Status.QUEUED, needs_sandbox=False),
        lost_before=lost_before,
        job=jobs.Job(tasks.example_answers_grade),
        on_unsent=example_runs_wait_for_broker,
    )


def _environments_of(versions) -> dict:
    """{task id: its environment} for a batch of versions, in one query (whose judge each one's uses)."""
    from authoring.models import Task

    task_ids = {version.task_id for version in versions}
    if not task_ids:
        return {}
    tasks = Task.objects.filter(pk__in=task_ids).select_related("environment__judge_choice")
    return {task.pk: task.environment for task in tasks}


def _examples_need_judge(rubric: dict, *, environment, max_age_s: float = 0) -> bool:
    """Whether a rubric's example answers go to a worker: it has judge checks and a judge is configured."""
    return (
        "judge" in engine_examples.rubric_needs(rubric)
        and judge_config_for(rubric, environment=environment, max_age_s=max_age_s) is not None
    )


def example_answers_run(*, task_version, user=None) -> ExampleRun | None:
    """(Re)grade `task_version`'s example answers; the new ExampleRun, or None when it has none.

    With a `user` (the task page's "Grade again"), only someone who may edit or review the task
    may ask, and not while a run is still going.
    """
    if user is not None:
        from accounts.permissions import can_edit_task

        if not (can_edit_task(user, task_version.task) or can_review(user)):
            raise NotAllowed("Only the task's authors and reviewers can grade its example answers again.")
    examples = task_version.spec.get("examples") or []
    if not examples:
        return None
    rubric = task_version.spec.get("rubric") or {}
    needs_judge = _examples_need_judge(rubric, environment=judge_environment_of(task_version))
    with transaction.atomic():
        previous = ExampleRun.objects.select_for_update().filter(task_version=task_version).first()
        if previous is not None:
            if user is not None and not previous.is_finished:
                raise DomainError(
                    "The example answers are being graded; wait for this run to finish.",
                    code="already_running",
                    http_status=409,
                )
            previous.delete()
        needs_sandbox = _examples_need_sandbox(rubric)
        run = ExampleRun.objects.create(
            task_version=task_version,
            total=len(examples),
            needs_judge=needs_judge,
            needs_sandbox=needs_sandbox,
            enqueued_at=timezone.now(),
            requested_by=user if user is not None else task_version.author,
        )
        if needs_sandbox:
            _SANDBOX_GRADERS[0](run)
            return run
        if needs_judge:
            from grading import tasks

            jobs.send_on_commit(jobs.Job(tasks.example_answers_grade), [run.id], on_unsent=example_runs_wait_for_broker)
            return run
    try:
        with transaction.atomic():  # a savepoint: a failure here leaves the caller's transaction usable
            return example_answers_grade(example_run_id=run.id) or run
    except Exception as exc:  # grading the examples must never lose the version being saved
        logger.exception("grading the example answers of version %s failed", task_version.pk)
        example_answers_fail(example_run_id=run.id, error=f"Grading failed: {exc}")
        run.refresh_from_db()
        return run


def _example_workspace(root: Path, example: dict) -> Path:
    """The example's files in a fresh workspace; an empty one without files, so that a check on a
    file the example lacks is "not met" (as after a rollout), not unscored."""
    return _write_workspace(root, engine_examples.example_workspace_files(example))


def example_result(example: dict, document: dict | None, *, error: str = "") -> dict:
    """What an ExampleRun stores for one example: its verdict's fields and its grade document (None, with
    `error` saying why, when it has none)."""
    if document is None:
        verdict = engine_examples.example_failed(example, error or "not graded")
    else:
        verdict = engine_examples.example_verdict(example, document)
    return {**verdict.to_dict(), "grade": document}


def example_answers_claim(*, example_run_id: int) -> ExampleRun | None:
    """Claim a queued ExampleRun for grading (QUEUED → RUNNING); None if another worker has it or it was
    replaced."""
    claimed = ExampleRun.objects.filter(id=example_run_id, status=ExampleRun.Status.QUEUED).update(
        status=ExampleRun.Status.RUNNING, started_at=timezone.now()
    )
    if claimed != 1:
        return None  # a redelivered message, or the run was replaced
    return ExampleRun.objects.select_related("task_version").get(id=example_run_id)


def example_answers_progress(*, example_run_id: int, graded: int) -> None:
    ExampleRun.objects.filter(id=example_run_id, status=ExampleRun.Status.RUNNING).update(graded=graded)


def example_answers_finish(*, example_run_id: int, results: list[dict]) -> ExampleRun:
    """Store a running ExampleRun's results (one `example_result` per example) and mark it done."""
    ExampleRun.objects.filter(id=example_run_id, status=ExampleRun.Status.RUNNING).update(
        status=ExampleRun.Status.DONE, results=results, graded=len(results), finished_at=timezone.now()
    )
    return ExampleRun.objects.get(id=example_run_id)


def example_answers_grade(*, example_run_id: int) -> ExampleRun | None:
    """Grade a queued ExampleRun and store each example's verdict. None if another worker has it."""
    from grading.engine.isolated import GradeStopped, grade_many_in_subprocess

    run = example_answers_claim(example_run_id=example_run_id)
    if run is None:
        return None
    spec = run.task_version.spec
    examples = spec.get("examples") or []
    rubric = rubric_parse(data=spec.get("rubric"))
    judge = (
        judge_client_for(
            rubric, environment=judge_environment_of(run.task_version), max_age_s=settings.ENDPOINT_CACHE_S
        )
        if run.needs_judge
        else None
    )
    results = []
    if judge is None:
        # Deterministic: the dry run's path, every example in one bounded child process.
        with tempfile.TemporaryDirectory(prefix="gymwright-examples-") as tmp:
            items = []
            for index, example in enumerate(examples):
                root = Path(tmp) / str(index)
                root.mkdir()
                items.append((example["answer"], _example_workspace(root, example)))
            try:
                documents = grade_many_in_subprocess(
                    rubric.to_document(), items=items, process=_dry_run_process_limits()
                )
                results = [example_result(example, document) for example, document in zip(examples, documents)]
            except GradeStopped as exc:
                results = [example_result(example, None, error=f"grading was stopped: {exc}") for example in examples]
    else:
        # Judged: in this worker, like a judged dry run, one example at a time with progress.
        for index, example in enumerate(examples):
            with tempfile.TemporaryDirectory(prefix="gymwright-examples-") as tmp:
                workspace = _example_workspace(Path(tmp), example)
                graded = engine.grade(rubric, answer=example["answer"], workspace=workspace, judge=judge, sandbox=None)
            results.append(example_result(example, graded.to_document()))
            example_answers_progress(example_run_id=run.id, graded=index + 1)
    return example_answers_finish(example_run_id=run.id, results=results)


def example_answers_fail(*, example_run_id: int, error: str) -> None:
    """Mark an unfinished ExampleRun as failed with the reason the task page shows."""
    ExampleRun.objects.filter(
        id=example_run_id, status__in=[ExampleRun.Status.QUEUED, ExampleRun.Status.RUNNING]
    ).update(status=ExampleRun.Status.ERROR, error=(error or "grading failed")[:2000], finished_at=timezone.now())


def example_run_fail_if_stale(*, run: ExampleRun | None, now=None) -> ExampleRun | None:
    """A run no worker finished in time (a worker died, or none is running) is failed with the
    reason, so the page stops waiting and offers "Grade again"."""
    if run is None or run.is_finished:
        return run
    since = run.started_at if run.status == ExampleRun.Status.RUNNING and run.started_at else run.created_at
    limit = _dry_run_stale_after_s()
    if run.needs_sandbox:  # each example is a rollout of up to the environment's time limit
        limits = (run.task_version.spec.get("environment") or {}).get("limits") or {}
        limit += run.total * (float(limits.get("timeout_s") or 600) + settings.ROLLOUT_STALE_AFTER_S)
    if ((now or timezone.now()) - since).total_seconds() > limit:
        waiting = "no worker took the job" if run.status == ExampleRun.Status.QUEUED else "the worker stopped"
        example_answers_fail(example_run_id=run.pk, error=f"Grading did not finish: {waiting}; grade them again.")
        run.refresh_from_db()
    return run
