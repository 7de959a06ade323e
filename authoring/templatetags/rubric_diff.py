"""What a rubric's diff shows (templates/authoring/_diff_body.html)."""

from django import template

register = template.Library()


@register.filter
def shown_checks(checks) -> list:
    """The rows of a rubric's check-by-check table: each check added, removed, changed or moved."""
    return [check for check in checks or () if check.status != "unchanged" or check.moved]
