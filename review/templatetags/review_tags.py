"""The review sections embedded in authoring's pages (authoring's templates load these tags;
authoring's Python never imports review)."""

from __future__ import annotations

from django import template
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince

from accounts import permissions
from authoring.models import Task
from authoring.templatetags.task_table import version_state
from grading.engine import gate_rules as engine_gates
from gymwright.forms import rendered_once
from gymwright.html import escape, slug_url_prefix, url_stem
from review import gate_evidence as review_gates
from review import selectors, services
from review.forms import ReviewForm, SubmitForm

register = template.Library()


def _override_reason_field() -> tuple[str, str]:
    """(label, widget HTML) of the unbound submit form's one field: the same every time, rendered once."""

    def render():
        field = SubmitForm()["override_reason"]
        return field.label, mark_safe(str(field))

    return rendered_once((SubmitForm, "override_reason"), render)


@register.simple_tag
def queue_rows(rows):
    """The review queue's rows (authoring.selectors.task_rows dicts), rendered in Python as the task list's are:
    as a template loop, 50 rows cost more than the rest of the page. Every value from the database is escaped."""
    review_url = escape(slug_url_prefix("review:review_page"))
    task_url = escape(slug_url_prefix("authoring:task_detail"))
    now = timezone.now()
    out = []
    for row in rows:
        slug = escape(row["slug"])
        tags = "".join(f'<span class="badge">{escape(tag)}</span> ' for tag in row["tags"])
        submitted = f"{timesince(row['submitted_at'], now)} ago" if row["submitted_at"] else "–"
        out.append(
            f'<tr data-task="{slug}"><td class="long-text"><a href="{review_url}{slug}/"><strong>'
            f'{escape(row["title"])}</strong></a><br><span class="muted mono">{slug}</span></td>'
            f'<td class="long-text">{escape(row["environment"])}</td>'
            f"<td>{version_state(row, task_url)}</td>"
            f'<td class="long-text">{tags}</td><td class="long-text">{escape(row["owner"])}</td>'
            f'<td class="muted">{submitted}</td></tr>'
        )
    if not out:
        out.append('<tr><td colspan="6" class="muted">Nothing waits for you.</td></tr>')
    return mark_safe("\n".join(out))  # every interpolated value above is escaped


@register.inclusion_tag("review/_task_reviews.html", takes_context=True)
def task_reviews(context, task, version):
    request = context["request"]
    user = request.user
    gates = review_gates.gates_evaluate(task_version=version) if version else []
    gates_pass = all(gate.ok for gate in gates)
    can_review = (
        version is not None
        and permissions.can_review(user)
        and task.owner_id != user.pk
        and version.author_id != user.pk
    )
    can_submit = permissions.can_edit_task(user, task) and task.status in services.SUBMITTABLE
    is_admin = permissions.is_admin(user)
    return {
        "task": task,
        "version": version,
        "csrf_token": context.get("csrf_token"),
        "gates": gates,
        "gates_pass": gates_pass,
        "blocking": engine_gates.blocking_reasons(gates),
        "submission": selectors.latest_submission(task_version=version) if version else None,
        "next_url": request.get_full_path(),
        "reviews": selectors.reviews_of(task=task, user=user),
        "can_submit": can_submit,
        "is_admin": is_admin,
        # the previews the gates miss start for whoever may start previews; the review page shows drafts
        "can_run_gates": permissions.can_run_previews(user),
        "can_open_review": permissions.reads_drafts(user),
        # each form only where it is shown (the template asks for it by name): building one deep-copies its fields
        "review_form": ReviewForm(initial={"version": version.number})
        if can_review and task.status == Task.Status.IN_REVIEW
        else None,
        "override_reason": _override_reason_field() if can_submit and is_admin and not gates_pass else None,
    }


@register.inclusion_tag("review/_editor_threads.html", takes_context=True)
def editor_threads(context, task, version):
    """The task's review threads in the editor, each at its check (the author replies and resolves)."""
    request = context["request"]
    ids = services.check_ids(version.rubric) if version else []
    threads = selectors.comment_threads(task=task, check_ids=ids) if task else []
    return {
        "task": task,
        "threads": threads,
        "open_count": sum(1 for t in threads if not t.is_resolved),
        "csrf_token": context.get("csrf_token"),
        "next_url": request.get_full_path(),
        "can_comment": permissions.can_review(request.user) or permissions.can_edit_task(request.user, task),
    }


_GATE_BADGES = {"pass": "badge passed", "fail": "badge failed"}


@register.simple_tag
def gate_rows(gates):
    """The gates table's rows, rendered in Python: on every task page, where as a template loop its
    nine rows cost more CPU than the queries behind them. Every value is escaped."""
    evidence = url_stem("sandbox:preview_detail")
    out = []
    for gate in gates:
        status = escape(gate.status)
        note = "" if gate.blocking else ' <span class="muted">(not blocking)</span>'
        link = f' · <a href="{evidence}/{int(gate.run_id)}/">evidence</a>' if gate.run_id else ""
        out.append(
            f'<tr class="gate gate-{status}" data-gate="{escape(gate.gate)}" data-status="{status}">'
            f'<td><span class="{_GATE_BADGES.get(gate.status, "badge")}">'
            f"{escape(gate.status.replace('_', '').upper())}</span></td>"
            f'<td>{escape(gate.title)}{note}</td><td class="muted long-text">{escape(gate.message)}{link}</td></tr>'
        )
    return mark_safe("\n".join(out))  # every interpolated value above is escaped or a number


@register.simple_tag
def bar_chart(pairs, width: int = 360, row: int = 22):
    """Horizontal bars [(label, count)] as inline SVG, drawn on the server."""
    from django.utils.html import format_html, format_html_join

    pairs = list(pairs or [])
    top = max((count for _, count in pairs), default=0) or 1
    label_width, bar_width = 130, width - 170
    rows = format_html_join(
        "",
        '<g transform="translate(0,{})"><text x="0" y="15" font-size="12">{}</text>'
        '<rect x="{}" y="4" width="{}" height="14" fill="#2457d6"></rect>'
        '<text x="{}" y="15" font-size="12">{}</text></g>',
        (
            (
                i * row,
                label,
                label_width,
                f"{bar_width * count / top:.1f}",
                f"{label_width + bar_width * count / top + 4:.1f}",
                count,
            )
            for i, (label, count) in enumerate(pairs)
        ),
    )
    return format_html(
        '<svg class="bar-chart" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'data-values="{values}">{rows}</svg>',
        w=width,
        h=row * len(pairs) + 4,
        rows=rows,
        values=";".join(f"{label}={count}" for label, count in pairs),
    )


@register.filter
def previews_missing(gates) -> bool:
    """Whether a gate waits for a preview that has not run, or ran with incomplete grades (what Run gates
    would start); not one that waits for something else first (a judge)."""
    return any(gate.status == "not_run" and gate.policy and not gate.waiting_for for gate in gates or [])
