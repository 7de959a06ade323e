"""Text people type into the app's boxes, as the app keeps it.

- Line ends are "\n": a browser sends a textarea's with CRLF, the API's clients with LF, and the same text must be
  the same content (the same hash, no spurious diff, a shell script without "\r" in its commands).
- A comment (a review, a reply, a comment on a check or on the judge's verdict, an override reason) is at most
  GYMWRIGHT_REVIEW_COMMENT_MAX_CHARS, counted after its line ends are made "\n", as a box's `maxlength` counts
  them: a comment that fit its box was refused when CRLF counted two.
"""

from __future__ import annotations

from django.conf import settings

from gymwright.errors import DomainError
from gymwright.storable_input import nul_check


def unix_newlines(value):
    """`value` with CRLF and CR line ends made LF; anything but a string as it is."""
    if isinstance(value, str):
        return value.replace("\r\n", "\n").replace("\r", "\n")
    return value


def comment_text(value, *, pointer: str, what: str) -> str:
    """A comment as stored: "\n" line ends, at most the comment limit, storable, stripped; "" for none. DomainError
    at `pointer` (naming `what`, "The comment") otherwise."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DomainError(f"{what} must be text.", details=[{"pointer": pointer, "message": "expected a string"}])
    value = unix_newlines(value)
    limit = settings.REVIEW_COMMENT_MAX_CHARS
    if len(value) > limit:
        raise DomainError(
            f"{what} is longer than the {limit} character limit (GYMWRIGHT_REVIEW_COMMENT_MAX_CHARS).",
            code="too_long",
            details=[{"pointer": pointer, "message": f"at most {limit} characters"}],
        )
    nul_check(value, pointer=pointer, what=what)
    return value.strip()
