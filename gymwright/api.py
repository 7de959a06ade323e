"""Project-wide API plumbing: pagination and the single error envelope.

Every API error, whatever raised it, answers as
    {"error": {"code": "...", "message": "...", "details": [{"pointer": "/checks/0/id", "message": "..."}]}}
"""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from grading.engine.validation import escape_pointer_token
from gymwright.errors import DomainError
from gymwright.pagination import KeysFirstPaginator


class Pagination(PageNumberPagination):
    django_paginator_class = KeysFirstPaginator
    page_size_query_param = "page_size"
    max_page_size = 500


@cache  # one component per output serializer, however many views list it
def paginated(serializer_class):
    """The OpenAPI shape of a page of `serializer_class`, as Pagination answers it from a plain APIView."""
    name = serializer_class.__name__.removesuffix("Output")
    return inline_serializer(
        f"Paginated{name}List",
        fields={
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )


def paginate(request, view, queryset, serializer_class) -> Response:
    """One page of `queryset` serialized with `serializer_class`, as Pagination answers it."""
    paginator = Pagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


def validated(serializer_class, data) -> dict:
    """`data` validated by `serializer_class`; a ValidationError becomes the envelope with pointers. A
    field the serializer does not know is refused at its pointer, never dropped: a review sent with
    `body` instead of `comment` was recorded as an approval without its comment, and `dry_run` put
    where it is not read imported for real."""
    serializer = serializer_class(data=data)
    if hasattr(data, "keys"):
        known = serializer.fields
        unknown = [key for key in data.keys() if key not in known and key not in _FORM_FIELDS]
        if unknown:
            expected = ", ".join(known)
            raise exceptions.ValidationError(
                {str(key)[:100]: [f"unknown field (the fields are: {expected})"] for key in unknown[:20]}
            )
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


_FORM_FIELDS = frozenset({"csrfmiddlewaretoken"})  # what a browser form adds to what it posts


def _flatten(detail, prefix: str = "") -> list[dict]:
    """DRF error details → [{"pointer": "/field/0", "message": "..."}]."""
    items: list[dict] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                items += _flatten(value, prefix)
            else:
                items += _flatten(value, f"{prefix}/{escape_pointer_token(key)}")
    elif isinstance(detail, list):
        if all(not isinstance(v, (dict, list)) for v in detail):
            items += [{"pointer": prefix or "", "message": str(v)} for v in detail]
        else:
            for index, value in enumerate(detail):
                items += _flatten(value, f"{prefix}/{index}")
    else:
        items.append({"pointer": prefix or "", "message": str(detail)})
    return items


def error_body(code: str, message: str, details: list[dict] | None = None, extra: dict | None = None) -> dict:
    """The envelope itself, for DRF responses and for Django's own error handlers (gymwright.error_views)."""
    body = {"error": {"code": code, "message": message, "details": details or []}}
    if extra:
        body["error"].update(extra)
    return body


def error_response(
    code: str, message: str, http_status: int, details: list[dict] | None = None, extra: dict | None = None
) -> Response:
    return Response(error_body(code, message, details, extra), status=http_status)


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        resp = error_response(exc.code, exc.message, exc.http_status, exc.details, exc.extra)
        if exc.extra.get("retry_after_s"):
            resp["Retry-After"] = str(exc.extra["retry_after_s"])
        return resp
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a real bug: let Django log it and answer 500
    if isinstance(exc, exceptions.ValidationError):
        details = _flatten(exc.detail)
        message = "; ".join(f"{d['pointer'] or '/'}: {d['message']}" for d in details[:5]) or "Invalid input."
        return error_response("invalid", message, response.status_code, details)
    code = getattr(exc, "default_code", "error")
    detail = exc.detail if isinstance(getattr(exc, "detail", None), str) else str(getattr(exc, "detail", exc))
    resp = error_response(str(code), str(detail), response.status_code)
    for header in ("WWW-Authenticate", "Retry-After", "Allow"):
        if header in response:
            resp[header] = response[header]
    return resp


class ApiDocsPermission(BasePermission):
    """The OpenAPI schema and its docs page: for logged-in users unless GYMWRIGHT_API_DOCS_PUBLIC is on."""

    def has_permission(self, request, view) -> bool:
        return settings.API_DOCS_PUBLIC or bool(request.user and request.user.is_authenticated)


def iso_datetime(value, zone=None) -> str | None:
    """What DRF's DateTimeField writes for a stored (aware) datetime: ISO 8601 in the current time zone (`zone`: a
    list looks it up once for its rows), `Z` for UTC. Without the field's per-call settings lookups, which were an
    eighth of a task-list request's CPU (two per row)."""
    if value is None:
        return None
    text = value.astimezone(zone or timezone.get_current_timezone()).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
