"""Review pages: submit a task version, record a review."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from authoring import selectors as authoring_selectors
from gymwright.errors import DomainError
from review import services
from review.forms import ReviewForm, SubmitForm


@require_POST
def task_submit(request, slug):
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    form = SubmitForm(request.POST)
    form.is_valid()
    try:
        services.task_submit(task=task, user=request.user,
                             override_reason=form.cleaned_data.get("override_reason") or "")
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Submitted {task.slug} v{task.latest_version.number} for review.")
    return redirect("authoring:task_detail", slug=slug)


@require_POST
def task_review(request, slug):
    authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    form = ReviewForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
        messages.error(request, f"Review not recorded: {problems}")
        return redirect("authoring:task_detail", slug=slug)
    try:
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=form.cleaned_data["version"],
                                                                user=request.user)
        services.review_create(task_version=version, reviewer=request.user, decision=form.cleaned_data["decision"],
                               comment=form.cleaned_data.get("comment") or "")
    except (DomainError, Http404) as exc:
        messages.error(request, getattr(exc, "message", str(exc)))
    else:
        messages.success(request, "Review recorded.")
    return redirect("authoring:task_detail", slug=slug)
