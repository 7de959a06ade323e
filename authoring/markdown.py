"""Markdown → sanitised HTML, the same for the live preview and the task page."""

import functools

import markdown as _markdown
import nh3

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "img",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "th": {"align"},
    "td": {"align"},
    "span": {"class"},
    "div": {"class"},
}


def render_markdown(text: str) -> str:
    text = text or ""
    # A task page renders its prompt on every view: the same text gives the same HTML, so a process
    # keeps the last few (prompts up to 64 KB; a longer one is rendered each time, not held).
    return _render_cached(text) if len(text) <= 65_536 else _render(text)


@functools.lru_cache(maxsize=256)
def _render_cached(text: str) -> str:
    return _render(text)


def _render(text: str) -> str:
    html = _markdown.markdown(text, extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
