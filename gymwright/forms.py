"""What every app's HTML forms share: putting a service's DomainError on the form that sent the input, and
rendering a form that a page shows empty once per process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from django import forms
from django.utils.safestring import SafeString

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


_RENDERED: dict[Hashable, object] = {}
_RENDERED_LOCK = threading.Lock()
_RENDERED_MAX = 256  # configurations kept (each new set of choices is one): past it, the cache starts again


def rendered_once(key: Hashable, render: Callable[[], object]):
    """`render()`, computed once per process for `key` (which must name everything the result depends on).

    Django renders a form through templates, each widget, label and option separately: ~1.5 ms for a small form,
    on every page that shows it. A form shown empty (unbound) renders the same HTML every time for the same
    fields, choices and initial values, so pages keep it here."""
    try:
        return _RENDERED[key]
    except KeyError:
        pass
    value = render()
    with _RENDERED_LOCK:
        if len(_RENDERED) >= _RENDERED_MAX:
            _RENDERED.clear()
        return _RENDERED.setdefault(key, value)


class RenderedOnceWhenUnbound(forms.Form):
    """A form whose empty (unbound) `as_p()` is rendered once per process for its class, its choices and its initial
    values; a bound form (one with the user's input and errors) renders as usual."""

    def as_p(self) -> SafeString:
        if self.is_bound:
            return super().as_p()
        choices = tuple((name, tuple(map(tuple, field.choices)) if hasattr(field, "choices") else None)
                        for name, field in self.fields.items())
        initial = tuple(sorted((name, repr(self.get_initial_for_field(field, name)))
                               for name, field in self.fields.items()))
        return rendered_once((type(self), self.prefix, self.auto_id, choices, initial), super().as_p)
