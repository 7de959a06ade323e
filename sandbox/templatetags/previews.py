"""Template helpers for the preview section embedded in the task page."""

from __future__ import annotations

from django import template

from sandbox import selectors
from sandbox.views import PreviewStartForm

register = template.Library()


@register.inclusion_tag("sandbox/_task_preview_list.html")
def task_preview_list(task, limit: int = 10):
    return {"task": task, "preview_runs": selectors.preview_run_list_for_task(task=task, limit=limit)}


@register.simple_tag
def preview_start_form():
    return PreviewStartForm()


@register.filter
def percent(value, digits: int = 0):
    if value is None or value == "":
        return "–"
    return f"{100 * float(value):.{int(digits)}f} %"


@register.filter
def number(value, digits: int = 2):
    if value is None or value == "":
        return "–"
    text = f"{float(value):.{int(digits)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@register.filter
def seconds(milliseconds):
    if milliseconds is None:
        return "–"
    return f"{milliseconds / 1000:.1f} s"


@register.filter
def get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def fixed(value, digits: int = 3):
    if value is None or value == "":
        return "–"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def unfinished(preview_runs) -> bool:
    return selectors.any_unfinished(list(preview_runs or []))
