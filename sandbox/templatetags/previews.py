"""Template helpers for the preview section embedded in the task page."""

from __future__ import annotations

from django import template
from django.utils.safestring import mark_safe
from django.utils.text import Truncator
from django.utils.timezone import localtime

from accounts import permissions
from gymwright.html import escape, url_stem
from gymwright.numbers import format_number, format_percent
from sandbox import selectors
from sandbox.forms import PreviewStartForm
from sandbox.models import PreviewRun, Rollout

register = template.Library()


@register.inclusion_tag("sandbox/_task_preview_list.html", takes_context=True)
def task_preview_list(context, task):
    user = context["request"].user
    return {"task": task, "preview_runs": selectors.preview_run_list_for_task(task=task, user=user)}


@register.simple_tag(takes_context=True)
def preview_start_form(context):
    """The start form, or None for a member who may not start previews (a lab member)."""
    return PreviewStartForm() if permissions.can_run_previews(context["request"].user) else None


@register.filter
def percent(value, digits: int = 0):
    return format_percent(value, digits)


@register.filter
def number(value, digits: int = 2):
    return format_number(value, digits)


@register.filter
def seconds(milliseconds):
    if milliseconds is None or milliseconds == "":
        return "–"
    return f"{format_number(float(milliseconds) / 1000, 1, fixed=True)} s"


@register.filter
def get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def fixed(value, digits: int = 3):
    return format_number(value, digits, fixed=True)


@register.filter
def unfinished(preview_runs) -> bool:
    return selectors.any_unfinished(list(preview_runs or []))


@register.simple_tag
def reward_histogram(rewards, bins: int = 10, width: int = 240, height: int = 80):
    """A reward histogram as inline SVG, drawn on the server (no script, no CDN)."""
    from django.utils.html import format_html, format_html_join

    from grading.engine.calibration import reward_histogram as histogram

    rewards = [
        r["reward"] if isinstance(r, dict) else getattr(r, "reward", r)  # numbers, rollouts or their rows
        for r in (rewards or [])
    ]
    rewards = [r for r in rewards if r is not None]
    counts = histogram(rewards, bins=int(bins))
    top = max(counts) or 1
    bar = width / len(counts)
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}"><title>{}–{}: {}</title></rect>',
        (
            (
                f"{i * bar + 1:.1f}",
                f"{height - 14 - (height - 18) * count / top:.1f}",
                f"{bar - 2:.1f}",
                f"{(height - 18) * count / top:.1f}",
                f"{i / len(counts):.1f}",
                f"{(i + 1) / len(counts):.1f}",
                count,
            )
            for i, count in enumerate(counts)
        ),
    )
    return format_html(
        '<svg class="histogram" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'aria-label="Reward histogram of {n} rollouts" data-counts="{counts}">'
        '<g fill="#2457d6">{bars}</g>'
        '<text x="0" y="{ty}" font-size="10" fill="#667085">0</text>'
        '<text x="{w}" y="{ty}" font-size="10" fill="#667085" text-anchor="end">1</text></svg>',
        w=width,
        h=height,
        n=len(rewards),
        counts=",".join(map(str, counts)),
        bars=bars,
        ty=height - 2,
    )


@register.simple_tag
def preview_run_rows(runs):
    """The rows of a task's recent preview runs (`selectors.preview_run_list_for_task`), rendered in
    Python: on every task page, and polled every 2 s while a run is live. Every value is escaped."""
    detail = url_stem("sandbox:preview_detail")
    labels = dict(PreviewRun.Status.choices)
    out = []
    for run in runs:
        summary = run.summary if isinstance(run.summary, dict) else {}
        out.append(
            f'<tr><td><a href="{detail}/{int(run.pk)}/">{int(run.pk)}</a></td>'
            f'<td>v{int(run.task_version.number)}</td><td class="long-text">{escape(run.policy_label)}</td>'
            f'<td><span class="badge {escape(run.status)}">{escape(labels.get(run.status, run.status))}</span> '
            f"{int(run.finished_count)}/{int(run.n)}</td>"
            f"<td>{escape(format_number(summary.get('mean_reward'), 2, fixed=True))}</td>"
            f"<td>{escape(format_percent(summary.get('pass_rate')))}</td>"
            f'<td class="long-text">{escape(run.created_by or "–")}</td>'
            f'<td class="muted">{localtime(run.created_at):%Y-%m-%d %H:%M}</td></tr>'
        )
    return mark_safe("\n".join(out))  # every interpolated value above is escaped or a number


@register.simple_tag
def rollout_table_rows(rows):
    """The preview page's rollout rows (`selectors.rollout_rows`), rendered in Python.

    The page re-renders every second while a run is live; as a template loop its 64 rows cost
    most of the page's CPU (~1,000 variables resolved and escaped). Every value from the database is
    escaped."""
    base = url_stem("sandbox:rollout_detail")
    labels = dict(Rollout.Status.choices)
    out = []
    for row in rows:
        pk, status = int(row["id"]), row["status"]
        attempts = (
            f' <span class="muted" title="claimed {int(row["attempts"])} times">×{int(row["attempts"])}</span>'
            if row["attempts"] > 1
            else ""
        )
        if row["passed"] is None:
            passed = "–"
        elif row["grade__complete"] is False:
            passed = '<span class="warn">incomplete</span>'
        else:
            passed = '<span class="ok">passed</span>' if row["passed"] else '<span class="error">failed</span>'
        if row["error"]:
            note = f'<span class="error">{escape(Truncator(row["error"]).chars(140))}</span>'
        elif status not in Rollout.TERMINAL:
            progress = row["progress"] if isinstance(row["progress"], dict) else {}
            words = escape(progress.get("phase") or progress.get("type") or "")
            if progress.get("step"):
                words += f" · step {escape(progress['step'])}"
            if progress.get("note"):
                words += escape(Truncator(progress["note"]).chars(100))
            note = f'<span class="muted">{words}</span>'
        else:
            note = ""
        out.append(
            f'<tr class="rollout-row" data-rollout-id="{pk}" hx-get="{base}/{pk}/" hx-target="#rollout-panel" '
            f'hx-swap="innerHTML"><td><a href="?rollout={pk}">{int(row["index"]) + 1}</a></td>'
            f'<td><span class="badge {escape(status)}">{escape(labels.get(status, status))}</span>{attempts}</td>'
            f"<td>{format_number(row['reward'], 3, fixed=True)}</td><td>{passed}</td><td>{int(row['steps'])}</td>"
            f'<td>{seconds(row["duration_ms"])}</td><td class="long-text">{note}</td></tr>'
        )
    return mark_safe("\n".join(out))  # every interpolated value above is escaped or a number
