"""Environments and their immutable versions."""

from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import permissions
from authoring.models import AuditEvent, Environment, EnvironmentVersion
from authoring.services.audit import audit_record
from authoring.services.documents import environment_spec_validate
from grading.engine import content_sha256
from gymwright.errors import ConflictError, DomainError, NotAllowed


def _not_yours(target, what: str, *, pointer: str = "/id") -> NotAllowed:
    """The refusal of a new version of someone else's task or environment (the web pages and the API
    check first; an import, which names tasks and environments by id, meets it here)."""
    owner = target.owner.get_username() if target.owner_id else "nobody"
    return NotAllowed(
        f"{what} {target.slug} belongs to {owner}: only its owner or an admin can change it.",
        details=[{"pointer": pointer, "message": f"another author's {what}"}],
    )


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


#: The environment's own calibration settings (when a judged check of its tasks counts as validated, and whether
#: one that is not blocks submission), each with the words that name it: the names are the API's fields and the
#: errors' pointers.
CALIBRATION_FIELDS = {
    "judge_min_labels": "Labelled answers a judged check needs",
    "judge_min_rate": "TPR and TNR a judged check needs",
    "judge_unvalidated_blocks": "A judged check not validated blocks submission",
}
_CALIBRATION_KINDS = {
    "judge_min_labels": "a whole number",
    "judge_min_rate": "a number",
    "judge_unvalidated_blocks": "true or false",
}


def _calibration_invalid(name: str, message: str) -> DomainError:
    return DomainError(f"{CALIBRATION_FIELDS[name]}: {message}.", details=[{"pointer": f"/{name}", "message": message}])


def _calibration_value_ok(name: str, value) -> bool:
    if name == "judge_unvalidated_blocks":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if name == "judge_min_labels":
        return isinstance(value, int)
    return isinstance(value, (int, float)) and math.isfinite(value)


@transaction.atomic
def environment_calibration_set(
    *,
    environment: Environment,
    user,
    judge_min_labels: int | None = None,
    judge_min_rate: float | None = None,
    judge_unvalidated_blocks: bool | None = None,
) -> Environment:
    """Change when `environment`'s judged checks count as validated (None: unchanged); only its owner or an admin
    may. Bounds are the model's validators; a bad value is a DomainError at its field's pointer. Audited on the
    environment when anything changed; no new version (a rule, not content)."""
    if not permissions.can_edit_environment(user, environment):
        raise _not_yours(environment, "environment", pointer="/judge_min_labels")
    values = {
        "judge_min_labels": judge_min_labels,
        "judge_min_rate": judge_min_rate,
        "judge_unvalidated_blocks": judge_unvalidated_blocks,
    }
    changes = {}
    for name, value in values.items():
        if value is None:
            continue
        if not _calibration_value_ok(name, value):
            raise _calibration_invalid(name, f"must be {_CALIBRATION_KINDS[name]}")
        old = getattr(environment, name)
        if value != old:
            changes[name] = [old, value]
            setattr(environment, name, value)
    if not changes:
        return environment
    try:
        environment.full_clean(exclude=["latest_version", "owner", "slug", "name", "description"])
    except ValidationError as exc:
        environment.refresh_from_db(fields=list(CALIBRATION_FIELDS))
        errors = exc.message_dict
        name = next((field for field in CALIBRATION_FIELDS if field in errors), next(iter(changes)))
        message = next(iter(errors.get(name) or [m for ms in errors.values() for m in ms]), "out of range")
        raise _calibration_invalid(name, message.rstrip(".").lower())
    environment.save(update_fields=[*changes, "updated_at"])
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.CALIBRATION,
        target=environment,
        summary="calibration: " + ", ".join(f"{name} {old} → {new}" for name, (old, new) in changes.items()),
        data={"calibration": changes},
    )
    return environment
