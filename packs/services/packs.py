"""A task pack: create one; record a download of one of its versions."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction

from accounts import permissions
from authoring.models import AuditEvent
from authoring.services import audit_record
from gymwright.errors import DomainError, NotAllowed
from packs.models import PackVersion, TaskPack


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
