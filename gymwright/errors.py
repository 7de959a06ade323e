"""The one domain error type services raise; views and the API turn it into responses."""

from __future__ import annotations


class DomainError(Exception):
    """A request that cannot be carried out, with what and where.

    details: [{"pointer": "/rubric/checks/1/pattern", "message": "..."}]
    """

    code = "invalid"
    http_status = 400

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: list[dict] | None = None,
        http_status: int | None = None,
        extra: dict | None = None,
    ):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if http_status:
            self.http_status = http_status
        self.details = details or []
        self.extra = extra or {}


class ConflictError(DomainError):
    """Saving on top of a version that is no longer the latest."""

    code = "conflict"
    http_status = 409


class NotAllowed(DomainError):
    code = "permission_denied"
    http_status = 403
