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


def not_yours(target, what: str, *, pointer: str = "/id") -> NotAllowed:
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
        raise not_yours(environment, "environment")
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
_CALIBRATION_KINDS = {"judge_min_labels": "whole", "judge_min_rate": "number", "judge_unvalidated_blocks": "bool"}
_KIND_WORDS = {"whole": "a whole number", "number": "a number", "bool": "true or false"}


def _kind_ok(kind: str, value) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "whole":
        return isinstance(value, int)
    return isinstance(value, (int, float)) and math.isfinite(value)


def settings_apply(obj, values: dict[str, tuple[str, str, object]], *, words: dict[str, str], exclude) -> dict:
    """Set settings on a model instance `obj`, each named by its API field: {name: (model field, kind, value)}
    with kind "whole", "number" or "bool" and value None for unchanged; bounded by the model's validators
    (full_clean, `exclude` left out). The changes {name: [old, new]}; or a DomainError at the first bad one's
    pointer (/name), its message led by `words[name]`, with `obj` as it was."""

    def invalid(name: str, message: str) -> DomainError:
        return DomainError(f"{words[name]}: {message}.", details=[{"pointer": f"/{name}", "message": message}])

    changes = {}
    for name, (field, kind, value) in values.items():
        if value is None:
            continue
        if not _kind_ok(kind, value):
            raise invalid(name, f"must be {_KIND_WORDS[kind]}")
        old = getattr(obj, field)
        if value != old:
            changes[name] = [old, value]
    for name, (_old, new) in changes.items():
        setattr(obj, values[name][0], new)
    if not changes:
        return changes
    try:
        obj.full_clean(exclude=exclude)
    except ValidationError as exc:
        for name, (old, _new) in changes.items():
            setattr(obj, values[name][0], old)
        errors = exc.message_dict
        name = next((api for api, (field, _, _) in values.items() if field in errors), next(iter(changes)))
        messages = errors.get(values[name][0]) or [message for found in errors.values() for message in found]
        raise invalid(name, next(iter(messages), "out of range").rstrip(".").lower()) from None
    return changes


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
        raise not_yours(environment, "environment", pointer="/judge_min_labels")
    given = {
        "judge_min_labels": judge_min_labels,
        "judge_min_rate": judge_min_rate,
        "judge_unvalidated_blocks": judge_unvalidated_blocks,
    }
    changes = settings_apply(
        environment,
        {name: (name, _CALIBRATION_KINDS[name], value) for name, value in given.items()},
        words=CALIBRATION_FIELDS,
        exclude=["latest_version", "owner", "slug", "name", "description"],
    )
    if not changes:
        return environment
    environment.save(update_fields=[*changes, "updated_at"])
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.CALIBRATION,
        target=environment,
        summary="calibration: " + ", ".join(f"{name} {old} → {new}" for name, (old, new) in changes.items()),
        data={"calibration": changes},
    )
    return environment
