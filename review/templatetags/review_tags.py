"""The review section embedded in the task page (authoring's template loads it; authoring's
Python never imports review)."""

from __future__ import annotations

from django import template

from authoring import permissions
from review.forms import ReviewForm
from review.models import Review

register = template.Library()


@register.inclusion_tag("review/_task_reviews.html", takes_context=True)
def task_reviews(context, task, version):
    user = context["request"].user
    return {
        "task": task, "version": version, "csrf_token": context.get("csrf_token"),
        "reviews": Review.objects.filter(task_version__task=task).select_related("reviewer", "task_version")[:20],
        "can_review": permissions.can_review(user),
        "review_form": ReviewForm(initial={"version": version.number if version else None}),
    }
