"""What a reviewer typed on the review page, kept across a refused post.

The page's forms (a decision with its comments; a comment, without JavaScript) post and redirect back to the page.
A refusal ("The comment is longer than the 10000 character limit") came back with every box empty: the text was
lost. The views keep what was typed in the session, for the next view of that same page, once; the page puts it
back in its boxes.
"""

from __future__ import annotations

from urllib.parse import urlsplit

SESSION_KEY = "review_drafts"
# Of all boxes of one post together: a browser's maxlength stops a reviewer far below this; past it, a post (not
# typed in the page) is not kept, rather than copied into a session row.
KEEP_MAX_CHARS = 1_000_000


def _page(url: str) -> str:
    return urlsplit(url).path


def drafts_keep(request, *, page_url: str, check_prefix: str) -> None:
    """Keep the review page's boxes as `request.POST` holds them (the decision form's `comment` and
    `<check_prefix><check id>`, or a comment form's `body` at its `check_id`) for the next view of `page_url`."""
    post = request.POST
    checks = {
        key[len(check_prefix) :]: value for key, value in post.items() if key.startswith(check_prefix) and value.strip()
    }
    task = post.get("comment", "")
    if post.get("body", "").strip() and not post.get("parent"):  # a reply's box is its thread's (kept by htmx)
        check_id = post.get("check_id", "")
        if check_id:
            checks[check_id] = post["body"]
        else:
            task = post["body"]
    if not task.strip() and not checks:
        return
    if len(task) + sum(len(key) + len(value) for key, value in checks.items()) > KEEP_MAX_CHARS:
        return
    request.session[SESSION_KEY] = {"page": _page(page_url), "task": task, "checks": checks}


def drafts_take(request, *, page_url: str) -> dict:
    """{"task": text for the task's comment box, "checks": {check id: text}}: what a refused post back to
    `page_url` kept (empty ones for anything else). Taken from the session, so shown once; what was kept for
    another page (a decision sent from the task page, which does not show it) is dropped too."""
    kept = request.session.pop(SESSION_KEY, None) if SESSION_KEY in request.session else None
    if not isinstance(kept, dict) or kept.get("page") != _page(page_url):
        return {"task": "", "checks": {}}
    return {"task": str(kept.get("task") or ""), "checks": dict(kept.get("checks") or {})}
