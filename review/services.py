"""Writes for review: submitting a task version, reviews, comment threads, the author's inbox.

Only these services change a task's review status (authoring.Task.status):
draft / changes requested --submit--> in review --approve--> approved
                                                 --request changes--> changes requested
         a new version (authoring's version-created hook) --> draft
The approved version stays recorded on the task (Task.approved_version) and approved; an admin's
bulk import of an already-reviewed dataset records its versions as approved (versions_approve_on_import).
"""

from __future__ import annotations

from django.contrib.contenttypes.models import ContentType
from django.db import connection, models, transaction
from django.utils import timezone

from accounts import permissions
from authoring.models import AuditEvent, Task, TaskVersion
from authoring.services import audit_record
from grading.engine import flat_checks
from grading.engine import gate_rules as engine_gates
from grading.engine.validation import escape_pointer_token
from gymwright.bulk import bulk_insert_rows
from gymwright.errors import ConflictError, DomainError, NotAllowed
from gymwright.text import comment_text
from review import gate_evidence as review_gates
from review.models import Comment, InboxItem, Review, ReviewVisit, Submission

SUBMITTABLE = (Task.Status.DRAFT, Task.Status.CHANGES_REQUESTED)


def task_versions_created(*, versions: list[TaskVersion], bulk: bool) -> None:
    """Authoring's version-created hook: a new version of a task starts a new draft (an archived task stays
    archived). New tasks (`bulk`: an import's batch) are created as drafts already."""
    if bulk:
        return
    for version in versions:
        task = version.task
        if task.status not in (Task.Status.DRAFT, Task.Status.ARCHIVED):
            Task.objects.filter(pk=task.pk).update(status=Task.Status.DRAFT)
            task.status = Task.Status.DRAFT


def versions_approve_on_import(*, versions: list[TaskVersion], admin) -> None:
    """Record each version as approved by `admin` (a bulk import of an already-reviewed dataset), audited.
    The versions are their tasks' latest (just imported): one UPDATE for the batch."""
    if not permissions.is_admin(admin):
        raise NotAllowed("Only an admin can approve on import.")
    bulk_insert_rows(
        Review,
        ("task_version_id", "reviewer_id", "decision", "comment"),
        [(version.pk, admin.pk, Review.Decision.APPROVE, "approved on import (--approve-as)") for version in versions],
    )
    by_task = {version.task_id: version for version in versions}
    _latest_versions_approve(task_ids=list(by_task))
    content_type = ContentType.objects.get_for_model(Task)
    bulk_insert_rows(
        AuditEvent,
        ("actor_id", "verb", "content_type_id", "object_id", "summary", "data"),
        [
            # each version holds its task (created with it): no query for the slugs
            (
                admin.pk,
                AuditEvent.Verb.APPROVE,
                content_type.pk,
                task_id,
                f"{version.task.slug} v{version.number} (approved on import)"[:300],
                {"version": version.number, "approve_as": True},
            )
            for task_id, version in by_task.items()
        ],
    )


def _latest_versions_approve(*, task_ids: list[int]) -> None:
    """Record each task's latest version as its approved one, with what a lab member is shown of it: its title, tags
    (Task.approved_title, Task.approved_tags) and the time. The head's `title` and `tags` are the latest version's
    (authoring.services writes them with each version), so they are copied in the database: three queries however
    many tasks. Both ways of approving (a review, an admin's import) come here."""
    now = timezone.now()
    Task.objects.filter(pk__any=task_ids).update(
        status=Task.Status.APPROVED,
        approved_version=models.F("latest_version"),
        approved_title=models.F("title"),
        approved_at=now,
        updated_at=now,
    )
    _approved_tags_record(task_ids=task_ids)


def _approved_tags_record(*, task_ids: list[int]) -> None:
    """Each task's approved tags become its tags (Task.tags, the latest version's): two queries, rows copied in the
    database."""
    approved = Task.approved_tags.through
    approved.objects.filter(task_id__any=task_ids).delete()
    tags, params = (
        Task.tags.through.objects.filter(task_id__any=task_ids)
        .order_by()
        .values_list("task_id", "tag_id")
        .query.sql_with_params()
    )
    quote, meta = connection.ops.quote_name, approved._meta
    columns = ", ".join(quote(meta.get_field(name).column) for name in ("task", "tag"))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {quote(meta.db_table)} ({columns}) {tags}", params)


def check_ids(rubric: dict) -> list[str]:
    """Every check id of a rubric, depth first (group children included)."""
    return [str(row.check["id"]) for row in flat_checks((rubric or {}).get("checks")) if row.check.get("id")]


def _notify(
    *, recipients, actor, task: Task, kind: str, version_number: int | None = None, check_id: str = "", text: str = ""
) -> None:
    rows, seen = [], set()
    for user in recipients:
        if user is None or user.pk in seen or (actor is not None and user.pk == actor.pk):
            continue
        seen.add(user.pk)
        rows.append(
            InboxItem(
                recipient=user,
                actor=actor,
                task=task,
                kind=kind,
                version_number=version_number,
                check_id=check_id,
                text=text[:300],
            )
        )
    InboxItem.objects.bulk_create(rows)


# --------------------------------------------------------------------------------------------- submit


@transaction.atomic
def task_submit(*, task: Task, user, task_version: TaskVersion | None = None, override_reason: str = "") -> Submission:
    """Send the latest version to review. Refused (409 gates_failed) until every sanity gate
    passes for that version; an admin may override with a written reason (audited)."""
    task = Task.objects.select_for_update(of=("self",)).select_related("latest_version").get(pk=task.pk)
    if not permissions.can_edit_task(user, task):
        raise NotAllowed("Only the task's owner or an admin can submit it for review.")
    version = task.latest_version
    if task_version is not None and task_version.pk != version.pk:
        raise ConflictError(
            f"v{task_version.number} is not the latest version of {task.slug} (v{version.number}); submit the latest.",
            code="not_latest",
            extra={"latest_version": version.number},
        )
    if task.status not in SUBMITTABLE:
        raise DomainError(
            f"{task.slug} is {task.get_status_display().lower()}; only a draft or a task with "
            "changes requested can be submitted.",
            code="invalid_state",
            http_status=409,
        )
    override_reason = comment_text(override_reason, pointer="/override_reason", what="The override reason")
    results = review_gates.gates_evaluate(task_version=version)
    failing = [result for result in results if not result.ok]
    if failing and override_reason and not permissions.is_admin(user):
        raise NotAllowed(
            "Only an admin may submit past failing gates.",
            details=[{"pointer": "/override_reason", "message": "only admins may override gates"}],
        )
    if failing and not override_reason:
        raise DomainError(
            f"{task.slug} v{version.number} cannot be submitted until every gate passes: "
            + "; ".join(f"{result.title} ({result.status.replace('_', ' ')})" for result in failing),
            code="gates_failed",
            http_status=409,
            details=[
                {
                    "pointer": f"/gates/{reason['gate']}",
                    "message": f"{reason['status']}: {reason['message']}",
                    "what_to_do": reason["what_to_do"],
                }
                for reason in engine_gates.blocking_reasons(failing)
            ],
            extra={"gates": [result.to_dict() for result in results]},
        )
    submission = Submission.objects.create(
        task_version=version,
        submitted_by=user,
        gates=[result.to_dict() for result in results],
        override_reason=override_reason if failing else "",
    )
    Task.objects.filter(pk=task.pk).update(
        status=Task.Status.IN_REVIEW, updated_at=timezone.now(), submitted_at=submission.created_at
    )
    task.status, task.submitted_at = Task.Status.IN_REVIEW, submission.created_at
    data = {"version": version.number}
    if submission.override_reason:
        data.update(override_reason=submission.override_reason, failing_gates=[r.gate for r in failing])
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.SUBMIT,
        target=task,
        summary=f"{task.slug} v{version.number}" + (" (gates overridden)" if submission.override_reason else ""),
        data=data,
    )
    return submission


# --------------------------------------------------------------------------------------------- reviews


def _may_review(reviewer, task: Task, task_version: TaskVersion) -> None:
    if not permissions.can_review(reviewer):
        raise NotAllowed("Only reviewers and admins can review.")
    if task.owner_id == reviewer.pk:
        raise NotAllowed(f"You own {task.slug}: someone else must review it.")
    if task_version.author_id == reviewer.pk:
        raise NotAllowed(f"You wrote v{task_version.number} of {task.slug}: someone else must review it.")


@transaction.atomic
def review_create(
    *, task_version: TaskVersion, reviewer, decision: str, comment: str = "", check_comments: dict | None = None
) -> Review:
    """A review of the version in review. Approve records the exact version as approved; a
    request for changes needs a comment on the task or on a check. Each comment starts a thread."""
    if decision not in Review.Decision.values:
        raise DomainError(
            f"Choose a decision: {', '.join(Review.Decision.values)}.",
            details=[{"pointer": "/decision", "message": f"unknown decision {str(decision)[:40]!r}"}],
        )
    task = Task.objects.select_for_update().get(pk=task_version.task_id)
    _may_review(reviewer, task, task_version)
    if task.status != Task.Status.IN_REVIEW or task.latest_version_id != task_version.pk:
        raise ConflictError(
            f"v{task_version.number} of {task.slug} is not in review"
            + (
                f" (the task is {task.get_status_display().lower()})"
                if task.status != Task.Status.IN_REVIEW
                else f" (v{task.latest_version.number} is)"
            )
            + "; only a submitted version can be reviewed.",
            code="not_in_review",
            extra={"status": task.status},
        )
    comment = comment_text(comment, pointer="/comment", what="The comment")
    if check_comments is None:
        check_comments = {}
    if not isinstance(check_comments, dict):
        raise DomainError(
            "check_comments must be an object {check id: comment}.",
            details=[{"pointer": "/check_comments", "message": "expected an object"}],
        )
    known = set(check_ids(task_version.rubric))
    cleaned = {}
    for check_id, text in check_comments.items():
        pointer = "/check_comments/" + escape_pointer_token(check_id)
        if check_id not in known:
            raise DomainError(
                f"v{task_version.number} has no check {str(check_id)[:64]!r}.",
                details=[{"pointer": pointer, "message": "no such check in this version"}],
            )
        text = comment_text(text, pointer=pointer, what=f"The comment on {check_id}")
        if text:
            cleaned[check_id] = text
    if decision == Review.Decision.REQUEST_CHANGES and not comment and not cleaned:
        raise DomainError(
            "Say what to change: a request for changes needs a comment on the task or on a check.",
            code="comment_required",
            details=[{"pointer": "/comment", "message": "required"}],
        )
    review = Review.objects.create(
        task_version=task_version, reviewer=reviewer, decision=decision, comment=comment, check_comments=cleaned
    )
    threads = (
        [Comment(task=task, task_version=task_version, check_id="", author=reviewer, body=comment, review=review)]
        if comment
        else []
    )
    threads += [
        Comment(task=task, task_version=task_version, check_id=check_id, author=reviewer, body=text, review=review)
        for check_id, text in cleaned.items()
    ]
    Comment.objects.bulk_create(threads)
    # .update() skips auto_now: every review (a comment too) makes the task's "Updated" time current.
    if decision == Review.Decision.APPROVE:
        _latest_versions_approve(task_ids=[task.pk])  # task_version is the latest: checked above, under the row lock
        verb, kind = AuditEvent.Verb.APPROVE, InboxItem.Kind.APPROVED
    elif decision == Review.Decision.REQUEST_CHANGES:
        Task.objects.filter(pk=task.pk).update(status=Task.Status.CHANGES_REQUESTED, updated_at=timezone.now())
        verb, kind = AuditEvent.Verb.REQUEST_CHANGES, InboxItem.Kind.CHANGES_REQUESTED
    else:
        Task.objects.filter(pk=task.pk).update(updated_at=timezone.now())
        verb, kind = AuditEvent.Verb.COMMENT, InboxItem.Kind.REVIEWED
    audit_record(
        actor=reviewer,
        verb=verb,
        target=task,
        summary=f"{task.slug} v{task_version.number}",
        data={"version": task_version.number, "comment": comment[:500], "checks": sorted(cleaned)},
    )
    _notify(
        recipients=[task.owner, task_version.author],
        actor=reviewer,
        task=task,
        kind=kind,
        version_number=task_version.number,
        # The task comment and every check comment: an approval with both must not hide the latter.
        text="\n".join(
            [
                *([comment] if comment else []),  # one to a line, as the inbox shows them
                *(f"{check_id}: {text}" for check_id, text in cleaned.items()),
            ]
        ),
    )
    return review


def review_visit_record(*, task_version: TaskVersion, reviewer) -> TaskVersion | None:
    """Remember that `reviewer` saw this version; answers the version they saw before (or None)."""
    visit = (
        ReviewVisit.objects.filter(task_id=task_version.task_id, reviewer=reviewer)
        .select_related("task_version")
        .first()
    )
    previous = visit.task_version if visit else None
    ReviewVisit.objects.update_or_create(
        task_id=task_version.task_id, reviewer=reviewer, defaults={"task_version": task_version}
    )
    return previous


# --------------------------------------------------------------------------------------------- comments


def _may_comment(user, task: Task) -> None:
    if not (permissions.can_review(user) or permissions.can_edit_task(user, task)):
        raise NotAllowed("Only reviewers, admins and the task's owner can comment on it.")


@transaction.atomic
def comment_create(
    *,
    task: Task,
    user,
    body: str,
    check_id: str = "",
    parent: Comment | None = None,
    task_version: TaskVersion | None = None,
) -> Comment:
    """A new thread on the task or on one check of `task_version` (default: the latest), or a
    reply to `parent`'s thread."""
    _may_comment(user, task)
    body = comment_text(body, pointer="/body", what="The comment")
    if not body:
        raise DomainError("The comment is empty.", details=[{"pointer": "/body", "message": "required"}])
    if parent is not None:
        if parent.task_id != task.pk:
            raise DomainError(
                "That thread belongs to another task.", details=[{"pointer": "/parent", "message": "wrong task"}]
            )
        root = parent.parent or parent
        comment = Comment.objects.create(
            task=task, task_version=task.latest_version, check_id=root.check_id, parent=root, author=user, body=body
        )
        recipients = [task.owner, root.author, *[reply.author for reply in root.replies.select_related("author")]]
        kind = InboxItem.Kind.REPLY
    else:
        version = task_version or task.latest_version
        check_id = (check_id or "").strip()
        if check_id and check_id not in check_ids(version.rubric):
            raise DomainError(
                f"v{version.number} has no check {check_id[:64]!r}.",
                details=[{"pointer": "/check_id", "message": "no such check in this version"}],
            )
        comment = Comment.objects.create(task=task, task_version=version, check_id=check_id, author=user, body=body)
        recipients = [task.owner]
        kind = InboxItem.Kind.COMMENT
    _notify(
        recipients=recipients,
        actor=user,
        task=task,
        kind=kind,
        version_number=comment.task_version.number,
        check_id=comment.check_id,
        text=body,
    )
    return comment


@transaction.atomic
def comment_resolve(*, comment: Comment, user, resolved: bool = True) -> Comment:
    """Mark a thread resolved (or open it again). Acts on the thread's root."""
    root = (
        Comment.objects.select_for_update()
        .select_related("task", "task__owner", "author")
        .get(pk=comment.parent_id or comment.pk)
    )
    _may_comment(user, root.task)
    if resolved and root.resolved_at is None:
        root.resolved_at, root.resolved_by = timezone.now(), user
        root.save(update_fields=["resolved_at", "resolved_by"])
        _notify(
            recipients=[root.author, root.task.owner],
            actor=user,
            task=root.task,
            kind=InboxItem.Kind.RESOLVED,
            version_number=root.task.latest_version.number if root.task.latest_version_id else None,
            check_id=root.check_id,
            text=root.body,
        )
    elif not resolved and root.resolved_at is not None:
        root.resolved_at, root.resolved_by = None, None
        root.save(update_fields=["resolved_at", "resolved_by"])
    return root


def inbox_mark_read(*, user) -> int:
    return InboxItem.objects.filter(recipient=user, read_at__isnull=True).update(read_at=timezone.now())
