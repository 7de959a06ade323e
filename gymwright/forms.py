"""What every app's HTML forms share: putting a service's DomainError on the form that sent the input."""

from __future__ import annotations

from collections.abc import Callable

from django import forms

from gymwright.errors import DomainError


def pointer_head(pointer: str) -> str:
    """The first reference token of a JSON pointer ("/slug/0" → "slug"; "" → "")."""
    return pointer.split("/")[1] if pointer.startswith("/") and len(pointer) > 1 else ""


def form_add_domain_error(form: forms.Form, exc: DomainError, *,
                          field_for: Callable[[str], str | None] = pointer_head) -> None:
    """Shows a service's DomainError on the form: its sentence at the top, and each problem at the
    field its JSON pointer names (`field_for` maps a pointer to a field; by default its first token)
    as "pointer: message", so that the field says what is wrong and where.
    """
    form.add_error(None, exc.message)
    for detail in exc.details:
        pointer = str(detail.get("pointer") or "")
        field = field_for(pointer)
        if pointer and field in form.fields:
            form.add_error(field, f"{pointer}: {detail.get('message', '')}")
