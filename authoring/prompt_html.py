"""A task version's prompt as the task, version and review pages show it.

Rendering Markdown costs about 3 µs a character (python-markdown's inline patterns; sanitising is cheap): a 3 MB
prompt, which the API and an import accepted before the task format bounded it, took 6 s on every view of its task
page. A version never changes, so
its prompt's HTML is rendered once and kept in Django's cache (shared by a host's web processes, or by all of them
with Redis) under the version's hash, as the rubric table is kept per process. A prompt longer than the format's
bound (PROMPT_MAX_CHARS; a version saved before it) is not rendered at all: it is shown as plain text with a line that says why, so that no
single view costs more than rendering the longest prompt the editor lets an author type.
"""

from __future__ import annotations

from django.core.cache import cache
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from authoring.markdown import render_markdown
from grading.engine.models import PROMPT_MAX_CHARS

# Part of the cache key: change it when the renderer or its sanitising rules change, so that no page shows HTML
# made by the old ones.
RENDERER_VERSION = 1
KEPT_FOR_S = 7 * 24 * 3600


def markdown_or_text(text: str) -> SafeString:
    """`text` rendered as Markdown and sanitised; over PROMPT_MAX_CHARS, escaped plain text with a line that says
    why it is not rendered."""
    text = text or ""
    if len(text) <= PROMPT_MAX_CHARS:
        return mark_safe(render_markdown(text))  # sanitised by nh3 (authoring.markdown)
    return mark_safe(
        f'<p class="warn prompt-as-text">This prompt is {len(text):,} characters long, over the {PROMPT_MAX_CHARS:,} '
        f"the editor takes: it is shown as plain text, not rendered as Markdown.</p>"
        f'<pre class="prompt-text">{escape(text)}</pre>'
    )


def prompt_html(version) -> SafeString:
    """The HTML of `version`'s prompt, rendered once per version (see the module's docstring)."""
    key = f"gymwright:prompt-html:{RENDERER_VERSION}:{version.sha256}"
    html = cache.get(key)
    if html is None:
        html = markdown_or_text(version.prompt)
        cache.set(key, str(html), timeout=KEPT_FOR_S)
    return mark_safe(html)  # what markdown_or_text made: sanitised or escaped
