"""The review REST API: submit, reviews, the queue, the inbox, gates, comment threads, agreement.

Errors answer in the single envelope (gymwright.api): 409 gates_failed lists the failing gates,
409 not_in_review, 403 for an owner or author reviewing, 400 with the pointer of a bad field.
"""

from __future__ import annotations

from functools import partial

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import permissions
from authoring import selectors as authoring_selectors
from gymwright.api import Pagination, iso_datetime, paginate, paginated, validated
from gymwright.errors import DomainError, NotAllowed
from gymwright.pagination import KeysFirstPaginator
from review import agreement as review_agreement
from review import gate_evidence as review_gates
from review import selectors, services
from review.models import Comment, Review

ERROR = inline_serializer(
    "ErrorEnvelope",
    fields={
        "error": inline_serializer(
            "Error",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "details": serializers.ListField(child=serializers.DictField()),
            },
        )
    },
)


def _errors(*codes: int) -> dict:
    return {code: OpenApiResponse(ERROR) for code in codes}


class GateOutput(serializers.Serializer):
    gate = serializers.CharField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=["pass", "fail", "not_run"])
    message = serializers.CharField()
    policy = serializers.CharField(allow_null=True)
    run_id = serializers.IntegerField(allow_null=True, help_text="The preview run that decided it.")
    blocking = serializers.BooleanField()
    what_to_do = serializers.CharField(allow_blank=True, help_text="What the author does next; empty when it passes.")


class SubmitInput(serializers.Serializer):
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Admins only: submit despite failing gates, saying why.",
    )


class SubmissionOutput(serializers.Serializer):
    task = serializers.CharField(source="task_version.task.slug")
    version = serializers.IntegerField(source="task_version.number")
    status = serializers.CharField(source="task_version.task.status")
    submitted_by = serializers.CharField(source="submitted_by.username")
    override_reason = serializers.CharField()
    gates = GateOutput(many=True)
    created_at = serializers.DateTimeField()


class ReviewInput(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Review.Decision.values)
    comment = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")
    check_comments = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        default=dict,
        help_text='{"<check id>": "comment"}',
    )


class ReviewOutput(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField(source="task_version.task.slug")
    version = serializers.IntegerField(source="task_version.number")
    reviewer = serializers.CharField(source="reviewer.username")
    decision = serializers.CharField()
    comment = serializers.CharField()
    check_comments = serializers.DictField(child=serializers.CharField())
    created_at = serializers.DateTimeField()


class QueueItemOutput(serializers.Serializer):
    slug = serializers.CharField()
    title = serializers.CharField()
    environment = serializers.CharField(source="environment.slug")
    owner = serializers.CharField(source="owner.username")
    version = serializers.IntegerField(source="latest_version.number")
    approved_version = serializers.IntegerField(source="approved_version.number", allow_null=True, default=None)
    tags = serializers.SerializerMethodField()
    submitted_at = serializers.DateTimeField(allow_null=True)

    def get_tags(self, task) -> list[str]:
        return [tag.name for tag in task.tags.all()]


def queue_item_output(row: dict, zone=None) -> dict:
    """A `authoring.selectors.task_rows` row in QueueItemOutput's shape, without the model objects it reads."""
    return {
        "slug": row["slug"],
        "title": row["title"],
        "environment": row["environment"],
        "owner": row["owner"],
        "version": row["latest_version"],
        "approved_version": row["approved_version"],
        "tags": row["tags"],
        "submitted_at": iso_datetime(row["submitted_at"], zone),
    }


class InboxItemOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    task = serializers.CharField(source="task.slug")
    version = serializers.IntegerField(source="version_number", allow_null=True)
    check_id = serializers.CharField()
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)
    text = serializers.CharField()
    read = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_read(self, item) -> bool:
        return item.read_at is not None


class ReplyOutput(serializers.Serializer):
    id = serializers.IntegerField()
    author = serializers.CharField(source="author.username")
    body = serializers.CharField()
    created_at = serializers.DateTimeField()


class ThreadOutput(ReplyOutput):
    check_id = serializers.CharField(help_text='"" for a comment on the whole task.')
    version = serializers.IntegerField(source="task_version.number", help_text="The version it was written on.")
    resolved = serializers.BooleanField(source="is_resolved")
    resolved_by = serializers.CharField(source="resolved_by.username", allow_null=True, default=None)
    replies = ReplyOutput(many=True, source="replies.all")


class CommentInput(serializers.Serializer):
    body = serializers.CharField(trim_whitespace=False)
    check_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    parent = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="Reply to this thread (a comment id)."
    )
    version = serializers.IntegerField(
        required=False, allow_null=True, default=None, help_text="The version the comment is on; default the latest."
    )


class ResolveInput(serializers.Serializer):
    resolved = serializers.BooleanField(default=True)


class AgreementStatsOutput(serializers.Serializer):
    labels = serializers.IntegerField(
        help_text="Distinct observations: one per (check, answer, judge verdict, human verdict); copies of one "
        "answer labelled at once count once."
    )
    answers = serializers.IntegerField(help_text="Distinct (check, answer) pairs behind the numbers.")
    agreed = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True)
    reword = serializers.BooleanField(help_text="κ < 0.6 or agreement < 80 % over at least 10 distinct answers.")


class JudgeRatesOutput(serializers.Serializer):
    """A judge against reviewers' labels (grading.engine.calibration.JudgeRates), human verdict as the truth."""

    tp = serializers.IntegerField(help_text="judge met, humans met")
    fn = serializers.IntegerField(help_text="judge not met, humans met")
    fp = serializers.IntegerField(help_text="judge met, humans not met")
    tn = serializers.IntegerField(help_text="judge not met, humans not met")
    answers = serializers.IntegerField(help_text="distinct labelled answers with a majority verdict")
    answers_met = serializers.IntegerField()
    answers_not_met = serializers.IntegerField()
    contested = serializers.IntegerField(help_text="answers whose reviewers split evenly: left out")
    tpr = serializers.FloatField(allow_null=True, help_text="judge met among answers humans call met")
    tpr_ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="Wilson 95 %")
    tnr = serializers.FloatField(allow_null=True, help_text="judge not met among answers humans call not met")
    tnr_ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True, help_text="Wilson 95 %")
    kappa = serializers.FloatField(allow_null=True)
    f1_met = serializers.FloatField(allow_null=True)
    f1_not_met = serializers.FloatField(allow_null=True)
    macro_f1 = serializers.FloatField(allow_null=True, help_text="mean of the two F1s (HealthBench)")
    validated = serializers.BooleanField()
    validation = serializers.CharField(help_text="why it is validated or not, in words")


class ValidationRuleOutput(serializers.Serializer):
    min_labels = serializers.IntegerField()
    min_per_class = serializers.IntegerField()
    min_rate = serializers.FloatField()
    blocking = serializers.BooleanField(help_text="a judge not validated blocks submission (else a warning)")


class AgreementScopeOutput(AgreementStatsOutput):
    calibration = JudgeRatesOutput()


class AgreementCheckOutput(AgreementScopeOutput):
    task = serializers.CharField()
    check_id = serializers.CharField()
    left_out = serializers.IntegerField(
        help_text="labels of this check on an earlier judge question (criterion, reference, scale or model), not "
        "counted"
    )


class LeftOutCheckOutput(serializers.Serializer):
    task = serializers.CharField()
    check_id = serializers.CharField()
    labels = serializers.IntegerField()


class LeftOutOutput(serializers.Serializer):
    labels = serializers.IntegerField(help_text="labels not counted, in all")
    checks = LeftOutCheckOutput(many=True)


class AgreementOutput(serializers.Serializer):
    overall = AgreementScopeOutput()
    tasks = serializers.DictField(child=AgreementScopeOutput())
    checks = AgreementCheckOutput(many=True)
    left_out = LeftOutOutput(
        help_text="labels on a judge question other than the one the task's latest version asks of the check "
        "(an earlier criterion, or a check it no longer has): counted nowhere here"
    )
    rule = ValidationRuleOutput()


class CorrectedCheckOutput(serializers.Serializer):
    check_id = serializers.CharField()
    n = serializers.IntegerField(help_text="rollouts that scored the check")
    raw_pass_rate = serializers.FloatField(allow_null=True)
    raw_pass_rate_ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    corrected_pass_rate = serializers.FloatField(allow_null=True, help_text="Rogan–Gladen, clipped to [0, 1]")
    corrected_pass_rate_ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    note = serializers.CharField(help_text="why a figure is missing")
    judge = JudgeRatesOutput()


class PreviewCalibrationOutput(serializers.Serializer):
    checks = CorrectedCheckOutput(many=True)
    mean_reward = serializers.FloatField(allow_null=True)
    corrected_mean_reward = serializers.FloatField(allow_null=True)
    corrected_mean_reward_ci95 = serializers.ListField(child=serializers.FloatField(), allow_null=True)
    note = serializers.CharField()
    method = serializers.CharField()
    bootstrap = serializers.DictField(child=serializers.IntegerField())
    rule = ValidationRuleOutput()


# --------------------------------------------------------------------------------------------- views


class SubmitApi(APIView):
    @extend_schema(
        request=SubmitInput,
        responses={200: SubmissionOutput, **_errors(400, 403, 404, 409)},
        operation_id="tasks_versions_submit",
        tags=["review"],
        description="Send this version to review. 409 `gates_failed` lists the failing gates (also in "
        "`error.gates`); an admin may send `override_reason` to submit anyway (audited).",
    )
    def post(self, request, slug, number):
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
        data = validated(SubmitInput, request.data)
        submission = services.task_submit(
            task=version.task,
            user=request.user,
            task_version=version,
            override_reason=data.get("override_reason") or "",
        )
        return Response(SubmissionOutput(submission).data)


class ReviewsApi(APIView):
    @extend_schema(responses=paginated(ReviewOutput), operation_id="tasks_versions_reviews_list", tags=["review"])
    def get(self, request, slug, number):
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
        reviews = version.reviews.select_related("reviewer", "task_version__task").order_by("-created_at", "-id")
        return paginate(request, self, reviews, ReviewOutput)

    @extend_schema(
        request=ReviewInput,
        responses={201: ReviewOutput, **_errors(400, 403, 404, 409)},
        operation_id="tasks_versions_reviews_create",
        tags=["review"],
        description="Approve, request changes or comment on the version in review. 409 `not_in_review` "
        "when it is not; 403 for the task's owner or the version's author; 400 "
        "`comment_required` for a request for changes without any comment.",
    )
    def post(self, request, slug, number):
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
        data = validated(ReviewInput, request.data)
        review = services.review_create(
            task_version=version,
            reviewer=request.user,
            decision=data["decision"],
            comment=data.get("comment") or "",
            check_comments=data.get("check_comments"),
        )
        return Response(ReviewOutput(review).data, status=status.HTTP_201_CREATED)


def _age(request) -> int | None:
    value = request.query_params.get("older_than_days", "").strip()
    if not value:
        return None
    try:
        days = int(value)
    except ValueError:
        raise DomainError(
            "older_than_days must be a whole number of days.",
            details=[{"pointer": "/older_than_days", "message": "expected an integer"}],
        )
    if not 0 <= days <= 36500:
        raise DomainError(
            "older_than_days must be between 0 and 36500.",
            details=[{"pointer": "/older_than_days", "message": "out of range"}],
        )
    return days


class ReviewQueueApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("environment", str),
            OpenApiParameter("tag", str),
            OpenApiParameter("author", str, description="owner's username"),
            OpenApiParameter("older_than_days", int, description="submitted at least this long ago"),
        ],
        responses={200: paginated(QueueItemOutput), **_errors(400, 403)},
        operation_id="review_queue_list",
        tags=["review"],
        description="Tasks in review that you may decide, oldest submission first (reviewers and admins; "
        "403 for anyone else, as on /review/).",
    )
    def get(self, request):
        if not permissions.can_review(request.user):  # the page's refusal (review.views.review_queue), before the query
            raise NotAllowed("Only reviewers and admins have a review queue.")
        filters = {key: request.query_params.get(key, "").strip()[:100] for key in ("environment", "tag", "author")}
        source = selectors.review_queue(user=request.user, older_than_days=_age(request), **filters)
        paginator = Pagination()
        paginator.django_paginator_class = partial(
            KeysFirstPaginator, rows=partial(authoring_selectors.task_rows, user=request.user)
        )
        page = paginator.paginate_queryset(source, request, view=self)
        zone = timezone.get_current_timezone()
        return paginator.get_paginated_response([queue_item_output(row, zone) for row in page])


class InboxApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("unread", bool, description="only unread items")],
        responses=paginated(InboxItemOutput),
        operation_id="inbox_list",
        tags=["review"],
        description="Reviews, comments, replies and approvals on your tasks and threads, newest first.",
    )
    def get(self, request):
        items = selectors.inbox_items(user=request.user)
        if request.query_params.get("unread") in ("1", "true"):
            items = items.filter(read_at__isnull=True)
        return paginate(request, self, items, InboxItemOutput)


class InboxReadApi(APIView):
    @extend_schema(
        request=None,
        responses=inline_serializer("InboxRead", {"marked": serializers.IntegerField()}),
        operation_id="inbox_read",
        tags=["review"],
    )
    def post(self, request):
        return Response({"marked": services.inbox_mark_read(user=request.user)})


def _gates_body(version) -> dict:
    results = review_gates.gates_evaluate(task_version=version)
    return {
        "task": version.task.slug,
        "version": version.number,
        "all_pass": all(result.ok for result in results),
        "gates": [result.to_dict() for result in results],
        "missing_previews": [
            {"policy": policy, "n": n} for policy, n in review_gates.gates_missing_previews(task_version=version)
        ],
    }


GATES = inline_serializer(
    "Gates",
    fields={
        "task": serializers.CharField(),
        "version": serializers.IntegerField(),
        "all_pass": serializers.BooleanField(),
        "gates": GateOutput(many=True),
        "missing_previews": serializers.ListField(child=serializers.DictField()),
    },
)


class GatesApi(APIView):
    @extend_schema(responses={200: GATES, **_errors(404)}, operation_id="tasks_versions_gates", tags=["review"])
    def get(self, request, slug, number):
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
        return Response(_gates_body(version))


class GatesRunApi(APIView):
    @extend_schema(
        request=None,
        responses={
            201: inline_serializer(
                "GatesRun",
                fields={"preview_runs": serializers.ListField(child=serializers.IntegerField()), "gates": GATES},
            ),
            **_errors(400, 403, 404, 409),
        },
        operation_id="tasks_versions_gates_run",
        tags=["review"],
        description="Start the previews the gates still miss (oracle ×3, nop ×3, each declared probe ×1, each "
        "applicable hack probe ×1), and those whose incomplete grades left a gate undecided. 409 "
        "(gates_waiting): the gates wait for a judge to be configured, and no preview can help yet.",
    )
    def post(self, request, slug, number):
        version = authoring_selectors.task_version_get_for_user(slug=slug, number=number, user=request.user)
        runs = review_gates.gates_run(task_version=version, user=request.user)
        return Response(
            {"preview_runs": [run.pk for run in runs], "gates": _gates_body(version)}, status=status.HTTP_201_CREATED
        )


class CommentsApi(APIView):
    @extend_schema(
        responses=ThreadOutput(many=True),
        operation_id="tasks_comments_list",
        tags=["review"],
        description="Every thread on the task, oldest first, with its replies.",
    )
    def get(self, request, slug):
        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        selectors.review_workspace_check(user=request.user)
        return Response(ThreadOutput(selectors.comment_threads(task=task), many=True).data)

    @extend_schema(
        request=CommentInput,
        responses={201: ThreadOutput, **_errors(400, 403, 404)},
        operation_id="tasks_comments_create",
        tags=["review"],
        description="Start a thread on the task (no check_id) or a check, or reply with `parent`.",
    )
    def post(self, request, slug):
        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        selectors.review_workspace_check(user=request.user)
        data = validated(CommentInput, request.data)
        parent = version = None
        if data.get("parent") is not None:
            parent = Comment.objects.filter(pk=data["parent"], task=task).first()
            if parent is None:
                raise DomainError(
                    f"{slug} has no comment {data['parent']}.",
                    details=[{"pointer": "/parent", "message": "no such comment on this task"}],
                )
        if data.get("version") is not None:
            try:
                version = authoring_selectors.task_version_get_for_user(
                    slug=slug, number=data["version"], user=request.user
                )
            except Http404:
                raise DomainError(
                    f"{slug} has no version {data['version']}.",
                    details=[{"pointer": "/version", "message": "no such version"}],
                )
        comment = services.comment_create(
            task=task,
            user=request.user,
            body=data["body"],
            check_id=data["check_id"],
            parent=parent,
            task_version=version,
        )
        thread = Comment.objects.select_related("author", "resolved_by", "task_version").get(
            pk=comment.parent_id or comment.pk
        )
        return Response(ThreadOutput(thread).data, status=status.HTTP_201_CREATED)


class CommentResolveApi(APIView):
    @extend_schema(
        request=ResolveInput,
        responses={200: ThreadOutput, **_errors(403, 404)},
        operation_id="tasks_comments_resolve",
        tags=["review"],
        description='Resolve a thread (or reopen it with {"resolved": false}).',
    )
    def post(self, request, slug, comment_id):
        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        selectors.review_workspace_check(user=request.user)
        comment = Comment.objects.filter(pk=comment_id, task=task).first()
        if comment is None:
            raise Http404(f"{slug} has no comment {comment_id}")
        data = validated(ResolveInput, request.data)
        root = services.comment_resolve(comment=comment, user=request.user, resolved=data["resolved"])
        return Response(ThreadOutput(root).data)


class AgreementApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("task", str, description="task slug"),
            OpenApiParameter("environment", str, description="environment slug"),
        ],
        responses={200: AgreementOutput, **_errors(400, 404)},
        operation_id="agreement",
        tags=["review"],
        description="Judge–human agreement (percent and Cohen's kappa, with the number of distinct answers) "
        "overall, per task and per check; `reword` flags a criterion to rewrite. `calibration`: the judge's TPR "
        "and TNR with Wilson intervals, F1 and whether labels validate it under `rule`, the environment's rule. "
        "Each check counts the labels on the judge question its task's latest version asks; `left_out` counts the "
        "others.",
    )
    def get(self, request):
        selectors.review_workspace_check(user=request.user)
        task_slug = request.query_params.get("task", "").strip()
        environment_slug = request.query_params.get("environment", "").strip()
        if bool(task_slug) == bool(environment_slug):
            raise DomainError(
                "Give exactly one of ?task=SLUG or ?environment=SLUG.",
                details=[{"pointer": "/task", "message": "task or environment, not both"}],
            )
        if task_slug:
            scope = {"task": authoring_selectors.task_get_for_user(slug=task_slug, user=request.user)}
        else:
            scope = {
                "environment": authoring_selectors.environment_get_for_user(slug=environment_slug, user=request.user)
            }
        return Response(review_agreement.agreement_json(**scope))


class PreviewCalibrationApi(APIView):
    @extend_schema(
        responses={200: PreviewCalibrationOutput, **_errors(404, 409)},
        operation_id="preview_calibration",
        tags=["review"],
        description="A finished preview's judged pass rates, raw and corrected by each judge's TPR / TNR "
        "(Rogan–Gladen), with seeded bootstrap intervals, and the mean reward corrected by them. 409 while "
        "the preview runs or when its rubric has no binary judged check.",
    )
    def get(self, request, preview_run_id: int):
        from review.calibration import preview_calibration_json
        from sandbox import selectors as sandbox_selectors

        preview_run = sandbox_selectors.preview_run_get_for_user(preview_run_id=preview_run_id, user=request.user)
        if not preview_run.is_finished:
            raise DomainError(
                f"Preview {preview_run.pk} is {preview_run.status}: its corrected rates come when it finishes.",
                code="preview_running",
                http_status=409,
            )
        document = preview_calibration_json(preview_run=preview_run)
        if document is None:
            raise DomainError(
                f"Preview {preview_run.pk}'s rubric has no binary llm_judge check: nothing to correct.",
                code="no_judged_checks",
                http_status=409,
            )
        return Response(document)


# ---------------------------------------------------------------- blind human reward prediction (review.blind)

BLIND_FIGURES = inline_serializer(
    "BlindFigures",
    fields={
        "task": serializers.CharField(),
        "scored": serializers.IntegerField(help_text="rollouts scored blind"),
        "scores": serializers.IntegerField(help_text="blind scores (a rollout may have several reviewers')"),
        "spearman": serializers.FloatField(allow_null=True, help_text="reward vs mean human score; null: undefined"),
        "spearman_ci95": serializers.ListField(child=serializers.FloatField(), allow_null=True),
        "flagged": serializers.BooleanField(),
        "verdict": serializers.CharField(),
        "rule": serializers.DictField(),
        "sample": serializers.IntegerField(help_text="rollouts in the stratified sample"),
        "hacks": serializers.ListField(child=serializers.DictField()),
        "hacks_hidden": serializers.IntegerField(help_text="hacks among rollouts the caller may still score blind"),
        "bootstrap": serializers.DictField(),
    },
)


class BlindFiguresApi(APIView):
    @extend_schema(
        responses={200: BLIND_FIGURES, **_errors(403, 404)},
        operation_id="blind_figures",
        tags=["review"],
        description="How the task's reward ranks rollouts against reviewers' blind scores: Spearman with a seeded "
        "bootstrap interval, whether the environment's rule flags it, and `hacks`: rollouts the rubric passes that "
        "most of their blind scorers fail (`example`: already an example answer; `probe`: its answer already a probe); "
        "those the caller may still score blind "
        "are only counted, in `hacks_hidden`, until the caller has scored them.",
    )
    def get(self, request, slug: str):
        from review import blind

        selectors.review_workspace_check(user=request.user)
        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        return Response(blind.task_figures(task=task, viewer=request.user))


class EnvironmentBlindFiguresApi(APIView):
    @extend_schema(
        responses={
            200: inline_serializer("EnvironmentBlindFigures", fields={"environment": serializers.CharField()}),
            **_errors(403, 404),
        },
        operation_id="environment_blind_figures",
        tags=["review"],
        description="The environment's blind-prediction figures pooled over its tasks' scored rollouts, and each "
        "task's (scored, scores, spearman, spearman_ci95, flagged, verdict, hacks: a count).",
    )
    def get(self, request, slug: str):
        from review import blind

        selectors.review_workspace_check(user=request.user)
        environment = authoring_selectors.environment_get_for_user(slug=slug, user=request.user)
        return Response(blind.environment_figures(environment=environment))


class BlindSampleApi(APIView):
    @extend_schema(
        responses={
            200: inline_serializer(
                "BlindSample",
                fields={
                    "to_score": serializers.ListField(child=serializers.IntegerField()),
                    "scored": serializers.ListField(child=serializers.IntegerField()),
                },
            ),
            **_errors(403, 404),
        },
        operation_id="blind_sample",
        tags=["review"],
        description="The task's stratified blind sample for you: rollout ids still to score (in order) and those "
        "you scored. No reward: read a rollout's grade only after scoring it. 403 for the task's author.",
    )
    def get(self, request, slug: str):
        from review import blind
        from review.models import BlindScore

        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        blind.blind_check(task=task, user=request.user)
        ids = blind.sample_ids(task=task)
        done = set(
            BlindScore.objects.filter(reviewer=request.user, rollout_id__in=ids).values_list("rollout_id", flat=True)
        )
        return Response({"to_score": [pk for pk in ids if pk not in done], "scored": [pk for pk in ids if pk in done]})


class BlindScoreInput(serializers.Serializer):
    passed = serializers.BooleanField()
    score = serializers.IntegerField(min_value=0, max_value=10)


class BlindScoreApi(APIView):
    @extend_schema(
        request=BlindScoreInput,
        responses={
            201: inline_serializer(
                "BlindScoreRecorded",
                fields={
                    "rollout": serializers.IntegerField(),
                    "passed": serializers.BooleanField(),
                    "score": serializers.IntegerField(),
                    "reward": serializers.FloatField(help_text="the rubric's reward, revealed once you scored"),
                    "rubric_passed": serializers.BooleanField(allow_null=True),
                },
            ),
            **_errors(400, 403, 404, 409),
        },
        operation_id="blind_score",
        tags=["review"],
        description="Score a rollout of the task blind (reviewers and admins; never the task's author): passed and "
        "0-10. Once per reviewer and rollout: 409 for a second. The answer reveals the rubric's reward.",
    )
    def post(self, request, slug: str, rollout_id: int):
        from review import blind

        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        blind.blind_check(task=task, user=request.user)
        rollout = blind.rollout_for(task=task, rollout_id=rollout_id)
        data = validated(BlindScoreInput, request.data)
        score = blind.score_record(task=task, rollout=rollout, reviewer=request.user, **data)
        return Response(
            {
                "rollout": rollout.pk,
                "passed": score.passed,
                "score": score.score,
                "reward": rollout.reward,
                "rubric_passed": rollout.passed,
            },
            status=status.HTTP_201_CREATED,
        )


class BlindHackExampleApi(APIView):
    @extend_schema(
        request=None,
        responses={
            201: inline_serializer(
                "BlindHackExample", fields={"version": serializers.IntegerField(), "example": serializers.CharField()}
            ),
            **_errors(400, 403, 404, 409),
        },
        operation_id="blind_hack_example",
        tags=["review"],
        description="Turn a flagged hack (a rollout the rubric passes and blind scorers fail) into an example answer "
        "expected to fail: a new version of the task (its author or an admin), audited. 409 when it already is one.",
    )
    def post(self, request, slug: str, rollout_id: int):
        from review import blind

        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        version = blind.hack_to_example(task=task, rollout_id=rollout_id, user=request.user)
        return Response(
            {"version": version.number, "example": blind.example_name(rollout_id)}, status=status.HTTP_201_CREATED
        )


class BlindHackProbeApi(APIView):
    @extend_schema(
        request=None,
        responses={
            201: inline_serializer(
                "BlindHackProbe",
                fields={
                    "version": serializers.IntegerField(),
                    "probe": inline_serializer(
                        "BlindHackProbeEntry",
                        fields={"answer": serializers.CharField(), "max_reward": serializers.FloatField()},
                    ),
                },
            ),
            **_errors(400, 403, 404, 409),
        },
        operation_id="blind_hack_probe",
        tags=["review"],
        description="Turn a flagged hack (a rollout the rubric passes and blind scorers fail) into a rubric probe: "
        "its final answer, with max_reward the largest hundredth below both the task's pass threshold and the hack's "
        "reward (so the gates fail it until the rubric is fixed). A new version of the task (its author or an admin), "
        "audited. 409 when its answer already is a probe; 400 for an answer longer than a probe runs.",
    )
    def post(self, request, slug: str, rollout_id: int):
        from review import blind

        task = authoring_selectors.task_get_for_user(slug=slug, user=request.user)
        version = blind.hack_to_probe(task=task, rollout_id=rollout_id, user=request.user)
        return Response(
            {"version": version.number, "probe": version.spec["rubric"]["probes"][-1]}, status=status.HTTP_201_CREATED
        )
