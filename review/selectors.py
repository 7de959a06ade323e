"""Reads for review: the queue, the inbox, comment threads. Each list costs a constant number
of queries however many tasks there are."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Exists, F, Func, OuterRef, Prefetch, QuerySet, Subquery
from django.utils import timezone

from accounts import permissions
from authoring.models import Task, TaskVersion
from authoring.selectors import approved_versions, task_filter
from grading.engine.models import flat_checks, kinds_with
from gymwright.errors import NotAllowed
from gymwright.pagination import PreparedList
from gymwright.sql import Prepared
from gymwright.storable_input import NUL
from review.models import Comment, InboxItem, Review, Submission


def _decidable(user_id) -> QuerySet[Task]:
    """The queue's rule: tasks in review that are not the reviewer's own, whose latest version they did not write.

    "Did not write" is asked of the versions the reviewer wrote (an index on the author) rather than by joining
    every task in review to its latest version: the join read the whole version table, documents and all, and
    took 17-21 ms for 3,333 tasks in review, on every page a reviewer opened (the navigation counts them)."""
    wrote_latest = TaskVersion.objects.filter(pk=OuterRef("latest_version_id"), author_id=user_id)
    return Task.objects.filter(status=Task.Status.IN_REVIEW).exclude(owner_id=user_id).filter(~Exists(wrote_latest))


def _queue(user_id, environment=None, tag=None, author=None) -> QuerySet[Task]:
    return task_filter(_decidable(user_id), environment=environment or "", tag=tag or "", author=author or "").order_by(
        "submitted_at", "id"
    )


# The queue's count and page of keys for every combination of its menus' filters: compiled once per process and
# combination (gymwright.sql). Its rows are the task list's (authoring.selectors.task_rows).
_QUEUE_FILTERS = {"environment": str, "tag": str, "author": str}
_queue_count = Prepared(_queue, count=True, optional=list(_QUEUE_FILTERS), user_id=int, **_QUEUE_FILTERS)
_queue_keys = Prepared(
    lambda **values: _queue(**values).values_list("pk", flat=True),
    sliced=True,
    optional=list(_QUEUE_FILTERS),
    user_id=int,
    **_QUEUE_FILTERS,
)


def review_queue(
    *, user, environment: str = "", tag: str = "", author: str = "", older_than_days: int | None = None
) -> QuerySet[Task] | PreparedList:
    """Tasks in review that `user` may decide (not their own, not a version they wrote), oldest submission first,
    for keys-first paging with `authoring.selectors.task_rows`: prepared count and key queries, or a queryset where
    the age filter is given."""
    if not permissions.can_review(user) or any(NUL in value for value in (environment, tag, author)):
        return Task.objects.none()
    if not older_than_days:
        return PreparedList(_queue_count, _queue_keys, user_id=user.pk, environment=environment, tag=tag, author=author)
    return _queue(user.pk, environment, tag, author).filter(
        submitted_at__lte=timezone.now() - timedelta(days=older_than_days)
    )


def _unread(user_id) -> QuerySet[InboxItem]:
    return InboxItem.objects.filter(recipient_id=user_id, read_at__isnull=True)


def _count(queryset: QuerySet) -> Subquery:
    """COUNT(*) of `queryset` as a value in another query's row."""
    return Subquery(queryset.order_by().annotate(n=Func(F("pk"), function="COUNT")).values("n"))


# The navigation's counts, on every page: one query (both counts for a reviewer), compiled once per process
# (gymwright.sql).
_nav_counts = Prepared(
    lambda user_id: (
        get_user_model().objects.filter(pk=user_id).values_list(_count(_decidable(user_id)), _count(_unread(user_id)))
    ),
    user_id=int,
)
_inbox_unread_count = Prepared(_unread, count=True, user_id=int)


def nav_counts(*, user) -> tuple[int, int]:
    """(tasks waiting for this reviewer, their unread inbox items): 0 waiting for one who does not review."""
    if not user.is_authenticated:
        return 0, 0
    if not permissions.can_review(user):
        return 0, _inbox_unread_count(user_id=user.pk)
    rows = _nav_counts(user_id=user.pk)
    return rows[0] if rows else (0, 0)


def inbox_items(*, user) -> QuerySet[InboxItem]:
    return InboxItem.objects.filter(recipient=user).select_related("actor", "task").order_by("-created_at", "-id")


def _threads(task: Task) -> QuerySet[Comment]:
    return (
        Comment.objects.filter(task=task, parent__isnull=True)
        .select_related("author", "resolved_by", "task_version")
        .prefetch_related(
            Prefetch("replies", queryset=Comment.objects.select_related("author").order_by("created_at", "id"))
        )
    )


def comment_threads(
    *, task: Task, version: TaskVersion | None = None, check_ids: list[str] | None = None
) -> list[Comment]:
    """The task's threads (roots with their replies), oldest first. With `check_ids` (the checks
    of the version shown), each thread says whether its check still exists (`current`)."""
    roots = list(_threads(task).order_by("created_at", "id"))
    known = set(check_ids) if check_ids is not None else None
    for root in roots:
        root.current = known is None or not root.check_id or root.check_id in known
    return roots


def comment_thread(*, task: Task, comment_id: int) -> Comment | None:
    """The thread `comment_id` is in (its root, with its replies), as comment_threads gives each; None when
    the task has no such comment."""
    root_id = Comment.objects.filter(pk=comment_id, task=task).values_list("parent_id", "pk").first()
    if root_id is None:
        return None
    return _threads(task).filter(pk=root_id[0] or root_id[1]).first()


def threads_by_check(threads: list[Comment]) -> dict[str, list[Comment]]:
    """Open and resolved threads grouped by check id ("" for the task), only those still current."""
    grouped: dict[str, list[Comment]] = {}
    for thread in threads:
        if thread.current:
            grouped.setdefault(thread.check_id, []).append(thread)
    return grouped


REVIEWS_SHOWN = 20


def _reviews_of_task(task_id, *, approved_only: bool) -> QuerySet[Review]:
    queryset = Review.objects.filter(task_version__task_id=task_id)
    if approved_only:  # a member who reads approved work only (lab)
        queryset = queryset.filter(task_version__in=approved_versions(TaskVersion.objects.filter(task_id=task_id)))
    return (
        queryset.select_related("reviewer", "task_version")
        .defer("task_version__spec")
        .order_by("-created_at")[:REVIEWS_SHOWN]
    )


# On every task page: compiled once per process (gymwright.sql), for each kind of reader.
_task_reviews = {
    approved_only: Prepared(
        lambda task_id, approved_only=approved_only: _reviews_of_task(task_id, approved_only=approved_only), task_id=int
    )
    for approved_only in (False, True)
}


def reviews_of(*, task: Task, user) -> list[Review]:
    """The task's latest reviews that `user` may read (a lab member: those of approved versions)."""
    return _task_reviews[not permissions.reads_drafts(user)](task_id=task.pk)


def review_workspace_check(*, user) -> None:
    """The review workspace (the review page, comment threads, judge agreement, an environment's dashboard)
    shows drafts: a member who reads approved work only (lab) is refused, with where to look instead."""
    if not permissions.reads_drafts(user):
        raise NotAllowed(
            "The review pages are for authors and reviewers; a lab member reads approved tasks "
            "on their task pages and in packs."
        )


_latest_submission = Prepared(
    lambda version_id: (
        Submission.objects.filter(task_version_id=version_id)
        .select_related("submitted_by")
        .order_by("-created_at", "-id")[:1]
    ),
    version_id=int,
)


def latest_submission(*, task_version: TaskVersion) -> Submission | None:
    return next(iter(_latest_submission(version_id=task_version.pk)), None)


def diff_base(*, task: Task, version: TaskVersion, seen: TaskVersion | None) -> TaskVersion | None:
    """What the review page diffs against: the version this reviewer saw last, else the last
    approved one, else the version submitted before this one."""
    for candidate in (seen, task.approved_version):
        if candidate is not None and candidate.pk != version.pk:
            return candidate
    earlier = (
        Submission.objects.filter(task_version__task=task, task_version__number__lt=version.number)
        .order_by("-task_version__number")
        .values_list("task_version_id", flat=True)
        .first()
    )
    return TaskVersion.objects.filter(pk=earlier).first() if earlier else None


#: The labelling queue ranks this many times a page of the oldest unlabelled judgements (split votes first): a
#: bounded read, however many wait.
LABEL_WINDOW_PAGES = 10


def unlabelled_judgements(*, task=None, environment=None, limit: int = 50) -> list:
    """Scored llm_judge check results that no human has labelled, those that teach the most first, each with
    `criterion` (from its version's rubric), `graded_text` (what the judge read), `judge_met`, `split` (the judge's
    samples disagreed) and `wanted` (its judge verdict is the class its check has fewer human labels of).

    Order: split votes first (the judge itself was unsure: a label there says the most about it), then the
    verdicts of the class each check lacks labels of (the judge's verdict stands in for the human's, unknown
    yet), so that checks gather the balanced labels validation needs (review.calibration), then the oldest.
    Ranked within a window of the oldest LABEL_WINDOW_PAGES × `limit`, the latest versions' first, then split votes.
    Only verdicts whose label would count for the gate: those judged under the question (criterion, reference, scale,
    model) the task's latest version asks of that check; an earlier criterion's are not offered at all."""
    from django.db.models import BooleanField, Case, F, Q, TextField, Value, When
    from django.db.models.functions import Cast

    from grading.models import CheckResult
    from sandbox.models import Rollout

    queryset = (
        CheckResult.objects.filter(kind__in=kinds_with("judged"), status=CheckResult.Status.SCORED, labels__isnull=True)
        .select_related("grade", "grade__task_version", "grade__task_version__task")
        # votes as JSON text: booleans from a binary judge, numbers from a scaled one (never "true"/"false")
        .annotate(votes_text=Cast("votes", output_field=TextField()))
        .annotate(
            split=Case(
                When(Q(votes_text__contains="true") & Q(votes_text__contains="false"), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )
        .order_by("-split", "grade__created_at", "position")
    )
    if task is not None:
        queryset = queryset.filter(grade__task_version__task=task)
    if environment is not None:
        queryset = queryset.filter(grade__task_version__task__environment=environment)
    # The latest version's own verdicts fill the window first: an older version's count only where it asked the same
    # judge question, and those of an earlier criterion are dropped below, so they must not crowd out ones that count.
    queryset = queryset.annotate(
        earlier_version=Case(
            When(grade__task_version_id=F("grade__task_version__task__latest_version_id"), then=Value(False)),
            default=Value(True),
            output_field=BooleanField(),
        )
    ).order_by("earlier_version", "-split", "grade__created_at", "position")
    items = _counting_for_the_gate(list(queryset[: limit * LABEL_WINDOW_PAGES]))
    labelled = _labelled_classes(task=task, environment=environment) if items else {}
    for item in items:
        item.split = bool(item.split)
        item.judge_met = (item.score or 0) >= 0.5
        have_met, have_not_met = labelled.get((item.grade.task_version.task.slug, item.check_id), (0, 0))
        item.wanted = have_met != have_not_met and item.judge_met == (have_met < have_not_met)
    items = sorted(items, key=lambda item: (not item.split, not item.wanted))[:limit]
    rollout_ids = {item.grade.rollout_id for item in items if item.grade.rollout_id}
    rollouts = {
        row["id"]: row for row in Rollout.objects.filter(pk__in=rollout_ids).values("id", "answer", "workspace_files")
    }
    for item in items:
        version = item.grade.task_version
        check = _find_check(version.rubric if version else {}, item.check_id) or {}
        item.criterion = check.get("criterion") or item.title
        item.target = str(check.get("target") or "answer")
        rollout = rollouts.get(item.grade.rollout_id) or {}
        item.graded_text = graded_text(item.target, rollout, item.grade.document)
    return items


def _counting_for_the_gate(items: list) -> list:
    """`items` (CheckResults with grade, version and task loaded) whose judge was asked the question its task's latest
    version asks of that check (review.calibration.current_label_rows): only a label on those counts for the
    judge_validated gate and the rates; one of an earlier criterion (or of a check the latest version dropped) would
    be a reviewer's effort spent on a question nobody asks any more. A few queries, whatever the number of items."""
    from review.calibration import current_label_rows

    if not items:
        return []
    rows = [
        {
            "item": index,
            "check_result__check_id": item.check_id,
            "check_result__grade_id": item.grade_id,
            "check_result__grade__source": item.grade.source,
            "check_result__grade__task_version_id": item.grade.task_version_id,
            "check_result__grade__task_version__sha256": item.grade.task_version.sha256,
            "check_result__grade__task_version__task_id": item.grade.task_version.task_id,
            "check_result__grade__task_version__task__slug": item.grade.task_version.task.slug,
        }
        for index, item in enumerate(items)
        if item.grade.task_version_id is not None  # a grade of no version: no task, no gate its label could count for
    ]
    counted, _ = current_label_rows(rows)
    return [items[row["item"]] for row in counted]


def _labelled_classes(*, task=None, environment=None) -> dict[tuple[str, str], tuple[int, int]]:
    """(task slug, check id) -> (answers humans call met, answers they call not met) so far."""
    from review.calibration import task_rates_summary

    return {
        key: (rates.answers_met, rates.answers_not_met)
        for key, rates in task_rates_summary(task=task, environment=environment).items()
    }


def _find_check(rubric: dict, check_id: str) -> dict | None:
    return next(
        (row.check for row in flat_checks((rubric or {}).get("checks")) if row.check.get("id") == check_id), None
    )


GRADED_TEXT_MAX_CHARS = 20_000


def check_target(rubric: dict, check_id: str) -> str:
    """What a check of `rubric` reads (its `target`, "answer" by default)."""
    return str((_find_check(rubric, check_id) or {}).get("target") or "answer")


def graded_text(target: str, rollout: dict, document: dict) -> str:
    """The text a judged check read: the rollout's file or answer, else the answer its grade kept."""
    if target.startswith("file:"):
        path = target[5:]
        for entry in rollout.get("workspace_files") or []:
            if isinstance(entry, dict) and entry.get("path") == path:
                return (entry.get("content") or f"({path}: binary or too large to show)")[:GRADED_TEXT_MAX_CHARS]
        return f"(file {path} was not captured)"
    answer = rollout.get("answer")
    if answer is None:
        answer = (document or {}).get("answer") or ""
    return str(answer)[:GRADED_TEXT_MAX_CHARS]


def environment_dashboard(*, environment) -> dict:
    """Tasks of an environment by status, and by the band verdict of their latest version's
    latest model preview (too hard / in band / too easy / not measured)."""
    from django.db.models import Count

    from sandbox.models import PreviewRun

    by_status = dict(Task.objects.filter(environment=environment).values_list("status").annotate(n=Count("id")))
    latest_versions = list(
        Task.objects.filter(environment=environment, latest_version__isnull=False).values_list(
            "latest_version_id", flat=True
        )
    )
    bands = {"too hard": 0, "in band": 0, "too easy": 0, "not measured": 0}
    seen = set()
    for run in (
        PreviewRun.objects.filter(task_version_id__in=latest_versions, policy="model", status=PreviewRun.Status.DONE)
        .order_by("task_version_id", "-created_at")
        .values("task_version_id", "summary")
    ):
        if run["task_version_id"] in seen:
            continue
        seen.add(run["task_version_id"])
        message = ((run["summary"] or {}).get("verdict") or {}).get("message", "")
        bands[
            "too hard"
            if "too hard" in message
            else "too easy"
            if "too easy" in message
            else "in band"
            if "band" in message
            else "not measured"
        ] += 1
    bands["not measured"] += len(latest_versions) - len(seen)
    statuses = [(label, by_status.get(value, 0)) for value, label in Task.Status.choices]
    return {"by_status": statuses, "by_band": list(bands.items()), "task_count": sum(by_status.values())}
