"""Grading's panels on authoring's pages (gymwright.pages; registered in GradingConfig.ready)."""

from __future__ import annotations

from grading import selectors


def example_answers(*, request, version, **_):
    """The task page's example answers: expected vs got, reward, and what changed since the parent version."""
    from grading.views import example_answers_context

    return example_answers_context(task_version=version, user=request.user) if version is not None else None


def verdict_changes(*, request, a, b, **_):
    """The diff page: which example answers changed verdict between the two versions."""
    rows = selectors.example_verdict_changes(version_a=a, version_b=b)
    return {
        "rows": rows,
        "changed": sum(1 for row in rows if row["changed"]),
        "a": a,
        "b": b,
        "added": sum(1 for row in rows if row["added"]),
        "removed": sum(1 for row in rows if row["removed"]),
    }


def kinds_link(*, request, **_):
    return {}


def dry_run(*, request, task=None, version=None, **_):
    return {"task": task, "version": version}


def environment_judge(*, request, environment, judge_form=None, **_):
    """The environment page's Judge: which judge its tasks use; its owner (or an admin) chooses one. `judge_form`: a
    refused choice's bound form (grading.views.environment_judge)."""
    from accounts import permissions
    from grading.forms import EnvironmentJudgeForm

    judge = selectors.environment_judge(environment=environment)
    if judge_form is None and permissions.can_edit_environment(request.user, environment):
        judge_form = EnvironmentJudgeForm(initial={"judge_endpoint": judge["chosen"].pk if judge["chosen"] else None})
    return {"environment": environment, "judge": judge, "judge_form": judge_form}


def copilot(*, request, task=None, **_):
    """The copilot drafts checks for a task that exists (its API is the task's)."""
    return {"task": task} if task is not None else None


def register() -> None:
    from gymwright.pages import panel_register

    panel_register("task_detail.examples", template="grading/_example_answers.html", selector=example_answers)
    panel_register("task_diff.examples", template="grading/_example_changes.html", selector=verdict_changes)
    panel_register("task_form.kinds_link", template="grading/_kinds_link.html", selector=kinds_link)
    panel_register("task_form.dry_run", template="grading/_dry_run_panel.html", selector=dry_run)
    panel_register("environment_detail.judge", template="grading/_environment_judge.html", selector=environment_judge)
    panel_register("task_form.copilot", template="grading/_copilot_panel.html", selector=copilot)
