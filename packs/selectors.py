"""Reads for packs: permission-aware getters and what the pack page shows."""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404

from accounts import permissions
from gymwright.errors import NotAllowed
from gymwright.sql import Prepared
from packs import archive
from packs.models import PackEntry, PackVersion, TaskPack


def pack_list_for_user(*, user, with_latest_version: bool = False) -> QuerySet[TaskPack]:
    """The packs, by slug. With `with_latest_version`, each carries its highest version's number and status
    (`latest_version`, `latest_status`: None for a pack with none) from the same query, never a version's manifest
    (which names every task of the pack)."""
    if not permissions.can_view(user):
        raise NotAllowed("You need a role to see task packs.")
    if not with_latest_version:
        return TaskPack.objects.all()
    return _packs_with_latest()


def _packs_with_latest():
    highest = PackVersion.objects.filter(pack_id=OuterRef("pk")).order_by("-major", "-minor", "-patch", "-id")
    return TaskPack.objects.annotate(
        latest_version=Subquery(highest.values("version")[:1]), latest_status=Subquery(highest.values("status")[:1])
    )


# The pack list page's count and page of rows: compiled once per process (gymwright.sql); paging the queryset
# compiled both on every view, which cost more CPU than running them.
_PAGE_FIELDS = ("slug", "name", "licence", "latest_version", "latest_status")
_pack_count = Prepared(lambda: TaskPack.objects.all(), count=True)
_pack_page = Prepared(lambda: _packs_with_latest().values_list(*_PAGE_FIELDS), sliced=True)


class PackListPage:
    """The pack list for a Paginator, by slug: its count and a page of rows (dicts of _PAGE_FIELDS: each pack's
    highest version's number and status, None for a pack with none) from the prepared queries."""

    def count(self) -> int:
        return _pack_count()

    def __getitem__(self, bounds: slice) -> list[dict]:
        if bounds.stop <= bounds.start:
            return []
        rows = _pack_page(offset=bounds.start, limit=bounds.stop - bounds.start)
        return [dict(zip(_PAGE_FIELDS, row, strict=True)) for row in rows]


def pack_list_page_source(*, user) -> PackListPage:
    """What the pack list page pages through (`pack_list_for_user` with_latest_version's packs, as rows)."""
    if not permissions.can_view(user):
        raise NotAllowed("You need a role to see task packs.")
    return PackListPage()


def pack_get_for_user(*, slug: str, user) -> TaskPack:
    if not permissions.can_view(user):
        raise NotAllowed("You need a role to see task packs.")
    pack = TaskPack.objects.filter(slug=slug).first()
    if pack is None:
        raise Http404(f"No pack {slug!r}.")
    return pack


def pack_version_get_for_user(*, slug: str, version: str, user) -> PackVersion:
    pack = pack_get_for_user(slug=slug, user=user)
    # the newest attempt at that number: a failed build's number is free again (the ready one, if any, is newest)
    pack_version = pack.versions.select_related("pack", "created_by").filter(version=version).order_by("-id").first()
    if pack_version is None:
        raise Http404(f"{slug} has no version {version!r}.")
    return pack_version


def pack_version_entries(*, pack_version: PackVersion):
    return PackEntry.objects.filter(pack_version=pack_version).select_related("task_version").order_by("task_slug")


def pack_version_histogram(*, pack_version: PackVersion) -> list[dict]:
    """The difficulty histogram (from each task's last model preview) with bar widths for the chart."""
    counts = (pack_version.manifest or {}).get("difficulty") or {}
    highest = max(counts.values(), default=0) or 1
    return [
        {"label": name, "count": counts.get(name, 0), "percent": round(100 * counts.get(name, 0) / highest, 1)}
        for name in archive.DIFFICULTY_BINS
    ]


def pack_version_split_counts(*, pack_version: PackVersion) -> dict:
    counts = {"train": 0, "test": 0}
    for split in pack_version.entries.values_list("split", flat=True):
        counts[split] += 1
    return counts


def pack_version_previous(*, pack_version: PackVersion) -> PackVersion | None:
    return (
        pack_version.pack.versions.filter(status=PackVersion.Status.READY)
        .exclude(pk=pack_version.pk)
        .filter(created_at__lt=pack_version.created_at)
        .first()
    )


TAGS_SHOWN = 60


def approved_tag_counts() -> list[tuple[str, int]]:
    """The tags a build's selection can name, with how many approved tasks carry each, most used first: the tags
    of each task's approved version (a pack selects by those, not by a later draft's; Task.approved_tags, set
    when the version was approved), at most TAGS_SHOWN. One aggregate query; reading every approved version's
    document for its tags cost the pack page a read of the whole version table."""
    from django.db.models import Count, Q

    from authoring.models import Tag, Task

    approved = Q(approved_tasks__approved_version__isnull=False) & ~Q(approved_tasks__status=Task.Status.ARCHIVED)
    rows = (
        Tag.objects.annotate(approved_count=Count("approved_tasks", filter=approved))
        .filter(approved_count__gt=0)
        .order_by("-approved_count", "name")
        .values_list("name", "approved_count")[:TAGS_SHOWN]
    )
    return [(name, count) for name, count in rows]


def dataset_check_get_for_user(*, check_id: int, user):
    """A dataset's health report, for the user who imported the dataset and for admins (404 for anyone else)."""
    from accounts import permissions
    from packs.models import DatasetCheck

    check = DatasetCheck.objects.filter(pk=check_id).first()
    if check is None or not (permissions.is_admin(user) or (user.is_authenticated and check.created_by_id == user.pk)):
        raise Http404("No such health report.")
    return check


def dataset_check_rows(check) -> dict:
    """What the report's page shows: counts, and one row per task in the import's order (those done so far)."""
    document = check.document or {}
    tasks = document.get("tasks") or []
    counts = document.get("counts") or {"healthy": 0, "broken": 0, "not_runnable": 0}
    return {"counts": counts, "tasks": tasks, "truncated": document.get("truncated", "")}
