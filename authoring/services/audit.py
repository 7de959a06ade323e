"""The audit trail: who did what to which object."""

from __future__ import annotations

from django.contrib.contenttypes.models import ContentType

from authoring.models import AuditEvent


def audit_record(*, actor, verb: str, target, summary: str, data: dict | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if actor is not None and actor.is_authenticated else None,
        verb=verb,
        content_type=ContentType.objects.get_for_model(type(target)),
        object_id=target.pk,
        summary=summary[:300],
        data=data or {},
    )
