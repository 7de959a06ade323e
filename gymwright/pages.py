"""Page composition: how an app adds a panel to another app's page without that page knowing it.

The apps depend in a line (tests/gymwright/test_app_dependencies.py), and so do their templates: a page
of authoring may not load review's tags, include sandbox's templates or reverse grading's URLs. An app to
the right registers a panel from its AppConfig.ready() instead, as it registers a version-created hook:
a slot on a page ("task_detail.reviews"), a template of its own, and a selector that returns the template's
context for this request (None: nothing to show). The page's view calls `panels(...)`, so every query runs
in the view; the page's template places each slot with the `render_panels` tag (gymwright/templatetags/pages.py),
which only renders. A slot nothing registered for renders empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Selector = Callable[..., "dict[str, Any] | None"]


@dataclass(frozen=True)
class Panel:
    template: str
    context: dict[str, Any]


_REGISTERED: dict[str, list[tuple[str, str, Selector]]] = {}  # page -> [(slot, template, selector)]


def panel_register(slot: str, *, template: str, selector: Selector) -> None:
    """On `slot` ("page.name"), `template` renders `selector(request=..., **the page's data)`; once per slot and template."""
    page, _, name = slot.partition(".")
    if not page or not name:
        raise ValueError(f"a panel's slot is 'page.name', not {slot!r}")
    entries = _REGISTERED.setdefault(page, [])
    if not any((s, t) == (name, template) for s, t, _ in entries):
        entries.append((name, template, selector))


def panels(page: str, *, request, **data: Any) -> dict[str, list[Panel]]:
    """What `page`'s registered panels show to this request, by slot name: called by the page's view."""
    shown: dict[str, list[Panel]] = {}
    for name, template, selector in _REGISTERED.get(page, ()):
        context = selector(request=request, **data)
        if context is not None:
            shown.setdefault(name, []).append(Panel(template, context))
    return shown
