"""The previews REST API: start a preview, read its progress and rollouts, cancel it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from authoring.selectors import task_version_get_for_user
from grading.apis import CheckRowOutput
from grading.selectors import grade_table
from gymwright.api import Pagination, paginated, validated
from sandbox import selectors, services
from sandbox.models import PreviewRun


class PreviewCreateInput(serializers.Serializer):
    policy = serializers.CharField(
        max_length=2100, trim_whitespace=False, help_text='"oracle", "nop", "probe:TEXT" or "model".'
    )
    n = serializers.IntegerField(
        min_value=1, max_value=PreviewRun.MAX_N, help_text=f"Rollouts, 1 to {PreviewRun.MAX_N}."
    )
    backend = serializers.ChoiceField(
        choices=services.BACKENDS,
        required=False,
        help_text="Sandbox backend, one of the server's allowed backends "
        "(GYMWRIGHT_SANDBOX_BACKENDS); default: the server's.",
    )


class RolloutSummaryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    index = serializers.IntegerField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    reward = serializers.FloatField(allow_null=True)
    reward_upper = serializers.FloatField(source="grade.reward_upper", allow_null=True, default=None)
    scoring_rule = serializers.IntegerField(source="grade.scoring_rule", allow_null=True, default=None)
    passed = serializers.BooleanField(allow_null=True)
    steps = serializers.IntegerField()
    duration_ms = serializers.IntegerField(allow_null=True)
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    error = serializers.CharField()
    progress = serializers.JSONField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class PreviewRunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField(source="task_version.task.slug")
    version = serializers.IntegerField(source="task_version.number")
    policy = serializers.CharField()
    n = serializers.IntegerField()
    backend = serializers.CharField()
    status = serializers.CharField()
    cancel_requested = serializers.BooleanField()
    summary = serializers.JSONField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class PreviewRunDetailOutput(PreviewRunOutput):
    progress = serializers.JSONField()
    waiting_for_broker = serializers.BooleanField(
        help_text="some queued rollouts wait for the job broker, which did not take their jobs (down or "
        "restarting): they are sent when it answers again (progress.waiting_for_broker counts them)"
    )
    rollouts = RolloutSummaryOutput(many=True)


class RolloutDetailOutput(RolloutSummaryOutput):
    preview_run = serializers.IntegerField(source="preview_run_id")
    worker = serializers.CharField()
    trajectory = serializers.JSONField()
    answer = serializers.CharField()
    workspace_files = serializers.JSONField()
    grade = serializers.JSONField(source="grade.document", allow_null=True)  # the gymwright.grade/v1 document
    grade_id = serializers.IntegerField(allow_null=True)
    checks = CheckRowOutput(many=True)


def _detail(preview_run: PreviewRun) -> dict:
    rollouts = list(selectors.rollout_list(preview_run=preview_run))
    data = PreviewRunOutput(preview_run).data
    data["progress"] = selectors.preview_run_progress(preview_run=preview_run, rollouts=rollouts)
    data["waiting_for_broker"] = data["progress"]["waiting_for_broker"] > 0
    data["rollouts"] = RolloutSummaryOutput(rollouts, many=True).data
    return data


class TaskVersionPreviewsApi(APIView):
    @extend_schema(responses=paginated(PreviewRunOutput), operation_id="tasks_versions_previews_list")
    def get(self, request, slug: str, number: int):
        version = task_version_get_for_user(slug=slug, number=number, user=request.user)
        queryset = version.preview_runs.select_related("task_version__task", "created_by").order_by(
            "-created_at", "-id"
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(PreviewRunOutput(page, many=True).data)

    @extend_schema(
        request=PreviewCreateInput,
        responses={201: PreviewRunDetailOutput, 202: PreviewRunDetailOutput},
        description="201: the preview's jobs were sent to the workers. 202: the preview and its rollouts "
        "are saved but the job broker did not take their jobs (`waiting_for_broker`); they "
        "are sent when it answers again: do not start the preview again.",
    )
    def post(self, request, slug: str, number: int):
        version = task_version_get_for_user(slug=slug, number=number, user=request.user)
        data = validated(PreviewCreateInput, request.data)
        preview_run = services.preview_run_create(
            task_version=version, user=request.user, policy=data["policy"], n=data["n"], backend=data.get("backend")
        )
        preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run.pk, user=request.user)
        data = _detail(preview_run)
        return Response(
            data, status=status.HTTP_202_ACCEPTED if data["waiting_for_broker"] else status.HTTP_201_CREATED
        )


class PreviewRunDetailApi(APIView):
    @extend_schema(responses=PreviewRunDetailOutput)
    def get(self, request, preview_run_id: int):
        preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run_id, user=request.user)
        return Response(_detail(preview_run))


class PreviewRunCancelApi(APIView):
    @extend_schema(request=None, responses=PreviewRunDetailOutput)
    def post(self, request, preview_run_id: int):
        preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run_id, user=request.user)
        preview_run = services.preview_run_cancel(preview_run=preview_run, user=request.user)
        preview_run = selectors.preview_run_get_for_user(preview_run_id=preview_run.pk, user=request.user)
        return Response(_detail(preview_run))


class RolloutDetailApi(APIView):
    @extend_schema(responses=RolloutDetailOutput)
    def get(self, request, rollout_id: int):
        rollout = selectors.rollout_get_for_user(rollout_id=rollout_id, user=request.user)
        rollout.checks = grade_table(rollout.grade).rows if rollout.grade_id else []
        return Response(RolloutDetailOutput(rollout).data)
