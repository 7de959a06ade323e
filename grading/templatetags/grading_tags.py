from django import template

from authoring import permissions
from grading import selectors

register = template.Library()


@register.inclusion_tag("grading/_check_table.html", takes_context=True)
def grade_table(context, grade, pending_judge=False, judge_note=""):
    """The per-check table and total of a stored Grade or of an unsaved grade document.

    `pending_judge` shows judge checks as pending (a dry run still being judged);
    `judge_note` instead marks them unscored with that reason (the judge job failed).
    """
    table = selectors.grade_table(grade, pending_judge=bool(pending_judge) or bool(judge_note),
                                  judge_note=judge_note)
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    show_labels = table.grade is not None and any(row.judged for row in table.rows)
    return {
        "table": table,
        "show_labels": show_labels,
        "can_label": show_labels and permissions.can_review(user),
        "request": request,
        "csrf_token": context.get("csrf_token"),
    }


@register.simple_tag
def upload_max_bytes() -> int:
    from django.conf import settings

    return settings.UPLOAD_MAX_BYTES
