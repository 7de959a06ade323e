"""`{% render_panels panels.slot %}`: a page places the panels other apps registered for it (gymwright.pages).

Each panel's template gets its selector's context alone, with `request` and `csrf_token`, as an inclusion
tag's does: nothing of the page leaks into it."""

from __future__ import annotations

from django import template
from django.utils.safestring import mark_safe

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
