"""The authoring REST API: small views with explicit input and output serializers."""

from __future__ import annotations

from functools import partial

from django.db import transaction
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import permissions
from authoring import selectors, services
from authoring.diff import task_version_diff_json
from authoring.models import Environment, slug_validator
from grading.engine.models import MAX_TAGS, PROMPT_MAX_CHARS, TAG_MAX_CHARS, TITLE_MAX_CHARS
from gymwright.api import Pagination, iso_datetime, paginated
from gymwright.api import paginate as _paginate
from gymwright.api import validated as _input
from gymwright.errors import DomainError, NotAllowed
from gymwright.pagination import KeysFirstPaginator


def _authors_only(user, what: str) -> None:
    if not permissions.can_author(user):
        raise NotAllowed(f"Only authors and admins can {what}.")


# --------------------------------------------------------------------------------------------- environments


class EnvironmentOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    owner = serializers.CharField(source="owner.username")
    latest_version = serializers.IntegerField(source="latest_version.number", allow_null=True)
    spec = serializers.JSONField(source="latest_version.spec")
    judge_min_labels = serializers.IntegerField(help_text="distinct labelled answers a judged check needs")
    judge_min_rate = serializers.FloatField(help_text="the TPR and TNR a judged check needs")
    judge_unvalidated_blocks = serializers.BooleanField(help_text="a judged check not validated blocks submission")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_fields(self):
        """With the fields apps to the right keep (services.EnvironmentField: grading's judge_endpoint)."""
        fields = super().get_fields()
        for extra in services.environment_fields():
            fields.update(extra.output_fields())
        return fields


class EnvironmentFieldsInput(serializers.Serializer):
    """The environment's calibration settings, and the environment fields apps to the right keep
    (services.EnvironmentField: grading's judge_endpoint, review's blind rule), each optional: a PATCH changes the
    ones it names. Their bounds are the services' (a bad value: 400 at its pointer)."""

    judge_min_labels = serializers.IntegerField(
        required=False, help_text="distinct labelled answers a judged check needs to be validated (2 to 100000)"
    )
    judge_min_rate = serializers.FloatField(
        required=False, help_text="the TPR and TNR a validated judged check needs (0.5 to 1)"
    )
    judge_unvalidated_blocks = serializers.BooleanField(
        required=False, help_text="a judged check not validated blocks submission (else the gates warn)"
    )

    def get_fields(self):
        fields = super().get_fields()
        for extra in services.environment_fields():
            fields[extra.name] = extra.input_field()
        return fields


class EnvironmentVersionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    spec = serializers.JSONField()
    sha256 = serializers.CharField()
    author = serializers.CharField(source="author.username")
    message = serializers.CharField()
    created_at = serializers.DateTimeField()


class EnvironmentCreateInput(serializers.Serializer):
    slug = serializers.CharField(max_length=64, validators=[slug_validator])
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    spec = serializers.JSONField(help_text="The environment object of gymwright.task/v1 (without id and version).")


class EnvironmentVersionInput(serializers.Serializer):
    spec = serializers.JSONField()
    base_version = serializers.IntegerField(help_text="The version you edited; 409 if it is no longer the latest.")
    message = serializers.CharField(required=False, allow_blank=True, max_length=500)


class EnvironmentListApi(APIView):
    @extend_schema(responses=paginated(EnvironmentOutput), operation_id="environments_list")
    def get(self, request):
        environments = selectors.environment_list(user=request.user).select_related(
            *services.environment_fields_related()
        )
        return _paginate(request, self, environments.order_by("slug"), EnvironmentOutput)

    @extend_schema(request=EnvironmentCreateInput, responses={201: EnvironmentOutput})
    def post(self, request):
        _authors_only(request.user, "create environments")  # before anything is looked up in the body
        data = _input(EnvironmentCreateInput, request.data)
        if Environment.objects.filter(slug=data["slug"]).exists():
            raise DomainError(
                f"An environment called {data['slug']!r} already exists.",
                details=[{"pointer": "/slug", "message": "already taken"}],
            )
        environment = services.environment_create(
            slug=data["slug"],
            name=data.get("name") or data["slug"],
            description=data.get("description", ""),
            author=request.user,
            spec=data["spec"],
        )
        return Response(EnvironmentOutput(environment).data, status=status.HTTP_201_CREATED)


class EnvironmentDetailApi(APIView):
    @extend_schema(responses=EnvironmentOutput)
    def get(self, request, slug):
        environment = selectors.environment_get_for_user(
            slug=slug, user=request.user, related=services.environment_fields_related()
        )
        return Response(EnvironmentOutput(environment).data)

    @extend_schema(request=EnvironmentFieldsInput, responses=EnvironmentOutput)
    def patch(self, request, slug):
        """Change the environment's settings that are no content (its owner or an admin): judge_endpoint, the judge
        endpoint its tasks use; when its judged checks count as validated (judge_min_labels, judge_min_rate) and
        whether one that is not blocks (judge_unvalidated_blocks); the blind rule (blind_min_correlation,
        blind_min_scored). All or none; each change audited; no new version."""
        environment = selectors.environment_get_for_user(slug=slug, user=request.user, action="edit")
        data = dict(_input(EnvironmentFieldsInput, request.data))
        calibration = {name: data.pop(name) for name in services.CALIBRATION_FIELDS if name in data}
        with transaction.atomic():
            if calibration:
                services.environment_calibration_set(environment=environment, user=request.user, **calibration)
            services.environment_fields_write(environment=environment, user=request.user, data=data)
        environment = selectors.environment_get_for_user(
            slug=slug, user=request.user, related=services.environment_fields_related()
        )
        return Response(EnvironmentOutput(environment).data)


class EnvironmentVersionListApi(APIView):
    @extend_schema(responses=paginated(EnvironmentVersionOutput), operation_id="environments_versions_list")
    def get(self, request, slug):
        environment = selectors.environment_get_for_user(slug=slug, user=request.user)
        return _paginate(
            request, self, selectors.environment_version_list(environment=environment), EnvironmentVersionOutput
        )

    @extend_schema(
        request=EnvironmentVersionInput, responses={201: EnvironmentVersionOutput, 200: EnvironmentVersionOutput}
    )
    def post(self, request, slug):
        environment = selectors.environment_get_for_user(slug=slug, user=request.user, action="edit")
        data = _input(EnvironmentVersionInput, request.data)
        version, created = services.environment_version_create(
            environment=environment,
            author=request.user,
            spec=data["spec"],
            base_version=data["base_version"],
            message=data.get("message", ""),
        )
        return Response(EnvironmentVersionOutput(version).data, status=201 if created else 200)


# --------------------------------------------------------------------------------------------- tasks


class TaskOutput(serializers.Serializer):
    slug = serializers.CharField()
    title = serializers.CharField()
    environment = serializers.CharField(source="environment.slug")
    status = serializers.CharField()
    tags = serializers.SerializerMethodField()
    owner = serializers.CharField(source="owner.username")
    latest_version = serializers.IntegerField(source="latest_version.number", allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_tags(self, task) -> list[str]:
        return [tag.name for tag in task.tags.all()]


def task_row_output(row: dict, zone=None) -> dict:
    """A `selectors.task_rows` row in TaskOutput's shape, without building the model objects TaskOutput reads."""
    return {
        "slug": row["slug"],
        "title": row["title"],
        "environment": row["environment"],
        "status": row["status"],
        "tags": row["tags"],
        "owner": row["owner"],
        "latest_version": row["latest_version"],
        "created_at": iso_datetime(row["created_at"], zone),
        "updated_at": iso_datetime(row["updated_at"], zone),
    }


class TaskVersionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    sha256 = serializers.CharField()
    author = serializers.CharField(source="author.username")
    message = serializers.CharField()
    created_at = serializers.DateTimeField()
    environment_version = serializers.IntegerField(source="environment_version.number")
    spec = serializers.JSONField(help_text="The whole gymwright.task/v1 document.")


class TaskVersionSummaryOutput(TaskVersionOutput):
    spec = None


class TaskContentInput(serializers.Serializer):
    title = serializers.CharField(max_length=TITLE_MAX_CHARS)
    # Kept as sent, as the editor keeps what is typed (DRF trims by default): a prompt's leading blank line and
    # final newline are content, and the same text must hash the same through the page and the API.
    prompt = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=PROMPT_MAX_CHARS)
    rubric = serializers.JSONField(help_text="A gymwright.rubric/v1 document.")
    solution = serializers.JSONField(required=False, help_text='{"script": "...", "answer": "..."}')
    files = serializers.JSONField(required=False, help_text="[{path, sha256}] of uploaded blobs.")
    tags = serializers.ListField(
        child=serializers.CharField(max_length=TAG_MAX_CHARS), max_length=MAX_TAGS, required=False
    )
    metadata = serializers.JSONField(required=False)
    examples = serializers.JSONField(
        required=False,
        help_text=(
            'Example answers graded on every new version: [{"name", "answer", "expect": "pass"|"fail", '
            '"reward": {"min", "max"} (optional), "files": [{"path", "content"}] (optional)}]; results at '
            "/api/tasks/{slug}/versions/{number}/examples/."
        ),
    )
    environment_version = serializers.IntegerField(
        required=False, help_text="Pin an environment version; default the latest."
    )


class TaskCreateInput(TaskContentInput):
    slug = serializers.CharField(max_length=64, validators=[slug_validator])
    environment = serializers.CharField(max_length=64, validators=[slug_validator])
    message = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text='Change note of version 1; default "created".'
    )


class TaskVersionInput(TaskContentInput):
    base_version = serializers.IntegerField(help_text="The version you edited; 409 if it is no longer the latest.")
    message = serializers.CharField(required=False, allow_blank=True, max_length=500)


def _content(data: dict, environment: Environment) -> dict:
    content = {
        key: data[key]
        for key in ("title", "prompt", "rubric", "solution", "files", "tags", "metadata", "examples")
        if key in data
    }
    if data.get("environment_version"):
        version = environment.versions.filter(number=data["environment_version"]).first()
        if version is None:
            raise DomainError(
                f"{environment.slug} has no version {data['environment_version']}.",
                details=[{"pointer": "/environment_version", "message": "no such version"}],
            )
        content["environment_version"] = version
    return content


class TaskListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(name, str, description=desc)
            for name, desc in (
                ("q", "search slug and title"),
                ("environment", "environment slug"),
                ("status", "task status"),
                ("tag", "tag name"),
                ("author", "owner's username"),
            )
        ],
        responses=paginated(TaskOutput),
        operation_id="tasks_list",
    )
    def get(self, request):
        filters = {
            key: request.query_params.get(key, "").strip()[:100]
            for key in ("q", "environment", "status", "tag", "author")
        }
        paginator = Pagination()
        rows = partial(selectors.task_rows, user=request.user)
        paginator.django_paginator_class = partial(KeysFirstPaginator, rows=rows)
        page = paginator.paginate_queryset(
            selectors.task_list_page_source(user=request.user, **filters), request, view=self
        )
        zone = timezone.get_current_timezone()
        return paginator.get_paginated_response([task_row_output(row, zone) for row in page])

    @extend_schema(request=TaskCreateInput, responses={201: TaskOutput})
    def post(self, request):
        _authors_only(request.user, "create tasks")  # a refusal, not "no environment" (its lookup refuses too)
        data = _input(TaskCreateInput, request.data)
        try:
            environment = selectors.environment_get_for_user(slug=data["environment"], user=request.user)
        except Http404:
            raise DomainError(
                f"No environment {data['environment']!r}.",
                details=[{"pointer": "/environment", "message": "not found"}],
            )
        task = services.task_create(
            slug=data["slug"],
            environment=environment,
            author=request.user,
            content=_content(data, environment),
            message=data.get("message", ""),
        )
        return Response(
            TaskOutput(selectors.task_get_for_user(slug=task.slug, user=request.user)).data,
            status=status.HTTP_201_CREATED,
        )


class TaskDetailApi(APIView):
    @extend_schema(responses=TaskOutput)
    def get(self, request, slug):
        return Response(TaskOutput(selectors.task_get_for_user(slug=slug, user=request.user)).data)


class TaskVersionListApi(APIView):
    @extend_schema(responses=paginated(TaskVersionSummaryOutput), operation_id="tasks_versions_list")
    def get(self, request, slug):
        task = selectors.task_get_for_user(slug=slug, user=request.user)
        return _paginate(
            request, self, selectors.task_version_list(task=task, user=request.user), TaskVersionSummaryOutput
        )

    @extend_schema(request=TaskVersionInput, responses={201: TaskVersionOutput, 200: TaskVersionOutput})
    def post(self, request, slug):
        """Create a new version on top of `base_version`. 200 with the latest when nothing changed, 409 on conflict."""
        task = selectors.task_get_for_user(slug=slug, user=request.user, action="edit")
        data = _input(TaskVersionInput, request.data)
        with transaction.atomic():
            version, created = services.task_version_create(
                task=task,
                author=request.user,
                content=_content(data, task.environment),
                base_version=data["base_version"],
                message=data.get("message", ""),
            )
        return Response(TaskVersionOutput(version).data, status=201 if created else 200)


class TaskVersionDetailApi(APIView):
    @extend_schema(responses=TaskVersionOutput)
    def get(self, request, slug, number):
        return Response(
            TaskVersionOutput(selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)).data
        )


class TaskDiffApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("a", int, required=True), OpenApiParameter("b", int, required=True)],
        responses=inline_serializer(
            "TaskDiff",
            fields={
                "fields": serializers.ListField(child=serializers.DictField()),
                "checks": serializers.ListField(child=serializers.DictField()),
                "rubric_changes": serializers.ListField(child=serializers.DictField()),
                "summary": serializers.DictField(),
            },
        ),
    )
    def get(self, request, slug):
        numbers = {}
        for key in ("a", "b"):
            try:
                numbers[key] = int(request.query_params.get(key, ""))
            except ValueError:
                raise DomainError(
                    f"Query parameter {key} must be a version number.",
                    details=[{"pointer": f"/{key}", "message": "expected an integer"}],
                )
        version_a = selectors.task_version_get_for_user(slug=slug, number=numbers["a"], user=request.user)
        version_b = selectors.task_version_get_for_user(slug=slug, number=numbers["b"], user=request.user)
        return Response(
            {"a": version_a.number, "b": version_b.number, **task_version_diff_json(version_a.spec, version_b.spec)}
        )


class BlobUploadApi(APIView):
    """Upload a file; answers its sha256 for use in a task's or environment's `files`."""

    @extend_schema(
        request={"multipart/form-data": inline_serializer("BlobUpload", {"file": serializers.FileField()})},
        responses={
            201: inline_serializer("Blob", {"sha256": serializers.CharField(), "size": serializers.IntegerField()})
        },
    )
    def post(self, request):
        _authors_only(request.user, "upload files")  # before the body is read: a blob is stored for good
        upload = request.FILES.get("file")  # parses the body, which runs the capped upload handler
        if getattr(request._request, "upload_too_large", False):
            raise services.upload_too_large_error("The file")
        if upload is None:
            raise DomainError(
                "Send the file as multipart field 'file'.", details=[{"pointer": "/file", "message": "required"}]
            )
        services.safe_relative_path(upload.name, field="file")
        blob = services.blob_store(uploaded_file=upload)
        return Response({"sha256": blob.sha256, "size": blob.size}, status=201)
