"""Template helpers for the preview pages and the preview section of the task page (sandbox/panels.py)."""

from __future__ import annotations

from django import template

from gymwright.numbers import format_number, format_percent
from sandbox import selectors
from sandbox.models import Rollout

register = template.Library()


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


@register.filter
def rollout_status(status: str) -> str:
    """A rollout's status in words (Rollout.Status's label)."""
    return _ROLLOUT_LABELS.get(status, status)


@register.filter
def rollout_finished(status: str) -> bool:
    return status in Rollout.TERMINAL


_ROLLOUT_LABELS = dict(Rollout.Status.choices)
