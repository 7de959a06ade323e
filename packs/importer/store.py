"""`tasks_import`: candidates stored in batches of a constant number of queries (their environments, tasks,
versions and files), rejected rows reported, and an admin's approval recorded for a reviewed dataset."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts import permissions
from authoring import services as authoring_services
from authoring.models import SLUG_RULE, Blob, Environment, Task, TaskVersion, slug_validator
from gymwright.bulk import keys_of
from gymwright.errors import DomainError, NotAllowed
from gymwright.storable_input import nul_check
from packs.importer.records import DEFAULT_ENVIRONMENT, Candidate, ImportReport, Rejection, ReportLine
from packs.importer.sources import request_candidates, source_candidates

BATCH = 1000


class _DryRunRollback(Exception):
    pass


def tasks_import(
    *,
    path: str | Path | None = None,
    documents: list | None = None,
    user,
    environment: str | None = None,
    dry_run: bool = False,
    approve_as=None,
) -> ImportReport:
    """Import every task of `path`, or of `documents` (a bulk request's items, already read: task
    documents or simple rows; reported as `/tasks/N`); see the module docstring. Raises ImportFailed /
    DomainError for a source that fails as a whole (nothing imported), NotAllowed for missing rights."""
    if not permissions.can_author(user):
        raise NotAllowed("Only authors and admins can import tasks.")
    if approve_as is not None and not permissions.is_admin(approve_as):
        raise NotAllowed(
            f"--approve-as {approve_as.get_username()}: only an admin may approve imported tasks.",
            details=[{"pointer": "/approve_as", "message": "not an admin"}],
        )
    default_version = _environment_latest(environment) if environment else None
    if documents is None:
        path = Path(path)
        if not path.exists():
            raise DomainError(
                f"{path} does not exist.", code="usage", details=[{"pointer": "/file", "message": "not found"}]
            )
    scratch_root = Path(settings.PACK_SCRATCH_DIR)
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="import-", dir=scratch_root))
    lines: list[ReportLine] = []
    used: Counter = Counter()  # environment id -> tasks created or changed in it
    environments: list[dict] = []
    started = timezone.now()
    try:
        try:
            with transaction.atomic():
                candidates = source_candidates(path, scratch) if documents is None else request_candidates(documents)
                _run(
                    candidates,
                    lines,
                    user=user,
                    default_version=default_version,
                    dry_run=dry_run,
                    approve_as=approve_as,
                    used=used,
                )
                environments = _environments_used(used, since=started)  # before a dry run's rollback
                if dry_run:
                    raise _DryRunRollback()
        except _DryRunRollback:
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ImportReport(lines=lines, dry_run=dry_run, environments=environments)


def _environments_used(used: Counter, *, since) -> list[dict]:
    rows = Environment.objects.filter(pk__in=list(used)).values_list("pk", "slug", "created_at") if used else []
    return [
        {"environment": slug, "tasks": used[pk], "new": created_at >= since}
        for pk, slug, created_at in sorted(rows, key=lambda row: row[1])
    ]


def _run(candidates, lines, *, user, default_version, dry_run, approve_as, used: Counter) -> None:
    batch: list = []
    for candidate in candidates:
        batch.append(candidate)
        if len(batch) >= BATCH:
            _import_batch(
                batch,
                lines,
                user=user,
                default_version=default_version,
                dry_run=dry_run,
                approve_as=approve_as,
                used=used,
            )
            batch = []
    if batch:
        _import_batch(
            batch, lines, user=user, default_version=default_version, dry_run=dry_run, approve_as=approve_as, used=used
        )


def _reject(lines, where, exc: DomainError, slug=None) -> None:
    detail = exc.details[0] if exc.details else {}
    lines.append(
        ReportLine(where=where, status="rejected", task=slug, message=exc.message, pointer=detail.get("pointer"))
    )


def _store_files(candidate: Candidate, dry_run: bool) -> None:
    known = set(Blob.objects.filter(sha256__in=list(candidate.files)).values_list("sha256", flat=True))
    for sha256, data in candidate.files.items():
        if sha256 in known:
            continue
        if dry_run:  # a row for validation only; the dry run's transaction is rolled back
            Blob.objects.create(sha256=sha256, size=len(data), file="")
        else:
            authoring_services.blob_store(data=data)


def _import_batch(batch, all_lines, *, user, default_version, dry_run, approve_as, used: Counter) -> None:
    """Import one batch; its report lines keep the source's order."""
    placed: list[tuple[int, ReportLine]] = []
    _import_batch_lines(
        batch, placed, user=user, default_version=default_version, dry_run=dry_run, approve_as=approve_as, used=used
    )
    all_lines.extend(line for _, line in sorted(placed, key=lambda pair: pair[0]))


class _Placed:
    """Report lines tagged with their candidate's position in the batch."""

    def __init__(self, placed: list, position: int):
        self.placed, self.position = placed, position

    def append(self, line: ReportLine) -> None:
        self.placed.append((self.position, line))


def _environment_for(candidate: Candidate, environments: dict, *, user, default_version):
    """The environment version a candidate pins, made once per distinct environment of the batch."""
    if candidate.environment is None and candidate.environment_slug:
        key = ("named", candidate.environment_slug)  # looked up once per batch, a refusal too
        if key not in environments:
            try:
                environments[key] = _environment_latest(candidate.environment_slug)
            except DomainError as exc:
                environments[key] = exc
        if isinstance(environments[key], DomainError):
            raise environments[key]
        return environments[key]
    if candidate.environment is None:
        if default_version is not None:
            return default_version
        slug, number, spec = DEFAULT_ENVIRONMENT, 1, {}
    else:
        slug, number, spec = candidate.environment
    # Most rows of a batch name the same environment: compare their specs as dicts (no serialising per row).
    known = environments.setdefault((slug, number), [])
    for known_spec, version in known:
        if known_spec == spec:
            if isinstance(version, DomainError):  # refused once (another author's environment): refused again
                raise version
            return version
    try:
        with transaction.atomic():
            version = authoring_services.environment_version_import(slug=slug, number=number, spec=spec, author=user)
    except DomainError as exc:
        known.append((spec, exc))
        raise
    known.append((spec, version))
    return version


def _environment_latest(slug: str):
    """The latest version of an existing environment, named by the import (its environment) or by a row;
    a name that cannot be an environment id (a NUL, a megabyte of text) is refused before any query and
    quoted only in part."""
    try:
        slug_validator(slug)
    except ValidationError:
        raise DomainError(
            f"{slug[:64]!r}{'…' if len(slug) > 64 else ''} is not an environment id: use {SLUG_RULE}.",
            details=[{"pointer": "/environment", "message": "not an environment id"}],
        )
    found = Environment.objects.filter(slug=slug).select_related("latest_version").first()
    if found is None or found.latest_version is None:
        raise DomainError(
            f"There is no environment {slug!r}.",
            details=[{"pointer": "/environment", "message": "no such environment"}],
        )
    return found.latest_version


def _unstorable_ids_rejected(batch: list) -> list:
    """The batch with each candidate whose task id cannot even be looked up (a NUL, or an unpaired
    surrogate from a JSON escape, from any source) turned into a rejection; such an id is not echoed
    in the report (it cannot be written out)."""
    checked = []
    for candidate in batch:
        try:
            nul_check(candidate.slug or "", pointer="/id", what="The task id")
        except DomainError as exc:
            candidate = (
                Rejection(candidate.where, exc.message, "/id")
                if isinstance(candidate, Candidate)
                else dataclasses.replace(candidate, slug=None)
            )  # not echoed: it cannot be written
        checked.append(candidate)
    return checked


def _import_batch_lines(batch, placed, *, user, default_version, dry_run, approve_as, used: Counter) -> None:
    environments: dict[tuple, Any] = {}
    new_items, new_where, new_position, new_notes, created_versions, changed = [], [], [], [], [], []
    batch = _unstorable_ids_rejected(batch)
    # the batch's task ids that exist already (usually none): probed by id, then those tasks whole
    known = keys_of(Task, "slug", [c.slug for c in batch if isinstance(c, Candidate)])
    existing = (
        {
            task.slug: task
            for task in Task.objects.filter(pk__any=list(known.values()))
            .order_by()
            .select_related("latest_version")
            .defer("latest_version__spec")
        }
        if known
        else {}
    )
    for position, candidate in enumerate(batch):
        lines = _Placed(placed, position)
        if isinstance(candidate, Rejection):
            lines.append(
                ReportLine(
                    where=candidate.where,
                    status="rejected",
                    task=candidate.slug,
                    message=candidate.message,
                    pointer=candidate.pointer,
                )
            )
            continue
        try:
            if candidate.files and candidate.environment is not None and candidate.environment[2].get("files"):
                # the environment's own files (a build context) are checked as uploaded when it is made
                with transaction.atomic():
                    _store_files(candidate, dry_run)
            environment_version = _environment_for(candidate, environments, user=user, default_version=default_version)
            task = existing.get(candidate.slug)
            if task is None:
                if candidate.files:
                    with transaction.atomic():
                        _store_files(candidate, dry_run)
                new_items.append(
                    {
                        "slug": candidate.slug,
                        "environment_version": environment_version,
                        "content": candidate.content,
                        "number": candidate.number,
                    }
                )
                new_where.append(candidate.where)
                new_position.append(position)
                new_notes.append(candidate.note)
                continue
            # an existing task: most rows of a pack imported again hold what one of its versions holds
            digest = authoring_services.task_content_sha256(
                task=task, content=candidate.content, environment_version=environment_version
            )
            if digest is not None and task.latest_version and digest == task.latest_version.content_sha256:
                lines.append(
                    ReportLine(
                        where=candidate.where, task=task.slug, version=task.latest_version.number, status="unchanged"
                    )
                )
                continue
            changed.append((position, candidate, task, environment_version, digest))
        except DomainError as exc:
            _reject(lines, candidate.where, exc, candidate.slug)
    # content an earlier version holds (an older pack imported again) is not made again on top of later work
    earlier = (
        dict(
            ((row["task_id"], row["content_sha256"]), row["number"])
            for row in TaskVersion.objects.filter(
                task_id__any=[task.pk for _, _, task, _, digest in changed if digest],
                content_sha256__any=[digest for *_, digest in changed if digest],
            ).values("task_id", "content_sha256", "number")
        )
        if any(digest for *_, digest in changed)
        else {}
    )
    for position, candidate, task, environment_version, digest in changed:
        lines = _Placed(placed, position)
        number = earlier.get((task.pk, digest))
        if number is not None:
            lines.append(
                ReportLine(
                    where=candidate.where,
                    task=task.slug,
                    version=number,
                    status="unchanged",
                    message=f"v{number} holds this content; {task.slug} is at v{task.latest_version.number}",
                )
            )
            continue
        try:
            # a savepoint per row, so that a rejected row leaves nothing behind
            with transaction.atomic():
                if candidate.files:
                    _store_files(candidate, dry_run)
                if task.environment_id != environment_version.environment_id:
                    raise DomainError(
                        f"task {task.slug} exists in environment {task.environment.slug}; this row is "
                        f"for environment {environment_version.environment.slug}",
                        details=[
                            {"pointer": "/environment/id", "message": "another environment than the existing task's"}
                        ],
                    )
                version, made = authoring_services.task_version_create(
                    task=task,
                    author=user,
                    base_version=task.latest_version.number if task.latest_version else None,
                    content={**candidate.content, "environment_version": environment_version},
                    message=authoring_services.IMPORT_MESSAGE,
                )
            lines.append(
                ReportLine(
                    where=candidate.where,
                    task=task.slug,
                    version=version.number,
                    status=("would_add_version" if dry_run else "new_version") if made else "unchanged",
                    message=candidate.note if made else "",
                )
            )
            if made:
                created_versions.append(version)
                used[environment_version.environment_id] += 1
        except DomainError as exc:
            _reject(lines, candidate.where, exc, candidate.slug)
    if new_items:
        created, rejected = authoring_services.tasks_bulk_create(author=user, items=new_items)
        results = {index: ("ok", version) for index, version in created}
        results.update({index: ("rejected", exc) for index, exc in rejected})
        for index in range(len(new_items)):
            kind, value = results[index]
            lines = _Placed(placed, new_position[index])
            if kind == "ok":
                lines.append(
                    ReportLine(
                        where=new_where[index],
                        status="would_create" if dry_run else "created",
                        task=new_items[index]["slug"],
                        version=value.number,
                        message=new_notes[index],
                    )
                )
                created_versions.append(value)
                used[new_items[index]["environment_version"].environment_id] += 1
            else:
                _reject(lines, new_where[index], value, new_items[index]["slug"])
    if approve_as is not None and created_versions:
        _approve(created_versions, approve_as)
    # A new version and its task hold each other (tasks_bulk_create caches version.task and
    # task.latest_version, which the approval reads): a reference cycle per task, and the version
    # holds its whole document. Unlinked once the batch is done, so that the batch's tasks and
    # documents are freed by reference counting when nothing uses them, instead of waiting for the
    # cyclic garbage collector to walk them all (a full collection per few requests of 1,000 tasks).
    for version in created_versions:
        if _VERSION_TASK.is_cached(version):
            _VERSION_TASK.delete_cached_value(version)


_VERSION_TASK = TaskVersion._meta.get_field("task")


def _approve(versions, admin) -> None:
    """Record each version as approved by `admin`: review's service, the only one that changes a task's status."""
    from review.services import versions_approve_on_import

    versions_approve_on_import(versions=versions, admin=admin)
