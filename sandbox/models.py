from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class PreviewRun(models.Model):
    """A batch of N rollouts of one TaskVersion with one policy.

    `status` moves queued → running → done (or cancelled) as its rollouts move; the
    rollouts are the truth, the run's status and `summary` are derived from them by
    `preview_run_refresh`. `cancel_requested` is the flag running rollouts poll.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (Status.DONE, Status.CANCELLED)
    MAX_N = 64

    task_version = models.ForeignKey("authoring.TaskVersion", on_delete=models.CASCADE, related_name="preview_runs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # The runtime's policy string; its kind and argument are stored apart, parsed once by
    # sandbox.services.policy_parse, so nothing re-splits the string.
    policy = models.CharField(max_length=2100, help_text='"oracle", "nop", "probe:TEXT", "hack:NAME" or "model".')
    policy_kind = models.CharField(max_length=20, help_text="oracle, nop, probe, model, hack, ...")
    policy_argument = models.TextField(blank=True, default="", help_text="The probe text or the hack name.")
    n = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(MAX_N)])
    backend = models.CharField(max_length=20)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    # Filled when the run finishes: counts, mean reward, pass rate (+ interval), pass@k.
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["task_version", "-created_at"])]
        constraints = [
            models.CheckConstraint(condition=models.Q(n__gte=1) & models.Q(n__lte=64), name="preview_run_n_1_to_64"),
        ]

    def __str__(self) -> str:
        return f"Preview {self.pk}: {self.policy_label} × {self.n}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def policy_label(self) -> str:
        if self.policy_kind == "probe":
            from grading.engine.gate_rules import probe_shown

            return f"probe {probe_shown(self.policy_argument)}"
        return self.policy


class Rollout(models.Model):
    """One episode: queued → running → grading → done | error | cancelled.

    A worker claims a queued row with a conditional UPDATE (see
    `sandbox.services.rollout_claim`); `attempts` counts claims and doubles as the
    claim token, so a worker whose claim was taken away (stale → re-queued) cannot
    overwrite the newer attempt's result.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        GRADING = "grading", "Grading"
        DONE = "done", "Done"
        ERROR = "error", "Error"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = (Status.RUNNING, Status.GRADING)
    TERMINAL = (Status.DONE, Status.ERROR, Status.CANCELLED)
    MAX_ATTEMPTS = 2

    preview_run = models.ForeignKey(PreviewRun, on_delete=models.CASCADE, related_name="rollouts")
    index = models.PositiveSmallIntegerField(help_text="0-based position in its preview run.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True, default="")
    # The latest progress event, e.g. {"phase": "agent", "step": 3}.
    progress = models.JSONField(default=dict, blank=True)
    steps = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    trajectory = models.JSONField(default=list, blank=True)
    answer = models.TextField(blank=True, default="")
    # [{"path": "report.md", "size": 120, "content": "..." | null, "truncated": false}]
    workspace_files = models.JSONField(default=list, blank=True)
    # The stored grade (its gymwright.grade/v1 document is grade.document); reward and passed repeat its
    # totals for lists and calibration.
    grade = models.ForeignKey("grading.Grade", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reward = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When its job message was last sent: a QUEUED rollout whose message is older than
    # ROLLOUT_REQUEUE_AFTER_S (lost in a broker restart) is sent again by the reaper.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["preview_run_id", "index"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]
        constraints = [
            models.UniqueConstraint(fields=["preview_run", "index"], name="rollout_unique_index_per_run"),
        ]

    def __str__(self) -> str:
        return f"Rollout {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
