"""Preview pages: start a preview, watch it live, read a rollout's trajectory and grade."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import permissions
from authoring.selectors import task_get_for_user, task_version_get_for_user
from gymwright.errors import DomainError, NotAllowed
from gymwright.forms import form_add_domain_error
from gymwright.html import is_htmx
from gymwright.pages import panels
from sandbox import selectors, services
from sandbox.forms import PreviewStartForm
from sandbox.models import PreviewRun


@require_http_methods(["GET", "POST"])
def preview_start(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    version = task_version_get_for_user(slug=slug, number=number, user=request.user)
    if not permissions.can_run_previews(request.user):  # the form too: a lab member starts nothing
        raise NotAllowed("Only authors, reviewers and admins can start previews.")
    form = PreviewStartForm(request.POST or None)
    status = 400 if request.method == "POST" else 200
    retry_after = None
    if request.method == "POST" and form.is_valid():
        try:
            preview_run = services.preview_run_create(
                task_version=version,
                user=request.user,
                policy=form.policy_string(),
                n=form.cleaned_data["n"],
                backend=form.cleaned_data.get("backend") or None,
            )
        except DomainError as exc:
            form_add_domain_error(form, exc)
            status = exc.http_status  # 429 when over the per-user cap of rollouts in flight or starts
            retry_after = exc.extra.get("retry_after_s")
        else:
            url = reverse("sandbox:preview_detail", args=[preview_run.pk])
            if is_htmx(request):
                response = HttpResponse(status=204)
                response["HX-Redirect"] = url
                return response
            return redirect(url)
    response = render(
        request, "sandbox/preview_start.html", {"form": form, "task": version.task, "version": version}, status=status
    )
    if status == 429 and retry_after:
        response["Retry-After"] = str(retry_after)
    return response


def _detail_context(request: HttpRequest, preview_run: PreviewRun) -> dict:
    rollouts = selectors.rollout_rows(preview_run=preview_run)
    return {
        "preview_run": preview_run,
        "task": preview_run.task_version.task,
        "version": preview_run.task_version,
        "rollouts": rollouts,
        "progress": selectors.preview_run_progress(preview_run=preview_run, rollouts=rollouts),
        "can_cancel": permissions.can_run_previews(request.user),
    }


@require_GET
def preview_detail(request: HttpRequest, preview_run_id: int) -> HttpResponse:
    preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run_id, user=request.user)
    context = _detail_context(request, preview_run)
    context["panels"] = panels("preview_detail", request=request, preview_run=preview_run)
    selected = request.GET.get("rollout")
    if selected and selected.isdigit():
        row = next((r for r in context["rollouts"] if r["id"] == int(selected)), None)
        if row is not None:
            rollout = selectors.rollout_get_for_user(rollout_id=row["id"], user=request.user)
            context.update(_rollout_context(rollout))
    return render(request, "sandbox/preview_detail.html", context)


@require_GET
def preview_progress(request: HttpRequest, preview_run_id: int) -> HttpResponse:
    """The live part of the page; it keeps polling itself while the run is not finished."""
    preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run_id, user=request.user)
    return render(request, "sandbox/_preview_progress.html", _detail_context(request, preview_run))


@require_POST
def preview_cancel(request: HttpRequest, preview_run_id: int) -> HttpResponse:
    preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run_id, user=request.user)
    try:
        services.preview_run_cancel(preview_run=preview_run, user=request.user)
    except NotAllowed:
        raise  # 403 (gymwright.middleware.DomainErrorMiddleware): a refusal is not a flash over the preview
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Preview cancelled: queued rollouts will not run; running ones stop shortly.")
    return redirect("sandbox:preview_detail", preview_run_id=preview_run.pk)


def _rollout_context(rollout) -> dict:
    return {
        "rollout": rollout,
        "trajectory_steps": selectors.trajectory_steps(rollout.trajectory or []),
    }


@require_GET
def rollout_detail(request: HttpRequest, rollout_id: int) -> HttpResponse:
    """A rollout's trajectory beside its grade: a fragment for the preview page, or a page of its own."""
    rollout = selectors.rollout_get_for_user(rollout_id=rollout_id, user=request.user)
    context = _rollout_context(rollout)
    if is_htmx(request):
        return render(request, "sandbox/_rollout_detail.html", context)
    context.update(
        {
            "preview_run": rollout.preview_run,
            "task": rollout.preview_run.task_version.task,
            "version": rollout.preview_run.task_version,
        }
    )
    return render(request, "sandbox/rollout_detail.html", context)


@require_GET
def task_previews(request: HttpRequest, slug: str) -> HttpResponse:
    """The task page's list of recent previews (it polls itself while any of them runs)."""
    task = task_get_for_user(slug=slug, user=request.user)
    return render(
        request,
        "sandbox/_task_preview_list.html",
        {"task": task, "preview_runs": selectors.preview_run_list_for_task(task=task, user=request.user)},
    )
