"""Writes. Every change to authoring data goes through one of these functions.

Versions are append-only: `task_version_create` and `environment_version_create`
are the only code paths that make content, and they never update a version row.
Saving on top of a version that is no longer the latest raises ConflictError;
nothing is overwritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.files.base import ContentFile
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from accounts import permissions
from authoring.models import (
    SLUG_RULE,
    AuditEvent,
    Blob,
    Environment,
    EnvironmentVersion,
    Tag,
    Task,
    TaskVersion,
    slug_validator,
)
from grading.engine import TASK_SCHEMA, canonical_json_exact, content_sha256, validate_task
from grading.engine.models import Environment as EngineEnvironment
from grading.engine.models import normalised_relative_path
from gymwright.bulk import Pipeline, bulk_insert_rows, ids_reserve, keys_of, saved_instances
from gymwright.egress import NETWORK_ON, egress_refusal
from gymwright.errors import ConflictError, DomainError, NotAllowed
from gymwright.nul import json_text_storable, nul_check
from gymwright.text import unix_newlines

ENVIRONMENT_KEYS = (
    "image",
    "dockerfile",
    "setup",
    "network",
    "limits",
    "tools",
    "custom_tools",
    "files",
    "checks_module",
)
# An environment spec with the task format's defaults (grading.engine.models.Environment and Limits).
_FORMAT_ENVIRONMENT = EngineEnvironment()
DEFAULT_ENVIRONMENT_SPEC: dict[str, Any] = {
    "image": None,
    "dockerfile": None,
    "setup": None,
    "network": _FORMAT_ENVIRONMENT.network,
    "limits": _FORMAT_ENVIRONMENT.limits.model_dump(exclude_none=True),
    "tools": list(_FORMAT_ENVIRONMENT.tools),
    "custom_tools": [],
    "files": [],
    "checks_module": None,
}


# ---------------------------------------------------------------------------------------------
# Audit


def audit_record(*, actor, verb: str, target, summary: str, data: dict | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        verb=verb,
        content_type=ContentType.objects.get_for_model(type(target)),
        object_id=target.pk,
        summary=summary[:300],
        data=data or {},
    )


# ---------------------------------------------------------------------------------------------
# Blobs and paths


def safe_relative_path(name: str, *, field: str = "path") -> str:
    """An upload's name as a normalised relative POSIX path (the engine's path rules), or DomainError
    saying what is wrong with it."""
    try:
        return normalised_relative_path(name if isinstance(name, str) else "")
    except ValueError as exc:
        raise DomainError(f"{field}: {exc}.", details=[{"pointer": f"/{field}", "message": str(exc)}]) from None


def blob_store(*, data: bytes | None = None, uploaded_file=None) -> Blob:
    """Stores bytes once under their sha256; returns the existing Blob for known content."""
    if uploaded_file is not None:
        if uploaded_file.size is not None and uploaded_file.size > settings.UPLOAD_MAX_BYTES:
            raise upload_too_large_error(getattr(uploaded_file, "name", "file"))
        digest = hashlib.sha256()
        chunks = []
        for chunk in uploaded_file.chunks():
            digest.update(chunk)
            chunks.append(chunk)
        data = b"".join(chunks)
    assert data is not None
    if len(data) > settings.UPLOAD_MAX_BYTES:
        raise upload_too_large_error("file")
    sha256 = hashlib.sha256(data).hexdigest()
    existing = Blob.objects.filter(sha256=sha256).first()
    if existing:
        if not existing.file.name or not existing.file.storage.exists(existing.file.name):
            # A row whose file is gone (a media folder restored without it, another folder on the same database):
            # these are its bytes, so they are written again where the row says, not kept as a dangling reference.
            if existing.file.name:
                existing.file.storage.save(existing.file.name, ContentFile(data))
            else:
                existing.file.save(f"{sha256[:2]}/{sha256}", ContentFile(data), save=False)
                Blob.objects.filter(pk=existing.pk).update(file=existing.file.name)
        return existing
    blob = Blob(sha256=sha256, size=len(data))
    blob.file.save(f"{sha256[:2]}/{sha256}", ContentFile(data), save=False)
    try:
        with transaction.atomic():
            blob.save()
    except IntegrityError:  # stored concurrently by another request: same bytes, same name
        return Blob.objects.get(sha256=sha256)
    return blob


@transaction.atomic
def api_token_rotate(*, user) -> Token:
    """A new API token for `user`; the old one stops working at once."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


def _not_yours(target, what: str, *, pointer: str = "/id") -> NotAllowed:
    """The refusal of a new version of someone else's task or environment (the web pages and the API
    check first; an import, which names tasks and environments by id, meets it here)."""
    owner = target.owner.get_username() if target.owner_id else "nobody"
    return NotAllowed(
        f"{what} {target.slug} belongs to {owner}: only its owner or an admin can change it.",
        details=[{"pointer": pointer, "message": f"another author's {what}"}],
    )


def upload_too_large_error(name: str) -> DomainError:
    """The one refusal of an upload over settings.UPLOAD_MAX_BYTES (413), for the pages and the API."""
    cap = f"{settings.UPLOAD_MAX_BYTES / (1024 * 1024):.3g} MB"
    return DomainError(
        f"{name} is larger than the upload limit ({cap}).",
        code="upload_too_large",
        http_status=413,
        details=[{"pointer": "/files", "message": f"larger than {cap}"}],
    )


def blob_read(*, sha256: str) -> bytes:
    blob = Blob.objects.get(sha256=sha256)
    with blob.file.open("rb") as handle:
        return handle.read()


def files_with_uploads(*, files: Iterable[dict], uploads: Iterable) -> list[dict]:
    """The file list [{path, sha256}] with uploaded files added (same path → replaced)."""
    by_path = {entry["path"]: entry for entry in files}
    for upload in uploads:
        path = safe_relative_path(upload.name, field="files")
        blob = blob_store(uploaded_file=upload)
        by_path[path] = {"path": path, "sha256": blob.sha256}
    return [by_path[path] for path in sorted(by_path)]


def _known_blobs(files: Iterable) -> set[str]:
    """The sha256s among `files`' entries that name an uploaded blob (one query; none for no files)."""
    wanted = {
        entry.get("sha256") for entry in files if isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
    }
    if not wanted:
        return set()
    return set(Blob.objects.filter(sha256__in=sorted(wanted)).values_list("sha256", flat=True))


def _check_blobs_exist(files: list[dict], pointer: str, *, known: set[str] | None = None) -> None:
    """Every entry names an uploaded blob; `known`: the batch's blobs, already looked up by `_known_blobs`."""
    if not files:
        return
    if known is None:
        known = _known_blobs(files)
    for index, entry in enumerate(files):
        if entry.get("sha256") not in known:
            raise DomainError(
                f"File {entry.get('path')!r} refers to content that was never uploaded.",
                details=[{"pointer": f"{pointer}/{index}/sha256", "message": "unknown content hash; upload the file"}],
            )


# ---------------------------------------------------------------------------------------------
# Validation


def _issues_to_error(issues, *, prefix_from: str = "", prefix_to: str = "", message: str) -> DomainError:
    details = []
    for issue in issues:
        pointer = issue.pointer
        if prefix_from and pointer.startswith(prefix_from):
            pointer = prefix_to + pointer[len(prefix_from) :]
        details.append({"pointer": pointer, "message": issue.message})
    summary = "; ".join(f"{d['pointer'] or '/'}: {d['message']}" for d in details[:3])
    return DomainError(f"{message}: {summary}", details=details)


# Environment limit -> (setting holding its ceiling, that setting's environment variable, unit shown).
_LIMIT_CEILINGS = {
    "memory_mb": ("SANDBOX_MAX_MEMORY_MB", "GYMWRIGHT_MAX_MEMORY_MB", "MB"),
    "pids": ("SANDBOX_MAX_PIDS", "GYMWRIGHT_MAX_PIDS", "processes"),
    "workspace_mb": ("SANDBOX_MAX_DISK_MB", "GYMWRIGHT_MAX_DISK_MB", "MB"),
    "tmp_mb": ("SANDBOX_MAX_DISK_MB", "GYMWRIGHT_MAX_DISK_MB", "MB"),
    "output_cap_bytes": ("SANDBOX_MAX_OUTPUT_CAP_BYTES", "GYMWRIGHT_MAX_OUTPUT_CAP_MB", "bytes"),
    "timeout_s": ("SANDBOX_MAX_TIMEOUT_S", "GYMWRIGHT_MAX_TIMEOUT_S", "s"),
    "exec_timeout_s": ("SANDBOX_MAX_TIMEOUT_S", "GYMWRIGHT_MAX_TIMEOUT_S", "s"),
}


def environment_limits_check(spec: dict, *, pointer_prefix: str = "") -> None:
    """DomainError naming each limit of an environment spec that is over this server's ceiling."""
    limits = spec.get("limits") or {}
    details = []
    for key, (setting, variable, unit) in _LIMIT_CEILINGS.items():
        value = limits.get(key)
        ceiling = getattr(settings, setting)
        if isinstance(value, (int, float)) and value > ceiling:
            details.append(
                {
                    "pointer": f"{pointer_prefix}/limits/{key}",
                    "message": f"{key} {value:g} {unit} is over this server's ceiling of {ceiling:g} {unit} "
                    f"({variable})",
                }
            )
    if details:
        summary = "; ".join(f"{d['pointer']}: {d['message']}" for d in details[:3])
        raise DomainError(f"Limits over the server's ceilings: {summary}", code="over_ceiling", details=details)


def environment_spec_validate(spec: dict) -> dict:
    """The spec with defaults filled in, or DomainError with pointers into the spec."""
    if not isinstance(spec, dict):
        raise DomainError(
            "The environment spec must be a JSON object.", details=[{"pointer": "", "message": "expected an object"}]
        )
    full = {**DEFAULT_ENVIRONMENT_SPEC, **spec}
    # A setup script or Dockerfile typed in the browser arrives with CRLF, and bash reads "\r" as
    # part of each command.
    for key in _ENVIRONMENT_TEXT_KEYS:
        if key in full:
            full[key] = unix_newlines(full[key])
    document = _task_document(
        slug="environment-check",
        number=1,
        title="x",
        prompt="x",
        environment_id="environment-check",
        environment_number=1,
        environment_spec=full,
        files=[],
        solution={"script": None, "answer": None},
        rubric={
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "c", "kind": "string_match", "points": 1, "expected": "x"}],
        },
        tags=[],
        metadata={},
    )
    issues = [issue for issue in validate_task(document) if issue.pointer.startswith("/environment")]
    if issues:
        raise _issues_to_error(issues, prefix_from="/environment", prefix_to="", message="Invalid environment")
    environment_limits_check(full)
    nul_check(full, what="The environment")
    _check_blobs_exist(full.get("files") or [], "/files")
    if full.get("network") in NETWORK_ON:
        reason = egress_refusal()
        if reason:
            raise DomainError(
                f"Invalid environment: /network: {reason}.", details=[{"pointer": "/network", "message": reason}]
            )
    return full


def _task_document(
    *,
    slug,
    number,
    title,
    prompt,
    environment_id,
    environment_number,
    environment_spec,
    files,
    solution,
    rubric,
    tags,
    metadata,
    examples=None,
) -> dict:
    document = {
        "schema": TASK_SCHEMA,
        "id": slug,
        "version": number,
        "title": title,
        "prompt": prompt,
        "environment": {"id": environment_id, "version": environment_number, **environment_spec},
        "files": files,
        "solution": solution,
        "rubric": rubric,
        "tags": tags,
        "metadata": metadata,
    }
    # Only when there are some: a task without example answers keeps the document (and sha256) it
    # had before they existed.
    if examples:
        document["examples"] = examples
    return document


CONTENT_KEYS = ("title", "prompt", "rubric", "solution", "files", "tags", "metadata", "examples")


_ENVIRONMENT_TEXT_KEYS = ("setup", "dockerfile", "checks_module")

# Free-text keys of a rubric check that authors type in multi-line boxes (criterion, reference
# answer, python code, shell command). Patterns and expected values are left exactly as written.
_RUBRIC_TEXT_KEYS = ("criterion", "reference", "code", "run", "title")


def _rubricunix_newlines(rubric):
    if not isinstance(rubric, dict) or not isinstance(rubric.get("checks"), list):
        return rubric

    def check_text(check):
        if not isinstance(check, dict):
            return check
        check = {key: unix_newlines(value) if key in _RUBRIC_TEXT_KEYS else value for key, value in check.items()}
        if isinstance(check.get("checks"), list):
            check["checks"] = [check_text(child) for child in check["checks"]]
        return check

    return {**rubric, "checks": [check_text(check) for check in rubric["checks"]]}


def _task_content_defaults(content: dict) -> dict:
    unknown = sorted(set(content) - set(CONTENT_KEYS) - {"environment_version"})
    if unknown:
        raise DomainError(
            f"Unknown field {unknown[0]!r}.",
            details=[{"pointer": f"/{k}", "message": "unknown field"} for k in unknown],
        )
    solution = content.get("solution") or {}
    if isinstance(solution, dict):
        solution = {
            "script": unix_newlines(solution.get("script")) or None,
            "answer": unix_newlines(solution.get("answer")) or None,
            **{k: v for k, v in solution.items() if k not in ("script", "answer")},
        }
    tags = content.get("tags") or []
    if isinstance(tags, list):
        tags = sorted({str(t).strip().lower() for t in tags if str(t).strip()})
    return {
        "title": content.get("title", ""),
        "prompt": unix_newlines(content.get("prompt", "")),
        "rubric": _rubricunix_newlines(content.get("rubric")),
        "solution": solution,
        "files": content.get("files") or [],
        "tags": tags,
        "metadata": content.get("metadata") or {},
        "examples": content.get("examples") or None,
    }


def _build_task_document(
    *,
    task_slug: str,
    number: int,
    environment_version: EnvironmentVersion,
    content: dict,
    known_blobs: set[str] | None = None,
    check_files: bool = True,
) -> tuple[dict, _Hashes]:
    """The task document for `content`, validated and storable, with its hashes; with `check_files`,
    each attached file's blob must exist (looked up unless `known_blobs` has it)."""
    content = _task_content_defaults(content)
    document = _task_document(
        slug=task_slug,
        number=number,
        title=content["title"],
        prompt=content["prompt"],
        environment_id=environment_version.environment.slug,
        environment_number=environment_version.number,
        environment_spec=environment_version.spec,
        files=content["files"],
        solution=content["solution"],
        rubric=content["rubric"],
        tags=content["tags"],
        metadata=content["metadata"],
        examples=content["examples"],
    )
    issues = validate_task(document)
    if issues:
        raise _issues_to_error(issues, message="Invalid task")
    if not str(content["title"]).strip():
        raise DomainError("A title is required.", details=[{"pointer": "/title", "message": "required"}])
    hashes = _document_hashes(document)
    if check_files and isinstance(content["files"], list):
        _check_blobs_exist(content["files"], "/files", known=known_blobs)
    return document, hashes


class _Hashes(NamedTuple):
    sha256: str
    content_sha256: str
    # The document's canonical JSON when it is the document itself (no 1.0 became 1): an import
    # stores it as it is instead of serialising the document once more.
    text: str | None


def _document_hashes(document: dict) -> _Hashes:
    """The hashes of a task document, from one canonical serialisation, which also refuses a NUL or a
    lone surrogate anywhere in it (with the pointer to it).

    Keys are sorted in canonical JSON and every other top-level key of a task document sorts
    before "version", so the full text is the text without the version, closed with it. (A
    document where that does not hold is serialised twice.)"""
    version = document.get("version")
    rest = {k: v for k, v in document.items() if k != "version"}
    text, exact = canonical_json_exact(rest)
    if not json_text_storable(text):
        nul_check(document, what="The task")  # raises, saying where; else a false alarm
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if type(version) is not int or (rest and max(rest) > "version"):
        full, exact = canonical_json_exact(document)
    else:
        full = text[:-1] + ("," if rest else "") + f'"version":{version}}}'
    return _Hashes(hashlib.sha256(full.encode("utf-8")).hexdigest(), content_hash, full if exact else None)


# ---------------------------------------------------------------------------------------------
# What other apps do with every new task version


# Apps to the right of authoring (review moves the task back to draft, grading grades a version's
# example answers) register here from
# their AppConfig.ready(): authoring never imports them, since the apps depend in a line. A hook
# is called inside the transaction that made the versions, with `bulk=True` for imports.
_VERSION_CREATED_HOOKS: list[Callable[..., None]] = []


def task_version_created_hook(callback: Callable[..., None]) -> Callable[..., None]:
    """Register `callback(*, versions: list[TaskVersion], bulk: bool)`, once per callback."""
    if callback not in _VERSION_CREATED_HOOKS:
        _VERSION_CREATED_HOOKS.append(callback)
    return callback


def _versions_created(versions: list[TaskVersion], *, bulk: bool) -> None:
    for callback in _VERSION_CREATED_HOOKS:
        callback(versions=versions, bulk=bulk)


# ---------------------------------------------------------------------------------------------
# Environments


@transaction.atomic
def environment_create(*, slug: str, name: str, author, spec: dict, description: str = "") -> Environment:
    if not permissions.can_author(author):
        raise NotAllowed("Only authors and admins can create environments.")
    environment = Environment(slug=slug, name=name or slug, description=description, owner=author)
    environment.full_clean(exclude=["latest_version"])
    environment.save()
    version, _ = environment_version_create(
        environment=environment, author=author, spec=spec, base_version=None, message="created", _audit=False
    )
    environment.latest_version = version
    audit_record(actor=author, verb=AuditEvent.Verb.CREATE, target=environment, summary=f"environment {slug}")
    return environment


@transaction.atomic
def environment_version_create(
    *, environment: Environment, author, spec: dict, base_version: int | None, message: str = "", _audit: bool = True
) -> tuple[EnvironmentVersion, bool]:
    """A new immutable EnvironmentVersion, or (latest, False) when the content is unchanged."""
    caller_environment = environment
    environment = Environment.objects.select_for_update().get(pk=environment.pk)
    latest = environment.latest_version
    if latest is not None and base_version != latest.number:
        raise ConflictError(
            f"{environment.slug} is at version {latest.number}; you edited version {base_version}.",
            extra={"latest_version": latest.number},
        )
    full = environment_spec_validate(spec)
    sha256 = content_sha256(full)
    if latest is not None and latest.sha256 == sha256:
        return latest, False
    if latest is not None and not permissions.can_edit_environment(author, environment):
        raise _not_yours(environment, "environment")
    number = (latest.number if latest else 0) + 1
    try:
        with transaction.atomic():
            version = EnvironmentVersion.objects.create(
                environment=environment,
                number=number,
                spec=full,
                sha256=sha256,
                author=author,
                parent=latest,
                message=message[:500],
            )
    except IntegrityError:
        raise ConflictError(
            f"{environment.slug} version {number} was just saved by someone else.", extra={"latest_version": number}
        )
    # .update() skips auto_now: say when explicitly, so "Updated" and the list order follow new versions.
    Environment.objects.filter(pk=environment.pk).update(latest_version=version, updated_at=timezone.now())
    environment.latest_version = caller_environment.latest_version = version
    if _audit:
        audit_record(
            actor=author,
            verb=AuditEvent.Verb.NEW_VERSION,
            target=environment,
            summary=f"environment {environment.slug} v{number}",
            data={"version": number},
        )
    return version, True


# ---------------------------------------------------------------------------------------------
# Tasks


def _set_tags(task: Task, names: list[str]) -> None:
    existing = {tag.name: tag for tag in Tag.objects.filter(name__in=names)}
    missing = [Tag(name=name) for name in names if name not in existing]
    if missing:
        Tag.objects.bulk_create(missing, ignore_conflicts=True)
        existing = {tag.name: tag for tag in Tag.objects.filter(name__in=names)}
    task.tags.set([existing[name] for name in names])


@transaction.atomic
def task_create(*, slug: str, environment: Environment, author, content: dict, message: str = "") -> Task:
    """A new task and its version 1 (`message` is v1's change note; "created" when empty)."""
    if not permissions.can_author(author):
        raise NotAllowed("Only authors and admins can create tasks.")
    if Task.objects.filter(slug=slug).exists():
        raise DomainError(
            f"A task called {slug!r} already exists.", details=[{"pointer": "/slug", "message": "already taken"}]
        )
    if environment.latest_version is None:
        raise DomainError(
            f"Environment {environment.slug} has no version yet.",
            details=[{"pointer": "/environment", "message": "no version"}],
        )
    task = Task(slug=slug, title=str(content.get("title") or slug)[:200], environment=environment, owner=author)
    try:
        task.full_clean(exclude=["latest_version", "tags"])
    except DjangoValidationError as exc:  # field errors → pointers
        details = [
            {"pointer": f"/{field}", "message": " ".join(messages)}
            for field, messages in getattr(exc, "message_dict", {"slug": [str(exc)]}).items()
        ]
        raise DomainError(
            "Invalid task: " + "; ".join(f"{d['pointer']}: {d['message']}" for d in details), details=details
        )
    # Validate before the first write so a bad first version leaves nothing behind.
    _build_task_document(task_slug=slug, number=1, environment_version=environment.latest_version, content=content)
    task.save()
    version, _ = task_version_create(
        task=task, author=author, content=content, base_version=None, message=message.strip() or "created", _audit=False
    )
    task.latest_version = version
    audit_record(actor=author, verb=AuditEvent.Verb.CREATE, target=task, summary=f"task {slug}")
    return task


@transaction.atomic
def task_version_create(
    *, task: Task, author, content: dict, base_version: int | None, message: str = "", _audit: bool = True
) -> tuple[TaskVersion, bool]:
    """A new immutable TaskVersion from `content`, made on top of `base_version`.

    `content` holds the editable parts: title, prompt, rubric, solution, files, tags,
    metadata, and optionally environment_version (an EnvironmentVersion; default: the
    environment's latest). Returns (version, True), or (latest, False) when nothing
    changed. Raises ConflictError when `base_version` is not the latest version.
    """
    # Lock the head row so that two saves on the same base serialise: the second sees
    # the first's version and gets a conflict instead of overwriting it.
    caller_task = task
    task = Task.objects.select_for_update().select_related("environment").get(pk=task.pk)
    latest = task.latest_version
    if latest is not None and base_version != latest.number:
        raise ConflictError(
            f"{task.slug} is now at version {latest.number} (by {latest.author}); you edited version {base_version}.",
            extra={"latest_version": latest.number, "base_version": base_version},
        )
    environment_version = content.get("environment_version") or task.environment.latest_version
    if environment_version is None:
        raise DomainError(
            "The task's environment has no version.", details=[{"pointer": "/environment", "message": "no version"}]
        )
    if environment_version.environment_id != task.environment_id:
        raise DomainError(
            "That environment version belongs to another environment.",
            details=[{"pointer": "/environment_version", "message": "wrong environment"}],
        )
    number = (latest.number if latest else 0) + 1
    document, hashes = _build_task_document(
        task_slug=task.slug, number=number, environment_version=environment_version, content=content
    )
    if latest is not None and latest.content_sha256 == hashes.content_sha256:
        return latest, False
    if latest is not None and not permissions.can_edit_task(author, task):
        raise _not_yours(task, "task")
    try:
        with transaction.atomic():
            version = TaskVersion.objects.create(
                task=task,
                number=number,
                spec=document,
                sha256=hashes.sha256,
                content_sha256=hashes.content_sha256,
                environment_version=environment_version,
                author=author,
                parent=latest,
                message=message[:500],
            )
    except IntegrityError:
        raise ConflictError(
            f"{task.slug} version {number} was just saved by someone else.",
            extra={"latest_version": number, "base_version": base_version},
        )
    # .update() skips auto_now: say when explicitly, so "Updated" and the list order follow new versions.
    updated_at = timezone.now()
    Task.objects.filter(pk=task.pk).update(latest_version=version, title=document["title"][:200], updated_at=updated_at)
    task.latest_version, task.title, task.updated_at = version, document["title"][:200], updated_at
    _set_tags(task, document["tags"])
    # Review moves the task back to draft here (its services alone change Task.status).
    _versions_created([version], bulk=False)
    # the caller's instance reflects the save too
    caller_task.latest_version, caller_task.title, caller_task.status, caller_task.updated_at = (
        version,
        task.title,
        task.status,
        updated_at,
    )
    if _audit:
        audit_record(
            actor=author,
            verb=AuditEvent.Verb.NEW_VERSION,
            target=task,
            summary=f"{task.slug} v{number}" + (f": {message}" if message else ""),
            data={"version": number, "sha256": version.sha256},
        )
    return version, True


def task_content_sha256(*, task: Task, content: dict, environment_version: EnvironmentVersion) -> str | None:
    """The content_sha256 that `task_version_create` would give `content` (in `environment_version`) as
    the task's next version: the document built and hashed in memory, no query and no lock. None when
    the content does not build, or names another environment (`task_version_create` says why). An
    import compares it with the task's versions: a pack imported again into a database that has its
    tasks finds every row unchanged this way (1,000 rows: ~0.05 s, against ~2 s through a savepoint and
    `task_version_create` each)."""
    if environment_version.environment_id != task.environment_id:
        return None
    number = (task.latest_version.number if task.latest_version else 0) + 1
    try:
        # files unchecked: content that hashes like an existing version's names that version's files
        _, hashes = _build_task_document(
            task_slug=task.slug,
            number=number,
            environment_version=environment_version,
            content=content,
            check_files=False,
        )
    except DomainError:
        return None
    return hashes.content_sha256


def task_version_content(version: TaskVersion) -> dict:
    """The editable content of a version, as task_version_create takes it."""
    spec = version.spec
    return {key: spec.get(key) for key in CONTENT_KEYS}


# ---------------------------------------------------------------------------------------------
# Imports (packs.importer): many new tasks at once, keeping the source's version numbers


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
            raise _not_yours(environment, "environment", pointer="/environment")
    latest = environment.latest_version
    version = EnvironmentVersion.objects.create(
        environment=environment,
        number=max(int(number or 1), (latest.number + 1) if latest else 1),
        spec=full,
        sha256=sha256,
        author=author,
        parent=latest,
        message="imported",
    )
    Environment.objects.filter(pk=environment.pk).update(latest_version=version)
    return version


# Tasks per hand-over to the bulk pipeline: its rows are written and their keys checked while the
# next chunk is validated.
BULK_CHUNK = 250


@transaction.atomic
def tasks_bulk_create(*, author, items: list[dict], message: str = "imported") -> tuple[list, list]:
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
