"""An environment's judge: which configured judge endpoint its tasks' judge checks use (grading.EnvironmentJudge)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts import permissions
from authoring.models import AuditEvent, Environment
from authoring.services import audit_record
from grading.models import EnvironmentJudge, ModelEndpoint
from gymwright.errors import DomainError, NotAllowed

POINTER = "/judge_endpoint"


@transaction.atomic
def environment_judge_set(*, environment: Environment, user, endpoint_id: int | None) -> EnvironmentJudge | None:
    """Choose the judge endpoint `environment`'s tasks use (None: the default judge), among the judge endpoints an
    admin configured; only its owner or an admin may. Audited on the environment. The choice is no content: no new
    environment version. Returns the choice (None: the default)."""
    if not permissions.can_edit_environment(user, environment):
        owner = environment.owner.get_username() if environment.owner_id else "nobody"
        raise NotAllowed(
            f"environment {environment.slug} belongs to {owner}: only its owner or an admin can change it.",
            details=[{"pointer": POINTER, "message": "another author's environment"}],
        )
    endpoint = None
    if endpoint_id is not None:
        endpoint = ModelEndpoint.objects.filter(pk=endpoint_id).first()
        if endpoint is None or endpoint.role != ModelEndpoint.Role.JUDGE:
            raise DomainError(
                f"Judge endpoint: there is no endpoint {endpoint_id}."
                if endpoint is None
                else f"Judge endpoint: {endpoint.name!r} is a {endpoint.role} endpoint, not a judge endpoint.",
                details=[{"pointer": POINTER, "message": "not one of the configured judge endpoints"}],
            )
    if endpoint is None:  # the default judge: no row, one way to say it
        EnvironmentJudge.objects.filter(environment=environment).delete()
        choice = None
    else:
        choice, _ = EnvironmentJudge.objects.update_or_create(environment=environment, defaults={"endpoint": endpoint})
    Environment.objects.filter(pk=environment.pk).update(updated_at=timezone.now())
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.JUDGE,
        target=environment,
        summary=f"judge {endpoint.name}" if endpoint is not None else "the default judge",
        data={"judge_endpoint": endpoint.name if endpoint is not None else None},
    )
    return choice
