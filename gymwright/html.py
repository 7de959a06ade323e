"""HTML escaping for text built in Python (a check's words with their inline code), and what a view asks of a
request made by htmx."""

from __future__ import annotations

from html import escape as _html_escape


def escape(value) -> str:
    """HTML-escape like django.utils.html.escape (& < > " '), without its lazy-string wrapper per call."""
    return _html_escape(str(value), quote=True)


def is_htmx(request) -> bool:
    """Whether htmx sent `request` (it answers with a fragment to swap in, not a page or a redirect)."""
    return request.headers.get("HX-Request") == "true"
