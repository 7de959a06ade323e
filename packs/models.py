"""Task packs: a TaskPack and its immutable PackVersions, each pinning TaskVersions in PackEntry rows.

A PackVersion is written once as `building`, finished once (`ready` with its archive, or
`failed` with the reason), and never changed after that: `PackVersionQuerySet.update`
refuses, and the only writes while building go through `building_update`, which matches
`status=building` so a finished version cannot be touched.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from authoring.models import ImmutableModel, ImmutableRowError, slug_validator

SEMVER_PATTERN = r"^(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})$"


class TaskPack(models.Model):
    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    licence = models.CharField(
        max_length=100, default="proprietary", help_text="SPDX identifier or a short name, shown in the dataset card."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class PackVersionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ImmutableRowError("PackVersion rows change only while building; use building_update")

    def bulk_update(self, *args, **kwargs):
        raise ImmutableRowError("PackVersion rows change only while building; use building_update")

    def building_update(self, **kwargs) -> int:
        """Update rows that are still building (progress, finishing); finished rows are never matched."""
        return models.QuerySet.update(self.filter(status=PackVersion.Status.BUILDING), **kwargs)


class PackVersion(models.Model):
    class Status(models.TextChoices):
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    pack = models.ForeignKey(TaskPack, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=24)
    major = models.PositiveIntegerField()
    minor = models.PositiveIntegerField()
    patch = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.BUILDING)
    failure_reason = models.TextField(blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    # {"environment": slug|None, "tags": [...], "tasks": [...], "test_ratio": 0.1}
    selection = models.JSONField(default=dict)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    archive = models.FileField(upload_to="packs/", max_length=300, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    content_sha256 = models.CharField(max_length=64, blank=True, default="")
    # The archive's manifest.json without its file map ("files": a sha256 for each of the ~11 files per task,
    # 10 MB at 10,000 tasks): what the pages and the API read. The archive's own manifest has it all.
    manifest = models.JSONField(null=True, blank=True)
    # {"added": [...], "removed": [...], "changed": [{"id", "from", "to"}]} against the previous ready version
    changes = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # when the build last reported (start, progress); a building row silent for too long is reaped
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # when its build job was sent; NULL: the broker did not take it (down), it waits for the broker (gymwright.jobs)
    enqueued_at = models.DateTimeField(null=True, blank=True)

    objects = PackVersionQuerySet.as_manager()

    class Meta:
        ordering = ["pack_id", "-major", "-minor", "-patch", "-id"]  # a failed attempt before the newer one
        # A version that failed never produced an archive: its number is free again for the next build (the
        # failed row stays, with its reason). Building and ready versions hold theirs.
        constraints = [
            models.UniqueConstraint(
                fields=["pack", "version"], condition=~models.Q(status="failed"), name="pack_version_unique_version"
            ),
            models.UniqueConstraint(
                fields=["pack", "major", "minor", "patch"],
                condition=~models.Q(status="failed"),
                name="pack_version_unique_semver",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pack.slug} {self.version}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ImmutableRowError(f"PackVersion {self.pk} is written once; use building_update while building")
        super().save(*args, **kwargs)

    @property
    def semver(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    @property
    def is_finished(self) -> bool:
        return self.status != self.Status.BUILDING

    @property
    def waiting_for_broker(self) -> bool:
        """Its build job waits for the job broker, which did not take it: sent when the broker answers again."""
        return self.status == self.Status.BUILDING and self.enqueued_at is None and self.heartbeat_at is None

    @property
    def progress_percent(self) -> int:
        if not self.progress_total:
            return 100 if self.is_finished else 0
        return min(100, int(100 * self.progress_done / self.progress_total))

    @property
    def filename(self) -> str:
        return f"{self.pack.slug}-{self.version}.tar.gz"


class PackEntry(ImmutableModel):
    """One TaskVersion pinned in a PackVersion, with its split."""

    class Split(models.TextChoices):
        TRAIN = "train", "Train"
        TEST = "test", "Test"

    pack_version = models.ForeignKey(PackVersion, on_delete=models.CASCADE, related_name="entries")
    task_version = models.ForeignKey("authoring.TaskVersion", on_delete=models.PROTECT, related_name="pack_entries")
    task_slug = models.CharField(max_length=64)
    split = models.CharField(max_length=5, choices=Split.choices)

    class Meta:
        ordering = ["pack_version_id", "task_slug"]
        constraints = [
            models.UniqueConstraint(fields=["pack_version", "task_slug"], name="pack_entry_one_version_per_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task_slug} ({self.split})"


class PackVerification(models.Model):
    """One check of a ready PackVersion's stored archive: every sha256 of its manifest (what `manage.py verify_pack`
    checks) and the archive's sha256 and content_sha256 against those recorded at its build. A version never
    changes, so it is checked once after its build and again only when someone asks ("Verify again"), one check
    at a time per version; the pages show the last finished one and when it ran."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"

    pack_version = models.ForeignKey(PackVersion, on_delete=models.CASCADE, related_name="verifications")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    ok = models.BooleanField(null=True, blank=True)
    problems = models.JSONField(default=list, blank=True)
    files_checked = models.PositiveIntegerField(default=0)
    # None: the check that follows the build
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # when its job was sent; NULL: the broker did not take it (down), it waits for the broker (gymwright.jobs)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pack_version_id", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pack_version"],
                condition=models.Q(status__in=["queued", "running"]),
                name="pack_verification_one_at_a_time",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pack_version_id}: {self.status} ({'ok' if self.ok else 'failed' if self.ok is False else '-'})"


class DatasetCheck(models.Model):
    """A dataset's health report (packs.health): the gates of every task an import brought in, run in batch on the
    docker backend by a worker; `document` is the report (gymwright.dataset-health/v1), written as each task is
    checked, whole when the check is done."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    source = models.CharField(max_length=300)  # what was imported (a file or folder name)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # what to check, in the import's order: [{"where", "task_version"}] and the import's refusals [{"where",
    # "slug", "message"}], which the report lists as not runnable here
    subjects = models.JSONField(default=list, blank=True)
    document = models.JSONField(null=True, blank=True)
    checked = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # when its job was sent; NULL: the broker did not take it (down), it waits for the broker (gymwright.jobs)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.source}: {self.status}"

    @property
    def total(self) -> int:
        return len(self.subjects or [])
