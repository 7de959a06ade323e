"""The review boxes' limits, for their maxlength (the server's own: review.services refuses more)."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def comment_max_chars() -> int:
    """GYMWRIGHT_REVIEW_COMMENT_MAX_CHARS: a comment, a reply, a check comment, an override reason."""
    return settings.REVIEW_COMMENT_MAX_CHARS
