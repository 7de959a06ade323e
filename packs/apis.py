"""The packs REST API: packs, versions (build, status, download) and task imports (file or bulk JSON)."""

from __future__ import annotations

import contextlib
import gc

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from authoring import selectors as authoring_selectors
from authoring.models import slug_validator
from gymwright.api import paginate as _paginate
from gymwright.api import paginated
from gymwright.api import validated as _input
from gymwright.errors import DomainError
from packs import downloads, importer, selectors, services
from packs.importer.rubric_formats import EXPORTERS
from packs.views import import_upload, pack_version_verification_state


class PackOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    licence = serializers.CharField()
    created_at = serializers.DateTimeField()


class PackCreateInput(serializers.Serializer):
    slug = serializers.CharField(max_length=64, validators=[slug_validator])
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    licence = serializers.CharField(max_length=100, required=False, allow_blank=True)


class PackVersionOutput(serializers.Serializer):
    version = serializers.CharField()
    status = serializers.CharField()
    failure_reason = serializers.CharField()
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    size = serializers.IntegerField(allow_null=True)
    sha256 = serializers.CharField()
    content_sha256 = serializers.CharField()
    selection = serializers.JSONField()
    changes = serializers.JSONField()
    counts = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    waiting_for_broker = serializers.BooleanField(
        help_text="the build's job waits for the job broker, which did not take it (down or restarting): it is sent "
        "when the broker answers again; do not start the build again"
    )

    def get_counts(self, obj) -> dict | None:
        return (obj.manifest or {}).get("counts")


class PackBuildInput(serializers.Serializer):
    environment = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=20)
    tasks = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    version = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=24)
    test_ratio = serializers.FloatField(required=False, min_value=0, max_value=1, default=0.1)
    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text="answer with the build's plan (version, tasks, changes) and start nothing",
    )


BUILD_PLAN = inline_serializer(
    "PackBuildPlan",
    fields={
        "version": serializers.CharField(),
        "tasks": serializers.IntegerField(),
        "splits": serializers.DictField(child=serializers.IntegerField(), help_text="tasks per split: train, test"),
        "test_ratio_filling_both": serializers.FloatField(
            allow_null=True,
            help_text="where a split would be empty, a test ratio that puts tasks in both (null: the "
            "splits are both filled, or a single task cannot fill both)",
        ),
        "changes": serializers.JSONField(),
        "previous": serializers.CharField(allow_null=True),
        "unchanged": serializers.BooleanField(help_text="the previous version's task versions, split the same way"),
    },
)


class PackListApi(APIView):
    @extend_schema(responses=paginated(PackOutput), operation_id="packs_list")
    def get(self, request):
        return _paginate(request, self, selectors.pack_list_for_user(user=request.user), PackOutput)

    @extend_schema(request=PackCreateInput, responses={201: PackOutput}, operation_id="packs_create")
    def post(self, request):
        data = _input(PackCreateInput, request.data)
        pack = services.pack_create(user=request.user, **data)
        return Response(PackOutput(pack).data, status=status.HTTP_201_CREATED)


class PackVersionListApi(APIView):
    @extend_schema(responses=paginated(PackVersionOutput), operation_id="pack_versions_list")
    def get(self, request, slug):
        pack = selectors.pack_get_for_user(slug=slug, user=request.user)
        return _paginate(request, self, pack.versions.select_related("created_by"), PackVersionOutput)

    @extend_schema(
        request=PackBuildInput, responses={202: PackVersionOutput, 200: BUILD_PLAN}, operation_id="pack_versions_build"
    )
    def post(self, request, slug):
        pack = selectors.pack_get_for_user(slug=slug, user=request.user)
        data = _input(PackBuildInput, request.data)
        selection = services.Selection(
            environment=data.get("environment") or None,
            tags=tuple(data.get("tags") or ()),
            tasks=tuple(data.get("tasks") or ()),
            test_ratio=data["test_ratio"],
        )
        if data["dry_run"]:
            plan = services.pack_version_plan(
                pack=pack, user=request.user, selection=selection, version=data.get("version") or None
            )
            return Response(plan.as_dict())
        pack_version = services.pack_version_start(
            pack=pack, user=request.user, selection=selection, version=data.get("version") or None
        )
        pack_version.refresh_from_db()  # its job was sent as it committed, or it waits for the broker
        return Response(PackVersionOutput(pack_version).data, status=status.HTTP_202_ACCEPTED)


class PackVerificationOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    problems = serializers.ListField(child=serializers.CharField())
    files_checked = serializers.IntegerField()
    checked_at = serializers.DateTimeField(source="finished_at")
    requested_by = serializers.CharField(
        source="requested_by.username",
        allow_null=True,
        default=None,
        help_text="null: the check that followed the build",
    )


class PackVersionDetailOutput(PackVersionOutput):
    """With the archive's verification: the context's `verification` and `checking`
    (views.pack_version_verification_state)."""

    verification = serializers.SerializerMethodField(
        help_text="the stored archive's last finished check (null: not checked yet)"
    )
    verifying = serializers.SerializerMethodField(help_text="a check is queued or running")

    @extend_schema_field(PackVerificationOutput(allow_null=True))
    def get_verification(self, obj):
        done = self.context["verification"]
        return PackVerificationOutput(done).data if done is not None else None

    def get_verifying(self, obj) -> bool:
        return self.context["checking"] is not None


class PackVersionDetailApi(APIView):
    @extend_schema(responses=PackVersionDetailOutput, operation_id="pack_versions_retrieve")
    def get(self, request, slug, version):
        pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
        verification, checking = pack_version_verification_state(pack_version=pack_version)
        return Response(
            PackVersionDetailOutput(pack_version, context={"verification": verification, "checking": checking}).data
        )


class PackVersionDownloadApi(APIView):
    @extend_schema(
        responses={(200, "application/gzip"): bytes},
        operation_id="pack_versions_download",
        description="The archive, streamed, with Content-Length, X-Checksum-SHA256 and ETag (the sha256).",
    )
    def get(self, request, slug, version):
        pack_version = selectors.pack_version_get_for_user(slug=slug, version=version, user=request.user)
        return downloads.pack_version_response(
            request,
            pack_version,
            on_send=lambda: services.pack_version_download_record(
                pack_version=pack_version, user=request.user, via="api"
            ),
        )


REPORT = inline_serializer(
    "ImportReport",
    fields={
        "dry_run": serializers.BooleanField(),
        "imported": serializers.IntegerField(),
        "rejected": serializers.IntegerField(),
        "environments": inline_serializer(
            "ImportEnvironment",
            many=True,
            fields={
                "environment": serializers.CharField(),
                "tasks": serializers.IntegerField(),
                "new": serializers.BooleanField(
                    help_text="this import makes it (a row without an environment, and none "
                    "given: the 'imported' environment)"
                ),
            },
            help_text="where the created and changed tasks went",
        ),
        "rows": serializers.ListField(child=serializers.JSONField()),
        "health_report": serializers.URLField(
            required=False,
            allow_null=True,
            help_text="a file of Harbor or Terminal-Bench tasks: the page of their health report, which a worker "
            "fills (the same URL + .json without the last slash reads it as JSON)",
        ),
    },
)


class ImportFileInput(serializers.Serializer):
    file = serializers.FileField()
    environment = serializers.CharField(required=False, allow_blank=True, max_length=64)
    dry_run = serializers.BooleanField(required=False, default=False)


class JSONItemsField(serializers.ListField):
    """A list of JSON values as the request's JSON parser read them. DRF's ListField of JSONField
    checks every item by serialising it again, which a 1,000-task request pays 1,000 times for
    nothing: each document is validated by the import itself, with its pointer."""

    def to_internal_value(self, data):
        if not isinstance(data, list):
            self.fail("not_a_list", input_type=type(data).__name__)
        return data


class ImportBulkInput(serializers.Serializer):
    tasks = JSONItemsField(
        child=serializers.JSONField(),
        min_length=1,
        help_text="gymwright.task/v1 documents, or simple rows {id, prompt, answer, rubric | criteria}",
    )
    environment = serializers.CharField(required=False, allow_blank=True, max_length=64)
    dry_run = serializers.BooleanField(required=False, default=False)


def _no_query(request) -> None:
    """An import reads its options from the body: `?dry_run=1` would otherwise import for real, unread."""
    if request.query_params:
        key = next(iter(request.query_params))[:100]
        raise DomainError(
            f"?{key}: an import takes its options in the request body (dry_run, environment), "
            "not in the query string; nothing was imported.",
            details=[{"pointer": f"?{key}", "message": "not read here: send it in the body"}],
        )


class ImportFileApi(APIView):
    @extend_schema(request={"multipart/form-data": ImportFileInput}, responses=REPORT, operation_id="imports_file")
    def post(self, request):
        _no_query(request)
        data = _input(ImportFileInput, request.data)
        report = import_upload(
            uploaded=data["file"],
            user=request.user,
            environment=data.get("environment") or None,
            dry_run=data["dry_run"],
        )
        check = services.dataset_check_start(report=report, user=request.user, source=data["file"].name)
        health = request.build_absolute_uri(reverse("packs:dataset_check", args=[check.pk])) if check else None
        return Response({**report.as_dict(), "health_report": health})


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off while a bulk request is parsed and imported, on again after.
    What such a request allocates stays alive until it ends (its JSON, the documents, the rows), so each
    collection its allocations trigger walks a growing live set and frees almost nothing (~13 ms of a
    1,000-task request's CPU, in process, for nothing). The import leaves no reference cycle per task
    (packs.importer.store), so what it made is freed by reference counting when the request ends, and the
    little cyclic garbage it makes (a rejected row's exception) waits at most for the end of the request,
    which IMPORT_MAX_ROWS bounds. A request that found the collector off (another thread's pause, a test's)
    leaves it off."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class ImportBulkApi(APIView):
    """A list of tasks per request: the same import service and per-row report as a file."""

    @extend_schema(request=ImportBulkInput, responses=REPORT, operation_id="imports_bulk")
    def post(self, request):
        _no_query(request)
        with _collector_paused():
            return self._import(request)

    def _import(self, request):
        data = _input(ImportBulkInput, request.data)
        if len(data["tasks"]) > settings.IMPORT_MAX_ROWS:
            raise DomainError(
                f"more than {settings.IMPORT_MAX_ROWS} tasks in one request (GYMWRIGHT_IMPORT_MAX_ROWS).",
                http_status=413,
                details=[{"pointer": "/tasks", "message": "too many"}],
            )
        report = importer.tasks_import(
            documents=data["tasks"],
            user=request.user,
            environment=data.get("environment") or None,
            dry_run=data["dry_run"],
        )
        return Response(report.as_dict())


class TaskVersionRubricExportApi(APIView):
    """A version's rubric as a HealthBench or RaR row (`?as=healthbench|rar`), as `manage.py export_rubrics`
    writes it (docs/formats.md, "HealthBench and RaR rubrics"), with the ids of the checks the format has
    no place for."""

    @extend_schema(
        parameters=[OpenApiParameter("as", str, required=True, enum=["healthbench", "rar"])],
        responses=inline_serializer(
            "RubricExport",
            fields={
                "format": serializers.CharField(),
                "row": serializers.DictField(),
                "left_out": serializers.ListField(),
            },
        ),
    )
    def get(self, request, slug, number):
        fmt = request.query_params.get("as", "")
        if fmt not in EXPORTERS:
            raise DomainError(
                "Give ?as=healthbench or ?as=rar.", details=[{"pointer": "/as", "message": "healthbench or rar"}]
            )
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
        row, left_out = EXPORTERS[fmt](version.spec, slug)
        return Response({"format": fmt, "row": row, "left_out": left_out})
