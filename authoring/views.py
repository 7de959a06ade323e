"""HTML views: validate → call a service or selector → render. Bad input re-renders the form."""

from __future__ import annotations

import codecs
import json
from functools import partial

from django.contrib import messages
from django.core import signing
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe

from accounts import permissions
from accounts import selectors as account_selectors
from accounts import services as account_services
from authoring import selectors, services
from authoring.diff import task_version_diff
from authoring.forms import FILE_ROLE_CHOICES, EnvironmentForm, TaskForm
from authoring.models import Task
from authoring.prompt_html import markdown_or_text, prompt_html
from grading.engine import flat_checks  # the pure engine: a library for every app
from grading.engine.describe import check_in_words
from grading.engine.kind_examples import EXAMPLES, example_as_dict
from gymwright.errors import ConflictError, DomainError, NotAllowed
from gymwright.forms import form_add_domain_error
from gymwright.pages import panels
from gymwright.pagination import KeysFirstPaginator
from gymwright.process_cache import Kept

PAGE_SIZE = 50

STARTER_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "mentions_answer", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
    ],
}


def _forbidden(request, exc: NotAllowed):
    return render(request, "authoring/forbidden.html", {"message": exc.message}, status=403)


def _upload_refused(request, form, *, what: str) -> bool:
    """True, with the reason on the form's files field, when the upload went over the limit (the upload
    handler dropped the files and kept the text fields, so everything typed is shown again)."""
    if not getattr(request, "upload_too_large", False):
        return False
    form.is_valid()  # the other fields' own errors too
    form.add_error("files", services.upload_too_large_error(what).message)
    return True


# --------------------------------------------------------------------------------------------- tasks


@require_safe
def task_list(request):
    filters = {key: request.GET.get(key, "").strip()[:100] for key in ("q", "environment", "status", "tag", "author")}
    queryset = selectors.task_list_page_source(user=request.user, **filters)
    rows = partial(selectors.task_rows, user=request.user, approvers=True)
    page = KeysFirstPaginator(queryset, PAGE_SIZE, rows=rows).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "authoring/task_list.html",
        {
            "page": page,
            "filters": filters,
            "query": query.urlencode(),
            **selectors.task_filter_choices(user=request.user),  # environments, statuses, tags: each reader's own
            "can_author": permissions.can_author(request.user),
        },
    )


# Files attached to a save that failed: a browser empties a file input when the page comes back, so they are stored
# (blobs are content-addressed) and carried, signed for this user, in the form's `kept_files` to the next try.
_KEPT_SALT = "gymwright.authoring.kept-files"
_KEPT_MAX_AGE_S = 24 * 3600


def _kept_uploads(request) -> list[dict]:
    """The files earlier failed tries of this form stored ([{path, sha256}]), from its signed `kept_files`."""
    token = request.POST.get("kept_files") or ""
    try:
        kept = signing.loads(token, salt=_KEPT_SALT, max_age=_KEPT_MAX_AGE_S) if token else {}
    except signing.BadSignature:
        return []
    if not isinstance(kept, dict) or kept.get("user") != request.user.pk:
        return []
    return [
        {"path": entry["path"], "sha256": entry["sha256"], **({"role": entry["role"]} if entry.get("role") else {})}
        for entry in kept.get("files") or []
    ]


def _keep_uploads(request, form) -> dict:
    """After a failed save: the files this try attached, stored, with those kept before; the form's context."""
    kept = _kept_uploads(request)
    cleaned = getattr(form, "cleaned_data", None) or {}
    uploads = cleaned.get("files") or []
    try:
        kept = services.files_with_uploads(files=kept, uploads=uploads, roles=cleaned.get("upload_roles"))
    except DomainError:
        pass  # a file the save refused (its name): the form says why; the others stay as they were
    if not kept:
        return {}
    return {
        "kept_files": kept,
        "kept_files_token": signing.dumps({"user": request.user.pk, "files": kept}, salt=_KEPT_SALT),
    }


def _task_form_context(request, form, **extra):
    # Each kind's worked example and edge cases, from the engine (the same as /grading/kinds/).
    kind_examples = {kind: example_as_dict(example) for kind, example in EXAMPLES.items()}
    return {
        "form": form,
        "starter_rubric": json.dumps(STARTER_RUBRIC, indent=2),
        "file_role_choices": FILE_ROLE_CHOICES,
        "upload_role_prefix": TaskForm.UPLOAD_ROLE_PREFIX,
        "kind_examples": kind_examples,
        # the kinds reference link, the dry-run panel and the review threads: gymwright.pages
        "panels": panels("task_form", request=request, task=extra.get("task"), version=extra.get("version")),
        **extra,
    }


def _environment_to_offer(request, environments):
    """The New task form's environment: the one named by `?environment=`, else the one of the task this
    author last changed, else the only one there is (an import's `imported` environment must not take
    the place of the one the author works in)."""
    named = request.GET.get("environment")
    if named:
        found = environments.filter(slug=named).first()
        if found is not None:
            return found
    # An import makes its tasks the author's newest ones: only a task whose latest version was saved by hand
    # says where the author works.
    last = (
        Task.objects.filter(owner=request.user, environment__in=environments)
        .exclude(latest_version__message=services.IMPORT_MESSAGE)
        .order_by("-updated_at")
        .select_related("environment")
        .first()
    )
    if last is not None:
        return last.environment
    return environments.first() if environments.count() == 1 else None


@require_http_methods(["GET", "POST"])
def task_create(request):
    if not permissions.can_author(request.user):
        return _forbidden(request, NotAllowed("Only authors and admins can create tasks."))
    environments = selectors.environment_list(user=request.user).filter(latest_version__isnull=False)
    if request.method == "POST":
        form = TaskForm(request.POST, request.FILES, environments=environments)
        if not _upload_refused(request, form, what="An attached file") and form.is_valid():
            try:
                files = services.files_with_uploads(
                    files=_kept_uploads(request),
                    uploads=form.cleaned_data["files"],
                    roles=form.cleaned_data.get("upload_roles"),
                )
                task = services.task_create(
                    slug=form.cleaned_data["slug"],
                    environment=form.cleaned_data["environment"],
                    author=request.user,
                    content=form.content(current_files=files),
                    message=form.cleaned_data.get("message") or "",
                )
            except DomainError as exc:
                form_add_domain_error(form, exc, field_for=form.field_for)
            else:
                messages.success(request, f"Created {task.slug} v1.")
                return redirect("authoring:task_detail", slug=task.slug)
        return render(
            request,
            "authoring/task_form.html",
            _task_form_context(request, form, creating=True, **_keep_uploads(request, form)),
            status=400,
        )
    initial = {"rubric": json.dumps(STARTER_RUBRIC, indent=2), "metadata": "{}", "examples": "[]"}
    initial["environment"] = _environment_to_offer(request, environments)
    form = TaskForm(initial=initial, environments=environments)
    return render(request, "authoring/task_form.html", _task_form_context(request, form, creating=True))


@require_safe
def task_detail(request, slug):
    task = selectors.task_get_for_user(slug=slug, user=request.user, count_versions=True)
    version = task.latest_version
    rubric_json, checks_html, check_count = _rubric_shown(version) if version else ("", "", 0)
    return render(
        request,
        "authoring/task_detail.html",
        {
            "task": task,
            "version": version,
            "prompt_html": prompt_html(version) if version else "",
            "rubric_json": rubric_json,
            "checks_html": checks_html,
            "check_count": check_count,
            "audit_events": selectors.audit_events_for(task, user=request.user),
            "can_edit": permissions.can_edit_task(request.user, task),
            # the sections other apps add (example answers, previews, reviews): gymwright.pages
            "panels": panels("task_detail", request=request, task=task, version=version) if version else {},
        },
    )


def _rubric_shown(version) -> tuple[str, str, int]:
    """The task page's rubric: its indented JSON (Python's encoder writes indented JSON in Python, ~1 ms for a
    small rubric), its table's rows and its number of checks. A version never changes, so a process keeps those of
    the versions it showed, by the version's hash: up to 32 MB in all (a team's working set of task pages, not only
    the last few: a 64-entry list missed on most of 200 distinct pages spread over the workers), a rubric over 1 MB
    worked out each time."""
    kept = _RUBRICS_SHOWN.get(version.sha256)
    if kept is not None:
        return kept
    checks = _flat_checks(version.rubric.get("checks"))
    shown = json.dumps(version.rubric, indent=2), _check_rows_html(checks), len(checks)
    _RUBRICS_SHOWN.put(version.sha256, shown)
    return shown


_RUBRICS_SHOWN = Kept(
    entries=4096, max_size=32 * 1024 * 1024, max_value=1024 * 1024, size=lambda shown: len(shown[0]) + len(shown[1])
)


def _flat_checks(checks):
    # What each check does, in words (pattern, expected value, path, criterion): the engine's sentence.
    return [{"depth": row.depth, "check": row.check, "words": check_in_words(row.check)} for row in flat_checks(checks)]


def _check_rows_html(items) -> str:
    """The rubric table's rows (authoring/_check_rows.html): worked out once per version and kept (_rubric_shown)."""
    rows = [{**item, "check": item["check"] if isinstance(item["check"], dict) else {}} for item in items]
    return render_to_string("authoring/_check_rows.html", {"items": rows})


def _initial_from_version(version) -> dict:
    spec = version.spec
    solution = spec.get("solution") or {}
    return {
        "title": spec.get("title", ""),
        "prompt": spec.get("prompt", ""),
        "rubric": json.dumps(spec.get("rubric"), indent=2, ensure_ascii=False),
        "solution_script": solution.get("script") or "",
        "solution_answer": solution.get("answer") or "",
        "tags": ", ".join(spec.get("tags") or []),
        "metadata": json.dumps(spec.get("metadata") or {}, indent=2),
        "examples": json.dumps(spec.get("examples") or [], indent=2, ensure_ascii=False),
        "base_version": version.number,
    }


@require_http_methods(["GET", "POST"])
def task_edit(request, slug):
    try:
        task = selectors.task_get_for_user(slug=slug, user=request.user, action="edit")
    except NotAllowed as exc:
        return _forbidden(request, exc)
    latest = task.latest_version
    current_files = list(latest.spec.get("files") or [])
    context = {"task": task, "version": latest, "creating": False}
    if request.method != "POST":
        form = TaskForm(initial=_initial_from_version(latest), editing=task, current_files=current_files)
        return render(request, "authoring/task_form.html", _task_form_context(request, form, **context))

    form = TaskForm(request.POST, request.FILES, editing=task, current_files=current_files)
    if _upload_refused(request, form, what="An attached file"):
        return render(
            request,
            "authoring/task_form.html",
            _task_form_context(request, form, **context, **_keep_uploads(request, form)),
            status=400,
        )
    if not form.is_valid():
        return render(
            request,
            "authoring/task_form.html",
            _task_form_context(request, form, **context, **_keep_uploads(request, form)),
            status=400,
        )
    base_version = form.cleaned_data.get("base_version")
    content = form.content(current_files=current_files)
    env_number = form.cleaned_data.get("environment_version")
    if env_number:
        content["environment_version"] = selectors.environment_version_of(
            environment=task.environment, number=env_number
        )
        if content["environment_version"] is None:
            form.add_error("environment_version", "No such environment version.")
            return render(
                request,
                "authoring/task_form.html",
                _task_form_context(request, form, **context, **_keep_uploads(request, form)),
                status=400,
            )
    try:
        content["files"] = services.files_with_uploads(
            files=[*content["files"], *_kept_uploads(request)],
            uploads=form.cleaned_data["files"],
            roles=form.cleaned_data.get("upload_roles"),
        )
        version, created = services.task_version_create(
            task=task,
            author=request.user,
            content=content,
            base_version=base_version,
            message=form.cleaned_data.get("message") or "",
        )
    except ConflictError:
        return _conflict(request, task=task, form=form, content=content, base_version=base_version)
    except DomainError as exc:
        form_add_domain_error(form, exc, field_for=form.field_for)
        return render(
            request,
            "authoring/task_form.html",
            _task_form_context(request, form, **context, **_keep_uploads(request, form)),
            status=400,
        )
    if created:
        messages.success(request, f"Saved {task.slug} v{version.number}.")
    else:
        messages.info(request, f"Nothing changed; {task.slug} stays at v{version.number}.")
    return redirect("authoring:task_detail", slug=task.slug)


def _conflict(request, *, task, form, content, base_version):
    """Both versions side by side; what the user typed stays in a form based on the latest."""
    task.refresh_from_db()
    latest = task.latest_version
    mine_spec = {**latest.spec, **{k: v for k, v in content.items() if k != "environment_version"}}
    data = request.POST.copy()
    data["base_version"] = str(latest.number)
    retry_form = TaskForm(data, editing=task, current_files=list(latest.spec.get("files") or []))
    retry_form.is_valid()
    base = task.versions.filter(number=base_version).first() if base_version else None
    # The task editor itself, pre-filled with the kept edit (files attached to this try kept too, with their roles),
    # so the merge is made with the rubric editor and file roles, not in raw JSON.
    return render(
        request,
        "authoring/task_conflict.html",
        _task_form_context(
            request,
            retry_form,
            task=task,
            version=latest,
            creating=False,
            latest=latest,
            base=base,
            theirs_diff=task_version_diff(base.spec if base else {}, latest.spec),
            mine_vs_latest=task_version_diff(latest.spec, mine_spec),
            **_keep_uploads(request, form),
        ),
        status=409,
    )


@require_safe
def task_versions(request, slug):
    task = selectors.task_get_for_user(slug=slug, user=request.user)
    versions = selectors.task_version_list(task=task, user=request.user)
    return render(request, "authoring/task_versions.html", {"task": task, "versions": versions})


@require_safe
def task_version_detail(request, slug, number):
    version = selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
    if request.GET.get("format") == "json":
        response = HttpResponse(json.dumps(version.spec, indent=2, ensure_ascii=False), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{slug}-v{number}.json"'
        return response
    return render(
        request,
        "authoring/task_version.html",
        {
            "task": version.task,
            "version": version,
            "prompt_html": prompt_html(version),
            "spec_json": json.dumps(version.spec, indent=2, ensure_ascii=False),
        },
    )


TEXT_SNIFF_BYTES = 8192


def _looks_like_text(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)  # a multibyte character cut at the end is fine
    except UnicodeDecodeError:
        return False
    return True


@require_GET
def task_version_file(request, slug, number, path):
    """An attached file of a version: text is shown in the browser as plain text, anything else is
    downloaded. Never rendered as HTML (text/plain, nosniff, a sandboxing CSP), whatever its name."""
    version = selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
    blob = selectors.task_version_file_blob(version=version, path=path)
    if blob is None:
        raise Http404(f"v{number} has no attached file {path!r}")
    handle = blob.file.open("rb")
    text = _looks_like_text(handle.read(TEXT_SNIFF_BYTES))
    handle.seek(0)
    response = FileResponse(
        handle,
        as_attachment=not text,
        filename=path.rsplit("/", 1)[-1],
        content_type="text/plain; charset=utf-8" if text else "application/octet-stream",
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_safe
def task_diff(request, slug):
    task = selectors.task_get_for_user(slug=slug, user=request.user)
    numbers = selectors.task_version_numbers(task=task, user=request.user)
    try:
        b = int(request.GET.get("b") or (numbers[-1] if numbers else 0))
        a = int(request.GET.get("a") or (numbers[-2] if len(numbers) > 1 else b))
    except ValueError:
        bad = [
            {"pointer": f"?{key}", "message": "must be a version number"}
            for key in ("a", "b")
            if not (request.GET.get(key) or "1").isdigit()
        ]
        raise DomainError("Compare two versions by number, e.g. ?a=1&b=2.", details=bad)
    version_a = selectors.task_version_get_for_user(slug=slug, number=a, user=request.user)
    version_b = selectors.task_version_get_for_user(slug=slug, number=b, user=request.user)
    return render(
        request,
        "authoring/task_diff.html",
        {
            "task": task,
            "a": version_a,
            "b": version_b,
            "numbers": numbers,
            "diff": task_version_diff(version_a.spec, version_b.spec),
            "panels": panels("task_diff", request=request, task=task, a=version_a, b=version_b),
        },
    )


@require_POST
def markdown_preview(request):
    return HttpResponse(markdown_or_text(request.POST.get("prompt", "")))


# --------------------------------------------------------------------------------------------- environments


@require_safe
def environment_list(request):
    return render(
        request,
        "authoring/environment_list.html",
        {
            "environments": selectors.environment_list(user=request.user),
            "can_author": permissions.can_author(request.user),
        },
    )


@require_http_methods(["GET", "POST"])
def environment_create(request):
    if not permissions.can_author(request.user):
        return _forbidden(request, NotAllowed("Only authors and admins can create environments."))
    form = EnvironmentForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        if not _upload_refused(request, form, what="A data file") and form.is_valid():
            try:
                files = services.files_with_uploads(files=[], uploads=form.cleaned_data["files"])
                environment = services.environment_create(
                    slug=form.cleaned_data["slug"],
                    name=form.cleaned_data["name"],
                    author=request.user,
                    description=form.cleaned_data.get("description") or "",
                    spec=form.spec(current_files=files),
                )
            except DomainError as exc:
                form_add_domain_error(form, exc, field_for=form.field_for)
            except Exception as exc:  # slug uniqueness from full_clean
                if hasattr(exc, "message_dict"):
                    for field, errors in exc.message_dict.items():
                        form.add_error(field if field in form.fields else None, errors)
                else:
                    raise
            else:
                messages.success(request, f"Created environment {environment.slug}.")
                return redirect("authoring:environment_detail", slug=environment.slug)
        return render(request, "authoring/environment_form.html", {"form": form, "creating": True}, status=400)
    return render(request, "authoring/environment_form.html", {"form": form, "creating": True})


@require_safe
def environment_detail(request, slug):
    environment = selectors.environment_get_for_user(slug=slug, user=request.user)
    return environment_page(request, environment)


def environment_page(request, environment, *, status: int = 200, **panel_data):
    """The environment's page. An app to the right whose panel's form on it was refused (grading's judge) answers
    with this page again, its bound form passed to its panel's selector in `panel_data`."""
    return render(
        request,
        "authoring/environment_detail.html",
        {
            "environment": environment,
            "version": environment.latest_version,
            "spec_json": json.dumps(environment.latest_version.spec, indent=2) if environment.latest_version else "",
            "versions": selectors.environment_version_list(environment=environment),
            "audit_events": selectors.audit_events_for(environment),
            "tasks": selectors.environment_tasks(environment=environment, user=request.user),
            "can_edit": permissions.can_edit_environment(request.user, environment),
            "can_author": permissions.can_author(request.user),
            "panels": panels("environment_detail", request=request, environment=environment, **panel_data),
        },
        status=status,
    )


@require_http_methods(["GET", "POST"])
def environment_edit(request, slug):
    try:
        environment = selectors.environment_get_for_user(slug=slug, user=request.user, action="edit")
    except NotAllowed as exc:
        return _forbidden(request, exc)
    current_files = list(environment.latest_version.spec.get("files") or [])
    if request.method != "POST":
        form = EnvironmentForm(initial=EnvironmentForm.initial_from(environment), editing=environment)
        return render(request, "authoring/environment_form.html", {"form": form, "environment": environment})
    form = EnvironmentForm(request.POST, request.FILES, editing=environment)
    if not _upload_refused(request, form, what="A data file") and form.is_valid():
        try:
            files = services.files_with_uploads(files=current_files, uploads=form.cleaned_data["files"])
            version, created = services.environment_version_create(
                environment=environment,
                author=request.user,
                spec=form.spec(current_files=files),
                base_version=form.cleaned_data.get("base_version"),
                message=form.cleaned_data.get("message") or "",
            )
        except ConflictError as exc:
            form.add_error(
                None, exc.message + " Your changes are still below; reload the latest in another tab to compare."
            )
            form.data = form.data.copy()
            form.data["base_version"] = str(exc.extra.get("latest_version"))
            return render(
                request, "authoring/environment_form.html", {"form": form, "environment": environment}, status=409
            )
        except DomainError as exc:
            form_add_domain_error(form, exc, field_for=form.field_for)
        else:
            messages.success(request, f"Saved {environment.slug} v{version.number}." if created else "Nothing changed.")
            return redirect("authoring:environment_detail", slug=slug)
    return render(request, "authoring/environment_form.html", {"form": form, "environment": environment}, status=400)


# --------------------------------------------------------------------------------------------- account


@require_http_methods(["GET", "POST"])
def account(request):
    token = account_selectors.api_token_get(user=request.user)
    new_key = None
    if request.method == "POST":
        replaced = token is not None
        token = account_services.api_token_rotate(user=request.user)
        new_key = token.key
        messages.success(
            request,
            "A new API token was created; the old one no longer works." if replaced else "Your API token was created.",
        )
    return render(
        request,
        "authoring/account.html",
        {
            "token": token,
            "new_key": new_key,
            "roles": sorted(permissions.roles_of(request.user)),
        },
    )
