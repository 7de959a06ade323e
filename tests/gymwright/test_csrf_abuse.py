"""CSRF, tried as a hostile site would (issue 27): a page elsewhere that makes a signed-in member's browser send a
write to Gymwright. The browser sends the member's cookies (the session's and the CSRF cookie) but the hostile page
cannot read the CSRF token, so it posts none, or one of its own (from its own visit), or the member's token from
another origin.

The routes are walked from the URL conf (django.urls' resolver, as the permission matrix walks it), so a new route
that takes a write from a session without the token fails here, whatever its method: every route, every unsafe
method, sent by a signed-in admin (who may do most things) with a body valid enough to write (the matrix's), must be
refused with Django's or DRF's CSRF answer (403) and leave every table as it was. The only routes exempt are DRF views
that take no write from a session (no handler for an unsafe method, or no authentication classes): those must not
change anything either. The same requests with the session's own token, from the site's origin, are not refused for
CSRF (so the refusals above are the token's doing, and the bodies are ones a view would act on).

The world (tests/gymwright/permission_matrix_world.py) names every object a route names: submit, reviews, gates/run,
examples/run, comments and their resolution, judge labels, previews and their cancel, pack builds, "Verify again",
imports, the API's writes, Django's admin site, sign-in and sign-out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.db import transaction
from django.test import Client

from tests.gymwright.permission_matrix_world import ADMIN
from tests.gymwright.test_permission_matrix import (  # noqa: F401 (module_world, world: the fixtures)
    BODIES,
    FORM,
    JSON,
    QUERIES,
    WRITES,
    _close,
    fingerprint,
    is_admin_route,
    is_api,
    module_world,
    path_of,
    routes,
    world,
)

pytestmark = pytest.mark.django_db

SITE = "http://testserver"  # the test client's origin
HOSTILE = "https://gymwright.evil.example"


def takes_no_session_write(pattern) -> bool:
    """Whether a route's view (a DRF view: Django's own views are all behind the CSRF middleware) can take no write
    from a session: it has no handler for an unsafe method (DRF answers before it reads the session, and renders
    its refusal as the view renders a page), or it authenticates no one (no authentication classes: it answers a
    signed-in member as it answers anyone, so a forged request carries no one's authority)."""
    view_class = getattr(pattern.callback, "cls", None)
    if view_class is None:
        return False
    takes_writes = any(hasattr(view_class, method.lower()) for method in WRITES)
    return not takes_writes or not list(view_class.authentication_classes)


def write_routes():
    """(name, path, pattern, methods) for every route of the URL conf, with the unsafe methods it is sent: all of
    them, but POST alone on the admin site (its views refuse before they read the method)."""
    for name, template, pattern in routes():
        methods = ("POST",) if is_admin_route(template) else WRITES
        yield name, template, pattern, methods


@dataclass
class Answer:
    status: int
    body: str
    changed: list[str]

    @property
    def csrf_refusal(self) -> bool:
        # Django's page, or DRF's envelope (a page's own 403 may name the CSRF token in its forms' script)
        return self.status == 403 and ("CSRF verification failed" in self.body or "CSRF Failed: " in self.body)


def send(client: Client, method: str, path: str, route: str, baseline: dict, *, token=None, origin=None) -> Answer:
    """`method` to `path` as `client` (the body the matrix sends), with `token` as the form field and the header
    and `origin` as the Origin header, in a savepoint rolled back afterwards (the client's cookies too)."""
    headers = {}
    if token is not None:
        headers["HTTP_X_CSRFTOKEN"] = token
    if origin is not None:
        headers["HTTP_ORIGIN"] = origin
    kind, body = BODIES.get(route, (JSON if is_api(path) else FORM, dict))
    data = body()
    saved = {key: morsel.value for key, morsel in client.cookies.items()}
    with transaction.atomic():
        if kind == JSON:
            response = client.generic(method, path, json.dumps(data), content_type="application/json", **headers)
        elif method == "POST":
            if token is not None:
                data["csrfmiddlewaretoken"] = token
            response = client.post(path, data, **headers)  # a form, multipart (files too)
        else:
            response = client.generic(method, path, **headers)
        content = b"".join(response.streaming_content) if response.streaming else response.content
        _close(response)
        after = fingerprint() if response.status_code < 500 else {}
        transaction.set_rollback(True)
    for key, value in saved.items():
        client.cookies[key] = value
    changed = sorted(table for table in baseline if after.get(table) != baseline[table])
    return Answer(response.status_code, content.decode(errors="replace"), changed)


@pytest.fixture
def victim(world):
    """The admin's browser: signed in, with the CSRF cookie a visit to any page sets."""
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(world["users"][ADMIN])
    assert client.get("/account/").status_code == 200
    client.token = client.cookies["csrftoken"].value
    client.baseline = fingerprint()  # after signing in (the admin's last login)
    return client


def attempts(world, victim, **how):
    """Every route and unsafe method, sent by the victim's browser `how` (a token, an origin): the problems."""
    problems = []
    for name, template, pattern, methods in write_routes():
        path = path_of(name, template, world["targets"]["-"]) + QUERIES.get(name, "")
        for method in methods:
            answer = send(victim, method, path, name, victim.baseline, **how)
            where = f"{method} {path} ({name})"
            if answer.changed:
                problems.append(f"{where}: changed {', '.join(answer.changed)}")
            if answer.status >= 500:
                problems.append(f"{where}: answered {answer.status}")
            elif not answer.csrf_refusal and not takes_no_session_write(pattern):
                problems.append(f"{where}: answered {answer.status}, not a CSRF refusal: {answer.body[:200]!r}")
    return problems


def test_a_write_without_the_csrf_token_is_refused_on_every_route(world, victim):
    """A hostile page's form or fetch: the member's cookies, no token."""
    problems = attempts(world, victim)
    assert not problems, "\n".join(problems)


def test_a_write_with_another_visitors_csrf_token_is_refused_on_every_route(world, victim):
    """The hostile site visits Gymwright itself and posts the token it was given: not the member's."""
    stranger = Client(enforce_csrf_checks=True)
    stranger.get("/accounts/login/")
    token = stranger.cookies["csrftoken"].value
    assert token != victim.token
    problems = attempts(world, victim, token=token)
    assert not problems, "\n".join(problems)


def test_a_write_with_the_members_token_from_another_origin_is_refused_on_every_route(world, victim):
    """Had the token leaked, a page on another origin still cannot use it: the browser names the page's origin."""
    problems = attempts(world, victim, token=victim.token, origin=HOSTILE)
    assert not problems, "\n".join(problems)


def test_the_same_writes_with_the_sessions_token_are_not_refused_for_csrf(world, victim):
    """The control: with the session's token from the site's own origin, no route answers with a CSRF refusal
    (so the refusals above are the token's doing), and the writes the matrix expects of an admin are made."""
    problems = []
    written = set()
    for name, template, _pattern, methods in write_routes():
        path = path_of(name, template, world["targets"]["-"]) + QUERIES.get(name, "")
        for method in methods:
            answer = send(victim, method, path, name, victim.baseline, token=victim.token, origin=SITE)
            if answer.csrf_refusal:
                problems.append(f"{method} {path} ({name}): refused for CSRF with the session's token")
            if answer.changed:
                written.add(name)
    assert not problems, "\n".join(problems)
    # the writes issue 27 names, each made once the token is there
    assert {
        "review:task_review",
        "review:gates_run",
        "review:comment_create",
        "review:comment_resolve",
        "grading:example_answers_run",
        "grading:judge_label",
        "packs:pack_detail",
        "packs:pack_version_verification",
        "packs:task_import",
        "api-task-version-reviews",
        "api-task-comments",
        "judge-label-create",
        "api-import-file",
    } <= written, sorted(written)
