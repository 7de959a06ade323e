"""Rubric text as pages show it: a check's description, a criterion."""

from __future__ import annotations

import re

from django import template
from django.utils.safestring import SafeString, mark_safe

from gymwright.html import escape

register = template.Library()

_INLINE_CODE = re.compile(r"`([^`\n]+)`")


@register.filter(is_safe=True)
def inline_code(text) -> SafeString:
    """`text` escaped, with each `inline code` span (one pair of backticks, on one line) shown as <code>: a check's
    description reads "`pytest -q` exits with 0", and a criterion names `fizzbuzz(n)`. Escaping comes first, so
    only the <code> tags added here are markup; an unpaired backtick stays as it is."""
    return mark_safe(_INLINE_CODE.sub(r"<code>\1</code>", escape("" if text is None else str(text))))
