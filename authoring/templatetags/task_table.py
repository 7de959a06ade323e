"""The task list's rows, rendered in Python: the hottest page of the app.

Profiled under load (bench/bench_load.py, py-spy), the Django template loop spent most of the
page's CPU resolving and escaping ~700 variables for 50 rows. The same markup built here with
`escape` costs a fraction of it. Rows are the plain dicts of `authoring.selectors.task_rows`;
every value from the database is escaped.
"""

from __future__ import annotations

from django import template
from django.utils import timezone
from django.utils.safestring import mark_safe

from gymwright.html import escape

register = template.Library()


@register.simple_tag
def filter_options(values, selected):
    """A filter's <option>s (environments, up to 200 tags), the chosen one selected: rendered in Python,
    where as a template loop they cost as much as the list's rows. Every value is escaped."""
    return mark_safe(
        "".join(f"<option{' selected' if value == selected else ''}>{escape(value)}</option>" for value in values)
    )


def version_state(row: dict, task_url: str) -> str:
    """'v3 approved · v5 draft' or 'v5 draft', as authoring/_version_state.html says it for a Task."""
    latest, approved, label = row["latest_version"], row["approved_version"], escape(row["status_label"].lower())
    if approved and approved != latest:
        return (
            f'<span class="version-state"><a href="{task_url}{escape(row["slug"])}/versions/{int(approved)}/">'
            f"v{int(approved)}</a> approved · v{int(latest)} {label}</span>"
        )
    if latest:
        return f'<span class="version-state">v{int(latest)} {label}</span>'
    return ""


@register.simple_tag
def task_rows(rows, task_url: str):
    task_url = escape(task_url)
    out = []
    for row in rows:
        slug = escape(row["slug"])
        tags = "".join(f'<span class="badge">{escape(tag)}</span> ' for tag in row["tags"])
        updated = timezone.localtime(row["updated_at"]).strftime("%Y-%m-%d %H:%M") if row["updated_at"] else ""
        author = escape(row["latest_version_author"] or "")
        out.append(
            f'<tr><td class="long-text"><a href="{task_url}{slug}/"><strong>{escape(row["title"])}</strong></a><br>'
            f'<span class="muted mono">{slug}</span></td>'
            f'<td class="long-text">{escape(row["environment"])}</td>'
            f'<td><span class="badge {escape(row["status"])}">{escape(row["status_label"])}</span></td>'
            f'<td class="long-text">{tags}</td>'
            f'<td class="long-text">{version_state(row, task_url)} <span class="muted">by {author}</span></td>'
            f'<td class="long-text">{escape(row["owner"])}</td><td class="muted">{updated}</td></tr>'
        )
    if not out:
        out.append('<tr><td colspan="7" class="muted">No tasks match.</td></tr>')
    return mark_safe("\n".join(out))  # every interpolated value above is escaped
