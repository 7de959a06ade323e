"""Packs' link in the site's navigation (gymwright.pages; registered in PacksConfig.ready)."""

from __future__ import annotations

from accounts import permissions


def navigation(*, request, **_):
    return {} if permissions.can_view(request.user) else None


def register() -> None:
    from gymwright.pages import panel_register

    panel_register("base.nav", template="packs/_nav.html", selector=navigation)
