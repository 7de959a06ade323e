"""Reads. Each returns a queryset with its joins, or one object checked against the user."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404

from accounts import permissions
from authoring.models import AuditEvent, Environment, EnvironmentVersion, Tag, Task, TaskVersion
from gymwright.errors import NotAllowed
from gymwright.pagination import PreparedList
from gymwright.sql import Prepared, PreparedIn
from gymwright.storable_input import NUL

ACTIONS = ("view", "edit", "review")


# review.Review.Decision.APPROVE, read by name through TaskVersion.reviews: authoring does not import review
# (the apps point one way). Both ways of approving (a review, an admin's `--approve-as` import) write one.
APPROVE = "approve"


def approved_versions(queryset: QuerySet[TaskVersion]) -> QuerySet[TaskVersion]:
    """The versions in `queryset` that a reviewer approved: what a lab member may read."""
    return queryset.filter(pk__in=TaskVersion.objects.filter(reviews__decision=APPROVE).values("pk"))


def task_version_readable(*, user, version: TaskVersion | None) -> bool:
    """May `user` read this task version (its document, previews, grades)? Authors, reviewers and admins read
    every version; a member who is only `lab` reads approved ones."""
    if not permissions.can_view(user) or version is None:
        return False
    return permissions.reads_drafts(user) or version.reviews.filter(decision=APPROVE).exists()


def task_version_check_readable(*, user, version: TaskVersion | None, what: str) -> None:
    """Http404 (naming `what`) unless `user` may read `version`: a draft stays unseen, not forbidden."""
    if not task_version_readable(user=user, version=version):
        raise Http404(f"No {what}")


def _check(user, obj, action: str) -> None:
    if not permissions.can_view(user):
        raise Http404
    if isinstance(obj, Task) and obj.approved_version_id is None and not permissions.reads_drafts(user):
        raise Http404(f"No task {obj.slug!r}")  # a lab member reads approved tasks only
    if action == "edit":
        allowed = (
            permissions.can_edit_task(user, obj)
            if isinstance(obj, Task)
            else permissions.can_edit_environment(user, obj)
        )
        if not allowed:
            raise NotAllowed(f"You may not edit {obj.slug}: only its owner or an admin can.")
    elif action == "review" and not permissions.can_review(user):
        raise NotAllowed("Only reviewers and admins can review.")


def _task_with_versions(slug) -> QuerySet[Task]:
    return Task.objects.select_related(
        "environment",
        "owner",
        "latest_version",
        "approved_version",
        "latest_version__author",
        "latest_version__environment_version",
    ).filter(slug=slug)


def _readable_version_count(*, approved_only: bool) -> Coalesce:
    """How many versions of the task in the outer query a reader may open (a lab member: the approved ones)."""
    versions = TaskVersion.objects.filter(task_id=OuterRef("pk"))
    if approved_only:
        versions = approved_versions(versions)
    return Coalesce(Subquery(versions.order_by().values("task_id").annotate(count=Count("pk")).values("count")), 0)


# Every task page starts with these two: compiled once per process (gymwright.sql). The task's own page also
# counts the versions its reader may open (its History button), in the same query, for each kind of reader.
_task_by_slug = Prepared(_task_with_versions, slug=str)
_task_page_by_slug = {
    approved_only: Prepared(
        lambda slug, approved_only=approved_only: _task_with_versions(slug).annotate(
            readable_version_count=_readable_version_count(approved_only=approved_only)
        ),
        slug=str,
    )
    for approved_only in (False, True)
}
_task_tags = {
    reads_drafts: Prepared(
        lambda task_id, reads_drafts=reads_drafts: Tag.objects.filter(
            **{"tasks__id" if reads_drafts else "approved_tasks__id": task_id}
        ),
        task_id=int,
    )
    for reads_drafts in (True, False)
}


def _approved_status(status: str) -> str:
    """The status a member who reads approved work only (lab) is shown for a task whose `status` is this: its
    approved version's ("approved"), or "archived"; never a later draft's place in review (draft, in review, changes
    requested). `_status_filters` is the same rule the other way, for the list's status filter."""
    return Task.Status.ARCHIVED if status == Task.Status.ARCHIVED else Task.Status.APPROVED


def _status_filters(status: str, *, reads_drafts: bool) -> dict | None:
    """The task list's filters on the stored status that find the tasks shown to the reader as `status`, or None
    where none is. A member who reads approved work only (lab) is shown `_approved_status`: "archived" is the stored
    one, "approved" any other (`not_status`), and a draft's place in review none. Filters on the column, not on an
    expression of it: the planner then knows how many rows match, and pages through the list's index."""
    if reads_drafts:
        return {"status": status}
    if status == Task.Status.ARCHIVED:
        return {"status": Task.Status.ARCHIVED.value}
    if status == Task.Status.APPROVED:
        return {"not_status": Task.Status.ARCHIVED.value}
    return {} if not status else None


_APPROVED_STATUSES = [
    (value, label) for value, label in Task.Status.choices if value in (Task.Status.APPROVED, Task.Status.ARCHIVED)
]


def _as_approved(task: Task) -> Task:
    """`task` as a member who reads approved work only (lab) reads it: its approved version's title and status, and
    its approval's time for its last update (the row is not changed)."""
    task.title, task.status, task.updated_at = task.approved_title, _approved_status(task.status), task.approved_at
    return task


def task_get_for_user(*, slug: str, user, action: str = "view", count_versions: bool = False) -> Task:
    """The task, if `user` may do `action` ("view", "edit", "review") to it.

    Http404 when it does not exist or the user may not see it; NotAllowed when the
    user may see it but not do `action`. For a member who reads approved work only (lab), the task's
    `latest_version` is its approved version: the newest one they may read, and its `title`, `tags` and `status`
    that version's (`approved_title`, `approved_tags`: a later draft's are not theirs to read), its `updated_at` the
    approval's time. The row is not changed.
    With `count_versions`, `task.readable_version_count` is how many versions `user` may open (not the latest
    version's number: an imported task starts at its source's number).
    """
    if NUL in slug:  # no slug has one, and PostgreSQL refuses it even in a lookup
        raise Http404(f"No task {slug!r}")
    tasks = (_task_page_by_slug[not permissions.reads_drafts(user)] if count_versions else _task_by_slug)(slug=slug)
    if not tasks:
        raise Http404(f"No task {slug!r}")
    task = tasks[0]
    _check(user, task, action)
    reads_drafts = permissions.reads_drafts(user)
    tags = task.tags.all()  # as prefetch_related("tags") leaves it: the manager's queryset, already read
    tags._result_cache, tags._prefetch_done = _task_tags[reads_drafts](task_id=task.pk), True
    task._prefetched_objects_cache = {"tags": tags}
    if not reads_drafts:
        task.latest_version = task.approved_version
        _as_approved(task)
    for version in (task.latest_version, task.approved_version):
        if version is not None:
            version.task = task  # the version's task is this row: no query when a section reads it
    return task


def task_check_for_user(*, task: Task, user, action: str = "view") -> Task:
    """`task_get_for_user`'s rules for a task already loaded with something else (a preview run, a
    rollout): Http404 or NotAllowed as there, and no second query for the task. As there, a member who reads
    approved work only (lab) is shown the approved version's title and status."""
    _check(user, task, action)
    if not permissions.reads_drafts(user):
        _as_approved(task)
    return task


def task_version_get_for_user(*, slug: str, number: int, user) -> TaskVersion:
    task = task_get_for_user(slug=slug, user=user)
    try:
        version = TaskVersion.objects.select_related(
            "author", "environment_version", "environment_version__environment"
        ).get(task=task, number=number)
    except TaskVersion.DoesNotExist:
        raise Http404(f"{slug} v{number} does not exist")
    task_version_check_readable(user=user, version=version, what=f"version {number} of {slug}")
    version.task = task
    return version


def environment_get_for_user(*, slug: str, user, action: str = "view", related: tuple[str, ...] = ()) -> Environment:
    """`related`: more select_related paths (the API's environment fields, services.EnvironmentField)."""
    if NUL in slug:  # no slug has one, and PostgreSQL refuses it even in a lookup
        raise Http404(f"No environment {slug!r}")
    try:
        environment = Environment.objects.select_related("owner", "latest_version", *related).get(slug=slug)
    except Environment.DoesNotExist:
        raise Http404(f"No environment {slug!r}")
    _check(user, environment, action)
    return environment


def environment_list(*, user) -> QuerySet[Environment]:
    if not permissions.can_view(user):
        return Environment.objects.none()
    return Environment.objects.select_related("owner", "latest_version", "latest_version__author")


def environment_version_list(*, environment: Environment) -> QuerySet[EnvironmentVersion]:
    return environment.versions.select_related("author").order_by("-number")


def task_list(
    *, user, q: str = "", environment: str = "", status: str = "", tag: str = "", author: str = ""
) -> QuerySet[Task]:
    """Tasks the user can see, filtered; a constant number of queries however many rows. A member who reads
    approved work only (lab) filters by the approved version's status and tags, newest approval first."""
    if not permissions.can_view(user) or any(NUL in value for value in (q, environment, status, tag, author)):
        return Task.objects.none()  # nothing stored holds a NUL, and PostgreSQL refuses one in a filter
    # A list shows each task's latest version number and author, never its document: leave it out.
    # (Pages and the API list read rows with `task_rows`; the related objects serve other callers.)
    reads_drafts = permissions.reads_drafts(user)
    queryset = (
        Task.objects.select_related(
            "environment", "owner", "latest_version", "latest_version__author", "approved_version"
        )
        .defer("latest_version__spec", "approved_version__spec")
        .prefetch_related("tags" if reads_drafts else "approved_tags")
    )
    if q:
        # On PostgreSQL, trigram indexes on the expressions these compile to answer them (authoring migrations
        # 0007 and 0008): a change of lookup or of field needs its index changed too
        # (tests/authoring/test_search_index.py, tests/authoring/test_lab_titles.py). A member who reads approved work
        # only (lab) searches the approved version's title: a draft's words find nothing.
        title = "title" if reads_drafts else "approved_title"
        queryset = queryset.filter(Q(slug__icontains=q) | Q(**{f"{title}__icontains": q}))
    statuses = _status_filters(status, reads_drafts=reads_drafts)
    if statuses is None:
        return Task.objects.none()
    return _listed(reads_drafts)(queryset, environment=environment, tag=tag, author=author, **statuses)


def _listed(reads_drafts: bool):
    """The task list's rule without its search, for `task_list` and the prepared page queries. A member who reads
    approved work only (lab) is given approved tasks, newest approval first, and filters by their approved tags."""

    def build(queryset=None, environment=None, status=None, not_status=None, tag=None, author=None) -> QuerySet[Task]:
        queryset = Task.objects.all() if queryset is None else queryset
        if status:
            queryset = queryset.filter(status=status)
        if not_status:
            queryset = queryset.exclude(status=not_status)
        if not reads_drafts:
            queryset = queryset.filter(approved_version__isnull=False)
        # the lab's order is the time they are shown (index task_approved_order)
        order = ("-updated_at", "-id") if reads_drafts else ("-approved_at", "-id")
        return task_filter(
            queryset, environment=environment or "", tag=tag or "", author=author or "", approved=not reads_drafts
        ).order_by(*order)

    return build


# The task list's and the API's count and page of keys, for every combination of filters but the search (whose
# `icontains` the ORM rewrites): compiled once per process and combination (gymwright.sql).
_LIST_FILTERS = {"environment": str, "status": str, "not_status": str, "tag": str, "author": str}
_list_count = {
    reads_drafts: Prepared(_listed(reads_drafts), count=True, optional=list(_LIST_FILTERS), **_LIST_FILTERS)
    for reads_drafts in (True, False)
}
_list_keys = {
    reads_drafts: Prepared(
        lambda build=_listed(reads_drafts), **filters: build(**filters).values_list(  # noqa: B008
            "pk", flat=True
        ),
        sliced=True,
        optional=list(_LIST_FILTERS),
        **_LIST_FILTERS,
    )
    for reads_drafts in (True, False)
}


def task_list_page_source(
    *, user, q: str = "", environment: str = "", status: str = "", tag: str = "", author: str = ""
) -> QuerySet[Task] | PreparedList:
    """What the task list and `/api/tasks/` page through with `task_rows`: `task_list`'s tasks, as prepared count
    and key queries where no search is given (the list as it opens, and its menus' filters)."""
    if q or not permissions.can_view(user) or any(NUL in value for value in (environment, status, tag, author)):
        return task_list(user=user, q=q, environment=environment, status=status, tag=tag, author=author)
    reads_drafts = permissions.reads_drafts(user)
    statuses = _status_filters(status, reads_drafts=reads_drafts)
    if statuses is None:
        return Task.objects.none()
    filters = {"environment": environment, "tag": tag, "author": author, **statuses}
    return PreparedList(_list_count[reads_drafts], _list_keys[reads_drafts], **filters)


def task_filter(
    queryset: QuerySet[Task], *, environment: str = "", tag: str = "", author: str = "", approved: bool = False
) -> QuerySet[Task]:
    """The task list's menus (environment slug, tag name, owner's username), for any list of tasks; with `approved`,
    the tag is one of the approved version's (what a member who reads approved work only is shown)."""
    if environment:
        queryset = queryset.filter(environment__slug=environment)
    if tag:
        queryset = queryset.filter(**{"approved_tags__name" if approved else "tags__name": tag})
    if author:
        queryset = queryset.filter(owner__username=author)
    return queryset


def task_filter_choices(*, user) -> dict:
    """The task list's filter menus: environment slugs, statuses and tag names, for members only; for a member who
    reads approved work only (lab), the tags of approved versions and the statuses they are shown (a draft's are
    not theirs to see). One query each."""
    if not permissions.can_view(user):
        return {"environments": [], "tags": [], "statuses": []}
    reads_drafts = permissions.reads_drafts(user)
    return {
        "environments": _environment_slugs(),
        "tags": _tag_names[reads_drafts](),
        "statuses": Task.Status.choices if reads_drafts else _APPROVED_STATUSES,
    }


def _tag_choices(reads_drafts: bool) -> QuerySet[Tag]:
    tags = Tag.objects.all()
    if not reads_drafts:
        tags = tags.filter(pk__in=Task.approved_tags.through.objects.values("tag_id"))
    return tags.order_by("name").values_list("name", flat=True)[:200]


# On the task list and the review queue: compiled once per process (gymwright.sql).
_environment_slugs = Prepared(lambda: Environment.objects.order_by("slug").values_list("slug", flat=True))
_tag_names = {
    reads_drafts: Prepared(lambda reads_drafts=reads_drafts: _tag_choices(reads_drafts))
    for reads_drafts in (True, False)
}


TASK_ROW_FIELDS = {
    "pk": "pk",
    "slug": "slug",
    "title": "title",
    "status": "status",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "environment": "environment__slug",
    "owner": "owner__username",
    "latest_version": "latest_version__number",
    "latest_version_author": "latest_version__author__username",
    "approved_version": "approved_version__number",
    "submitted_at": "submitted_at",
}
_STATUS_LABELS = dict(Task.Status.choices)


_APPROVED_ROW_FIELDS = {
    **TASK_ROW_FIELDS,
    "title": "approved_title",
    "updated_at": "approved_at",
    "latest_version": "approved_version__number",
    "latest_version_author": "approved_version__author__username",
}


# A page of the task list or of the API: compiled once per page length (gymwright.sql)
_task_row_values, _approved_row_values = (
    PreparedIn(
        lambda keys, paths=tuple(fields.values()): (  # noqa: B008 - bound once per table
            Task.objects.filter(pk__in=keys).order_by().values_list(*paths)
        ),
        "keys",
        item=int,
    )
    for fields in (TASK_ROW_FIELDS, _APPROVED_ROW_FIELDS)
)
_task_row_tags, _approved_row_tags = (
    PreparedIn(
        lambda keys, through=through: (
            through.objects.filter(task_id__in=keys).order_by("tag__name").values_list("task_id", "tag__name")
        ),
        "keys",
        item=int,
    )
    for through in (Task.tags.through, Task.approved_tags.through)
)


def task_rows(keys: list[int], *, user=None, approvers: bool = False) -> list[dict]:
    """The list columns of these tasks as plain dicts (in no particular order): two queries, no model objects.

    A page of the task list or of `/api/tasks/` builds 250+ model instances through `select_related`;
    the same columns as `.values()` rows cost a fraction of the CPU (bench/bench_load.py). For a member who
    reads approved work only (lab), the latest version, title, tags and status are the approved one's and the
    update time the approval's, as on the task's page. `approvers`: add who approved each approved version
    (one query more; the pages' lists say it, the API does not).
    """
    reads_drafts = user is None or permissions.reads_drafts(user)
    fields = TASK_ROW_FIELDS if reads_drafts else _APPROVED_ROW_FIELDS
    rows = [
        dict(zip(fields, values)) for values in (_task_row_values if reads_drafts else _approved_row_values)(keys=keys)
    ]
    tags: dict[int, list[str]] = {}
    for task_id, name in (_task_row_tags if reads_drafts else _approved_row_tags)(keys=keys):
        tags.setdefault(task_id, []).append(name)
    for row in rows:
        row["tags"] = tags.get(row["pk"], [])
        if not reads_drafts:
            row["status"] = _approved_status(row["status"])
        row["status_label"] = _STATUS_LABELS.get(row["status"], row["status"])
    if approvers:
        _approvers_add(rows)
    return rows


def _approvers_add(rows: list[dict]) -> None:
    """`approved_by` on each row with an approved version: who approved that version (the audit log's approve
    event naming it), so the list never reads as if the version's author approved it. One query, none when
    no row is approved."""
    approved = {row["pk"]: row["approved_version"] for row in rows if row.get("approved_version")}
    for row in rows:
        row["approved_by"] = None
    if not approved:
        return
    events = (
        AuditEvent.objects.filter(
            content_type=ContentType.objects.get_for_model(Task),
            object_id__in=sorted(approved),
            verb=AuditEvent.Verb.APPROVE,
        )
        .order_by("object_id", "-created_at", "-id")
        .values_list("object_id", "actor__username", "data")
    )
    by_task: dict[int, str] = {}
    for task_id, username, data in events:
        if task_id not in by_task and isinstance(data, dict) and data.get("version") == approved[task_id]:
            by_task[task_id] = username or "(deleted user)"
    for row in rows:
        row["approved_by"] = by_task.get(row["pk"])


def task_version_list(*, task: Task, user) -> QuerySet[TaskVersion]:
    """The versions of `task` that `user` may read, newest first."""
    queryset = task.versions.select_related("author", "environment_version__environment").order_by("-number")
    return queryset if permissions.reads_drafts(user) else approved_versions(queryset)


AUDIT_EVENTS_SHOWN = 50


def _events_about(content_type_id, object_id) -> QuerySet[AuditEvent]:
    return (
        AuditEvent.objects.filter(content_type_id=content_type_id, object_id=object_id)
        .select_related("actor")
        .order_by("-created_at", "-id")
    )


_latest_events = Prepared(
    lambda content_type_id, object_id: _events_about(content_type_id, object_id)[:AUDIT_EVENTS_SHOWN],
    content_type_id=int,
    object_id=int,
)  # every task page


def audit_events_for(obj, *, user=None) -> list[AuditEvent]:
    """The latest events about `obj`; of a task, for a member who reads approved work only (lab), only the
    events about versions they may read (a later draft's "v3: message" stays unseen)."""
    content_type = ContentType.objects.get_for_model(type(obj))
    if isinstance(obj, Task) and user is not None and not permissions.reads_drafts(user):
        return list(
            _events_about(content_type.pk, obj.pk).filter(data__version__in=task_version_numbers(task=obj, user=user))[
                :AUDIT_EVENTS_SHOWN
            ]
        )
    return _latest_events(content_type_id=content_type.pk, object_id=obj.pk)


def task_version_file_blob(*, version, path: str):
    """The Blob of the file attached to `version` at `path`, or None."""
    from authoring.models import Blob

    entry = next((f for f in version.spec.get("files") or [] if f.get("path") == path), None)
    return Blob.objects.filter(sha256=entry["sha256"]).first() if entry else None


# A file shown inline on the review page: at most this many bytes of it (the rest is behind its link), so that
# a large data file cannot make the page huge; a file that is not UTF-8 text is named, never shown.
FILE_SHOWN_MAX_BYTES = 64 * 1024
FILES_SHOWN_MAX = 40


@dataclass
class FileShown:
    """One attached file of a version as a reviewer reads it: its text inline (bounded), and its lines against
    the version compared with when it changed."""

    path: str
    role: str
    sha256: str
    status: str  # "added" | "changed" | "unchanged"
    size: int | None = None
    text: str | None = None  # None: binary, missing or over the cap (`note` says which)
    note: str = ""
    lines: list = field(default_factory=list)  # authoring.diff.LineDiff, for a changed text file


def _file_text(blob, max_bytes: int) -> tuple[str | None, str]:
    if blob is None:
        return None, "the file's bytes are missing from storage"
    with blob.file.open("rb") as handle:
        head = handle.read(max_bytes + 1)
    if b"\0" in head:
        return None, f"binary, {blob.size} bytes"
    try:
        text = head[:max_bytes].decode("utf-8")
    except UnicodeDecodeError as error:
        if len(head) > max_bytes and error.start >= max_bytes - 3:  # a character cut at the cap
            text = head[: error.start].decode("utf-8")
        else:
            return None, f"not UTF-8 text, {blob.size} bytes"
    if len(head) > max_bytes:
        return text, f"the first {max_bytes // 1024} KB of {blob.size} bytes; open the file for the rest"
    return text, ""


def task_version_files_shown(
    *, version, base=None, max_bytes: int = FILE_SHOWN_MAX_BYTES, budget=None
) -> list[FileShown]:
    """The attached files of `version`, protected and grader files first, each with its text (bounded) and,
    when it changed since `base`, its line diff (within `budget`, an authoring.diff.DiffBudget the page's
    diffs share): what a reviewer approves along with the rubric."""
    from authoring.diff import DiffBudget, line_diff

    budget = budget or DiffBudget()
    from authoring.models import Blob

    files = [entry for entry in version.spec.get("files") or [] if isinstance(entry, dict) and entry.get("path")]
    files.sort(key=lambda entry: (entry.get("role") not in ("protected", "grader"), entry["path"]))
    before = {
        entry.get("path"): entry.get("sha256")
        for entry in ((base.spec.get("files") if base else None) or [])
        if isinstance(entry, dict)
    }
    inline = files[:FILES_SHOWN_MAX]
    wanted = {entry.get("sha256") for entry in inline} | {before.get(entry["path"]) for entry in inline}
    blobs = {blob.sha256: blob for blob in Blob.objects.filter(sha256__in=[sha for sha in wanted if sha])}
    shown = []
    for index, entry in enumerate(files):
        path, sha256 = entry["path"], entry.get("sha256") or ""
        old = before.get(path) if base else None
        status = "unchanged" if base is None or old == sha256 else ("changed" if old else "added")
        if index >= FILES_SHOWN_MAX:  # named, never left out unsaid: the reviewer approves it too
            note = f"not shown here: the page shows the first {FILES_SHOWN_MAX} files' text; open the file to read it"
            shown.append(FileShown(path, entry.get("role") or "", sha256, status, note=note))
            continue
        blob = blobs.get(sha256)
        text, note = _file_text(blob, max_bytes)
        item = FileShown(path, entry.get("role") or "", sha256, status, blob.size if blob else None, text, note)
        if status == "changed" and text is not None:
            old_text, _ = _file_text(blobs.get(old), max_bytes)
            if old_text is not None:
                item.lines = line_diff(old_text, text, budget=budget)
        shown.append(item)
    return shown


def task_version_numbers(*, task: Task, user) -> list[int]:
    """The version numbers of `task` that `user` may read, in order."""
    queryset = task.versions.order_by("number")
    if not permissions.reads_drafts(user):
        queryset = approved_versions(queryset)
    return list(queryset.values_list("number", flat=True))


# The task page's example answers for a lab member: compiled once per process (gymwright.sql).
_approved_before = Prepared(
    lambda task_id, number: approved_versions(TaskVersion.objects.filter(task_id=task_id, number__lt=number)).order_by(
        "-number"
    )[:1],
    task_id=int,
    number=int,
)


def task_version_before(*, version: TaskVersion, user=None) -> TaskVersion | None:
    """The version before `version` that `user` may read, to tell what changed since: its parent, or for a member
    who reads approved work only (lab) the approved version before it (the parent may be a draft they cannot
    open). One query either way; with no `user`, the parent."""
    if user is None or permissions.reads_drafts(user):
        return version.parent
    return next(iter(_approved_before(task_id=version.task_id, number=version.number)), None)


def environment_version_of(*, environment: Environment, number: int) -> EnvironmentVersion | None:
    return environment.versions.filter(number=number).first()


def environment_tasks(*, environment: Environment, user, limit: int = 100) -> QuerySet[Task]:
    """The tasks of `environment` that `user` may see (a lab member: approved ones), by slug."""
    queryset = environment.tasks.order_by("slug")
    if not permissions.reads_drafts(user):
        queryset = queryset.filter(approved_version__isnull=False)
    return queryset[:limit]
