"""REST API of the grading app: the public format schemas, rubric validation, stored grades."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from django.http import HttpResponse, HttpResponseNotModified
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from grading import selectors, services
from gymwright.errors import DomainError

SCHEMA_NAMES = ("rubric", "task", "grade")


@lru_cache(maxsize=None)
def _schema_body(name: str) -> tuple[bytes, str]:
    """The engine's JSON Schema for `name`, serialised once per process, and its ETag."""
    from grading.engine import json_schema

    body = json.dumps(json_schema(name), indent=2, ensure_ascii=False).encode()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'


# Public: the browser editor (and anyone writing a rubric) validates against these, logged in or not.
@extend_schema(summary="The JSON Schema of a Gymwright format", tags=["formats"], auth=[],
               parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, enum=list(SCHEMA_NAMES))],
               responses={(200, "application/schema+json"): OpenApiTypes.OBJECT})
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def format_schema(request, name: str):
    if name not in SCHEMA_NAMES:
        raise NotFound(f"No schema {name!r}; there are {', '.join(SCHEMA_NAMES)}.")
    body, etag = _schema_body(name)
    if request.headers.get("If-None-Match") == etag:
        return HttpResponseNotModified(headers={"ETag": etag})
    response = HttpResponse(body, content_type="application/schema+json")
    response["ETag"] = etag
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response


class RubricValidateInput(serializers.Serializer):
    rubric = serializers.JSONField(help_text="A gymwright.rubric/v1 document (an object), or its JSON text.")
    files = serializers.ListField(child=serializers.DictField(), required=False, max_length=1000,
                                  help_text="The task's files [{path, role}], for the warnings about roles.")


class IssueOutput(serializers.Serializer):
    pointer = serializers.CharField(help_text="RFC 6901 JSON pointer into the rubric")
    message = serializers.CharField()


@extend_schema(summary="Validate a rubric (schema and semantic rules)", tags=["formats"],
               request=RubricValidateInput,
               responses=inline_serializer("RubricValidateOutput", {
                   "valid": serializers.BooleanField(), "issues": IssueOutput(many=True),
                   "warnings": IssueOutput(many=True, help_text="lint: ways an agent could game the rubric")}))
@api_view(["POST"])
def rubric_validate(request):
    """{rubric, files?} → {valid, issues: [{pointer, message}], warnings: [{pointer, message}]}: the schema
    rules plus the semantic ones, and the lint's warnings (which do not make a rubric invalid)."""
    from grading.engine import validate_rubric
    from grading.engine.lint import lint_rubric

    serializer = RubricValidateInput(data=request.data)
    serializer.is_valid(raise_exception=True)
    rubric = serializer.validated_data["rubric"]
    if isinstance(rubric, str):
        try:
            rubric = services.rubric_from_text(text=rubric).to_document()
        except DomainError as error:
            return Response({"valid": False, "issues": error.details, "warnings": []})
    if not isinstance(rubric, dict):
        return Response({"valid": False, "issues": [{"pointer": "", "message": "expected a JSON object"}],
                         "warnings": []})
    issues = [{"pointer": issue.pointer, "message": issue.message} for issue in validate_rubric(rubric)]
    warnings = [{"pointer": issue.pointer, "message": issue.message}
                for issue in lint_rubric(rubric, serializer.validated_data.get("files"))]
    return Response({"valid": not issues, "issues": issues, "warnings": warnings})


class JudgeLabelOutput(serializers.Serializer):
    reviewer = serializers.CharField(source="reviewer.username")
    verdict = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    agrees = serializers.BooleanField()
    comment = serializers.CharField()
    created_at = serializers.DateTimeField()


class CheckResultOutput(serializers.Serializer):
    id = serializers.IntegerField()
    check_id = serializers.CharField()
    parent_check_id = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    points = serializers.FloatField()
    awarded = serializers.FloatField(allow_null=True)
    explanation = serializers.CharField()
    votes = serializers.JSONField()
    duration_ms = serializers.IntegerField(allow_null=True)
    labels = JudgeLabelOutput(many=True)


class GradeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    source = serializers.CharField()
    task = serializers.CharField(source="task_version.task.slug", default=None)
    version = serializers.IntegerField(source="task_version.number", default=None)
    rollout_id = serializers.IntegerField(allow_null=True)
    reward = serializers.FloatField()
    earned = serializers.FloatField()
    max = serializers.FloatField()
    passed = serializers.BooleanField()
    gated = serializers.BooleanField()
    complete = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    document = serializers.JSONField()
    check_results = CheckResultOutput(many=True)


@extend_schema(summary="A stored grade with its per-check results and reviewers' labels", tags=["grading"],
               responses=GradeOutput)
@api_view(["GET"])
def grade_detail(request, grade_id: int):
    grade = selectors.grade_get_for_user(grade_id=grade_id, user=request.user)
    return Response(GradeOutput(grade).data)


class JudgeLabelInput(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=["agree", "met", "not_met", "score"])
    score = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    comment = serializers.CharField(required=False, allow_blank=True, default="")


@extend_schema(summary="Confirm or overrule the judge on one check (reviewers)", tags=["grading"],
               request=JudgeLabelInput, responses={201: JudgeLabelOutput})
@api_view(["POST"])
def judge_label_create(request, check_result_id: int):
    serializer = JudgeLabelInput(data=request.data)
    serializer.is_valid(raise_exception=True)
    check_result = selectors.check_result_get_for_user(check_result_id=check_result_id, user=request.user,
                                                       action="label")
    label = services.judge_label_record(check_result=check_result, reviewer=request.user,
                                        **serializer.validated_data)
    return Response(JudgeLabelOutput(label).data, status=201)
