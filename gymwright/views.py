"""Site-wide views: the error page for a request that failed on the server's side."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

DATABASE_LOST = ("The connection to the database was lost while this request was being handled, so it did not "
                 "finish. Try again: the next request reconnects.")
UNEXPECTED = "The error has been logged. Nothing you saved before this request is lost; try again in a moment."


def server_error(request) -> HttpResponse:
    """handler500: the site's error page (JSON for API and htmx callers), never a traceback.

    Django calls it inside its `except` block, so the exception is still at hand: a database
    that went away (a dropped connection, a restart) is a 503 that says to try again, since
    Django's health check reconnects on the next request; anything else is a 500. It renders
    without the request's context processors: they read the database, which may be down.
    """
    exception = sys.exc_info()[1]
    if isinstance(exception, (OperationalError, InterfaceError)):
        status, code, title, message = 503, "database_unavailable", "Database unavailable", DATABASE_LOST
    else:
        status, code, title, message = 500, "server_error", "Something went wrong on our side", UNEXPECTED
    if request.path.startswith("/api/") or request.headers.get("HX-Request") or \
            "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse({"error": {"code": code, "message": message, "details": []}}, status=status)
    else:
        response = HttpResponse(render_to_string("500.html", {"title": title, "message": message, "status": status,
                                                     "retry_url": request.get_full_path()}),
                                status=status)
    if status == 503:
        response["Retry-After"] = "5"
    return response
