"""Review pages: submit a task version, the review queue, the review page, comment threads, the
author's inbox, the judge labelling queue and agreement, the environment dashboard."""

from __future__ import annotations

from functools import partial, wraps

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from accounts import permissions
from authoring import selectors as authoring_selectors
from authoring.diff import DiffBudget, task_version_diff
from authoring.prompt_html import prompt_html
from grading.engine import flat_checks
from grading.engine.describe import check_in_words
from gymwright.errors import DomainError, NotAllowed
from gymwright.html import is_htmx
from gymwright.pagination import KeysFirstPaginator
from review import agreement as review_agreement
from review import evidence, selectors, services
from review import gate_evidence as review_gates
from review.drafts import drafts_keep, drafts_take
from review.forms import ReviewForm, SubmitForm
from review.label_cards import label_cards
from review.models import Comment

PAGE_SIZE = 50
CHECK_COMMENT_PREFIX = "check_comment__"


def _forbidden(request, exc: NotAllowed):
    return render(request, "authoring/forbidden.html", {"message": exc.message}, status=403)


def _review_workspace(view):
    """The review workspace shows drafts: a member who reads approved work only (lab) gets 403 with where
    to look instead (review.selectors.review_workspace_check), before anything is looked up."""

    @wraps(view)
    def checked(request, *args, **kwargs):
        try:
            selectors.review_workspace_check(user=request.user)
        except NotAllowed as exc:
            return _forbidden(request, exc)
        return view(request, *args, **kwargs)

    return checked


def _next(request, default: str) -> str:
    target = request.POST.get("next") or ""
    return target if target.startswith("/") and not target.startswith("//") else default


# --------------------------------------------------------------------------------------------- submit, gates


@require_POST
def task_submit(request, slug):
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    form = SubmitForm(request.POST)
    form.is_valid()
    try:
        services.task_submit(
            task=task, user=request.user, override_reason=form.cleaned_data.get("override_reason") or ""
        )
    except NotAllowed as exc:
        return _forbidden(request, exc)  # a refusal, not a flash over the task page
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Submitted {task.slug} v{task.latest_version.number} for review.")
    return redirect("authoring:task_detail", slug=slug)


@require_POST
def gates_run(request, slug):
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    try:
        runs = review_gates.gates_run(task_version=task.latest_version, user=request.user)
    except NotAllowed as exc:
        return _forbidden(request, exc)  # as a refused submit
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        if runs:
            messages.success(request, "Started " + ", ".join(f"{run.policy_label} × {run.n}" for run in runs) + ".")
        else:
            messages.info(request, "Every preview the gates need has already run on this version.")
    return redirect(_next(request, reverse("authoring:task_detail", args=[slug]) + "#gates"))


# --------------------------------------------------------------------------------------------- review


def _check_comments(post) -> dict:
    return {
        key[len(CHECK_COMMENT_PREFIX) :]: value
        for key, value in post.items()
        if key.startswith(CHECK_COMMENT_PREFIX) and value.strip()
    }


@require_POST
def task_review(request, slug):
    authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    back = _next(request, reverse("authoring:task_detail", args=[slug]))
    form = ReviewForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
        messages.error(request, f"Review not recorded: {problems}")
        drafts_keep(request, page_url=back, check_prefix=CHECK_COMMENT_PREFIX)  # back in the boxes
        return redirect(back)
    try:
        version = authoring_selectors.task_version_get_for_user(
            slug=slug, number=form.cleaned_data["version"], user=request.user
        )
        review = services.review_create(
            task_version=version,
            reviewer=request.user,
            decision=form.cleaned_data["decision"],
            comment=form.cleaned_data.get("comment") or "",
            check_comments=_check_comments(request.POST),
        )
    except NotAllowed as exc:
        return _forbidden(request, exc)  # one's own task, or not a reviewer; a version not theirs to read: 404
    except DomainError as exc:
        messages.error(request, f"Review not recorded: {exc.message}")
        drafts_keep(request, page_url=back, check_prefix=CHECK_COMMENT_PREFIX)
        return redirect(back)
    messages.success(request, f"Review recorded: {review.get_decision_display().lower()} on v{version.number}.")
    return redirect(
        "review:queue" if permissions.can_review(request.user) else "authoring:task_detail",
        **({} if permissions.can_review(request.user) else {"slug": slug}),
    )


def _check_cards(version, threads_by_check, agreement_by_check, flags) -> list[dict]:
    cards = []
    for row in flat_checks(version.rubric.get("checks")):
        check_id = str(row.check.get("id", ""))
        cards.append(
            {
                "id": check_id,
                "depth": row.depth,
                "check": row.check,
                "words": check_in_words(row.check),
                "threads": threads_by_check.get(check_id, []),
                "agreement": agreement_by_check.get(check_id),
                "flag": flags.get(check_id),
            }
        )
    return cards


@require_safe
@_review_workspace
def review_page(request, slug):
    """Everything needed to decide, on one screen."""
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    version = task.latest_version
    seen = (
        services.review_visit_record(task_version=version, reviewer=request.user)
        if permissions.can_review(request.user)
        else None
    )
    base = selectors.diff_base(task=task, version=version, seen=seen)
    threads = selectors.comment_threads(task=task, check_ids=services.check_ids(version.rubric))
    grouped = selectors.threads_by_check(threads)
    agreement = review_agreement.agreement_json(task=task)
    agreement_by_check = {item["check_id"]: item for item in agreement["checks"]}
    flags = evidence.discrimination(task_version=version)
    gate_results = review_gates.gates_evaluate(task_version=version)
    can_decide = (
        permissions.can_review(request.user)
        and task.owner_id != request.user.pk
        and version.author_id != request.user.pk
    )
    drafts = drafts_take(request, page_url=request.path)  # what a refused post held, back in its boxes
    cards = _check_cards(version, grouped, agreement_by_check, flags["flags"])
    for card in cards:
        card["draft"] = drafts["checks"].get(card["id"], "")
    diff_budget = DiffBudget()  # the version diff and the files' diffs share one page's time
    return render(
        request,
        "review/review_page.html",
        {
            "task": task,
            "version": version,
            "prompt_html": prompt_html(version),
            "cards": cards,
            "task_draft": drafts["task"],
            "discrimination_run": flags["run"],
            "task_threads": grouped.get("", []),
            "outdated_threads": [thread for thread in threads if not thread.current],
            "base": base,
            "diff": task_version_diff(base.spec, version.spec, budget=diff_budget) if base else None,
            "previews": evidence.version_previews(task_version=version),
            "older_previews_version": evidence.older_previews_only(task_version=version),
            "gates": gate_results,
            "gates_pass": all(result.ok for result in gate_results),
            "can_run_gates": permissions.can_run_previews(request.user),
            "submission": selectors.latest_submission(task_version=version),
            "agreement": agreement,
            "can_review": permissions.can_review(request.user),
            "reviews": selectors.reviews_of(task=task, user=request.user),
            "in_review": task.status == task.Status.IN_REVIEW,
            "can_decide": can_decide and task.status == task.Status.IN_REVIEW,
            "can_comment": permissions.can_review(request.user) or permissions.can_edit_task(request.user, task),
            "review_form": ReviewForm(initial={"version": version.number}),
            "check_comment_prefix": CHECK_COMMENT_PREFIX,
            "undo_seconds": settings.REVIEW_UNDO_S,
            "files_shown": authoring_selectors.task_version_files_shown(version=version, base=base, budget=diff_budget),
            "checks_module": (version.environment_version.spec or {}).get("checks_module") or "",
        },
    )


# --------------------------------------------------------------------------------------------- queue, inbox


@require_safe
def review_queue(request):
    if not permissions.can_review(request.user):
        return _forbidden(request, NotAllowed("Only reviewers and admins have a review queue."))
    filters = {key: request.GET.get(key, "").strip()[:100] for key in ("environment", "tag", "author")}
    age = request.GET.get("older_than_days", "").strip()
    older_than_days = int(age) if age.isdigit() and int(age) <= 36500 else None
    source = selectors.review_queue(user=request.user, older_than_days=older_than_days, **filters)
    rows = partial(authoring_selectors.task_rows, user=request.user)
    page = KeysFirstPaginator(source, PAGE_SIZE, rows=rows).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    now = timezone.now()
    return render(
        request,
        "review/queue.html",
        {
            "page": page,
            # how long each task has waited, in words: worked out here, so that the rows' fragment is kept by its text
            "rows": [
                {**row, "waiting": f"{timesince(row['submitted_at'], now)} ago" if row["submitted_at"] else "–"}
                for row in page
            ],
            "filters": filters,
            "older_than_days": older_than_days or "",
            "query": query.urlencode(),
            **authoring_selectors.task_filter_choices(user=request.user),
        },
    )


@require_safe
def inbox(request):
    page = Paginator(selectors.inbox_items(user=request.user), PAGE_SIZE).get_page(request.GET.get("page"))
    unread_ids = {item.pk for item in page if item.read_at is None}
    response = render(request, "review/inbox.html", {"page": page, "unread_ids": unread_ids})
    services.inbox_mark_read(user=request.user)
    return response


# --------------------------------------------------------------------------------------------- comments


def _thread_in_place(request, task, comment_id: int, *, next_url: str, error: str = "", body: str = "") -> HttpResponse:
    """A thread's reply or resolve sent by htmx (the editor, the review page) answers with the thread
    alone, swapped in where it was: a reload would drop what the author or reviewer has not saved yet.
    A refusal is said in the thread (`error`), keeping what was typed (`body`), and answers 200 as a form
    shown again with its errors does (a 4xx is a console error in the browser, for a typing mistake)."""
    thread = selectors.comment_thread(task=task, comment_id=comment_id)
    if thread is None:
        return HttpResponse('<p class="error thread-error">That thread no longer exists.</p>', status=404)
    return render(
        request,
        "review/_thread.html",
        {
            "thread": thread,
            "task": task,
            "next_url": next_url,
            "thread_error": error,
            "reply_body": body,
            "can_comment": permissions.can_review(request.user) or permissions.can_edit_task(request.user, task),
        },
    )


@require_POST
@_review_workspace
def comment_create(request, slug):
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    back = _next(request, reverse("review:review_page", args=[slug]))
    parent = None
    if request.POST.get("parent"):
        parent = Comment.objects.filter(
            pk=request.POST["parent"] if request.POST["parent"].isdigit() else 0, task=task
        ).first()
        if parent is None:
            if is_htmx(request):
                return _thread_in_place(request, task, 0, next_url=back)
            messages.error(request, "That thread no longer exists.")
            return redirect(back)
    in_place = is_htmx(request) and parent is not None
    try:
        services.comment_create(
            task=task,
            user=request.user,
            body=request.POST.get("body", ""),
            check_id=request.POST.get("check_id", ""),
            parent=parent,
        )
    except DomainError as exc:
        if in_place:
            return _thread_in_place(
                request,
                task,
                parent.pk,
                next_url=back,
                error=f"Reply not saved: {exc.message}",
                body=request.POST.get("body", ""),
            )
        if isinstance(exc, NotAllowed):
            return _forbidden(request, exc)  # as a refused submit (in place, the thread says it)
        messages.error(request, f"Comment not saved: {exc.message}")
        drafts_keep(request, page_url=back, check_prefix=CHECK_COMMENT_PREFIX)
    if in_place:
        return _thread_in_place(request, task, parent.pk, next_url=back)
    return redirect(back)


@require_POST
@_review_workspace
def comment_resolve(request, slug, comment_id):
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    back = _next(request, reverse("review:review_page", args=[slug]))
    comment = Comment.objects.filter(pk=comment_id, task=task).first()
    if comment is None:
        if is_htmx(request):
            return _thread_in_place(request, task, comment_id, next_url=back)
        raise Http404(f"{slug} has no comment {comment_id}")
    try:
        services.comment_resolve(comment=comment, user=request.user, resolved=request.POST.get("resolved") != "0")
    except DomainError as exc:
        if is_htmx(request):
            return _thread_in_place(request, task, comment.pk, next_url=back, error=exc.message)
        if isinstance(exc, NotAllowed):
            return _forbidden(request, exc)  # as a refused submit (in place, the thread says it)
        messages.error(request, exc.message)
    if is_htmx(request):
        return _thread_in_place(request, task, comment.pk, next_url=back)
    return redirect(back)


# --------------------------------------------------------------------------------------------- judge review


def _scope(request):
    """(task, environment) from ?task= / ?environment=, each None when absent."""
    task = environment = None
    if request.GET.get("task"):
        task = authoring_selectors.task_get_for_user(slug=request.GET["task"][:64], user=request.user)
    if request.GET.get("environment"):
        environment = authoring_selectors.environment_get_for_user(
            slug=request.GET["environment"][:64], user=request.user
        )
    return task, environment


@require_safe
def label_queue(request):
    """Judged checks no human has labelled yet: y / n / s(kip), j / k; labels save without a reload."""
    if not permissions.can_review(request.user):
        return _forbidden(request, NotAllowed("Only reviewers and admins label the judge."))
    task, environment = _scope(request)
    items = selectors.unlabelled_judgements(task=task, environment=environment, limit=PAGE_SIZE)
    return render(
        request, "review/label_queue.html", {"cards": label_cards(items), "task": task, "environment": environment}
    )


@require_safe
@_review_workspace
def agreement_page(request, slug):
    environment = authoring_selectors.environment_get_for_user(slug=slug, user=request.user)
    return render(
        request,
        "review/agreement.html",
        {
            "environment": environment,
            "agreement": review_agreement.agreement_json(environment=environment),
            "can_review": permissions.can_review(request.user),
        },
    )


@require_safe
@_review_workspace
def environment_dashboard(request, slug):
    from review import blind
    from review.calibration import environment_calibration_json

    environment = authoring_selectors.environment_get_for_user(slug=slug, user=request.user)
    agreement = review_agreement.agreement_json(environment=environment)
    return render(
        request,
        "review/dashboard.html",
        {
            "environment": environment,
            **selectors.environment_dashboard(environment=environment),
            "agreement": agreement["overall"],
            "calibration": environment_calibration_json(environment=environment, agreement=agreement),
            "blind": blind.environment_figures(environment=environment, viewer=request.user),
            "can_review": permissions.can_review(request.user),
        },
    )


# ---------------------------------------------------------------- blind human reward prediction (review.blind)


@require_safe
@_review_workspace
def blind_figures(request, slug):
    """How the task's reward ranks rollouts against blind human scores, its hacks, and where to score next."""
    from review import blind

    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    try:
        blind.blind_check(task=task, user=request.user)
        upcoming, refusal = blind.next_for(task=task, user=request.user), ""
    except NotAllowed as exc:
        upcoming, refusal = None, exc.message
    return render(
        request,
        "review/blind_figures.html",
        {
            "task": task,
            "figures": blind.task_figures(task=task, viewer=request.user),
            "upcoming": upcoming,
            "refusal": refusal,
            "can_edit": permissions.can_edit_task(request.user, task),
        },
    )


@require_http_methods(["GET", "HEAD", "POST"])
@_review_workspace
def blind_score(request, slug, rollout_id):
    """One rollout scored blind: its prompt, trajectory, answer and files without any of its grade until this
    reviewer has scored it (POST); after that, the grade beside their score."""
    from review import blind
    from review.forms import BlindScoreForm
    from sandbox.selectors import trajectory_steps

    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    try:
        blind.blind_check(task=task, user=request.user)
    except NotAllowed as exc:
        return _forbidden(request, exc)
    rollout = blind.rollout_for(task=task, rollout_id=rollout_id)
    mine = blind.scored_by(rollout=rollout, user=request.user)
    form = BlindScoreForm(request.POST or None)
    if request.method == "POST" and mine is None:
        if form.is_valid():
            try:
                blind.score_record(task=task, rollout=rollout, reviewer=request.user, **form.cleaned_data)
            except DomainError as exc:
                messages.error(request, exc.message)
            return redirect("review:blind_score", slug=slug, rollout_id=rollout_id)
    elif request.method == "POST":
        messages.info(request, "You already scored this rollout blind.")
        return redirect("review:blind_score", slug=slug, rollout_id=rollout_id)
    version = rollout.preview_run.task_version
    context = {
        "task": task,
        "rollout": rollout,
        "mine": mine,
        "form": form,
        "trajectory_steps": trajectory_steps(rollout.trajectory or []),
    }
    if mine is None:
        context["prompt_html"] = prompt_html(version)
    else:
        context["upcoming"] = blind.next_for(task=task, user=request.user)
    return render(request, "review/blind_score.html", context)


def _blind_hack_turn(request, slug, rollout_id, *, make, said):
    """A flagged hack made into something the rubric must fail (`make`: review.blind's hack_to_example or
    hack_to_probe, a new version); `said(version)` is the message; refusals are said on the figures page."""
    task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
    try:
        version = make(task=task, rollout_id=rollout_id, user=request.user)
    except NotAllowed as exc:
        return _forbidden(request, exc)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, said(version))
    return redirect("review:blind_figures", slug=slug)


@require_POST
def blind_hack_example(request, slug, rollout_id):
    """The one click that turns a flagged hack into an example answer expected to fail (a new version)."""
    from review import blind

    return _blind_hack_turn(
        request,
        slug,
        rollout_id,
        make=blind.hack_to_example,
        said=lambda version: (
            f"Saved v{version.number}: rollout {rollout_id}'s answer is the example answer "
            f"{blind.example_name(rollout_id)}, expected to fail."
        ),
    )


@require_POST
def blind_hack_probe(request, slug, rollout_id):
    """The one click that turns a flagged hack into a rubric probe scoring below the pass threshold (a new version)."""
    from review import blind

    return _blind_hack_turn(
        request,
        slug,
        rollout_id,
        make=blind.hack_to_probe,
        said=lambda version: (
            f"Saved v{version.number}: rollout {rollout_id}'s answer is a probe that must score at most "
            f"{version.spec['rubric']['probes'][-1]['max_reward']:g}. Run the gates to see the rubric fail it until "
            "you fix the rubric."
        ),
    )


@require_http_methods(["GET", "POST"])
def environment_calibration(request, slug):
    """The environment's owner (or an admin) changes its calibration settings (the environment page's Calibration
    panel posts here); a refused change answers the environment's page again with the form's errors. A GET (that
    page reloaded, or gone back to) opens the panel on the environment's page."""
    from authoring.views import environment_page
    from gymwright.forms import form_add_domain_error
    from review import environment_settings
    from review.forms import EnvironmentCalibrationForm

    environment = authoring_selectors.environment_get_for_user(slug=slug, user=request.user)
    if request.method == "GET":
        return redirect(reverse("authoring:environment_detail", args=[environment.slug]) + "#calibration")
    if not permissions.can_edit_environment(request.user, environment):
        owner = environment.owner.get_username() if environment.owner_id else "nobody"
        return _forbidden(
            request,
            NotAllowed(f"Only {owner}, the owner of {environment.slug}, or an admin can change its calibration."),
        )
    form = EnvironmentCalibrationForm(request.POST)
    if form.is_valid():
        try:
            environment_settings.environment_settings_set(
                environment=environment, user=request.user, values=form.cleaned_data
            )
        except DomainError as exc:
            environment.refresh_from_db()
            form_add_domain_error(form, exc)
        else:
            messages.success(request, f"{environment.slug}'s calibration settings are saved.")
            return redirect(reverse("authoring:environment_detail", args=[slug]) + "#calibration")
    return environment_page(request, environment, status=400, calibration_form=form)
