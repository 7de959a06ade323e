"""Celery jobs of the grading app: interfaces only (ids in, a service call, failures recorded)."""

from __future__ import annotations

from celery import Task, shared_task

from grading import services


class DryRunJob(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        dry_run_id = kwargs.get("dry_run_id", args[0] if args else None)
        if dry_run_id is not None:
            services.dry_run_fail(dry_run_id=dry_run_id, error=f"Grading failed: {exc}")


# No automatic retry: the judge client already retries transient model errors, and
# a second delivery of this message finds the dry run claimed and walks away.
@shared_task(base=DryRunJob, name="grading.dry_run_grade", acks_late=True)
def dry_run_grade(dry_run_id: int) -> None:
    services.dry_run_grade(dry_run_id=dry_run_id)


class ExampleAnswersJob(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        example_run_id = kwargs.get("example_run_id", args[0] if args else None)
        if example_run_id is not None:
            services.example_answers_fail(example_run_id=example_run_id, error=f"Grading failed: {exc}")


# As for dry runs: the judge client retries transient errors; a redelivered message walks away.
@shared_task(base=ExampleAnswersJob, name="grading.example_answers_grade", acks_late=True)
def example_answers_grade(example_run_id: int) -> None:
    services.example_answers_grade(example_run_id=example_run_id)
