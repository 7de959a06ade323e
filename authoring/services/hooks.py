"""What other apps do with every new task version."""

from __future__ import annotations

from collections.abc import Callable

from authoring.models import TaskVersion

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
