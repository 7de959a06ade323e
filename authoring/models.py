"""Authoring data: environments, tasks and their immutable versions, blobs, audit.

Reviews live in the review app, which alone changes a task's review status.

Versions (EnvironmentVersion, TaskVersion) are append-only: a row is written once
and never updated. `ImmutableQuerySet` refuses bulk updates and `save()` refuses
to write an existing row, so no code path can change a version in place.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from grading.engine.models import TAG_MAX_CHARS, TITLE_MAX_CHARS
from gymwright.fields import BulkJSONField

# Every slug (task, environment, pack), and every message, help text and refusal that speaks of one: the
# forms and the API check it with this validator too (Django's and DRF's SlugField allow uppercase and
# underscores, and said so in their own message).
SLUG_RULE = "1-64 lowercase letters, digits and hyphens, not starting or ending with a hyphen"
slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{0,62}[a-z0-9]$|^[a-z0-9]$", f"Use {SLUG_RULE}.")


class ImmutableRowError(Exception):
    pass


class ImmutableQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ImmutableRowError(f"{self.model.__name__} rows are immutable; create a new version instead")

    def bulk_update(self, *args, **kwargs):
        raise ImmutableRowError(f"{self.model.__name__} rows are immutable; create a new version instead")


class ImmutableModel(models.Model):
    objects = ImmutableQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ImmutableRowError(f"{type(self).__name__} {self.pk} is immutable; create a new version instead")
        super().save(*args, **kwargs)


class Blob(models.Model):
    """A content-addressed file. The same bytes are stored once, under their sha256."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    file = models.FileField(upload_to="blobs/", max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"


class Tag(models.Model):
    name = models.CharField(max_length=TAG_MAX_CHARS, unique=True)  # the task format's bound

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Environment(models.Model):
    """The mutable head of an environment; its content lives in EnvironmentVersion."""

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="environments")
    latest_version = models.ForeignKey(
        "EnvironmentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # When a judged check of this environment's tasks counts as validated (grading.engine.calibration): this
    # many distinct labelled answers, half of each class, both TPR and TNR at least the rate. The gates warn
    # about a check that is not, and block only where `judge_unvalidated_blocks` says so.
    # Defaults in the database too (db_default): a row written without these columns (an older migration state's
    # model, a raw INSERT) gets them instead of failing NOT NULL.
    judge_min_labels = models.PositiveIntegerField(
        default=50, db_default=50, validators=[MinValueValidator(2), MaxValueValidator(100_000)]
    )
    judge_min_rate = models.FloatField(
        default=0.85, db_default=0.85, validators=[MinValueValidator(0.5), MaxValueValidator(1.0)]
    )
    judge_unvalidated_blocks = models.BooleanField(
        default=False,
        db_default=False,
        help_text="A judged check that is not validated blocks submission (else it is a warning).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(judge_min_rate__gte=0.5, judge_min_rate__lte=1.0, judge_min_labels__gte=2),
                name="environment_judge_validation_in_range",
            )
        ]

    def __str__(self) -> str:
        return self.slug


class EnvironmentVersion(ImmutableModel):
    """One immutable version of an environment.

    `spec` is the `environment` object of gymwright.task/v1 without id and version:
    image, dockerfile, setup, network, limits, tools, custom_tools, files
    ([{path, sha256}], shared data files) and checks_module (Python source or null).
    """

    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField()
    sha256 = models.CharField(max_length=64)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    message = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["environment_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["environment", "number"], name="env_version_unique_number")]

    def __str__(self) -> str:
        return f"{self.environment.slug} v{self.number}"


class Task(models.Model):
    """The mutable head of a task: identity, status, tags, owner, pointer to the latest version."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        IN_REVIEW = "in_review", "In review"
        CHANGES_REQUESTED = "changes_requested", "Changes requested"
        APPROVED = "approved", "Approved"
        ARCHIVED = "archived", "Archived"

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    title = models.CharField(max_length=TITLE_MAX_CHARS)  # the task format's bound
    # No index of their own: the (environment, -updated_at) and (owner, -updated_at) indexes below
    # lead with them, and every index is written again for each of an import's new rows.
    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    tags = models.ManyToManyField(Tag, blank=True, related_name="tasks")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    # The exact version a reviewer approved (packs export it), kept when later drafts follow it.
    approved_version = models.ForeignKey(
        "TaskVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The approved version's title, set with `approved_version` (review.services): what a member who reads approved
    # work only (lab) is shown and searches, where `title` follows every new draft. The version's own title is in its
    # spec, which lists do not read. `db_default`: an import's raw inserts (authoring.services) leave it out.
    approved_title = models.CharField(max_length=TITLE_MAX_CHARS, blank=True, default="", db_default="")
    # As `approved_title`, the approved version's tags and when it was approved: `tags` and `updated_at` follow every
    # new draft (and every review), so a lab member's list, tag menu, tag filter, task page and API read these.
    approved_tags = models.ManyToManyField(Tag, blank=True, related_name="approved_tasks")
    approved_at = models.DateTimeField(null=True, blank=True)
    latest_version = models.ForeignKey(
        "TaskVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # When the latest submission sent the task to review (review.services.task_submit sets it with the submission):
    # the review queue's order, oldest first, read from the task itself instead of from its submissions.
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["status", "-updated_at"]),
            models.Index(fields=["environment", "-updated_at"]),
            models.Index(fields=["owner", "-updated_at"]),
            models.Index(fields=["-updated_at", "-id"]),
            # The review queue and every reviewer's navigation count: the tasks in review in queue order, with
            # what the queue's rule reads (the owner, the latest version), answered from the index alone. Only
            # tasks in review are in it: an import's drafts do not write it.
            models.Index(
                fields=["submitted_at", "id", "owner", "latest_version"],
                name="task_review_queue",
                condition=models.Q(status="in_review"),
            ),
            # A lab member's task list, newest approval first (approved tasks only: drafts do not write it).
            models.Index(
                fields=["-approved_at", "-id"],
                name="task_approved_order",
                condition=models.Q(approved_version__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class TaskVersion(ImmutableModel):
    """One immutable version of a task: the whole gymwright.task/v1 document.

    `sha256` is the hash of the canonical JSON of `spec`; `content_sha256` hashes the
    content without its version number, so an unchanged save is recognised.
    """

    # indexed by the (task, number) constraint below, which leads with it
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="versions", db_index=False)
    number = models.PositiveIntegerField()
    spec = BulkJSONField()
    sha256 = models.CharField(max_length=64)
    content_sha256 = models.CharField(max_length=64)
    environment_version = models.ForeignKey(EnvironmentVersion, on_delete=models.PROTECT, related_name="task_versions")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    message = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="task_version_unique_number")]

    def __str__(self) -> str:
        return f"{self.task.slug} v{self.number}"

    @property
    def rubric(self) -> dict:
        return self.spec.get("rubric") or {}

    @property
    def prompt(self) -> str:
        return self.spec.get("prompt") or ""


class AuditEvent(models.Model):
    """Who did what to which object, when. Written by services, shown on the object's page."""

    class Verb(models.TextChoices):
        CREATE = "create", "created"
        NEW_VERSION = "new_version", "saved a new version"
        SUBMIT = "submit", "submitted for review"
        APPROVE = "approve", "approved"
        REQUEST_CHANGES = "request_changes", "requested changes"
        COMMENT = "comment", "commented"
        EXPORT = "export", "exported"
        PREVIEW = "preview", "started a preview"
        UPLOAD = "upload", "uploaded"
        BUILD = "build", "built a pack"
        BUILD_FAILED = "build_failed", "pack build failed"
        DOWNLOAD = "download", "downloaded"
        IMPORT = "import", "imported"
        JUDGE = "judge", "chose the judge"
        CALIBRATION = "calibration", "changed the calibration rules"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    verb = models.CharField(max_length=20, choices=Verb.choices)
    # indexed by the (content_type, object_id, -created_at) index below, which leads with it
    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE, db_index=False)
    object_id = models.PositiveBigIntegerField()
    target = GenericForeignKey("content_type", "object_id")
    summary = models.CharField(max_length=300)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["content_type", "object_id", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.actor} {self.get_verb_display()} {self.summary}"
