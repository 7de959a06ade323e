"""Stored grades: one Grade per graded answer, one CheckResult per check, reviewers' JudgeLabels;
and the model endpoints (judge and policy) that grading and the sandbox both call.

A Grade is written once by `grading.services.grade_record` from the engine's
gymwright.grade/v1 document (kept verbatim in `document`); the columns repeat its
numbers so that lists and statistics need no JSON parsing. Grades are not edited
afterwards: a new grading makes a new Grade.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from grading.engine.models import flat_checks, kinds_with
from grading.engine.scoring import SCORING_RULE
from gymwright.numbers import format_number


class Grade(models.Model):
    class Source(models.TextChoices):
        DRY_RUN = "dry_run", "Dry run"
        ROLLOUT = "rollout", "Rollout"

    task_version = models.ForeignKey(
        "authoring.TaskVersion", null=True, blank=True, on_delete=models.CASCADE, related_name="grades"
    )
    # The Rollout points at its Grade from the sandbox app; this plain id only lets a
    # grade be traced back without a circular dependency between the two apps.
    rollout_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    source = models.CharField(max_length=10, choices=Source.choices)
    reward = models.FloatField()
    # The reward had every unscored check been met; equal to reward when complete. Null for a grade of
    # scoring rule 1 that could not be totalled again.
    reward_upper = models.FloatField(null=True, blank=True)
    earned = models.FloatField()
    max = models.FloatField()
    passed = models.BooleanField()
    gated = models.BooleanField(default=False)
    complete = models.BooleanField(default=True)
    # grading.engine.scoring.SCORING_RULE the totals follow: 1 (unscored checks left out of max) decides no
    # gate and no pack calibration ("graded under the old scoring rule — run it again").
    scoring_rule = models.PositiveSmallIntegerField(default=SCORING_RULE)
    document = models.JSONField(help_text="The gymwright.grade/v1 document, as the engine produced it.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["task_version", "source", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(reward__gte=0) & models.Q(reward__lte=1), name="grade_reward_in_unit_interval"
            ),
        ]

    def __str__(self) -> str:
        return f"Grade {self.pk}: {format_number(self.earned)} / {format_number(self.max)}, reward {format_number(self.reward, fixed=True)}"

    @property
    def old_rule(self) -> bool:
        """Totalled under scoring rule 1: its reward is not a lower bound, it decides nothing."""
        return self.scoring_rule < SCORING_RULE

    @property
    def unscored_count(self) -> int:
        return sum(1 for check in self.document.get("checks", []) if check.get("status") == "unscored")

    @property
    def unscored_note(self) -> str:
        """“2 checks unscored: no judge model configured” (the checks with nothing unscored under them),
        or, for a grade of the old rule, that it must be run again."""
        if self.old_rule:
            return "graded under the old scoring rule — run it again"
        rows = [check for check, _, _, _ in flat_checks(self.document.get("checks") or [])]
        leaves = [
            check
            for check in rows
            if check.get("status") == "unscored"
            and not any(
                child.get("status") == "unscored" for child in check.get("checks") or [] if isinstance(child, dict)
            )
        ]
        reasons = list(dict.fromkeys(check.get("explanation") for check in leaves if check.get("explanation")))
        count = len(leaves)
        return f"{count} check{'s' if count != 1 else ''} unscored" + (
            f": {'; '.join(reasons[:2])}{'; …' if len(reasons) > 2 else ''}" if reasons else ""
        )


class CheckResult(models.Model):
    class Status(models.TextChoices):
        SCORED = "scored", "Scored"
        UNSCORED = "unscored", "Unscored"

    grade = models.ForeignKey(Grade, on_delete=models.CASCADE, related_name="check_results")
    position = models.PositiveIntegerField(help_text="Order in the rubric, depth first (groups before children).")
    depth = models.PositiveSmallIntegerField(default=0, help_text="0 for top-level checks, 1 for group children...")
    parent_check_id = models.CharField(max_length=64, blank=True, default="")
    check_id = models.CharField(max_length=64)
    kind = models.CharField(max_length=32)
    title = models.CharField(max_length=300, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices)
    score = models.FloatField(null=True, blank=True)
    points = models.FloatField()
    awarded = models.FloatField(null=True, blank=True)
    required = models.BooleanField(default=False)
    explanation = models.TextField(blank=True, default="")
    votes = models.JSONField(default=list, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["grade_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["grade", "check_id"], name="check_result_unique_check_per_grade"),
            models.CheckConstraint(
                condition=models.Q(status="unscored") | models.Q(score__isnull=False),
                name="check_result_scored_has_score",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.check_id} ({self.status})"

    @property
    def is_judged(self) -> bool:
        return self.kind in kinds_with("judged")

    @property
    def is_binary_judgement(self) -> bool:
        """A met / not met verdict (boolean votes), as opposed to a score on a scale."""
        if self.votes:
            return all(isinstance(vote, bool) for vote in self.votes)
        return self.score in (0.0, 1.0)


class JudgeLabel(models.Model):
    """A reviewer's own verdict on one judged check: agrees with the judge or overrules it."""

    class Verdict(models.TextChoices):
        MET = "met", "Met"
        NOT_MET = "not_met", "Not met"
        SCORE = "score", "Score"

    check_result = models.ForeignKey(CheckResult, on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judge_labels")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    score = models.FloatField(null=True, blank=True, help_text="The reviewer's score in [0, 1] for scaled judges.")
    agrees = models.BooleanField(help_text="Whether the reviewer's verdict is the judge's verdict.")
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["reviewer", "check_result"], name="judge_label_one_per_reviewer"),
            models.CheckConstraint(
                condition=~models.Q(verdict="score") | (models.Q(score__gte=0) & models.Q(score__lte=1)),
                name="judge_label_score_verdict_has_score",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} on {self.check_result}: {self.verdict}"


class DryRun(models.Model):
    """A dry-run grading that needs the judge, done by a worker.

    Inputs are kept whole (the rubric as it was in the editor, unsaved; the answer;
    workspace files in Django storage) so that any worker on any host can grade it.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        ERROR = "error", "Error"

    task = models.ForeignKey("authoring.Task", null=True, blank=True, on_delete=models.CASCADE, related_name="dry_runs")
    task_version = models.ForeignKey(
        "authoring.TaskVersion", null=True, blank=True, on_delete=models.CASCADE, related_name="dry_runs"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    rubric = models.JSONField()
    answer = models.TextField(blank=True, default="")
    # [{"path": "report.md", "name": "<storage name>", "size": 123}]
    files = models.JSONField(default=list, blank=True)
    # The deterministic part, graded in the request; judge checks in it are pending.
    preview = models.JSONField(default=dict, blank=True)
    grade = models.ForeignKey(Grade, null=True, blank=True, on_delete=models.SET_NULL, related_name="dry_runs")
    error = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # when its job was sent; NULL: the broker did not take it (down), it waits for the broker (gymwright.jobs)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"DryRun {self.pk} ({self.status})"

    @property
    def waiting_for_broker(self) -> bool:
        """Its job waits for the job broker, which did not take it: sent when the broker answers again."""
        return self.status == self.Status.QUEUED and self.enqueued_at is None

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.DONE, self.Status.ERROR}


class ExampleRun(models.Model):
    """The task version's example answers graded (one run per version; a re-run replaces it).

    `results` holds one `grading.engine.example_answers.ExampleVerdict` dict per example, in the
    document's order, each with its grade document under "grade" (None when it has none).
    Deterministic rubrics are graded at once; rubrics with judge checks by a worker; rubrics with
    checks that run in the sandbox (`needs_sandbox`) by a sandbox worker, each example as a rollout
    whose workspace starts with the example's files.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        ERROR = "error", "Error"

    task_version = models.OneToOneField("authoring.TaskVersion", on_delete=models.CASCADE, related_name="example_run")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    needs_judge = models.BooleanField(default=False)
    needs_sandbox = models.BooleanField(default=False)
    # who asked for it (the version's author, or whoever clicked "Grade again"): a sandbox run counts
    # against their cap of rollouts in flight
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    total = models.PositiveIntegerField(default=0)
    graded = models.PositiveIntegerField(default=0)  # progress while a worker grades
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # when its job was sent (a run graded at once: when it was made); NULL: the broker did not take it
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"ExampleRun {self.pk} of version {self.task_version_id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.DONE, self.Status.ERROR}


class ModelEndpoint(models.Model):
    """An OpenAI-compatible model endpoint for the agent policy or the LLM judge.

    The API key is never stored: `api_key_env` names the environment variable that
    holds it on the web and worker hosts.
    """

    class Role(models.TextChoices):
        POLICY = "policy", "Policy (agent)"
        JUDGE = "judge", "Judge"

    class ResponseFormat(models.TextChoices):
        # The values are grading.engine.judge.RESPONSE_FORMATS.
        AUTO = "auto", "Auto (json_schema, then json_object, then none)"
        JSON_SCHEMA = "json_schema", "JSON schema (strict)"
        JSON_OBJECT = "json_object", "JSON object"
        NONE = "none", "None (the prompt alone asks for JSON)"

    name = models.CharField(max_length=100, unique=True)
    role = models.CharField(max_length=10, choices=Role.choices)
    base_url = models.URLField(max_length=500)
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        default="OPENAI_API_KEY",
        help_text="Name of the environment variable that holds the API key.",
    )
    default_params = models.JSONField(default=dict, blank=True, help_text='e.g. {"temperature": 0, "max_tokens": 2048}')
    is_default = models.BooleanField(default=False, help_text="Used when a task or rubric names no endpoint.")
    response_format = models.CharField(
        max_length=12,
        choices=ResponseFormat.choices,
        default=ResponseFormat.AUTO,
        help_text="How a judge asks for its JSON verdict. Auto sends a strict JSON schema and falls back to "
        "json_object, then to none, when the endpoint refuses it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["role"], condition=models.Q(is_default=True), name="one_default_endpoint_per_role"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.role}: {self.model})"


class EnvironmentJudge(models.Model):
    """The judge endpoint an environment's tasks' judge checks use, chosen by its owner (or an admin) among those an
    admin configured. A rubric's own judge.model wins when it names one; no row: the default judge. Grading's data,
    not the environment's: which endpoints exist is this installation's, not part of an environment version."""

    environment = models.OneToOneField(
        "authoring.Environment", on_delete=models.CASCADE, primary_key=True, related_name="judge_choice"
    )
    # An endpoint an admin deletes falls back to the default judge, as no choice does (the endpoint's own deletion
    # is the admin's call; the environments that chose it are not a reason to refuse it).
    endpoint = models.ForeignKey(
        ModelEndpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="environment_judges",
        limit_choices_to={"role": ModelEndpoint.Role.JUDGE},
    )

    def __str__(self) -> str:
        return f"{self.environment_id}: {self.endpoint.name if self.endpoint_id else 'the default judge'}"
