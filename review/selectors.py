"""Reads for review: the queue, the inbox, comment threads. Each list costs a constant number
of queries however many tasks there are."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery
from django.utils import timezone

from authoring import permissions
from authoring.models import Task, TaskVersion
from gymwright.nul import NUL
from review.models import Comment, InboxItem, Review, Submission


def review_queue(*, user, environment: str = "", tag: str = "", author: str = "",
                 older_than_days: int | None = None) -> QuerySet[Task]:
    """Tasks in review that `user` may decide (not their own, not a version they wrote), oldest
    submission first, each annotated with `submitted_at`."""
    if not permissions.can_review(user) or any(NUL in value for value in (environment, tag, author)):
        return Task.objects.none()
    latest_submission = (Submission.objects.filter(task_version=OuterRef("latest_version"))
                         .order_by("-created_at").values("created_at")[:1])
    queryset = (Task.objects.filter(status=Task.Status.IN_REVIEW)
                .exclude(owner=user).exclude(latest_version__author=user)
                .select_related("environment", "owner", "latest_version", "latest_version__author",
                                "approved_version")
                .prefetch_related("tags")
                .annotate(submitted_at=Subquery(latest_submission)))
    if environment:
        queryset = queryset.filter(environment__slug=environment)
    if tag:
        queryset = queryset.filter(tags__name=tag)
    if author:
        queryset = queryset.filter(owner__username=author)
    if older_than_days:
        queryset = queryset.filter(submitted_at__lte=timezone.now() - timedelta(days=older_than_days))
    return queryset.order_by("submitted_at", "id")


def review_queue_count(*, user) -> int:
    if not permissions.can_review(user):
        return 0
    return (Task.objects.filter(status=Task.Status.IN_REVIEW).exclude(owner=user)
            .exclude(latest_version__author=user).count())


def inbox_items(*, user) -> QuerySet[InboxItem]:
    return (InboxItem.objects.filter(recipient=user).select_related("actor", "task")
            .order_by("-created_at", "-id"))


def inbox_unread_count(*, user) -> int:
    if not user.is_authenticated:
        return 0
    return InboxItem.objects.filter(recipient=user, read_at__isnull=True).count()


def comment_threads(*, task: Task, version: TaskVersion | None = None, check_ids: list[str] | None = None
                    ) -> list[Comment]:
    """The task's threads (roots with their replies), oldest first. With `check_ids` (the checks
    of the version shown), each thread says whether its check still exists (`current`)."""
    roots = list(Comment.objects.filter(task=task, parent__isnull=True)
                 .select_related("author", "resolved_by", "task_version")
                 .prefetch_related(Prefetch("replies", queryset=Comment.objects.select_related("author")
                                            .order_by("created_at", "id")))
                 .order_by("created_at", "id"))
    known = set(check_ids) if check_ids is not None else None
    for root in roots:
        root.current = known is None or not root.check_id or root.check_id in known
    return roots


def threads_by_check(threads: list[Comment]) -> dict[str, list[Comment]]:
    """Open and resolved threads grouped by check id ("" for the task), only those still current."""
    grouped: dict[str, list[Comment]] = {}
    for thread in threads:
        if thread.current:
            grouped.setdefault(thread.check_id, []).append(thread)
    return grouped


def reviews_of(*, task: Task, limit: int = 20) -> QuerySet[Review]:
    return (Review.objects.filter(task_version__task=task).select_related("reviewer", "task_version")
            .order_by("-created_at")[:limit])


def latest_submission(*, task_version: TaskVersion) -> Submission | None:
    return (Submission.objects.filter(task_version=task_version).select_related("submitted_by")
            .order_by("-created_at", "-id").first())


def diff_base(*, task: Task, version: TaskVersion, seen: TaskVersion | None) -> TaskVersion | None:
    """What the review page diffs against: the version this reviewer saw last, else the last
    approved one, else the version submitted before this one."""
    for candidate in (seen, task.approved_version):
        if candidate is not None and candidate.pk != version.pk:
            return candidate
    earlier = (Submission.objects.filter(task_version__task=task, task_version__number__lt=version.number)
               .order_by("-task_version__number").values_list("task_version_id", flat=True).first())
    return TaskVersion.objects.filter(pk=earlier).first() if earlier else None


