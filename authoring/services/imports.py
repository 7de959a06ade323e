"""Imports (packs.importer): many new tasks at once, keeping the source's version numbers."""

from __future__ import annotations

from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.utils import timezone

from accounts import permissions
from authoring.models import (
    SLUG_RULE,
    AuditEvent,
    Environment,
    EnvironmentVersion,
    Tag,
    Task,
    TaskVersion,
    slug_validator,
)
from authoring.services.audit import audit_record
from authoring.services.blobs import _known_blobs
from authoring.services.documents import _build_task_document, environment_spec_validate
from authoring.services.environments import not_yours
from authoring.services.hooks import _versions_created
from grading.engine import content_sha256
from gymwright.bulk import Pipeline, bulk_insert_rows, ids_reserve, keys_of, saved_instances
from gymwright.errors import DomainError, NotAllowed

IMPORT_MESSAGE = "imported"  # the change note of every version an import makes (the New task form skips them)


@transaction.atomic
def environment_version_import(*, slug: str, number: int, spec: dict, author) -> EnvironmentVersion:
    """The environment version an imported task pins: an existing version with the same content
    (the one with the source's number first), or a new one that keeps the source's number when it
    is above the latest, so a task re-imported from a pack keeps its sha256."""
    if not permissions.can_author(author):
        raise NotAllowed("Only authors and admins can import tasks.")
    full = environment_spec_validate(spec)
    sha256 = content_sha256(full)
    environment = Environment.objects.select_for_update().filter(slug=slug).first()
    if environment is None:
        environment = Environment(slug=slug, name=slug, owner=author)
        try:
            environment.full_clean(exclude=["latest_version"])
        except Exception:  # noqa: BLE001 - django ValidationError
            raise DomainError(
                f"{slug!r} is not a valid environment id: use {SLUG_RULE}.",
                details=[{"pointer": "/environment/id", "message": "invalid slug"}],
            )
        environment.save()
        audit_record(
            actor=author, verb=AuditEvent.Verb.CREATE, target=environment, summary=f"environment {slug} (imported)"
        )
    else:
        same = (
            environment.versions.filter(sha256=sha256)
            .order_by(models.Case(models.When(number=number, then=0), default=1), "-number")
            .first()
        )
        if same is not None:
            return same
        if not permissions.can_edit_environment(author, environment):
            raise not_yours(environment, "environment", pointer="/environment")
    latest = environment.latest_version
    version = EnvironmentVersion.objects.create(
        environment=environment,
        number=max(int(number or 1), (latest.number + 1) if latest else 1),
        spec=full,
        sha256=sha256,
        author=author,
        parent=latest,
        message=IMPORT_MESSAGE,
    )
    Environment.objects.filter(pk=environment.pk).update(latest_version=version)
    return version


# Tasks per hand-over to the bulk pipeline: its rows are written and their keys checked while the
# next chunk is validated.
BULK_CHUNK = 250


@transaction.atomic
def tasks_bulk_create(*, author, items: list[dict], message: str = IMPORT_MESSAGE) -> tuple[list, list]:
    """Many new tasks in a constant number of queries (plus one per task that names files).

    Each item: {"slug", "environment_version", "content", "number" (optional, default 1)}.
    Returns ([(index, TaskVersion)], [(index, DomainError)]): a bad item is rejected with its
    reason and the others are still created. Each chunk of BULK_CHUNK items is validated and
    hashed here while the chunk before is written and its foreign keys checked (gymwright.bulk.Pipeline).
    """
    if not permissions.can_author(author):
        raise NotAllowed("Only authors and admins can import tasks.")
    # one lookup of the batch's attached files, and one of its task ids, not one per task
    known_blobs = _known_blobs(
        entry for item in items if isinstance(item["content"].get("files"), list) for entry in item["content"]["files"]
    )
    taken = keys_of(Task, "slug", [item["slug"] for item in items if isinstance(item["slug"], str)])
    # Each task row points at its version from the start, the version at its task (the foreign keys
    # are checked after both are in): an UPDATE of every new task row cost more than its insert.
    task_ids, version_ids = ids_reserve(Task, len(items)), ids_reserve(TaskVersion, len(items))
    task_type = ContentType.objects.get_for_model(Task)
    now = timezone.now()
    message = message[:500]
    created, rejected, seen = [], [], set()
    with Pipeline() as pipeline:
        for start in range(0, len(items), BULK_CHUNK):
            chunk = []
            for index in range(start, min(start + BULK_CHUNK, len(items))):
                item = items[index]
                slug = item["slug"]
                try:
                    try:
                        slug_validator(slug)
                    except Exception:  # noqa: BLE001 - django ValidationError
                        raise DomainError(
                            f"{slug!r} is not a valid task id: use {SLUG_RULE}.",
                            details=[{"pointer": "/id", "message": "invalid slug"}],
                        )
                    document, hashes = _build_task_document(
                        task_slug=slug,
                        number=int(item.get("number") or 1),
                        environment_version=item["environment_version"],
                        content=item["content"],
                        known_blobs=known_blobs,
                    )
                except DomainError as exc:
                    rejected.append((index, exc))
                    continue
                if slug in taken or slug in seen:
                    rejected.append(
                        (
                            index,
                            DomainError(
                                f"A task called {slug!r} already exists.",
                                details=[{"pointer": "/id", "message": "already taken"}],
                            ),
                        )
                    )
                else:
                    chunk.append((index, document, hashes))
                seen.add(slug)
            if not chunk:
                continue
            task_rows = [
                (
                    task_ids[i],
                    items[i]["slug"],
                    document["title"][:200],
                    items[i]["environment_version"].environment_id,
                    author.pk,
                    version_ids[i],
                    now,
                    now,
                )
                for i, document, _ in chunk
            ]
            version_rows = [
                (
                    version_ids[i],
                    task_ids[i],
                    document["version"],
                    document,
                    hashes.sha256,
                    hashes.content_sha256,
                    items[i]["environment_version"].pk,
                    author.pk,
                    message,
                    now,
                )
                for i, document, hashes in chunk
            ]
            pipeline.insert(Task, _TASK_COLUMNS, task_rows)
            pipeline.insert(
                TaskVersion, _VERSION_COLUMNS, version_rows, json_text={"spec": [hashes.text for _, _, hashes in chunk]}
            )
            pipeline.insert(
                AuditEvent,
                ("actor_id", "verb", "content_type_id", "object_id", "summary", "data", "created_at"),
                [
                    (
                        author.pk,
                        AuditEvent.Verb.IMPORT,
                        task_type.pk,
                        task_ids[i],
                        f"task {items[i]['slug']} v{document['version']} ({message})"[:300],
                        {"version": document["version"], "sha256": hashes.sha256},
                        now,
                    )
                    for i, document, hashes in chunk
                ],
            )
            pipeline.check_constraints()
            # what the caller gets back, made while the thread writes
            using = pipeline.connection.alias
            for (i, _, _), task, version in zip(
                chunk,
                saved_instances(Task, _TASK_COLUMNS, task_rows, using=using),
                saved_instances(TaskVersion, _VERSION_COLUMNS, version_rows, using=using),
            ):
                _VERSION_TASK.set_cached_value(version, task)  # version.task, task.latest_version: no query
                _TASK_LATEST_VERSION.set_cached_value(task, version)
                created.append((i, version))
        pipeline.wait()
    names = sorted({name for _, version in created for name in version.spec["tags"]})
    if names:
        Tag.objects.bulk_create([Tag(name=name) for name in names], ignore_conflicts=True)
        tag_ids = dict(Tag.objects.filter(name__in=names).values_list("name", "pk"))
        bulk_insert_rows(
            Task.tags.through,
            ("task_id", "tag_id"),
            [(version.task_id, tag_ids[name]) for _, version in created for name in version.spec["tags"]],
        )
    _versions_created([version for _, version in created], bulk=True)
    return created, sorted(rejected, key=lambda pair: pair[0])


_VERSION_TASK, _TASK_LATEST_VERSION = TaskVersion._meta.get_field("task"), Task._meta.get_field("latest_version")


_TASK_COLUMNS = ("id", "slug", "title", "environment_id", "owner_id", "latest_version_id", "created_at", "updated_at")


_VERSION_COLUMNS = (
    "id",
    "task_id",
    "number",
    "spec",
    "sha256",
    "content_sha256",
    "environment_version_id",
    "author_id",
    "message",
    "created_at",
)
