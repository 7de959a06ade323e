"""Page composition tags: `{% render_panels panels.slot %}` places the panels other apps registered for a page
(gymwright.pages), and `{% kept_fragment "x/_rows.html" rows=rows %}` renders a hot table's template once per content.

A panel's template gets its selector's context alone, with `request` and `csrf_token`, as an inclusion tag's does:
nothing of the page leaks into it."""

from __future__ import annotations

import datetime
import hashlib
import json
from decimal import Decimal

from django import template
from django.conf import settings
from django.template import Context
from django.utils import timezone, translation
from django.utils.safestring import mark_safe

from gymwright.process_cache import Kept

register = template.Library()


@register.simple_tag(takes_context=True)
def render_panels(context, shown) -> str:
    out = []
    for panel in shown or ():
        values = {"request": context.get("request"), **panel.context}
        csrf_token = context.get("csrf_token")
        if csrf_token is not None:
            values["csrf_token"] = csrf_token
        out.append(context.template.engine.get_template(panel.template).render(context.new(values)))
    return mark_safe("".join(out))  # each part is a rendered (autoescaped) template


# Rendered fragments by (template, digest of what they were rendered from); each web process keeps its own.
_FRAGMENTS = Kept(entries=1024, max_size=32 * 1024 * 1024, max_value=1024 * 1024)


def _plain(value):
    """What json.dumps cannot write itself, for a fragment's key: dates and numbers by value, rows given as a page or
    another iterable as a list. Anything else (a model instance) is refused: its repr would not name its content."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, tuple | set | frozenset) or hasattr(value, "object_list"):
        return list(value)
    raise TypeError(f"a kept fragment is rendered from plain values, not {type(value).__name__}")


@register.simple_tag(takes_context=True)
def kept_fragment(context, template_name: str, **values) -> str:
    """`template_name` rendered with `values` alone, and kept: the same values render the same HTML, so a hot table
    (the task list's 50 rows, a preview's 64 rollouts, a filter's 200 options) is rendered once per content and read
    back after that. The values must be plain data (rows from `.values()`, numbers, strings, dates): the key is their
    content, with the time zone and language the template formats them in."""
    values = {name: list(value) if hasattr(value, "object_list") else value for name, value in values.items()}
    if settings.DEBUG:  # a template edited while the development server runs shows at once
        return context.template.engine.get_template(template_name).render(
            Context(values, autoescape=context.autoescape)
        )
    content = json.dumps(
        [template_name, timezone.get_current_timezone_name(), translation.get_language(), values], default=_plain
    )
    key = hashlib.blake2b(content.encode(), digest_size=16).digest()
    html = _FRAGMENTS.get(key)
    if html is None:
        html = context.template.engine.get_template(template_name).render(
            Context(values, autoescape=context.autoescape)
        )
        _FRAGMENTS.put(key, html)
    return html
