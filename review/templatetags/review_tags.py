"""Review's template helpers: the gates' words and which previews they miss, the dashboard's bars. The sections review
adds to other apps' pages are panels (review/panels.py)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def gate_word(status: str) -> str:
    """A gate's status as its badge says it: PASS, FAIL, NOTRUN."""
    return status.replace("_", "").upper()


@register.filter
def gate_rows(gates) -> list[dict]:
    """The gates as the table shows them, plain values (review/_gate_rows.html, kept per content: the task page
    shows them on every view, and the table's template costs ~1 ms a page)."""
    return [
        {
            "gate": gate.gate,
            "title": gate.title,
            "status": gate.status,
            "blocking": gate.blocking,
            "message": gate.message,
            "run_id": gate.run_id,
            "link": gate.link,
            "link_text": gate.link_text,
        }
        for gate in gates or []
    ]


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
    would start); not one that waits for something else first (a judge), nor one a new run would leave the same."""
    return any(
        gate.status == "not_run" and gate.policy and not gate.waiting_for and not gate.settled for gate in gates or []
    )
