"""Authoring's panels on the site's layout (gymwright.pages; registered in AuthoringConfig.ready): the Tasks
and Environments links for those who may read them, and the account link."""

from __future__ import annotations

from accounts import permissions


def navigation(*, request, **_):
    return {} if permissions.can_view(request.user) else None


def account_link(*, request, **_):
    return {}


def register() -> None:
    from gymwright.pages import panel_register

    panel_register("base.nav", template="authoring/_nav.html", selector=navigation)
    panel_register("base.account", template="authoring/_account_link.html", selector=account_link)
