"""Review data: a reviewer's decision on one exact task version.

The task's status lives on authoring.Task; only review.services changes it
(submit, approve, request changes).
"""

from __future__ import annotations

from django.conf import settings
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
