"""Every URL × every role: who may read what, generated from the URL conf (issue 12).

`ACCESS` names, for every named route, which roles may GET it. The test walks the URL conf: a
route missing from the table fails the test, so a new endpoint cannot ship without a decision
about who may see it. For each route and each caller — anonymous, a signed-in user with no role,
the owning author, another author, a reviewer, an admin and a lab member, each by session and
(for /api/) by API token — it checks:

- allowed callers are not refused (no 401/403, no redirect to the login page) and get no 5xx;
- refused callers get 400/403/404 or an answer without the fixture's data (an empty list); HTML
  pages send anonymous visitors to the login page, the API answers them 401/403;
- a POST without a CSRF token from a signed-in browser session is refused (403) everywhere
  except the API token path.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token

from authoring import services
from tests.authoring.conftest import task_content
from tests.support.users import make_user

ANON, NOROLE, OWNER, OTHER, REVIEWER, ADMIN, LAB = "anonymous", "norole", "owner", "other", "reviewer", "admin", "lab"
CALLERS = (ANON, NOROLE, OWNER, OTHER, REVIEWER, ADMIN, LAB)
ENV, TASK = "matrix-env-q7", "matrix-task-q7"  # names that appear in a page only when it shows them

PUBLIC = set(CALLERS)
SIGNED_IN = PUBLIC - {ANON}
MEMBERS = SIGNED_IN - {NOROLE}          # any role: may read environments, lists and packs
AUTHORS = {OWNER, OTHER, ADMIN}          # may create
OWNERS = {OWNER, ADMIN}                  # may edit what they own
REVIEWERS = {REVIEWER, ADMIN}
LABS = {LAB, ADMIN}


class TaskReaders(frozenset):
    """Members; a lab member only once a reviewer approved the task's version (a lab reads approved work)."""


TASK_READERS = TaskReaders(MEMBERS)
REVIEW_WORKSPACE = MEMBERS - {LAB}      # shows drafts: the review page, threads, agreement, dashboards
STAFF = {ADMIN}                          # Django admin (the admin user is staff)

# route name -> roles that may GET it
ACCESS: dict[str, set[str]] = {
    "login": PUBLIC, "healthz": PUBLIC, "favicon.ico": PUBLIC,
    "logout": SIGNED_IN,
    "api-schema": SIGNED_IN, "api-docs": SIGNED_IN, "format-schema": PUBLIC,  # format docs, no data
    "authoring:task_list": MEMBERS, "authoring:task_detail": TASK_READERS, "authoring:task_versions": TASK_READERS,
    "authoring:task_version_detail": TASK_READERS, "authoring:task_diff": TASK_READERS,
    "authoring:environment_list": MEMBERS, "authoring:environment_detail": MEMBERS,
    "authoring:account": SIGNED_IN, "authoring:markdown_preview": MEMBERS,
    "authoring:task_create": AUTHORS, "authoring:environment_create": AUTHORS,
    "authoring:task_edit": OWNERS, "authoring:environment_edit": OWNERS,
    "api-environment-list": MEMBERS, "api-environment-detail": MEMBERS, "api-environment-versions": MEMBERS,
    "api-task-list": MEMBERS, "api-task-detail": TASK_READERS, "api-task-versions": TASK_READERS,
    "api-task-version": TASK_READERS, "api-task-diff": TASK_READERS, "api-blob-upload": AUTHORS,
    "rubric-validate": MEMBERS, "grade-detail": TASK_READERS, "judge-label-create": REVIEWERS,
    "grading:dry_run": AUTHORS, "grading:dry_run_detail": MEMBERS, "grading:grade_detail": TASK_READERS,
    "grading:judge_label": REVIEWERS,
    "grading:example_answers": TASK_READERS, "grading:example_answers_run": OWNERS | REVIEWERS,
    "api-task-version-examples": TASK_READERS, "api-task-version-examples-run": OWNERS | REVIEWERS,
    "api-task-version-previews": TASK_READERS, "api-preview-detail": TASK_READERS, "api-preview-cancel": OWNERS,
    "api-rollout-detail": TASK_READERS,
    "sandbox:preview_start": OWNERS, "sandbox:preview_detail": TASK_READERS, "sandbox:preview_progress": TASK_READERS,
    "sandbox:preview_cancel": OWNERS, "sandbox:task_previews": TASK_READERS, "sandbox:rollout_detail": TASK_READERS,
    "review:task_submit": OWNERS, "review:task_review": REVIEWERS,
    "api-task-version-submit": OWNERS, "api-task-version-reviews": TASK_READERS,
    "api-task-version-gates": TASK_READERS, "api-task-version-gates-run": OWNERS,
    "api-task-comments": REVIEW_WORKSPACE, "api-task-comment-resolve": REVIEW_WORKSPACE,
    "api-review-queue": MEMBERS, "api-inbox": SIGNED_IN, "api-inbox-read": SIGNED_IN, "api-agreement": REVIEW_WORKSPACE,
    "packs:pack_list": MEMBERS, "packs:pack_detail": MEMBERS, "packs:pack_version": MEMBERS,
    "packs:pack_version_progress": LABS, "packs:pack_version_verification": LABS,
    "packs:pack_version_cancel": LABS, "packs:pack_version_download": LABS, "packs:task_import": AUTHORS,
    "api-pack-list": MEMBERS, "api-pack-versions": MEMBERS, "api-pack-version": MEMBERS,
    "api-pack-version-download": LABS, "api-import-file": AUTHORS, "api-import-bulk": AUTHORS,
    "authoring:task_version_file": TASK_READERS, "grading:kinds_reference": MEMBERS,
    "review:queue": REVIEWERS, "review:review_page": REVIEW_WORKSPACE,  # reading; deciding is REVIEWERS
    "review:label_queue": REVIEWERS,
    "review:environment_dashboard": REVIEW_WORKSPACE, "review:agreement": REVIEW_WORKSPACE, "review:inbox": SIGNED_IN,
    "review:gates_run": OWNERS, "review:comment_create": REVIEW_WORKSPACE, "review:comment_resolve": REVIEW_WORKSPACE,
}


def _routes(patterns=None, prefix="", namespace=None):
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            name = pattern.name or str(pattern.pattern)
            yield (f"{namespace}:{name}" if namespace else name), prefix + str(pattern.pattern)


def _access(name: str, *, approved: bool = False) -> set[str] | None:
    rows = _route_access(name)
    if isinstance(rows, TaskReaders) and not approved:
        return rows - {LAB}
    return rows


def _route_access(name: str) -> set[str] | None:
    if name == "admin:login":
        return PUBLIC
    if name == "admin:logout":
        return SIGNED_IN
    if name.startswith("admin:") or name.startswith("admin/"):
        return STAFF
    return ACCESS.get(name)


def test_every_route_has_a_row():
    missing = sorted({name for name, _ in _routes() if _access(name) is None})
    assert not missing, f"routes with no row in ACCESS (decide who may read them): {missing}"


@pytest.fixture(params=["draft", "approved"])
def world(request, transactional_db, django_user_model):
    users = {
        NOROLE: make_user(django_user_model, "nobody"),
        OWNER: make_user(django_user_model, "owner", "author"),
        OTHER: make_user(django_user_model, "other", "author"),
        REVIEWER: make_user(django_user_model, "rita", "reviewer"),
        ADMIN: make_user(django_user_model, "root", "admin"),
        LAB: make_user(django_user_model, "labby", "lab"),
    }
    users[ADMIN].is_staff = users[ADMIN].is_superuser = True  # Django's admin site: superusers only here
    users[ADMIN].save()
    environment = services.environment_create(slug=ENV, name="Shell", author=users[OWNER],
                                              spec={"network": "none"})
    task = services.task_create(slug=TASK, environment=environment, author=users[OWNER], content=task_content())
    from grading import engine
    from grading.services import grade_record
    from sandbox.models import PreviewRun, Rollout

    version = task.latest_version
    graded = engine.grade(engine.parse_task(version.spec).rubric, answer="42", workspace=None, judge=None,
                          sandbox=None)
    grade = grade_record(grade=graded, task_version=version, source="dry_run", user=users[OWNER])
    run = PreviewRun.objects.create(task_version=version, created_by=users[OWNER], policy="oracle", n=1,
                                    backend="bubblewrap")
    rollout = Rollout.objects.create(preview_run=run, index=0)
    values = {"number": 1, "preview_run_id": run.pk, "rollout_id": rollout.pk,
              "grade_id": grade.pk, "check_result_id": grade.check_results.first().pk, "dry_run_id": 999999,
              "comment_id": 999999, "version": "1.0.0", "name": "task", "object_id": str(task.pk),
              "content_type_id": "1", "id": str(users[OWNER].pk)}
    if request.param == "approved":
        from review.services import versions_approve_on_import

        versions_approve_on_import(versions=[version], admin=users[ADMIN])
    values["approved"] = request.param == "approved"
    tokens = {role: Token.objects.create(user=user).key for role, user in users.items()}
    return users, tokens, values


def _path(name: str, template: str, values: dict) -> str | None:
    if "(?P<" in template or template.endswith("$"):
        return None  # regex catch-alls (admin's app index and catch-all) are covered by admin:index
    if name.startswith("admin:") and not name.endswith(("_changelist", ":index", ":login", ":logout")):
        return None  # Django's admin checks the same permission on a model's add/change/delete/history pages
    slug = ENV if template.startswith(("environments/", "api/environments/")) else \
        TASK if "tasks/" in template else "pack"

    def fill(match):
        conv, key = match.group(1), match.group(2)
        if key == "slug":
            return slug
        return str(values.get(key, 1))

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, template)


def _get(client: Client, path: str, token: str | None):
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"} if token else {}
    return client.get(path, **headers)


def _to_login(response) -> bool:
    return response.status_code == 302 and "login" in response.headers.get("Location", "")


def _blocked(response) -> bool:
    """What an allowed caller must never get."""
    return response.status_code in (401, 403) or _to_login(response)


def _kept_out(response) -> bool:
    """What a refused caller must get: a refusal, or an answer without any of the fixture's data."""
    if response.status_code in (400, 401, 403, 404, 405) or _to_login(response):
        return True  # (400: the request was refused before anything was read)
    if response.status_code == 200:
        body = response.content.decode(errors="replace")
        return ENV not in body and TASK not in body  # e.g. a list that is empty for this caller
    return False


def test_every_route_answers_each_role_as_its_row_says(world, settings):
    settings.ALLOWED_HOSTS = ["*"]
    users, tokens, values = world
    problems = []
    for name, template in _routes():
        path = _path(name, template, values)
        if path is None:
            continue
        allowed = _access(name, approved=values["approved"])
        if allowed is None:
            continue  # test_every_route_has_a_row names it
        api = path.startswith("/api/")
        for caller in CALLERS:
            client = Client()
            if caller != ANON:
                client.force_login(users[caller])
            ways = [(client, None)]
            if api and caller != ANON:
                ways.append((Client(), tokens[caller]))
            for way, token in ways:
                response = _get(way, path, token)
                how = "token" if token else "session"
                if response.status_code >= 500:
                    problems.append(f"{caller}/{how} GET {path} ({name}) -> {response.status_code}")
                elif caller in allowed and _blocked(response):
                    problems.append(f"{caller}/{how} GET {path} ({name}) refused with {response.status_code}, "
                                    f"but the row allows {caller}")
                elif caller not in allowed and not _kept_out(response):
                    problems.append(f"{caller}/{how} GET {path} ({name}) -> {response.status_code}, "
                                    f"but the row refuses {caller}")
    assert not problems, "\n".join(problems)


def test_a_browser_post_without_a_csrf_token_is_refused_everywhere(world, settings):
    settings.ALLOWED_HOSTS = ["*"]
    users, tokens, values = world
    problems = []
    for name, template in _routes():
        path = _path(name, template, values)
        if path is None or name in ("login", "healthz"):
            continue
        client = Client(enforce_csrf_checks=True)
        client.force_login(users[ADMIN])
        response = client.post(path, {"x": "1"})
        if response.status_code not in (403, 405):
            problems.append(f"admin session POST {path} ({name}) without CSRF -> {response.status_code}")
    assert not problems, "\n".join(problems)
