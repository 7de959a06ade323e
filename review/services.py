"""Writes for review: submitting a task version and recording reviews.

Only these services change a task's review status (authoring.Task.status).
"""

from __future__ import annotations

from django.db import transaction

from authoring import permissions
from authoring.models import AuditEvent, Task, TaskVersion
from authoring.services import audit_record
from gymwright.errors import ConflictError, DomainError, NotAllowed
from review.models import Review


@transaction.atomic
def task_submit(*, task: Task, user) -> Task:
    if not permissions.can_edit_task(user, task):
        raise NotAllowed("Only the task's owner or an admin can submit it for review.")
    if task.status not in (Task.Status.DRAFT, Task.Status.CHANGES_REQUESTED):
        raise DomainError(f"{task.slug} is {task.get_status_display().lower()}; only drafts can be submitted.",
                          code="invalid_state", http_status=409)
    Task.objects.filter(pk=task.pk).update(status=Task.Status.IN_REVIEW)
    task.status = Task.Status.IN_REVIEW
    audit_record(actor=user, verb=AuditEvent.Verb.SUBMIT, target=task,
                 summary=f"{task.slug} v{task.latest_version.number}", data={"version": task.latest_version.number})
    return task


@transaction.atomic
def review_create(*, task_version: TaskVersion, reviewer, decision: str, comment: str = "",
                  check_comments: dict | None = None) -> Review:
    if not permissions.can_review(reviewer):
        raise NotAllowed("Only reviewers and admins can review.")
    if decision not in Review.Decision.values:
        raise DomainError(f"Unknown decision {decision!r}.", details=[{"pointer": "/decision", "message": "unknown"}])
    task = Task.objects.select_for_update().get(pk=task_version.task_id)
    if decision != Review.Decision.COMMENT and task.latest_version_id != task_version.pk:
        raise ConflictError(f"v{task_version.number} is no longer the latest version of {task.slug}; review the latest.",
                            extra={"latest_version": task.latest_version.number if task.latest_version else None})
    review = Review.objects.create(task_version=task_version, reviewer=reviewer, decision=decision,
                                   comment=comment, check_comments=check_comments or {})
    if decision == Review.Decision.APPROVE:
        Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED, approved_version=task_version)
        verb = AuditEvent.Verb.APPROVE
    elif decision == Review.Decision.REQUEST_CHANGES:
        Task.objects.filter(pk=task.pk).update(status=Task.Status.CHANGES_REQUESTED)
        verb = AuditEvent.Verb.REQUEST_CHANGES
    else:
        verb = AuditEvent.Verb.COMMENT
    audit_record(actor=reviewer, verb=verb, target=task, summary=f"{task.slug} v{task_version.number}",
                 data={"version": task_version.number, "comment": comment[:500]})
    return review
