"""Review's panels on other apps' pages (gymwright.pages; registered in ReviewConfig.ready): the review section
of the task page, the review threads in the task editor, the environment's dashboard link and the
navigation's Review and Inbox links."""

from __future__ import annotations

from functools import cache

from django.utils.safestring import mark_safe

from accounts import permissions
from authoring.models import Task
from grading.engine import gate_rules as engine_gates
from gymwright.forms import rendered_once
from review import gate_evidence as review_gates
from review import selectors, services
from review.forms import ReviewForm, SubmitForm


def _override_reason_field() -> tuple[str, str]:
    """(label, widget HTML) of the unbound submit form's one field: the same every time, rendered once."""

    def render():
        field = SubmitForm()["override_reason"]
        return field.label, mark_safe(str(field))

    return rendered_once((SubmitForm, "override_reason"), render)


def task_reviews(*, request, task, version, **_):
    """The task page's gates, submit form and reviews."""
    user = request.user
    gates = review_gates.gates_evaluate(task_version=version) if version else []
    gates_pass = all(gate.ok for gate in gates)
    can_review = (
        version is not None
        and permissions.can_review(user)
        and task.owner_id != user.pk
        and version.author_id != user.pk
    )
    can_submit = permissions.can_edit_task(user, task) and task.status in services.SUBMITTABLE
    is_admin = permissions.is_admin(user)
    return {
        "task": task,
        "version": version,
        "gates": gates,
        "gates_pass": gates_pass,
        "blocking": engine_gates.blocking_reasons(gates),
        "submission": selectors.latest_submission(task_version=version) if version else None,
        "next_url": request.get_full_path(),
        "reviews": selectors.reviews_of(task=task, user=user),
        "can_submit": can_submit,
        "is_admin": is_admin,
        # the previews the gates miss start for whoever may start previews; the review page shows drafts
        "can_run_gates": permissions.can_run_previews(user),
        "can_open_review": permissions.reads_drafts(user),
        # each form only where it is shown (the template asks for it by name): building one deep-copies its fields
        "review_form": ReviewForm(initial={"version": version.number})
        if can_review and task.status == Task.Status.IN_REVIEW
        else None,
        "override_reason": _override_reason_field() if can_submit and is_admin and not gates_pass else None,
    }


def editor_threads(*, request, task=None, version=None, **_):
    """The task's review threads in the editor, each at its check (the author replies and resolves)."""
    if task is None:
        return None  # a new task has none
    ids = services.check_ids(version.rubric) if version else []
    threads = selectors.comment_threads(task=task, check_ids=ids)
    return {
        "task": task,
        "threads": threads,
        "open_count": sum(1 for t in threads if not t.is_resolved),
        "next_url": request.get_full_path(),
        "can_comment": permissions.can_review(request.user) or permissions.can_edit_task(request.user, task),
    }


def environment_dashboard_link(*, request, environment, **_):
    # the review workspace shows drafts
    return {"environment": environment} if permissions.reads_drafts(request.user) else None


def navigation(*, request, **_):
    """Review and Inbox, with their counts: tasks waiting for this reviewer, unread inbox items (one query). The
    counts are read when the template first shows one."""
    user = request.user
    counts = cache(lambda: selectors.nav_counts(user=user))
    return {
        "nav_review": permissions.can_review(user),
        "review_queue_count": lambda: counts()[0],
        "inbox_unread_count": lambda: counts()[1],
    }


def preview_calibration(*, request, preview_run, **_):
    """A finished preview's judged pass rates, raw and corrected by reviewers' labels (review.calibration)."""
    from review.calibration import preview_calibration_json

    if not preview_run.is_finished:
        return None
    calibration = preview_calibration_json(preview_run=preview_run)
    if calibration is None:
        return None
    task = preview_run.task_version.task
    return {"calibration": calibration, "task": task, "environment": permissions.can_review(request.user)}


def environment_calibration(*, request, environment, calibration_form=None, **_):
    """The environment page's Calibration: when its judged checks count as validated, whether one that is not
    blocks, and the blind rule; its owner (or an admin) changes them. `calibration_form`: a refused change's bound
    form (review.views.environment_calibration)."""
    from review import blind
    from review.forms import EnvironmentCalibrationForm

    rule = blind.rule_for(environment)
    if calibration_form is None and permissions.can_edit_environment(request.user, environment):
        calibration_form = EnvironmentCalibrationForm(
            initial=EnvironmentCalibrationForm.initial_from(environment=environment, blind_rule=rule)
        )
    return {"environment": environment, "blind_rule": rule, "calibration_form": calibration_form}


def register() -> None:
    from gymwright.pages import panel_register

    panel_register(
        "preview_detail.calibration", template="review/_preview_calibration.html", selector=preview_calibration
    )

    panel_register("task_detail.reviews", template="review/_task_reviews.html", selector=task_reviews)
    panel_register("task_form.threads", template="review/_editor_threads.html", selector=editor_threads)
    panel_register(
        "environment_detail.actions", template="review/_environment_links.html", selector=environment_dashboard_link
    )
    panel_register("base.nav", template="review/_nav.html", selector=navigation)
    panel_register(
        "environment_detail.calibration",
        template="review/_environment_calibration.html",
        selector=environment_calibration,
    )
