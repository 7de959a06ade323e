"""REST API of the grading app: the public format schemas, rubric validation, stored grades."""

from __future__ import annotations

import hashlib
import json
from functools import cache

from django.http import HttpResponse, HttpResponseNotModified
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from grading import selectors, services
from gymwright.api import validated
from gymwright.errors import DomainError

SCHEMA_NAMES = ("rubric", "task", "grade")


@cache
def _schema_body(name: str) -> tuple[bytes, str]:
    """The engine's JSON Schema for `name`, serialised once per process, and its ETag."""
    from grading.engine import json_schema

    body = json.dumps(json_schema(name), indent=2, ensure_ascii=False).encode()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'


# Public: the browser editor (and anyone writing a rubric) validates against these, logged in or not.
@extend_schema(
    summary="The JSON Schema of a Gymwright format",
    tags=["formats"],
    auth=[],
    parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, enum=list(SCHEMA_NAMES))],
    responses={(200, "application/schema+json"): OpenApiTypes.OBJECT},
)
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
    files = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        max_length=1000,
        help_text="The task's files [{path, role}], for the warnings about roles.",
    )


class IssueOutput(serializers.Serializer):
    pointer = serializers.CharField(help_text="RFC 6901 JSON pointer into the rubric")
    message = serializers.CharField()


@extend_schema(
    summary="Validate a rubric (schema and semantic rules)",
    tags=["formats"],
    request=RubricValidateInput,
    responses=inline_serializer(
        "RubricValidateOutput",
        {
            "valid": serializers.BooleanField(),
            "issues": IssueOutput(many=True),
            "warnings": IssueOutput(many=True, help_text="lint: ways an agent could game the rubric"),
        },
    ),
)
@api_view(["POST"])
def rubric_validate(request):
    """{rubric, files?} → {valid, issues: [{pointer, message}], warnings: [{pointer, message}]}: the schema
    rules plus the semantic ones, and the lint's warnings (which do not make a rubric invalid)."""
    from grading.engine import validate_rubric
    from grading.engine.lint import lint_rubric

    data = validated(RubricValidateInput, request.data)
    rubric = data["rubric"]
    if isinstance(rubric, str):
        try:
            rubric = services.rubric_from_text(text=rubric).to_document()
        except DomainError as error:
            return Response({"valid": False, "issues": error.details, "warnings": []})
    if not isinstance(rubric, dict):
        return Response(
            {"valid": False, "issues": [{"pointer": "", "message": "expected a JSON object"}], "warnings": []}
        )
    issues = [{"pointer": issue.pointer, "message": issue.message} for issue in validate_rubric(rubric)]
    warnings = [
        {"pointer": issue.pointer, "message": issue.message} for issue in lint_rubric(rubric, data.get("files"))
    ]
    return Response({"valid": not issues, "issues": issues, "warnings": warnings})


class JudgeLabelOutput(serializers.Serializer):
    reviewer = serializers.CharField(source="reviewer.username")
    verdict = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    agrees = serializers.BooleanField()
    comment = serializers.CharField()
    created_at = serializers.DateTimeField()


class CheckRowOutput(serializers.Serializer):
    """One row of grading.selectors.grade_table: the one shape of a check's result in the API (the grade's
    check_results, a rollout's checks). `id` is the stored CheckResult (null for a grade not stored)."""

    id = serializers.IntegerField(allow_null=True)
    check_id = serializers.CharField()
    parent_check_id = serializers.CharField()
    kind = serializers.CharField()
    title = serializers.CharField()
    status = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    points = serializers.FloatField(allow_null=True)
    awarded = serializers.FloatField(allow_null=True)
    required = serializers.BooleanField()
    explanation = serializers.CharField()
    depth = serializers.IntegerField()
    votes = serializers.JSONField()
    duration_ms = serializers.IntegerField(allow_null=True)
    labels = JudgeLabelOutput(many=True)


class GradeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    source = serializers.CharField()
    task = serializers.CharField(source="task_version.task.slug", default=None)
    version = serializers.IntegerField(source="task_version.number", default=None)
    rollout_id = serializers.IntegerField(allow_null=True)
    reward = serializers.FloatField(help_text='An incomplete grade\'s lower bound (docs/formats.md, "Scoring")')
    reward_upper = serializers.FloatField(
        allow_null=True,
        help_text="The reward had every unscored check been "
        "met; null for a grade of the old scoring rule that was not totalled again",
    )
    scoring_rule = serializers.IntegerField(
        help_text="2: the current rule; 1: unscored checks were left out of max (decides no gate: run it again)"
    )
    earned = serializers.FloatField()
    max = serializers.FloatField()
    passed = serializers.BooleanField()
    gated = serializers.BooleanField()
    complete = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    document = serializers.JSONField()
    check_results = CheckRowOutput(many=True, source="check_rows")


@extend_schema(
    summary="A stored grade with its per-check results and reviewers' labels", tags=["grading"], responses=GradeOutput
)
@api_view(["GET"])
def grade_detail(request, grade_id: int):
    grade = selectors.grade_get_for_user(grade_id=grade_id, user=request.user)
    grade.check_rows = selectors.grade_table(grade).rows
    return Response(GradeOutput(grade).data)


class JudgeLabelInput(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=["agree", "met", "not_met", "score"])
    score = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    comment = serializers.CharField(required=False, allow_blank=True, default="")


@extend_schema(
    summary="Confirm or overrule the judge on one check (reviewers)",
    tags=["grading"],
    request=JudgeLabelInput,
    responses={201: JudgeLabelOutput},
)
@api_view(["POST"])
def judge_label_create(request, check_result_id: int):
    data = validated(JudgeLabelInput, request.data)
    check_result = selectors.check_result_get_for_user(
        check_result_id=check_result_id, user=request.user, action="label"
    )
    label = services.judge_label_record(check_result=check_result, reviewer=request.user, **data)
    return Response(JudgeLabelOutput(label).data, status=201)


class ExampleVerdictOutput(serializers.Serializer):
    name = serializers.CharField()
    expect = serializers.ChoiceField(choices=["pass", "fail"])
    reward_min = serializers.FloatField(allow_null=True)
    reward_max = serializers.FloatField(allow_null=True)
    status = serializers.ChoiceField(choices=["as_expected", "unexpected", "incomplete", "error", "pending"])
    got = serializers.CharField(allow_null=True, help_text='"pass" | "fail"; null without a verdict')
    reward = serializers.FloatField(allow_null=True)
    reward_upper = serializers.FloatField(
        allow_null=True, default=None, help_text="The grade's reward_upper; null before grading"
    )
    message = serializers.CharField()
    grade = serializers.JSONField(allow_null=True, help_text="The gymwright.grade/v1 document, once graded.")


class ExampleRunOutput(serializers.Serializer):
    status = serializers.CharField(help_text="none (no example answers) | queued | running | done | error")
    total = serializers.IntegerField()
    graded = serializers.IntegerField()
    needs_judge = serializers.BooleanField()
    as_expected = serializers.IntegerField()
    examples = ExampleVerdictOutput(many=True)


def _example_run_output(task_version) -> dict:
    run = selectors.example_run_of(task_version=task_version)
    results = selectors.example_results(task_version=task_version, run=run)
    return {
        "status": run.status if run else "none",
        "total": len(results),
        "graded": run.graded if run else 0,
        "needs_judge": bool(run and run.needs_judge),
        "as_expected": sum(1 for result in results if result["status"] == "as_expected"),
        "examples": [{**result, "got": result.get("got")} for result in results],
    }


@extend_schema(
    summary="How a version's example answers graded (expected vs got, reward)",
    tags=["grading"],
    responses=ExampleRunOutput,
)
@api_view(["GET"])
def example_answers(request, slug: str, number: int):
    from authoring.selectors import task_version_get_for_user

    task_version = task_version_get_for_user(slug=slug, number=number, user=request.user)
    return Response(ExampleRunOutput(_example_run_output(task_version)).data)


@extend_schema(
    summary="Grade a version's example answers again (authors of the task, reviewers)",
    tags=["grading"],
    request=None,
    responses={202: ExampleRunOutput},
)
@api_view(["POST"])
def example_answers_run(request, slug: str, number: int):
    from authoring.selectors import task_version_get_for_user

    task_version = task_version_get_for_user(slug=slug, number=number, user=request.user)
    if services.example_answers_run(task_version=task_version, user=request.user) is None:
        raise DomainError(
            f"{slug} v{number} has no example answers.",
            code="no_examples",
            details=[{"pointer": "/examples", "message": "none saved"}],
        )
    return Response(ExampleRunOutput(_example_run_output(task_version)).data, status=202)


class CopilotFileInput(serializers.Serializer):
    path = serializers.CharField(max_length=255)
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)


class CopilotDraftInput(serializers.Serializer):
    prompt = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="Default: the latest version's prompt."
    )
    reference = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="The reference answer; default: the latest version's solution answer.",
    )
    files = CopilotFileInput(many=True, required=False, help_text="The reference solution's files (text).")
    rubric = serializers.JSONField(required=False, help_text="The rubric in the editor: its ids are not reused.")
    count = serializers.IntegerField(required=False, min_value=1, max_value=40, default=12)
    degraded = serializers.IntegerField(required=False, min_value=0, max_value=5, default=3)


@extend_schema(
    summary="Draft checks with the rubric copilot, each tested before it is offered (the task's editors)",
    description="Nothing is saved but the audit entry: accepted suggestions go into the editor's rubric and "
    "become a version by the normal save. 409 when no model is configured; 422 when the model's draft is unusable.",
    tags=["grading"],
    request=CopilotDraftInput,
    responses={200: OpenApiTypes.OBJECT},
)
@api_view(["POST"])
def rubric_draft(request, slug: str):
    from authoring.selectors import task_get_for_user

    task = task_get_for_user(slug=slug, user=request.user, action="edit")
    data = validated(CopilotDraftInput, request.data)
    files = data.get("files")
    if files is not None and len({item["path"] for item in files}) != len(files):
        raise DomainError("Two reference files have the same path.", code="invalid_path")
    rubric = data.get("rubric")
    return Response(
        services.rubric_draft(
            task=task,
            user=request.user,
            prompt=data.get("prompt"),
            reference=data.get("reference"),
            files={item["path"]: item["content"] for item in files} if files is not None else None,
            existing_rubric=rubric if isinstance(rubric, dict) else None,
            count=data["count"],
            degraded=data["degraded"],
        )
    )


# --------------------------------------------------------------------------------------------- environment judge


def _judge_endpoint_input() -> serializers.Field:
    return serializers.IntegerField(
        required=False, allow_null=True, help_text="The id of a configured judge endpoint; null: the default judge."
    )


def _judge_endpoint_output() -> dict[str, serializers.Field]:
    # No choice (no EnvironmentJudge row) or an endpoint since deleted: null, the default judge.
    return {
        "judge_endpoint": serializers.IntegerField(
            source="judge_choice.endpoint_id",
            allow_null=True,
            default=None,
            help_text="The judge endpoint its owner chose; null: the default.",
        ),
        "judge_endpoint_name": serializers.CharField(
            source="judge_choice.endpoint.name", allow_null=True, default=None
        ),
    }


def _judge_endpoint_write(*, environment, user, value) -> None:
    services.environment_judge_set(environment=environment, user=user, endpoint_id=value)


def environment_judge_field():
    """`judge_endpoint` of GET and PATCH /api/environments/<slug>/ (authoring's API; registered in ready())."""
    from authoring.services import EnvironmentField

    return EnvironmentField(
        name="judge_endpoint",
        input_field=_judge_endpoint_input,
        output_fields=_judge_endpoint_output,
        related=("judge_choice__endpoint",),
        write=_judge_endpoint_write,
    )
