"""Blobs: uploaded bytes stored once under their sha256, and the paths they are attached at."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction

from authoring.models import Blob
from grading.engine.models import normalised_relative_path
from gymwright.errors import DomainError


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


def files_with_uploads(*, files: Iterable[dict], uploads: Iterable, roles: dict[str, str] | None = None) -> list[dict]:
    """The file list [{path, sha256}] with uploaded files added (same path → replaced); `roles`: {upload's
    name: role} chosen as they were attached (workspace, the default, is left unsaid)."""
    by_path = {entry["path"]: entry for entry in files}
    for upload in uploads:
        path = safe_relative_path(upload.name, field="files")
        blob = blob_store(uploaded_file=upload)
        role = (roles or {}).get(upload.name)
        by_path[path] = {
            "path": path,
            "sha256": blob.sha256,
            **({"role": role} if role and role != "workspace" else {}),
        }
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
