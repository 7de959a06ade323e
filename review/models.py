"""Review data: a reviewer's decision on one exact task version.

The task's status lives on authoring.Task; only review.services changes it
(submit, approve, request changes).
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Review(models.Model):
    """A reviewer's decision on one exact TaskVersion."""

    class Decision(models.TextChoices):
        APPROVE = "approve", "Approve"
        REQUEST_CHANGES = "request_changes", "Request changes"
        COMMENT = "comment", "Comment"

    task_version = models.ForeignKey("authoring.TaskVersion", on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews")
    decision = models.CharField(max_length=20, choices=Decision.choices)
    comment = models.TextField(blank=True)
    check_comments = models.JSONField(default=dict, blank=True)  # {check_id: comment}
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.reviewer} {self.get_decision_display().lower()} {self.task_version_id}"


class Submission(models.Model):
    """A task version sent to review, with the gates as they stood then.

    `override_reason` is set when an admin submitted despite failing gates; it is shown
    to the reviewer and audited.
    """

    task_version = models.ForeignKey("authoring.TaskVersion", on_delete=models.CASCADE, related_name="submissions")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    gates = models.JSONField(default=list, blank=True)  # [GateResult.to_dict()]
    override_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["task_version", "-created_at"])]


class Comment(models.Model):
    """A comment on a task (check_id "") or on one of its checks. A root comment starts a
    thread; replies point at it. Threads are resolved as a whole (on the root).

    A thread belongs to the task and is shown on every later version whose rubric still
    has its check: that is how unresolved comments carry forward to new versions.
    """

    task = models.ForeignKey("authoring.Task", on_delete=models.CASCADE, related_name="comments")
    task_version = models.ForeignKey("authoring.TaskVersion", on_delete=models.CASCADE, related_name="comments")
    check_id = models.CharField(max_length=64, blank=True, default="")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies")
    review = models.ForeignKey(Review, null=True, blank=True, on_delete=models.SET_NULL, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["task", "parent", "resolved_at"])]

    @property
    def is_resolved(self) -> bool:
        return self.resolved_at is not None


class InboxItem(models.Model):
    """Something an author should see about their task: a review, a comment, a reply, an approval."""

    class Kind(models.TextChoices):
        APPROVED = "approved", "approved"
        CHANGES_REQUESTED = "changes_requested", "requested changes on"
        REVIEWED = "reviewed", "commented on"
        COMMENT = "comment", "commented on"
        REPLY = "reply", "replied on"
        RESOLVED = "resolved", "resolved a thread on"
        SUBMITTED = "submitted", "submitted"

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inbox_items")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    task = models.ForeignKey("authoring.Task", on_delete=models.CASCADE, related_name="+")
    version_number = models.PositiveIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    check_id = models.CharField(max_length=64, blank=True, default="")
    text = models.CharField(max_length=300, blank=True, default="")
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["recipient", "read_at"]), models.Index(fields=["recipient", "-created_at"])]


class ReviewVisit(models.Model):
    """The last version of a task a reviewer opened: the review page diffs against it."""

    task = models.ForeignKey("authoring.Task", on_delete=models.CASCADE, related_name="+")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    task_version = models.ForeignKey("authoring.TaskVersion", on_delete=models.CASCADE, related_name="+")
    seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "reviewer"], name="review_visit_one_per_reviewer")]


class BlindScore(models.Model):
    """A reviewer's score of one preview rollout made before they saw its grade: pass / fail and 0-10.

    One per reviewer and rollout, never replaced: once a score is in, its reviewer has seen the grade, and a
    second score would not be blind (review.blind)."""

    rollout = models.ForeignKey("sandbox.Rollout", on_delete=models.CASCADE, related_name="+")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    passed = models.BooleanField()
    score = models.PositiveSmallIntegerField(help_text="0 (worthless) to 10 (a perfect answer).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["rollout", "reviewer"], name="blind_score_one_per_reviewer"),
            models.CheckConstraint(condition=models.Q(score__lte=10), name="blind_score_0_to_10"),
        ]


class BlindRule(models.Model):
    """An environment's rule for flagging a task whose reward disagrees with blind human scores; without a row,
    grading.engine.calibration's defaults (Spearman below 0.5 over at least 10 scored rollouts)."""

    environment = models.OneToOneField("authoring.Environment", on_delete=models.CASCADE, related_name="blind_rule")
    # Set by the environment's owner (review.environment_settings.blind_rule_set) or in the admin.
    min_correlation = models.FloatField(default=0.5, validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)])
    min_scored = models.PositiveIntegerField(default=10, validators=[MinValueValidator(3), MaxValueValidator(100_000)])

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(min_correlation__gte=-1, min_correlation__lte=1, min_scored__gte=3),
                name="blind_rule_in_range",
            )
        ]
