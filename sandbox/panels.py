"""Sandbox's panel on authoring's task page (gymwright.pages; registered in SandboxConfig.ready)."""

from __future__ import annotations

from accounts import permissions
from sandbox import selectors
from sandbox.forms import PreviewStartForm


def task_previews(*, request, task, version, **_):
    """The task's recent previews, and the start form for a member who may start them (not a lab member)."""
    user = request.user
    return {
        "task": task,
        "version": version,
        "form": PreviewStartForm() if version is not None and permissions.can_run_previews(user) else None,
        "preview_runs": selectors.preview_run_list_for_task(task=task, user=user),
    }


def register() -> None:
    from gymwright.pages import panel_register

    panel_register("task_detail.previews", template="sandbox/_task_previews.html", selector=task_previews)
