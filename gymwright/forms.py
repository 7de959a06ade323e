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


def form_add_domain_error(
    form: forms.Form, exc: DomainError, *, field_for: Callable[[str], str | None] = pointer_head
) -> None:
    """Shows a service's DomainError on the form, each problem once, in words, under the field its JSON pointer
    names (`field_for` maps a pointer to a field; by default its first token). JSON pointers are for API answers:
    on a form, the field says where.

    - The only problem of the error, at a field: the error's own sentence, under that field, and nowhere else
      ("Version 0.1.0 is lower than the proposed 0.2.0; ..." under Version, not "/version: lower than the
      proposal" there and the sentence again on top); a pointer in that sentence is left out.
    - One of several problems: the error's sentence on top, and the problem's message under its field as a
      sentence (the item of a list named: "Item 3: not approved.").
    - Inside a field that holds a JSON document (the form's `json_fields`: a rubric, metadata, example answers)
      the pointer is the only way to say where, so it stays in front ("/rubric/checks/1/id: duplicate check id
      'same'"; the rubric editor places that at its check), and the sentence goes on top.
    - A problem no field holds is said by the sentence on top.
    """
    json_fields = set(getattr(form, "json_fields", ()))
    placed = []
    for detail in exc.details:
        pointer = str(detail.get("pointer") or "")
        field = field_for(pointer) if pointer else None
        if field in form.fields:
            placed.append((field, pointer, str(detail.get("message", ""))))
    if len(exc.details) == 1 and len(placed) == 1 and placed[0][0] not in json_fields:
        field, pointer, _ = placed[0]
        # The field says where: a sentence that names the pointer too ("Limits over the server's ceilings:
        # /limits/memory_mb: memory_mb 8192 MB is over ...") reads without it.
        form.add_error(field, exc.message.replace(f"{pointer}: ", ""))
        return
    form.add_error(None, exc.message)
    for field, pointer, message in placed:
        if field in json_fields:
            form.add_error(field, f"{pointer}: {message}")
            continue
        last = pointer.rsplit("/", 1)[-1]
        item = (
            f"Item {int(last) + 1}: "
            if pointer.count("/") == 2 and pointer_head(pointer) == field and last.isdigit() and len(last) < 10
            else ""
        )
        form.add_error(field, item + _sentence(message, capital=not item))


def _sentence(text: str, *, capital: bool = True) -> str:
    """ "lower than the proposal" as a sentence: a capital first letter (unless it follows a label) and a full
    stop."""
    text = text.strip()
    if not text:
        return text
    if capital:
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


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
        choices = tuple(
            (name, tuple(map(tuple, field.choices)) if hasattr(field, "choices") else None)
            for name, field in self.fields.items()
        )
        initial = tuple(
            sorted((name, repr(self.get_initial_for_field(field, name))) for name, field in self.fields.items())
        )
        return rendered_once((type(self), self.prefix, self.auto_id, choices, initial), super().as_p)
