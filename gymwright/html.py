"""HTML escaping for text built in Python (a check's words with their inline code), a URL prefix for a long table,
and what a view asks of a request made by htmx."""

from __future__ import annotations

from html import escape as _html_escape

from django.urls import reverse


def escape(value) -> str:
    """HTML-escape like django.utils.html.escape (& < > " '), without its lazy-string wrapper per call."""
    return _html_escape(str(value), quote=True)


def slug_url_prefix(viewname: str) -> str:
    """The URL of `viewname` (a view taking one slug, its last part) up to that slug: f"{prefix}{slug}/" is the URL of
    `slug`. A table of N rows reverses the URL once instead of N times (the pack list: BENCHMARKS.md, "Pages in
    templates")."""
    return reverse(viewname, args=["--slug--"]).rsplit("--slug--/", 1)[0]


def is_htmx(request) -> bool:
    """Whether htmx sent `request` (it answers with a fragment to swap in, not a page or a redirect)."""
    return request.headers.get("HX-Request") == "true"
