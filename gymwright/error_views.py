"""Django's error handlers (handler400/403/404/500 in gymwright.urls).

Under /api/ every answer is the API's JSON error envelope, including the ones Django gives before
any API view runs (an unknown path, a bad Host header) and an unhandled error; elsewhere the site's
own templates/400.html ... 500.html.
"""

from __future__ import annotations

import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views import defaults
from django.views.decorators.csrf import requires_csrf_token

from gymwright.api import error_body

API_PREFIX = "/api/"
DATABASE_LOST = (
    "The connection to the database was lost while this request was being handled, so it did not "
    "finish. Try again: the next request reconnects."
)


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIX)


def _envelope(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status)


def _too_large_message(exception) -> str | None:
    """What a request over one of Django's request caps is told, naming the cap; None for any other 400."""
    if isinstance(exception, RequestDataTooBig):
        cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return (
            f"The request body is larger than the limit of {cap / (1024 * 1024):.3g} MB "
            f"(DATA_UPLOAD_MAX_MEMORY_SIZE); send it in smaller requests, or upload it as a file."
        )
    if isinstance(exception, TooManyFieldsSent):
        return (
            f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields "
            f"(DATA_UPLOAD_MAX_NUMBER_FIELDS)."
        )
    if isinstance(exception, TooManyFilesSent):
        return (
            f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files (DATA_UPLOAD_MAX_NUMBER_FILES)."
        )
    return None


@requires_csrf_token
def bad_request(request, exception):
    """A request over a size cap is a 413 that names the cap; any other unreadable request a 400
    that echoes nothing of it."""
    too_large = _too_large_message(exception)
    if too_large is not None:
        if _is_api(request):
            return _envelope("request_too_large", too_large, 413)
        # A browser keeps a form's text in its history: the page says so, since the form itself is gone.
        too_large += (
            " Nothing was saved. Your browser's Back button returns to the form with everything you typed still in it."
        )
        return HttpResponse(
            render_to_string("500.html", {"title": "Request too large", "message": too_large, "status": 413}),
            status=413,
        )
    if _is_api(request):
        return _envelope("bad_request", "The request could not be read (malformed request or unknown host).", 400)
    return defaults.bad_request(request, exception)


@requires_csrf_token
def permission_denied(request, exception):
    if _is_api(request):
        return _envelope("permission_denied", "You do not have permission to perform this action.", 403)
    return defaults.permission_denied(request, exception)


@requires_csrf_token
def page_not_found(request, exception):
    if _is_api(request):
        path = request.path if len(request.path) <= 200 else request.path[:200] + "…"
        return _envelope(
            "not_found",
            f"There is no API endpoint at {path}; the endpoints are listed at "
            f"{reverse('api-docs')} and {reverse('api-schema')}.",
            404,
        )
    # What was not found, when the code said it ("six-sevens v99 does not exist"); Django's own misses
    # (no such URL) carry no sentence and keep the page's general words.
    message = exception.args[0] if isinstance(exception, Http404) and exception.args else None
    if isinstance(message, str) and message:
        return render(
            request, "404.html", {"request_path": request.path, "message": message[:300].rstrip(".")}, status=404
        )
    return defaults.page_not_found(request, exception)


@requires_csrf_token
def server_error(request):
    """Django calls this inside its `except` block, so the exception is still at hand: a database
    that went away (a dropped connection, a restart) is a 503 that says to try again, since the
    connection's health check reconnects on the next request; anything else is a 500. The page
    renders without the request's context processors: they read the database, which may be down."""
    if isinstance(sys.exc_info()[1], (OperationalError, InterfaceError)):
        if _is_api(request):
            response = _envelope("database_unavailable", DATABASE_LOST, 503)
        else:
            response = HttpResponseServerError(
                render_to_string(
                    "500.html",
                    {
                        "title": "Database unavailable",
                        "message": DATABASE_LOST,
                        "status": 503,
                        "retry_url": request.get_full_path(),
                    },
                ),
                status=503,
            )
        response["Retry-After"] = "5"
        return response
    if _is_api(request):
        return _envelope("server_error", "The server failed on this request; the error has been logged.", 500)
    return defaults.server_error(request)
