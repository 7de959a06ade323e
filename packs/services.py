"""Writes for task packs: create a pack, start, build, fail and cancel a PackVersion, verify its archive, record
downloads.

A build reads the approved version of each selected task (Task.approved_version, never a later
draft) in task-slug order, streams them through the pure writer (packs.archive) into a temporary
file, and publishes the archive to Django storage only when it is complete. A failed or
cancelled build stores no archive and keeps the reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

import gymwright
from accounts import permissions
from authoring.models import AuditEvent, Task, TaskVersion
from authoring.services import audit_record, blob_read
from grading.engine.scoring import SCORING_RULE
from gymwright import jobs
from gymwright.bulk import bulk_insert_rows
from gymwright.errors import DomainError, NotAllowed
from packs import archive
from packs.models import PackEntry, PackVerification, PackVersion, TaskPack
from sandbox.models import PreviewRun

logger = logging.getLogger(__name__)

# Seconds between progress writes (and cancel checks) of a build: the pack page polls about once a
# second. (Every 50 tasks was 400 queries for a 10,000-task build, ~6 % of its time.)
PROGRESS_WRITE_INTERVAL_S = 0.5
CHUNK = 500


# ---------------------------------------------------------------------------------------------- packs


@transaction.atomic
def pack_create(*, slug: str, user, name: str = "", description: str = "", licence: str = "") -> TaskPack:
    if user is not None and not permissions.can_build_packs(user):  # None: the command line (manage.py)
        raise NotAllowed("Only lab members and admins can create packs.")
    if TaskPack.objects.filter(slug=slug).exists():
        raise DomainError(
            f"A pack called {slug!r} already exists.", details=[{"pointer": "/slug", "message": "already taken"}]
        )
    pack = TaskPack(
        slug=slug, name=name or slug, description=description, licence=licence or "proprietary", created_by=user
    )
    try:
        pack.full_clean()
    except DjangoValidationError as exc:  # field errors → pointers
        details = [
            {"pointer": f"/{name}", "message": " ".join(messages)}
            for name, messages in getattr(exc, "message_dict", {"slug": [str(exc)]}).items()
        ]
        raise DomainError(
            "Invalid pack: " + "; ".join(f"{d['pointer']}: {d['message']}" for d in details), details=details
        )
    pack.save()
    audit_record(actor=user, verb=AuditEvent.Verb.CREATE, target=pack, summary=f"pack {slug}")
    return pack


# ---------------------------------------------------------------------------------------------- selection


def selected_versions(
    *, environment: str | None = None, tags: list[str] | tuple = (), tasks: list[str] | tuple = ()
) -> list[tuple[int, str, int]]:
    """(pk, task slug, number) of the approved TaskVersion of every selected task (all approved tasks without
    a selector), by slug. The environment and tags are the approved version's own: a later draft that
    retags a task or moves it to another environment does not change what a pack selects."""
    heads = Task.objects.filter(approved_version__isnull=False).exclude(status=Task.Status.ARCHIVED)
    if tasks:
        heads = heads.filter(slug__in=list(tasks))
    versions = TaskVersion.objects.filter(pk__in=heads.values("approved_version_id"))
    if environment:
        versions = versions.filter(environment_version__environment__slug=environment)
    if not tags:
        return list(versions.order_by("task__slug").values_list("pk", "task__slug", "number"))
    # Tags live in the version's document; containment on a JSON array is PostgreSQL's alone, and a
    # pack's candidates are read once, so the document's tag list is compared here.
    wanted = set(tags)
    return [
        (pk, slug, number)
        for pk, slug, number, have in versions.order_by("task__slug").values_list(
            "pk", "task__slug", "number", "spec__tags"
        )
        if isinstance(have, list) and wanted <= set(have)
    ]


SELECTION_PROBLEMS_SHOWN = 50  # a list of thousands of unknown names is answered with the first ones


def _selection_check(*, environment, tags, tasks, reads_drafts: bool = True) -> None:
    """Every task named in an explicit list is packable: it exists, a reviewer approved a version of it and it is
    not archived. Each one that is not is refused at its pointer (/tasks/N), all of them at once: a named task
    is never left out without a word (an archived one was). A member who reads approved work only (lab) is told
    "no approved task" alike for a task that does not exist and one that was never approved, as its page answers
    them both 404: the answer must not tell which drafts exist."""
    if not tasks:
        return
    known = {
        slug: (approved, status)
        for slug, approved, status in Task.objects.filter(slug__in=list(tasks)).values_list(
            "slug", "approved_version_id", "status"
        )
    }
    problems = []  # (pointer, message at the pointer, the sentence)
    for index, slug in enumerate(tasks):
        approved, status = known.get(slug, (None, None))
        if not reads_drafts and approved is None:
            problems.append((f"/tasks/{index}", "no approved task", f"There is no approved task {slug!r}"))
        elif slug not in known:
            problems.append((f"/tasks/{index}", "no such task", f"There is no task {slug!r}"))
        elif status == Task.Status.ARCHIVED:
            problems.append((f"/tasks/{index}", "archived", f"Task {slug!r} is archived"))
        elif approved is None:
            problems.append((f"/tasks/{index}", "not approved", f"Task {slug!r} has no approved version"))
    if problems:
        shown = problems[:SELECTION_PROBLEMS_SHOWN]
        more = f"; and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        message = (
            f"{problems[0][2]}."
            if len(problems) == 1
            else f"{len(problems)} of the tasks named cannot be packed: "
            + "; ".join(f"{pointer}: {sentence}" for pointer, _, sentence in shown)
            + more
            + "."
        )
        raise DomainError(message, details=[{"pointer": pointer, "message": text} for pointer, text, _ in shown])


# ---------------------------------------------------------------------------------------------- semver


def parse_semver(text: str, *, pointer: str = "/version") -> tuple[int, int, int]:
    import re

    match = re.match(r"^(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})$", str(text or ""))
    if not match:
        raise DomainError(
            f"{text!r} is not a version like 1.2.3.", details=[{"pointer": pointer, "message": "expected X.Y.Z"}]
        )
    return tuple(int(part) for part in match.groups())  # type: ignore[return-value]


def _bump(version: tuple[int, int, int], kind: str) -> tuple[int, int, int]:
    major, minor, patch = version
    if kind == "major":
        return (major + 1, 0, 0)
    if kind == "minor":
        return (major, minor + 1, 0)
    return (major, minor, patch + 1)


def pack_changes(*, previous: dict[str, int], current: dict[str, int]) -> dict:
    """{added, removed, changed} between two {task slug: task version number} maps."""
    return {
        "added": sorted(set(current) - set(previous)),
        "removed": sorted(set(previous) - set(current)),
        "changed": [
            {"id": slug, "from": previous[slug], "to": current[slug]}
            for slug in sorted(set(previous) & set(current))
            if previous[slug] != current[slug]
        ],
    }


def _previous_ready(pack: TaskPack) -> PackVersion | None:
    return pack.versions.filter(status=PackVersion.Status.READY).first()


def _entry_map(pack_version: PackVersion | None) -> dict[str, int]:
    if pack_version is None:
        return {}
    return dict(pack_version.entries.values_list("task_slug", "task_version__number"))


def _holding_their_number(pack: TaskPack):
    """The versions whose number is taken: ready ones and builds under way (a failed one published nothing)."""
    return pack.versions.exclude(status=PackVersion.Status.FAILED)


def pack_version_propose(
    *, pack: TaskPack, selected: dict[str, int], previous: PackVersion | None
) -> tuple[tuple[int, int, int], dict]:
    """The next version for `selected` ({slug: version number}) and the changes it carries against
    `previous`, the pack's last ready version (`_previous_ready`).

    Removed tasks → major, added → minor, changed (or nothing) → patch, counted from the last
    ready version; never a number a ready or building version already has. A failed version never produced
    an archive, so its number is free again: after a failed 1.0.0 the proposal is 1.0.0.
    """
    changes = pack_changes(previous=_entry_map(previous), current=selected)
    kind = "major" if changes["removed"] else "minor" if changes["added"] else "patch"
    if previous is None:
        proposal = (1, 0, 0)
    else:
        proposal = _bump(previous.semver, kind)
    highest = _holding_their_number(pack).order_by("-major", "-minor", "-patch").first()
    if highest is not None and proposal <= highest.semver:
        proposal = _bump(highest.semver, kind)
    return proposal, changes


# ---------------------------------------------------------------------------------------------- build


@dataclass
class Selection:
    environment: str | None = None
    tags: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    test_ratio: float = 0.1

    def as_dict(self) -> dict:
        return {
            "environment": self.environment,
            "tags": list(self.tags),
            "tasks": list(self.tasks),
            "test_ratio": self.test_ratio,
        }


@dataclass
class BuildPlan:
    """What a build of `selection` would make, before anything is written: its version, task count and the
    changes against the previous ready version (`previous`). `unchanged`: the same task versions split by the
    same ratio as `previous`, so the build would publish the same tasks under a new patch number."""

    version: str
    semver: tuple[int, int, int]
    tasks: int
    changes: dict
    previous: PackVersion | None
    unchanged: bool
    rows: list[tuple[int, str, int]] = field(repr=False, default_factory=list)
    split_by_slug: dict[str, str] = field(repr=False, default_factory=dict)  # by the hash the build uses
    test_ratio_filling_both: float | None = None  # where a split would be empty: a ratio that fills both, if any

    @property
    def splits(self) -> dict:
        """{"train": n, "test": n}"""
        test = sum(1 for split in self.split_by_slug.values() if split == "test")
        return {"train": len(self.split_by_slug) - test, "test": test}

    @property
    def empty_split(self) -> str | None:
        """The split that would hold no task ("test" for a small pack at a small ratio), or None."""
        return archive.empty_split(self.splits)

    def as_dict(self) -> dict:
        return {
            "version": self.version,
            "tasks": self.tasks,
            "splits": self.splits,
            "test_ratio_filling_both": self.test_ratio_filling_both,
            "changes": self.changes,
            "previous": self.previous.version if self.previous else None,
            "unchanged": self.unchanged,
        }


def pack_version_plan(*, pack: TaskPack, user, selection: Selection, version: str | None = None) -> BuildPlan:
    """The build `pack_version_start` would start for `selection` (a dry run: nothing is written), or the
    DomainError it would raise."""
    if user is not None and not permissions.can_build_packs(user):  # None: the command line (manage.py)
        raise NotAllowed("Only lab members and admins can build packs.")
    if not (0 <= selection.test_ratio <= 1):
        raise DomainError(
            "The test ratio must be between 0 and 1.",
            details=[{"pointer": "/test_ratio", "message": "between 0 and 1"}],
        )
    _selection_check(
        environment=selection.environment,
        tags=selection.tags,
        tasks=selection.tasks,
        reads_drafts=user is None or permissions.reads_drafts(user),
    )
    rows = selected_versions(environment=selection.environment, tags=selection.tags, tasks=selection.tasks)
    if not rows:
        raise DomainError(
            "No approved task matches this selection.",
            details=[{"pointer": "/selection", "message": "nothing approved matches"}],
        )
    previous = _previous_ready(pack)
    proposal, changes = pack_version_propose(
        pack=pack, selected={slug: number for _, slug, number in rows}, previous=previous
    )
    if version:
        wanted = parse_semver(version)
        if wanted < proposal:
            raise DomainError(
                f"Version {version} is lower than the proposed {'.'.join(map(str, proposal))}; "
                "a version may be raised, never lowered or reused (a failed one's number is free).",
                details=[{"pointer": "/version", "message": "lower than the proposal"}],
            )
        proposal = wanted
    text = ".".join(str(part) for part in proposal)
    if _holding_their_number(pack).filter(version=text).exists():
        raise DomainError(
            f"{pack.slug} {text} already exists.", details=[{"pointer": "/version", "message": "already used"}]
        )
    unchanged = (
        previous is not None
        and not any(changes.values())
        and (previous.selection or {}).get("test_ratio", 0.1) == selection.test_ratio
    )
    split_by_slug = {slug: archive.split_of(slug, selection.test_ratio) for _, slug, _ in rows}
    plan = BuildPlan(
        version=text,
        semver=proposal,
        tasks=len(rows),
        changes=changes,
        previous=previous,
        unchanged=unchanged,
        rows=rows,
        split_by_slug=split_by_slug,
    )
    if plan.empty_split:
        plan.test_ratio_filling_both = archive.test_ratio_filling_both(split_by_slug)
    return plan


class UnchangedBuild(DomainError):
    """The build would publish the previous version's task versions again, split the same way (`plan`)."""

    def __init__(self, plan: BuildPlan):
        super().__init__(
            f"Nothing changed since {plan.previous.version}: a build would publish the same task "
            f"versions again as {plan.version}.",
            code="unchanged",
            details=[{"pointer": "/selection", "message": "the previous version's tasks"}],
        )
        self.plan = plan


@transaction.atomic
def pack_version_start(
    *,
    pack: TaskPack,
    user,
    selection: Selection,
    version: str | None = None,
    enqueue: bool = True,
    allow_unchanged: bool = True,
    on_unchanged: Callable[[UnchangedBuild], None] | None = None,
) -> PackVersion:
    """A new PackVersion in `building`, its entries pinned now; the build job is enqueued after commit.
    A build that changes nothing: with `allow_unchanged=False`, UnchangedBuild (carrying the plan) is raised;
    otherwise it goes ahead, and `on_unchanged` is told first (the command line's note), from the one plan."""
    pack = TaskPack.objects.select_for_update().get(pk=pack.pk)
    plan = pack_version_plan(pack=pack, user=user, selection=selection, version=version)
    if plan.unchanged and not allow_unchanged:
        raise UnchangedBuild(plan)
    if plan.unchanged and on_unchanged is not None:
        on_unchanged(UnchangedBuild(plan))
    text, proposal, changes, versions = plan.version, plan.semver, plan.changes, plan.rows
    try:
        with transaction.atomic():
            pack_version = PackVersion.objects.create(
                pack=pack,
                version=text,
                major=proposal[0],
                minor=proposal[1],
                patch=proposal[2],
                selection=selection.as_dict(),
                changes=changes,
                progress_total=len(versions),
                created_by=user,
                enqueued_at=timezone.now(),
            )  # NULL only when the broker does not take the job
    except IntegrityError:
        raise DomainError(f"{pack.slug} {text} was just started by someone else.", code="conflict", http_status=409)
    bulk_insert_rows(
        PackEntry,
        ("pack_version_id", "task_version_id", "task_slug", "split"),
        [(pack_version.pk, pk, slug, plan.split_by_slug[slug]) for pk, slug, _ in versions],
    )
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.BUILD,
        target=pack,
        summary=f"{pack.slug} {text}: started a build of {len(versions)} tasks",
        data={"version": text, "tasks": len(versions)},
    )
    if enqueue:
        jobs.send_on_commit(_build_job(), [pack_version.pk], on_unsent=_builds_wait_for_broker)
    return pack_version


def _build_job() -> jobs.Job:
    from packs.tasks import pack_version_build_job

    return jobs.Job(pack_version_build_job)


def _builds_wait_for_broker(pack_version_ids: list[int]) -> None:
    """The broker did not take these builds' jobs: they wait for it (the API and the page say so), and the broker
    check sends them when it answers again."""
    PackVersion.objects.filter(pk__in=pack_version_ids, heartbeat_at__isnull=True).building_update(enqueued_at=None)


def pack_builds_resend(lost_before=None) -> list[int]:
    """The broker check's resender (gymwright.jobs): builds no worker has started whose job waits for the broker,
    or was sent before `lost_before` (the broker lost it). A build that is already under way is left alone."""
    unstarted = PackVersion.objects.filter(
        status=PackVersion.Status.BUILDING, heartbeat_at__isnull=True, cancel_requested=False
    )
    return jobs.resend(
        unstarted,
        lost_before=lost_before,
        job=_build_job(),
        on_unsent=_builds_wait_for_broker,
        update=lambda queryset, **changes: queryset.building_update(**changes),
    )


def pack_verifications_resend(lost_before=None) -> list[int]:
    """The broker check's resender for checks of an archive (queued, their job waiting or lost)."""
    return jobs.resend(
        PackVerification.objects.filter(status=PackVerification.Status.QUEUED),
        lost_before=lost_before,
        job=_verification_job(),
        on_unsent=_verifications_wait_for_broker,
    )


def _calibration(summary: dict | None, policy: str) -> dict | None:
    if not summary or summary.get("graded") in (None, 0):
        return None
    if summary.get("scoring_rule", SCORING_RULE) < SCORING_RULE:
        return None  # graded under the old scoring rule (unscored checks left out of max): run it again
    return {
        "policy": policy,
        "n": summary.get("graded"),
        "pass_rate": summary.get("pass_rate"),
        "pass_at_k": summary.get("pass_at_k"),
        "mean_reward": summary.get("mean_reward"),
    }


def _task_items(pack_version: PackVersion) -> Iterator[archive.TaskItem]:
    """The pinned task versions, in slug order, a chunk at a time, with their last finished model
    preview. Only a model measures difficulty: oracle, nop, probe and hack previews are sanity
    checks that pass or fail by design (the gates run the hack probes last, which made every gated
    task "unsolved")."""
    entries = (
        PackEntry.objects.filter(pack_version=pack_version)
        .order_by("task_slug")
        .values_list("task_version_id", flat=True)
    )
    ids = list(entries.iterator(chunk_size=5000))
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        versions = {row[0]: row for row in TaskVersion.objects.filter(pk__in=chunk).values_list("pk", "spec", "sha256")}
        previews: dict[int, dict | None] = {}
        for run in (
            PreviewRun.objects.filter(task_version_id__in=chunk, status=PreviewRun.Status.DONE, policy_kind="model")
            .order_by("task_version_id", "-created_at", "-id")
            .values("task_version_id", "summary", "policy")
        ):
            if run["task_version_id"] not in previews:
                previews[run["task_version_id"]] = _calibration(run["summary"], run["policy"])
        for pk in chunk:
            _, spec, sha256 = versions[pk]
            yield archive.TaskItem(document=spec, sha256=sha256, calibration=previews.get(pk))


def pack_info(pack_version: PackVersion) -> archive.PackInfo:
    pack = pack_version.pack
    return archive.PackInfo(
        slug=pack.slug,
        name=pack.name,
        version=pack_version.version,
        description=pack.description,
        licence=pack.licence,
        test_ratio=float(pack_version.selection.get("test_ratio", 0.1)),
        gymwright_version=gymwright.__version__,
    )


def _scratch_root() -> Path:
    root = Path(settings.PACK_SCRATCH_DIR)
    root.mkdir(parents=True, exist_ok=True)
    return root


# A build's scratch folder: pack-<version id>-<random>, holding owner.json (the host and process building in it).
SCRATCH_NAME = re.compile(r"^pack-(\d+)-")
SCRATCH_OWNER = "owner.json"
SCRATCH_UNOWNED_GRACE_S = 60  # a folder made a moment ago may not have its owner.json yet


def _process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field), or None when there is no
    such process: a pid and its start time name one process, a reused pid is another one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _scratch_own(scratch: Path) -> None:
    (scratch / SCRATCH_OWNER).write_text(
        json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": _process_start(os.getpid())})
    )


def _scratch_orphaned(folder: Path, *, building: bool, now: float) -> bool:
    """Whether no running build works in `folder`: its version is no longer building, or its owner was a process
    of this host that is gone (a worker killed mid-build). Another host's build is that host's to judge."""
    if not building:
        return True
    try:
        owner = json.loads((folder / SCRATCH_OWNER).read_text())
    except (OSError, ValueError):
        try:
            return now - folder.stat().st_mtime > SCRATCH_UNOWNED_GRACE_S
        except OSError:
            return False
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    return not isinstance(pid, int) or _process_start(pid) != owner.get("started")


def pack_scratch_reap() -> list[str]:
    """Remove this host's build scratch folders that belong to no running build (their worker was killed and the
    build is failed or still waiting for the reaper), from each worker's start and timer; the names removed."""
    root = Path(settings.PACK_SCRATCH_DIR)
    try:
        folders = {
            entry: int(match.group(1))
            for entry in root.iterdir()
            if (match := SCRATCH_NAME.match(entry.name)) and entry.is_dir() and not entry.is_symlink()
        }
    except OSError:  # no scratch folder yet
        return []
    building = set(
        PackVersion.objects.filter(pk__in=set(folders.values()), status=PackVersion.Status.BUILDING).values_list(
            "pk", flat=True
        )
    )
    now, removed = time.time(), []
    for folder, pack_version_id in folders.items():
        if _scratch_orphaned(folder, building=pack_version_id in building, now=now):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    if removed:
        logger.warning("removed the scratch folders of pack builds no process runs any more: %s", removed)
    return removed


def _archive_name(pack_version: PackVersion) -> str:
    """Where this build attempt stores its archive: a name no other attempt uses (a redelivered job may build the
    same version twice at once), so that a failed attempt removes exactly the file it wrote, even a partial one."""
    return f"packs/{pack_version.pack.slug}/{pack_version.version}-{uuid.uuid4().hex[:12]}/{pack_version.filename}"


def _storage_delete_quietly(name: str) -> None:
    try:
        if default_storage.exists(name):
            default_storage.delete(name)
    except Exception:  # the build's outcome stands; the file is logged for a person to remove
        logger.exception("could not remove the unpublished pack archive %s", name)


def pack_version_build(*, pack_version_id: int) -> PackVersion:
    """Build a `building` PackVersion, publish its archive and verify it; a no-op for a finished one."""
    pack_version = PackVersion.objects.select_related("pack", "created_by").get(pk=pack_version_id)
    if pack_version.is_finished:
        return pack_version
    PackVersion.objects.filter(pk=pack_version.pk).building_update(heartbeat_at=timezone.now())
    scratch = Path(tempfile.mkdtemp(prefix=f"pack-{pack_version.pk}-", dir=_scratch_root()))
    _scratch_own(scratch)
    temporary = scratch / "archive.tar.gz"

    last_write = time.monotonic()

    def progress(done: int) -> None:
        nonlocal last_write
        now = time.monotonic()
        if now - last_write < PROGRESS_WRITE_INTERVAL_S and done != pack_version.progress_total:
            return
        last_write = now
        PackVersion.objects.filter(pk=pack_version.pk).building_update(progress_done=done, heartbeat_at=timezone.now())
        if PackVersion.objects.filter(pk=pack_version.pk, cancel_requested=True).exists():
            raise archive.BuildCancelled()

    user = pack_version.created_by
    # The stored file this attempt is responsible for until the version's row names it: removed on every way
    # out but publishing (a cancel or a reap that lands while it is being saved, any error after the save, an
    # error in the middle of the save). It is removed directly, not on commit: the transaction that finds the
    # build cancelled is the one that rolls back, and a rollback drops its on-commit callbacks.
    unpublished: str | None = None
    verification = None
    try:
        result = archive.build_pack(
            out=temporary,
            info=pack_info(pack_version),
            tasks=_task_items(pack_version),
            read_blob=lambda sha256: blob_read(sha256=sha256),
            scratch_dir=scratch / "tree",
            build_record={
                "created_at": pack_version.created_at.isoformat(),
                "created_by": user.get_username() if user else None,
            },
            progress=progress,
        )
        if result.size > settings.PACK_MAX_BYTES:
            raise archive.PackError(
                f"the archive is {result.size} bytes, over the {settings.PACK_MAX_BYTES}-byte "
                "limit (GYMWRIGHT_PACK_MAX_MB)"
            )
        unpublished = _archive_name(pack_version)
        with open(temporary, "rb") as handle:
            unpublished = default_storage.save(unpublished, File(handle), max_length=300)
        with transaction.atomic():
            updated = PackVersion.objects.filter(pk=pack_version.pk, cancel_requested=False).building_update(
                status=PackVersion.Status.READY,
                archive=unpublished,
                size=result.size,
                sha256=result.sha256,
                content_sha256=result.content_sha256,
                manifest=archive.manifest_summary(result.manifest),
                progress_done=pack_version.progress_total,
                finished_at=timezone.now(),
            )
            if updated != 1:  # cancelled, or reaped, while it was being written or saved
                raise archive.BuildCancelled()
            audit_record(
                actor=user,
                verb=AuditEvent.Verb.BUILD,
                target=pack_version.pack,
                summary=f"{pack_version.pack.slug} {pack_version.version}: built ({result.size} bytes)",
                data={
                    "version": pack_version.version,
                    "sha256": result.sha256,
                    "content_sha256": result.content_sha256,
                },
            )
            # in the same transaction: a ready version always has its check, queued if not run yet
            verification = PackVerification.objects.create(pack_version_id=pack_version.pk, enqueued_at=timezone.now())
        unpublished = None
    except archive.BuildCancelled:
        pack_version_fail(pack_version_id=pack_version.pk, reason="cancelled by a user")
    except (archive.PackError, DomainError) as exc:
        pack_version_fail(pack_version_id=pack_version.pk, reason=str(exc))
    except Exception as exc:
        logger.exception("pack build %s failed", pack_version.pk)
        pack_version_fail(pack_version_id=pack_version.pk, reason=f"internal error: {type(exc).__name__}: {exc}")
    finally:
        if unpublished is not None:
            _storage_delete_quietly(unpublished)
        shutil.rmtree(scratch, ignore_errors=True)
    if verification is not None:  # published: checked from storage, as "Verify again" does, by its own job
        _verification_enqueue(verification.pk)
    return PackVersion.objects.select_related("pack").get(pk=pack_version.pk)


def _verification_enqueue(verification_id: int) -> None:
    """Send a queued check to a worker once its row is committed. Its own job, not the build's: reading and hashing
    the whole archive took as long again as writing it (4.5 s of a 10,000-task build's 10 s), and a build is done
    when its archive is published; the page shows the check running, then its result. A broker that cannot take
    the job now leaves the check queued, waiting for it (gymwright.jobs); a build is not failed for it."""
    jobs.send_on_commit(_verification_job(), [verification_id], on_unsent=_verifications_wait_for_broker)


def _verification_job() -> jobs.Job:
    from packs.tasks import pack_verification_run_job

    return jobs.Job(pack_verification_run_job)


def _verifications_wait_for_broker(verification_ids: list[int]) -> None:
    PackVerification.objects.filter(pk__in=verification_ids, status=PackVerification.Status.QUEUED).update(
        enqueued_at=None
    )


@transaction.atomic
def pack_version_fail(*, pack_version_id: int, reason: str, stale_before=None, unstarted: bool = False) -> bool:
    """Mark a building version failed with `reason` (no archive); False when it had already finished.
    With `stale_before`, only if its build has not reported since then (the reaper's check,
    repeated inside the UPDATE so that a build that just reported keeps going); with `unstarted`, only if
    no worker has started it."""
    pack_version = PackVersion.objects.select_related("pack", "created_by").get(pk=pack_version_id)
    queryset = PackVersion.objects.filter(pk=pack_version_id)
    if stale_before is not None:
        queryset = queryset.filter(_silent_since(stale_before))
    if unstarted:
        queryset = queryset.filter(heartbeat_at__isnull=True)
    updated = queryset.building_update(
        status=PackVersion.Status.FAILED, failure_reason=reason[:2000], finished_at=timezone.now()
    )
    if updated:
        audit_record(
            actor=pack_version.created_by,
            verb=AuditEvent.Verb.BUILD_FAILED,
            target=pack_version.pack,
            summary=f"{pack_version.pack.slug} {pack_version.version}: {reason}"[:300],
            data={"version": pack_version.version, "reason": reason[:2000]},
        )
    return bool(updated)


def _silent_since(moment) -> Q:
    """Builds silent since `moment`: started and not heard from since, or sent to the workers before it and never
    started. One whose job waits for the broker (`enqueued_at` NULL) is not silent: it has not been sent yet."""
    return Q(heartbeat_at__lt=moment) | Q(heartbeat_at__isnull=True, enqueued_at__lt=moment)


def pack_versions_reap_stale(*, stale_after_s: float | None = None, now=None) -> list[int]:
    """Fail building versions whose build stopped reporting (its worker died mid-build, or the job
    was lost before any worker took it), with the reason; a build that reports again afterwards
    finds its version finished and stops. Checks of an archive that stopped as long ago are finished as
    failed too. Safe from any number of processes: conditional UPDATEs."""
    stale_after_s = settings.PACK_BUILD_STALE_AFTER_S if stale_after_s is None else stale_after_s
    cutoff = (now or timezone.now()) - timedelta(seconds=stale_after_s)
    reaped = []
    for row in (
        PackVersion.objects.filter(status=PackVersion.Status.BUILDING)
        .filter(_silent_since(cutoff))
        .values("pk", "heartbeat_at")
    ):
        what = "the build stopped reporting" if row["heartbeat_at"] else "no worker started the build"
        reason = (
            f"{what} for more than {stale_after_s:g} s (its worker died or its job was lost); "
            "nothing was published — start the build again"
        )
        if pack_version_fail(pack_version_id=row["pk"], reason=reason, stale_before=cutoff):
            reaped.append(row["pk"])
            logger.warning("reaped stale pack build %s: %s", row["pk"], reason)
    _verifications_reap_stale(stale_after_s=stale_after_s, now=now)
    return reaped


def pack_version_cancel(*, pack_version: PackVersion, user) -> None:
    if not permissions.can_build_packs(user):
        raise NotAllowed("Only lab members and admins can cancel builds.")
    if pack_version.is_finished:
        raise DomainError(f"{pack_version} has already finished.", code="invalid_state", http_status=409)
    PackVersion.objects.filter(pk=pack_version.pk).building_update(cancel_requested=True)
    # A build no worker has started (its job waits for the broker, or is queued) ends now; one that starts
    # later finds it finished, and one that started meanwhile sees the flag.
    pack_version_fail(pack_version_id=pack_version.pk, reason="cancelled by a user", unstarted=True)


def pack_version_download_record(*, pack_version: PackVersion, user, via: str) -> None:
    if not permissions.can_build_packs(user):
        raise NotAllowed("Only lab members and admins can download packs.")
    if pack_version.status != PackVersion.Status.READY:
        raise DomainError(
            f"{pack_version} is {pack_version.get_status_display().lower()}; there is nothing to download.",
            code="invalid_state",
            http_status=409,
        )
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.DOWNLOAD,
        target=pack_version.pack,
        summary=f"{pack_version.pack.slug} {pack_version.version} ({via})",
        data={"version": pack_version.version, "via": via},
    )


# ---------------------------------------------------------------------------------------------- verification

# "Verify again" is refused this soon after the end of the version's last check someone asked for: each check reads
# the whole archive.
VERIFY_AGAIN_AFTER_S = 60
PROBLEMS_KEPT = 1000  # a check's problems stored and shown; a wrecked archive can have one per file


class _HashingReader:
    """A read-only stream that hashes what is read through it: the archive is read once for both checks."""

    def __init__(self, handle):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        return data


def pack_version_verify(*, pack_version: PackVersion) -> archive.Verification:
    """Check the stored archive against its manifest (archive.verify_pack, what `manage.py verify_pack` runs) and
    against the sha256 and content_sha256 recorded at build time, in one read of the archive."""
    with default_storage.open(pack_version.archive.name, "rb") as handle:
        reader = _HashingReader(handle)
        result = archive.verify_pack(reader)
        while reader.read(1 << 20):  # what the tar reader left (its end blocks, the gzip trailer, anything after)
            pass
    digest = reader.digest.hexdigest()
    digest_problems = []
    if digest != pack_version.sha256:
        digest_problems.append(f"the archive's sha256 {digest} is not the recorded {pack_version.sha256}")
    if result.manifest and result.manifest.get("content_sha256") != pack_version.content_sha256:
        digest_problems.append("the manifest's content_sha256 is not the recorded one")
    return archive.Verification(
        result.ok and not digest_problems, result.problems + digest_problems, result.manifest, result.files_checked
    )


def _verifications_reap_stale(*, stale_after_s: float, now=None, pack_version_id: int | None = None) -> int:
    """Finish checks that stopped (their worker died) or never started, so that the version can be checked
    again and its page stops waiting; a check reads one archive, far less than the builds' stale period."""
    cutoff = (now or timezone.now()) - timedelta(seconds=stale_after_s)
    stale = PackVerification.objects.filter(
        Q(status=PackVerification.Status.RUNNING, started_at__lt=cutoff)
        | Q(status=PackVerification.Status.QUEUED, enqueued_at__lt=cutoff)
    )  # a check waiting for the broker waits
    if pack_version_id is not None:
        stale = stale.filter(pack_version_id=pack_version_id)
    return stale.update(
        status=PackVerification.Status.DONE,
        ok=False,
        finished_at=timezone.now(),
        problems=[
            f"the check did not finish within {stale_after_s:g} s (its worker died or its job was lost): verify again"
        ],
    )


def pack_verification_request(*, pack_version: PackVersion, user) -> PackVerification:
    """ "Verify again": a queued check of the stored archive, run by a worker after commit. One check at a time per
    version, and not within VERIFY_AGAIN_AFTER_S of the end of the last one someone asked for (each reads the
    whole archive)."""
    if not permissions.can_build_packs(user):
        raise NotAllowed("Only lab members and admins can verify packs.")
    if pack_version.status != PackVersion.Status.READY:
        raise DomainError(
            f"{pack_version} is {pack_version.get_status_display().lower()}; there is no archive to verify.",
            code="invalid_state",
            http_status=409,
        )
    _verifications_reap_stale(stale_after_s=settings.PACK_BUILD_STALE_AFTER_S, pack_version_id=pack_version.pk)
    # the check that followed the build does not count: the first "Verify again" is never refused for it
    last = (
        pack_version.verifications.filter(status=PackVerification.Status.DONE, requested_by__isnull=False)
        .order_by("-finished_at")
        .first()
    )
    since = (timezone.now() - last.finished_at).total_seconds() if last is not None else None
    if since is not None and since < VERIFY_AGAIN_AFTER_S:
        raise DomainError(
            f"{pack_version} was checked {since:.0f} s ago; verify again at most once every "
            f"{VERIFY_AGAIN_AFTER_S} s (each check reads the whole archive).",
            code="too_soon",
            http_status=429,
        )
    try:
        with transaction.atomic():
            verification = PackVerification.objects.create(
                pack_version=pack_version, requested_by=user, enqueued_at=timezone.now()
            )
    except IntegrityError:  # pack_verification_one_at_a_time
        raise DomainError(
            f"{pack_version} is being verified now; its result will show here.", code="conflict", http_status=409
        )
    _verification_enqueue(verification.pk)
    return verification


def pack_verification_run(*, verification_id: int) -> PackVerification | None:
    """Run a queued check (claimed with a conditional UPDATE: a redelivered job walks away) and store its result;
    an archive that cannot be read is a failed check that says why."""
    claimed = PackVerification.objects.filter(pk=verification_id, status=PackVerification.Status.QUEUED).update(
        status=PackVerification.Status.RUNNING, started_at=timezone.now()
    )
    if claimed != 1:
        return None
    verification = PackVerification.objects.select_related("pack_version__pack").get(pk=verification_id)
    try:
        result = pack_version_verify(pack_version=verification.pack_version)
        ok, problems, files_checked = result.ok, result.problems, result.files_checked
    except OSError as exc:
        ok, problems, files_checked = False, [f"the stored archive cannot be read: {exc}"], 0
    if len(problems) > PROBLEMS_KEPT:
        problems = problems[:PROBLEMS_KEPT] + [
            f"… and {len(problems) - PROBLEMS_KEPT} more problems "
            "(manage.py verify_pack on the downloaded archive lists them all)"
        ]
    PackVerification.objects.filter(pk=verification_id, status=PackVerification.Status.RUNNING).update(
        status=PackVerification.Status.DONE,
        ok=ok,
        problems=problems,
        files_checked=files_checked,
        finished_at=timezone.now(),
    )
    verification.refresh_from_db()
    return verification


def pack_verification_fail(*, verification_id: int, reason: str) -> bool:
    """Finish a check whose job blew up, with the reason; False when it had already finished."""
    unfinished = PackVerification.objects.exclude(status=PackVerification.Status.DONE).filter(pk=verification_id)
    return bool(
        unfinished.update(
            status=PackVerification.Status.DONE, ok=False, problems=[reason[:2000]], finished_at=timezone.now()
        )
    )
