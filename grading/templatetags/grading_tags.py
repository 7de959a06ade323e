from django import template
from django.conf import settings

from accounts import permissions
from grading import selectors

register = template.Library()


@register.inclusion_tag("grading/_check_table.html", takes_context=True)
def grade_table(context, grade, pending_judge=False, judge_note=""):
    """The per-check table and total of a stored Grade or of an unsaved grade document.

    `pending_judge` shows judge checks as pending (a dry run still being judged);
    `judge_note` instead marks them unscored with that reason (the judge job failed).
    """
    table = selectors.grade_table(grade, pending_judge=bool(pending_judge) or bool(judge_note), judge_note=judge_note)
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    judged_rows = [row for row in table.rows if row.judged and row.check_result is not None]
    can_label = bool(judged_rows) and permissions.can_review(user)
    return {
        "table": table,
        # The reviewers' column appears when there is something to show or to do in it.
        "show_labels": can_label or any(row.labels for row in judged_rows),
        "can_label": can_label,
        "request": request,
        "csrf_token": context.get("csrf_token"),
    }


@register.simple_tag
def upload_max_bytes() -> int:
    from django.conf import settings

    return settings.UPLOAD_MAX_BYTES


@register.filter
def example_status(status: str) -> str:
    """ "as_expected" → "as expected" (grading.engine.example_answers.STATUS_WORDS)."""
    from grading.engine.example_answers import STATUS_WORDS

    return STATUS_WORDS.get(status, status)


@register.simple_tag
def comment_max_chars() -> int:
    """GYMWRIGHT_REVIEW_COMMENT_MAX_CHARS, a comment box's maxlength (the server's own limit, which it enforces): a
    review comment, a reply, a check comment, an override reason, a comment on the judge's verdict."""
    return settings.REVIEW_COMMENT_MAX_CHARS
