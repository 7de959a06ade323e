"""HTML views of the grading app: the dry-run panel's endpoints, stored grades, judge labels.

The dry-run endpoints answer HTML fragments (the panel swaps them in); every error a
user can cause comes back as a fragment that says what is wrong, never a 500.
"""

from __future__ import annotations

import json

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import permissions
from authoring.selectors import task_get_for_user, task_version_get_for_user
from authoring.services import upload_too_large_error
from grading import selectors, services
from gymwright.errors import DomainError, NotAllowed


def _error_fragment(request: HttpRequest, error: DomainError) -> HttpResponse:
    return render(request, "grading/_dry_run_result.html", {"error": error}, status=error.http_status)


def _task_context(request: HttpRequest):
    """The task (and version) the panel sits on, if any, checked against the user."""
    slug = request.POST.get("task", "").strip()
    if not slug:
        return None, None
    number = request.POST.get("version", "").strip()
    if number.isdigit():
        version = task_version_get_for_user(slug=slug, number=int(number), user=request.user)
        return version.task, version
    return task_get_for_user(slug=slug, user=request.user), None


@require_POST
def dry_run_create(request: HttpRequest) -> HttpResponse:
    """Grade the candidate answer against the rubric posted from the editor (unsaved)."""
    post, uploads = request.POST, request.FILES  # parsing the body runs the capped upload handler
    try:
        if getattr(request, "upload_too_large", False):
            raise upload_too_large_error("A file")
        if not permissions.can_run_previews(request.user):  # a lab member grades with the engine's own CLI
            raise NotAllowed("You need a role (author, reviewer or admin) to grade answers.")
        task, task_version = _task_context(request)
        answer = post.get("answer", "")
        if uploads.get("answer_file") is not None:
            if answer.strip():
                raise DomainError("Paste an answer or upload an answer file, not both.", code="invalid_answer")
            answer = services.answer_from_file(data=uploads["answer_file"].read())
        # The panel's script sends one "paths" entry per file (folder + name); without it,
        # the folder field and the file's name make the path.
        paths = post.getlist("paths")
        folder = post.get("folder", "").strip().strip("/")
        files = [
            services.WorkspaceFile(
                path=paths[index]
                if index < len(paths) and paths[index]
                else (f"{folder}/{upload.name}" if folder else upload.name),
                upload=upload,
            )
            for index, upload in enumerate(uploads.getlist("files"))
        ]
        outcome = services.dry_run_start(
            rubric_text=post.get("rubric", ""),
            answer=answer,
            files=files,
            user=request.user,
            task=task,
            task_version=task_version,
        )
    except DomainError as error:
        return _error_fragment(request, error)
    except Http404:
        return _error_fragment(
            request, DomainError("That task or version does not exist.", code="not_found", http_status=404)
        )
    if outcome.dry_run is not None:
        return render(
            request,
            "grading/_dry_run_result.html",
            {"dry_run": outcome.dry_run, "document": outcome.document, "pending_judge": True},
        )
    return render(request, "grading/_dry_run_result.html", {"document": outcome.document})


@require_GET
def dry_run_detail(request: HttpRequest, dry_run_id: int) -> HttpResponse:
    """The panel polls this until the worker is done."""
    try:
        dry_run = selectors.dry_run_get_for_user(dry_run_id=dry_run_id, user=request.user)
    except Http404:
        return _error_fragment(request, DomainError("That dry run is gone.", code="not_found", http_status=404))
    dry_run = services.dry_run_fail_if_stale(dry_run=dry_run)
    context = {"dry_run": dry_run}
    if dry_run.status == dry_run.Status.DONE and dry_run.grade_id:
        context["grade"] = selectors.grade_get_for_user(grade_id=dry_run.grade_id, user=request.user)
    else:
        context.update(document=dry_run.preview, pending_judge=not dry_run.is_finished)
    return render(request, "grading/_dry_run_result.html", context)


@require_GET
def grade_detail(request: HttpRequest, grade_id: int) -> HttpResponse:
    grade = selectors.grade_get_for_user(grade_id=grade_id, user=request.user)
    return render(
        request,
        "grading/grade_detail.html",
        {"grade": grade, "document_json": json.dumps(grade.document, indent=2, ensure_ascii=False)},
    )


@require_POST
def judge_label_create(request: HttpRequest, check_result_id: int) -> HttpResponse:
    """A reviewer agrees with or overrules the judge on one check; answers the row's label cell."""
    try:
        check_result = selectors.check_result_get_for_user(
            check_result_id=check_result_id, user=request.user, action="label"
        )
        score_text = request.POST.get("score", "").strip()
        try:
            score = float(score_text) if score_text else None
        except ValueError:
            raise DomainError(
                f"The score must be a number between 0 and 1, not {score_text[:40]!r}.",
                code="invalid",
                details=[{"pointer": "/score", "message": "a number between 0 and 1"}],
            )
        services.judge_label_record(
            check_result=check_result,
            reviewer=request.user,
            verdict=request.POST.get("verdict", ""),
            score=score,
            comment=request.POST.get("comment", ""),
        )
    except DomainError as error:
        return render(request, "grading/_judge_labels.html", {"error": error}, status=error.http_status)
    check_result = selectors.check_result_get_for_user(check_result_id=check_result_id, user=request.user)
    return render(
        request,
        "grading/_judge_labels.html",
        {"check_result": check_result, "labels": list(check_result.labels.all()), "can_label": True, "saved": True},
    )


def _type_words(prop: dict, defs: dict) -> str:
    if "$ref" in prop:
        prop = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    if "anyOf" in prop:
        return " or ".join(_type_words(p, defs) for p in prop["anyOf"] if p.get("type") != "null")
    return {
        "string": "text",
        "integer": "whole number",
        "number": "number",
        "boolean": "true / false",
        "array": "list",
        "object": "object",
    }.get(prop.get("type", ""), prop.get("type", "any JSON value"))


def kinds_reference_rows() -> list[dict]:
    """Each check kind: its description and fields from the engine's rubric schema, and its example."""
    from grading.engine.kind_examples import EXAMPLES
    from grading.engine.schema import json_schema

    schema = json_schema("rubric")
    defs = schema.get("$defs", {})
    rows = []
    for definition in defs.values():
        kind = ((definition.get("properties") or {}).get("kind") or {}).get("const")
        if not isinstance(kind, str):
            continue
        required = set(definition.get("required") or [])
        fields = [
            {
                "name": name,
                "type": _type_words(prop, defs),
                "required": name in required,
                "default": json.dumps(prop["default"]) if "default" in prop else "",
                "description": prop.get("description", ""),
            }
            for name, prop in (definition.get("properties") or {}).items()
            if name != "kind"
        ]
        example = EXAMPLES.get(kind)
        rows.append(
            {
                "kind": kind,
                "description": definition.get("description", ""),
                "fields": fields,
                "example": example,
                "example_check": json.dumps(example.check, indent=2) if example else "",
            }
        )
    return rows


@require_GET
def kinds_reference(request: HttpRequest) -> HttpResponse:
    """The check kinds: generated from the engine's schema, with the same worked examples as the editor."""
    return render(request, "grading/kinds.html", {"kinds": kinds_reference_rows()})


def example_answers_context(*, task_version, user) -> dict:
    """What the example-answers section shows (the task page embeds it; the fragment polls it)."""
    run = services.example_run_fail_if_stale(run=selectors.example_run_of(task_version=task_version))
    rows = selectors.example_rows(task_version=task_version, run=run, user=user)
    return {
        "task": task_version.task,
        "version": task_version,
        "run": run,
        "rows": rows,
        "pending": any(row.verdict.status == "pending" for row in rows) and run is not None and not run.is_finished,
        "as_expected": sum(1 for row in rows if row.verdict.ok),
        "can_run": permissions.can_edit_task(user, task_version.task) or permissions.can_review(user),
    }


@require_GET
def example_answers(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """The example-answers section of one version, as a fragment (polled while a worker grades)."""
    task_version = task_version_get_for_user(slug=slug, number=number, user=request.user)
    return render(
        request, "grading/_example_answers.html", example_answers_context(task_version=task_version, user=request.user)
    )


@require_POST
def example_answers_run(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """Grade the version's example answers again (after configuring a judge, say)."""
    from django.contrib import messages

    task_version = task_version_get_for_user(slug=slug, number=number, user=request.user)
    try:
        services.example_answers_run(task_version=task_version, user=request.user)
    except NotAllowed:
        raise  # 403 (gymwright.middleware.DomainErrorMiddleware): a refusal is not a flash over the task page
    except DomainError as error:
        messages.error(request, error.message)
    return redirect(reverse("authoring:task_detail", args=[slug]) + "#examples")


@require_http_methods(["GET", "POST"])
def environment_judge(request: HttpRequest, slug: str) -> HttpResponse:
    """The environment's owner (or an admin) chooses the judge endpoint its tasks use (the environment page's Judge
    panel posts here); a refused choice answers the environment's page again with the form's error. A GET (that
    page reloaded, or gone back to) opens the panel on the environment's page."""
    from django.contrib import messages

    from authoring.selectors import environment_get_for_user
    from authoring.views import environment_page
    from grading.forms import EnvironmentJudgeForm
    from gymwright.forms import form_add_domain_error

    environment = environment_get_for_user(slug=slug, user=request.user)
    if request.method == "GET":
        return redirect(reverse("authoring:environment_detail", args=[environment.slug]) + "#judge")
    if not permissions.can_edit_environment(request.user, environment):
        owner = environment.owner.get_username() if environment.owner_id else "nobody"
        message = f"Only {owner}, the owner of {environment.slug}, or an admin can choose its judge."
        return render(request, "authoring/forbidden.html", {"message": message}, status=403)
    form = EnvironmentJudgeForm(request.POST)
    if form.is_valid():
        chosen = form.cleaned_data["judge_endpoint"]
        try:
            services.environment_judge_set(
                environment=environment, user=request.user, endpoint_id=chosen.pk if chosen else None
            )
        except DomainError as exc:
            form_add_domain_error(form, exc, field_for=lambda pointer: "judge_endpoint")
        else:
            messages.success(
                request,
                f"{environment.slug}'s tasks use {f'the judge {chosen.name}' if chosen else 'the default judge'}.",
            )
            return redirect(reverse("authoring:environment_detail", args=[slug]) + "#judge")
    return environment_page(request, environment, status=400, judge_form=form)
