"""What each role is shown matches what it may do: every link (and every fragment a page loads, hx-get) on the
pages a role opens answers that role, never 403 or 404, and a lab member, who edits nothing, is shown no form
that changes anything. The permission matrix (test_permission_matrix.py) says who may open each route; this
says that no page shows a way to one they may not."""

from __future__ import annotations

import html
import re

import pytest

from authoring import services
from authoring.models import Task
from review.services import versions_approve_on_import
from sandbox.models import PreviewRun, Rollout
from tests.authoring.conftest import RUBRIC, task_content
from tests.grading.test_example_answers import EXAMPLES
from tests.support.users import make_user

pytestmark = pytest.mark.django_db

ROLES = ("author", "reviewer", "admin", "lab", "norole")
LINK = re.compile(r'(?:href|hx-get)="(/[^"#]*)')
FORM = re.compile(r'<form\b[^>]*\bmethod="post"[^>]*>', re.IGNORECASE)
ACTION = re.compile(r'\baction="([^"]*)"')
NOT_FOLLOWED = ("/static/", "/accounts/logout/", "/admin/")


def build_world(django_user_model, password: str | None = None) -> dict:
    """A user per role (`password` for each, else make_user's), and their tasks: `five`: v1 to v5, v2 and v5
    approved, with a preview of v5 still running and example answers that v4 (a draft) broke; `shipped`: v1
    approved and v2 in review; `hidden`: a draft tagged secret-tag."""
    users = {
        role: make_user(django_user_model, name, *roles, password=password)
        for role, name, roles in (
            ("author", "alice", ["author"]),
            ("reviewer", "rita", ["reviewer"]),
            ("admin", "adam", ["admin"]),
            ("lab", "lena", ["lab"]),
            ("norole", "nobody", []),
        )
    }
    author, admin = users["author"], users["admin"]
    environment = services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})
    broken = {**RUBRIC, "checks": [{**RUBRIC["checks"][0], "expected": "forty-two"}, *RUBRIC["checks"][1:]]}
    five = services.task_create(
        slug="five",
        environment=environment,
        author=author,
        content=task_content(title="Five 1", tags=["shown"], examples=EXAMPLES),
    )
    for number in range(2, 6):
        content = task_content(
            title=f"Five {number}", tags=["shown"], examples=EXAMPLES, rubric=broken if number == 4 else RUBRIC
        )
        version, _ = services.task_version_create(task=five, author=author, base_version=number - 1, content=content)
        if number in (2, 5):
            versions_approve_on_import(versions=[version], admin=admin)
    shipped = services.task_create(
        slug="shipped", environment=environment, author=author, content=task_content(title="Shipped")
    )
    versions_approve_on_import(versions=[shipped.latest_version], admin=admin)
    services.task_version_create(
        task=shipped, author=author, base_version=1, content=task_content(title="Shipped, revised")
    )
    Task.objects.filter(pk=shipped.pk).update(status=Task.Status.IN_REVIEW)
    services.task_create(
        slug="hidden",
        environment=environment,
        author=author,
        content=task_content(title="Hidden draft", tags=["secret-tag"]),
    )
    five.refresh_from_db()
    preview_run = PreviewRun.objects.create(
        task_version=five.latest_version, created_by=author, policy="oracle", n=1, backend="bubblewrap"
    )
    Rollout.objects.create(preview_run=preview_run, index=0)
    return {**users, "preview": f"/previews/{preview_run.pk}/"}


@pytest.fixture
def world(db, django_user_model):
    return build_world(django_user_model)


def links(body: str) -> set[str]:
    return {html.unescape(href) for href in LINK.findall(body) if not href.startswith(NOT_FOLLOWED)}


def post_forms(body: str) -> list[str]:
    return sorted(html.unescape((ACTION.search(form) or [None, ""])[1]) for form in FORM.findall(body))


def refused_links(client, pages: list[str]) -> list[str]:
    """Each link on `pages` that answers this client 403 or 404 (each page must open: 200)."""
    answers: dict[str, int] = {}
    problems = []
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, (page, response.status_code)
        for href in sorted(links(response.content.decode())):
            if href not in answers:
                answers[href] = client.get(href).status_code
            if answers[href] in (401, 403, 404):
                problems.append(f"{page} links to {href}: {answers[href]}")
    return problems


MEMBER_PAGES = [
    "/",
    "/environments/",
    "/environments/shell/",
    "/packs/",
    "/inbox/",
    "/account/",
    "/tasks/five/",
    "/tasks/shipped/",
]
PAGES = {
    "author": MEMBER_PAGES,
    "reviewer": MEMBER_PAGES,
    "admin": MEMBER_PAGES,
    "lab": MEMBER_PAGES,
    "norole": ["/inbox/", "/account/"],
}


@pytest.mark.parametrize("role", ROLES)
def test_every_link_on_a_roles_pages_answers_that_role(client, world, role):
    client.force_login(world[role])
    pages = PAGES[role] + ([world["preview"]] if role != "norole" else [])
    assert refused_links(client, pages) == []


def test_the_navigation_shows_review_to_reviewers_and_admins_only(client, world):
    for role in ROLES:
        client.force_login(world[role])
        body = client.get("/inbox/").content.decode()
        assert ('id="nav-review"' in body) == (role in ("reviewer", "admin")), role
        assert ('href="/packs/"' in body) == (role != "norole"), role


def test_import_tasks_is_linked_for_authors_and_admins_only(client, world):
    for role in ROLES[:4]:
        client.force_login(world[role])
        body = client.get("/packs/").content.decode()
        assert ('href="/packs/import/"' in body) == (role in ("author", "admin")), role


def test_a_lab_member_is_shown_no_form_that_changes_anything(client, world):
    client.force_login(world["lab"])
    for page in (
        "/",
        "/environments/",
        "/environments/shell/",
        "/inbox/",
        "/account/",
        "/tasks/five/",
        "/tasks/shipped/",
        world["preview"],
        f"{world['preview']}progress/",
    ):
        body = client.get(page).content.decode()
        # logging out, and the account page's own token (a lab member's API access)
        assert set(post_forms(body)) <= {"/accounts/logout/", ""}, page


def test_run_gates_and_cancel_are_shown_to_those_who_may_start_previews(client, world):
    """A lab member starts and cancels nothing (the server refuses it); authors, reviewers and admins do."""
    for role in ("author", "reviewer", "admin", "lab"):
        client.force_login(world[role])
        task_page = client.get("/tasks/five/").content.decode()
        preview = client.get(world["preview"]).content.decode()
        assert ('id="run-gates"' in task_page) == (role != "lab"), role
        assert ('id="cancel-form"' in preview) == (role != "lab"), role
    client.force_login(world["reviewer"])
    assert 'id="run-gates"' in client.get("/review/tasks/shipped/").content.decode()
    client.force_login(world["lab"])
    response = client.post("/tasks/five/gates/run/", follow=True)
    assert b"Only authors, reviewers and admins can start previews" in response.content
    assert PreviewRun.objects.count() == 1
