"""What other apps do with every new task version, and the environment fields they keep."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from authoring.models import Environment, TaskVersion

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


@dataclass(frozen=True)
class EnvironmentField:
    """A field of the environment API (GET and PATCH /api/environments/<slug>/) whose data an app to the right keeps,
    as grading keeps an environment's judge: authoring shows and takes it without importing that app.

    `name`: the PATCH body's field; `input_field()`: a new DRF field that validates it (and documents it);
    `output_fields()`: new DRF fields it adds to an environment's output, read through `related` (select_related
    paths from the environment, so a page of environments stays one query); `write(environment=, user=, value=)`:
    checks who may, validates the value and saves it, raising DomainError (a pointer at /name) or NotAllowed."""

    name: str
    input_field: Callable[[], Any]
    output_fields: Callable[[], dict[str, Any]]
    related: tuple[str, ...]
    write: Callable[..., None]


_ENVIRONMENT_FIELDS: dict[str, EnvironmentField] = {}


def environment_field_register(field: EnvironmentField) -> EnvironmentField:
    """Register an environment field (from an AppConfig.ready()); once per name."""
    _ENVIRONMENT_FIELDS.setdefault(field.name, field)
    return field


def environment_fields() -> list[EnvironmentField]:
    return list(_ENVIRONMENT_FIELDS.values())


def environment_fields_related() -> tuple[str, ...]:
    """The select_related paths the registered fields' output reads."""
    return tuple(path for field in _ENVIRONMENT_FIELDS.values() for path in field.related)


@transaction.atomic
def environment_fields_write(*, environment: Environment, user, data: dict[str, Any]) -> None:
    """Save the registered fields `data` names (validated by their input fields): all of them, or none."""
    for name, value in data.items():
        _ENVIRONMENT_FIELDS[name].write(environment=environment, user=user, value=value)
