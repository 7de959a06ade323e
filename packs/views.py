"""Pack pages: the list, a pack with its versions, a version (contents, splits, difficulty chart,
diff, live build progress, verification), download, and the task import upload."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core import signing
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import permissions
from authoring.models import SLUG_RULE, Environment, slug_validator
from gymwright.errors import DomainError, NotAllowed
from gymwright.forms import RenderedOnceWhenUnbound, form_add_domain_error
from gymwright.html import slug_url_prefix
from packs import downloads, importer, selectors, services
from packs.models import PackVerification, PackVersion


class PackCreateForm(RenderedOnceWhenUnbound):
    slug = forms.CharField(max_length=64, validators=[slug_validator], help_text=f"{SLUG_RULE}.")
    name = forms.CharField(max_length=200, required=False)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    licence = forms.CharField(max_length=100, required=False, initial="proprietary")


class PackBuildForm(RenderedOnceWhenUnbound):
    environment = forms.ChoiceField(required=False)
    tags = forms.CharField(required=False, max_length=1400, help_text="comma-separated; a task needs every tag")
    tasks = forms.CharField(required=False, help_text="task ids, comma-separated (default: every approved task)")
    version = forms.CharField(required=False, max_length=24, help_text="default: proposed from the changes")
    test_ratio = forms.FloatField(min_value=0, max_value=1, initial=0.1)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["environment"].choices = [("", "any environment")] + [
            (slug, slug) for slug in Environment.objects.values_list("slug", flat=True)
        ]

    def selection(self) -> services.Selection:
        data = self.cleaned_data
        split = lambda text: tuple(part.strip() for part in (text or "").split(",") if part.strip())  # noqa: E731
        return services.Selection(
            environment=data.get("environment") or None,
            tags=split(data.get("tags")),
            tasks=split(data.get("tasks")),
            test_ratio=data["test_ratio"],
        )


def _last_selection(pack) -> dict:
    """The build form's start: the selection of the pack's latest version, so that the next build selects what the
    last one did unless the builder changes it (an empty form built every approved task)."""
    latest = pack.versions.order_by("-created_at", "-id").values_list("selection", flat=True).first() or {}
    return {
        "environment": latest.get("environment") or "",
        "tags": ", ".join(latest.get("tags") or []),
        "tasks": ", ".join(latest.get("tasks") or []),
        "test_ratio": latest.get("test_ratio", 0.1),
    }


class ImportForm(forms.Form):
    file = forms.FileField(
        help_text="tasks.jsonl, a .csv/.jsonl/.parquet table, a .jsonl of HealthBench or RaR rows, or a .tar.gz "
        "of a pack or of Harbor / Terminal-Bench tasks"
    )
    environment = forms.CharField(required=False, help_text="environment (slug) for table rows")
    dry_run = forms.BooleanField(required=False, initial=True, label="Dry run (show what would be created)")


PAGE_SIZE = 50


@require_http_methods(["GET", "POST"])
def pack_list(request: HttpRequest) -> HttpResponse:
    packs = selectors.pack_list_page_source(user=request.user)
    form = PackCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            pack = services.pack_create(user=request.user, **form.cleaned_data)
        except NotAllowed:
            raise  # 403 (gymwright.middleware.DomainErrorMiddleware): a refusal is not a form error
        except DomainError as exc:
            form_add_domain_error(form, exc)
        else:
            return redirect("packs:pack_detail", slug=pack.slug)
    page = Paginator(packs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "packs/pack_list.html",
        {
            "page": page,
            # the rows as plain values: their HTML is kept per content (kept_fragment), a template loop over a page of
            # 50 packs cost more than the rest of the page
            "rows": list(page),
            "form": form,
            "pack_url": slug_url_prefix("packs:pack_detail"),
            "status_labels": {value: str(label) for value, label in PackVersion.Status.choices},
            "can_build": permissions.can_build_packs(request.user),
            "can_import": permissions.can_author(request.user),
        },
        status=400 if request.method == "POST" else 200,
    )


@require_http_methods(["GET", "POST"])
def pack_detail(request: HttpRequest, slug: str) -> HttpResponse:
    pack = selectors.pack_get_for_user(slug=slug, user=request.user)
    form = PackBuildForm(request.POST or None, initial=_last_selection(pack))
    plan, status = None, 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            selection, version = form.selection(), form.cleaned_data.get("version") or None
            try:
                if request.POST.get("action") == "check":  # the plan, nothing written
                    plan, status = (
                        services.pack_version_plan(pack=pack, user=request.user, selection=selection, version=version),
                        200,
                    )
                else:  # a build that would publish the previous version's tasks again asks first
                    pack_version = services.pack_version_start(
                        pack=pack,
                        user=request.user,
                        selection=selection,
                        version=version,
                        allow_unchanged=bool(request.POST.get("confirm")),
                    )
                    return redirect("packs:pack_version", slug=pack.slug, version=pack_version.version)
            except services.UnchangedBuild as exc:
                plan, status = exc.plan, 200
            except NotAllowed:
                raise  # 403, as a refused create
            except DomainError as exc:
                form_add_domain_error(form, exc)
    return render(
        request,
        "packs/pack_detail.html",
        {
            "pack": pack,
            "versions": pack.versions.select_related("created_by"),
            "form": form,
            "plan": plan,
            "approved_tags": selectors.approved_tag_counts() if permissions.can_build_packs(request.user) else [],
            "can_build": permissions.can_build_packs(request.user),
        },
        status=status,
    )


def _version_context(request, pack_version: PackVersion) -> dict:
    return {
        "pack": pack_version.pack,
        "pack_version": pack_version,
        "can_build": permissions.can_build_packs(request.user),
    }


def pack_version_verification_state(
    *, pack_version: PackVersion
) -> tuple[PackVerification | None, PackVerification | None]:
    """(the last finished check of the version's stored archive, the check queued or running), read from the
    checks' rows, never by reading the archive: a page load costs the same for any size. One check runs at a
    time, so the newest two rows hold both. (A read for packs/selectors.py.)"""
    verification = checking = None
    for index, row in enumerate(
        pack_version.verifications.select_related("requested_by").order_by("-created_at", "-id")[:2]
    ):
        if row.status != PackVerification.Status.DONE:
            checking = row if index == 0 else checking
        elif verification is None:
            verification = row
    return verification, checking


def _verification_context(request, pack_version: PackVersion) -> dict:
    verification, checking = pack_version_verification_state(pack_version=pack_version)
    return {**_version_context(request, pack_version), "verification": verification, "checking": checking}


def _diff_rows(pack_version: PackVersion, previous: PackVersion | None) -> list[dict]:
    """The changes against the previous version, each with the task version(s) it names: an added task's version in
    this pack, a removed one's in the previous pack, a changed one's two (its version diff)."""
    changes = pack_version.changes or {}
    numbers = dict(
        pack_version.entries.filter(task_slug__in=changes.get("added") or []).values_list(
            "task_slug", "task_version__number"
        )
    )
    removed = (
        dict(
            previous.entries.filter(task_slug__in=changes.get("removed") or []).values_list(
                "task_slug", "task_version__number"
            )
        )
        if previous is not None
        else {}
    )
    return (
        [{"kind": "added", "slug": slug, "number": numbers.get(slug)} for slug in changes.get("added") or []]
        + [{"kind": "removed", "slug": slug, "number": removed.get(slug)} for slug in changes.get("removed") or []]
        + [
            {"kind": "changed", "slug": row["id"], "from": row["from"], "to": row["to"]}
            for row in changes.get("changed") or []
        ]
    )


@require_GET
def pack_version_detail(request: HttpRequest, slug: str, version: str) -> HttpResponse:
    pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
    context = _verification_context(request, pack_version)
    previous = selectors.pack_version_previous(pack_version=pack_version)
    context.update(
        {
            "entries": selectors.pack_version_entries(pack_version=pack_version),
            "histogram": selectors.pack_version_histogram(pack_version=pack_version),
            "split_counts": selectors.pack_version_split_counts(pack_version=pack_version),
            "previous": previous,
            "diff_rows": _diff_rows(pack_version, previous),
        }
    )
    return render(request, "packs/pack_version.html", context)


@require_GET
def pack_version_progress(request: HttpRequest, slug: str, version: str) -> HttpResponse:
    """The live build status; it polls itself until the build has finished."""
    pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
    response = render(request, "packs/_build_progress.html", _version_context(request, pack_version))
    if pack_version.is_finished and request.headers.get("HX-Request") == "true":
        response["HX-Refresh"] = "true"  # show the finished page (contents, chart, download)
    return response


@require_http_methods(["GET", "POST"])
def pack_version_verification(request: HttpRequest, slug: str, version: str) -> HttpResponse:
    """The archive's verification as stored (GET; it polls itself while a check runs); POST: "Verify again"."""
    pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
    error, status = None, 200
    if request.method == "POST":
        try:
            services.pack_verification_request(pack_version=pack_version, user=request.user)
        except NotAllowed:
            raise  # 403, not a flash over the page
        except DomainError as exc:
            error, status = exc.message, exc.http_status
        if request.headers.get("HX-Request") != "true":
            if error:
                messages.error(request, error)
            return redirect("packs:pack_version", slug=slug, version=version)
    return render(
        request,
        "packs/_verification.html",
        {**_verification_context(request, pack_version), "verify_error": error},
        status=status,
    )


@require_POST
def pack_version_cancel(request: HttpRequest, slug: str, version: str) -> HttpResponse:
    pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
    try:
        services.pack_version_cancel(pack_version=pack_version, user=request.user)
    except NotAllowed:
        raise  # 403, as a refused preview cancel
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("packs:pack_version", slug=slug, version=version)


@require_GET
def pack_version_download(request: HttpRequest, slug: str, version: str):
    pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
    return downloads.pack_version_response(
        request,
        pack_version,
        on_send=lambda: services.pack_version_download_record(
            pack_version=pack_version, user=request.user, via="browser"
        ),
    )


@require_http_methods(["GET", "POST"])
def task_import(request: HttpRequest) -> HttpResponse:
    """Upload and import; a dry run keeps the file for an hour, so that "Import for real" needs no second
    upload (a browser cannot keep the chosen file across the page it posts to)."""
    if not permissions.can_author(request.user):
        raise NotAllowed("Only authors and admins can import tasks.")
    if request.method == "POST" and "pending" in request.POST:
        return _import_pending(request)
    form = ImportForm(request.POST or None, request.FILES or None)
    report = pending = health_check = None
    if request.method == "POST" and form.is_valid():
        environment, dry_run = form.cleaned_data.get("environment") or None, form.cleaned_data["dry_run"]
        try:
            kept = {"root": _pending_root(request.user), "prefix": _pending_prefix(request.user)} if dry_run else {}
            folder, target = _staged(form.cleaned_data["file"], **kept)
            try:
                report = importer.tasks_import(path=target, user=request.user, environment=environment, dry_run=dry_run)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            health_check = services.dataset_check_start(report=report, user=request.user, source=target.name)
            if dry_run:
                pending = {
                    "token": signing.dumps(
                        {
                            "user": request.user.pk,
                            "folder": folder.name,
                            "file": target.name,
                            "environment": environment,
                        },
                        salt=_PENDING_SALT,
                    ),
                    "file": target.name,
                    "environment": environment,
                }
            else:
                shutil.rmtree(folder, ignore_errors=True)
        except DomainError as exc:
            form_add_domain_error(form, exc)
    return render(
        request,
        "packs/import.html",
        {"form": form, "report": report, "pending": pending, "health_check": health_check},
        status=400 if request.method == "POST" and not form.is_valid() else 200,
    )


_PENDING_SALT = "packs.import.pending"
PENDING_MAX_AGE_S = 3600


def _pending_prefix(user) -> str:
    return f"user-{int(user.pk)}-"


def _pending_root(user) -> Path:
    """Where dry-run uploads wait for "Import for real", on the web host that took them. A user keeps one:
    a new dry run replaces their last (so the disk they can hold is one upload's cap, not one per dry
    run for an hour); anyone's older than an hour is removed as new ones come."""
    root = Path(settings.PACK_SCRATCH_DIR) / "pending"
    root.mkdir(parents=True, exist_ok=True)
    cutoff, own = time.time() - PENDING_MAX_AGE_S, _pending_prefix(user)
    for folder in root.iterdir():
        try:
            if folder.name.startswith(own) or folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass
    return root


def _import_pending(request: HttpRequest) -> HttpResponse:
    """The file a dry run kept, imported for real by the user who uploaded it (the token is signed for
    them, and names only a folder under the pending root)."""
    form = ImportForm()
    try:
        staged = signing.loads(request.POST["pending"], salt=_PENDING_SALT, max_age=PENDING_MAX_AGE_S)
    except signing.BadSignature:
        staged = None
    folder = Path(settings.PACK_SCRATCH_DIR) / "pending" / str((staged or {}).get("folder", ""))
    target = folder / str((staged or {}).get("file", ""))
    if (
        staged is None
        or staged.get("user") != request.user.pk
        or not str(staged.get("folder", "")).startswith(_pending_prefix(request.user))
        or Path(staged["folder"]).name != staged["folder"]
        or Path(staged["file"]).name != staged["file"]
        or not target.is_file()
    ):
        messages.error(
            request,
            "That dry run's file is no longer kept (an hour at most, and once imported it is "
            "gone): choose the file again.",
        )
        return render(request, "packs/import.html", {"form": form}, status=400)
    try:
        report = importer.tasks_import(
            path=target, user=request.user, environment=staged.get("environment"), dry_run=False
        )
    except DomainError as exc:
        messages.error(request, exc.message)
        return render(request, "packs/import.html", {"form": form}, status=exc.http_status)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    health_check = services.dataset_check_start(report=report, user=request.user, source=target.name)
    return render(request, "packs/import.html", {"form": form, "report": report, "health_check": health_check})


def import_upload(*, uploaded, user, environment: str | None, dry_run: bool) -> importer.ImportReport:
    """An uploaded file, saved to the import's scratch folder under a safe name, then imported (the API's)."""
    folder, target = _staged(uploaded)
    try:
        return importer.tasks_import(path=target, user=user, environment=environment, dry_run=dry_run)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _staged(uploaded, *, root: Path | None = None, prefix: str = "upload-") -> tuple[Path, Path]:
    """(folder, file): the upload saved under a safe name in a folder of its own under `root` (the
    scratch folder by default), which the caller removes."""
    import tempfile

    name = Path(uploaded.name or "upload").name
    suffix = next((s for s in (".tar.gz", ".tgz", ".jsonl", ".csv", ".parquet") if name.lower().endswith(s)), None)
    if suffix is None:
        raise DomainError(
            f"{name}: import a tasks.jsonl, a .csv/.jsonl/.parquet table or a .tar.gz.",
            details=[{"pointer": "/file", "message": "unknown kind of file"}],
        )
    if uploaded.size is not None and uploaded.size > settings.IMPORT_MAX_BYTES:
        raise DomainError(
            f"{name} is larger than the import limit (GYMWRIGHT_IMPORT_MAX_MB).",
            http_status=413,
            details=[{"pointer": "/file", "message": "too large"}],
        )
    root = root or Path(settings.PACK_SCRATCH_DIR)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    stem = "tasks" if name.lower() == "tasks.jsonl" else (Path(name[: -len(suffix)]).name or "upload")
    target = folder / f"{stem}{suffix}"
    try:
        with open(target, "wb") as handle:
            for chunk in uploaded.chunks():
                handle.write(chunk)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder, target


@require_GET
def dataset_check_detail(request: HttpRequest, check_id: int) -> HttpResponse:
    """A dataset's health report: one verdict per task (healthy, broken, not runnable here) with the reason and the
    gates behind it; it reloads itself while the check runs."""
    check = selectors.dataset_check_get_for_user(check_id=check_id, user=request.user)
    return render(request, "packs/dataset_check.html", {"check": check, **selectors.dataset_check_rows(check)})


@require_GET
def dataset_check_json(request: HttpRequest, check_id: int) -> HttpResponse:
    """The report as JSON (gymwright.dataset-health/v1, what `manage.py check_dataset --json` writes), as it stands."""
    from django.http import JsonResponse

    check = selectors.dataset_check_get_for_user(check_id=check_id, user=request.user)
    document = check.document or {"schema": "gymwright.dataset-health/v1", "source": check.source, "tasks": []}
    return JsonResponse(
        {**document, "status": check.status, "error": check.error or None},
        json_dumps_params={"ensure_ascii": False},
    )
