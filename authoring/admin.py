from django.contrib import admin

from authoring.models import AuditEvent, Blob, Environment, EnvironmentVersion, Tag, Task, TaskVersion


class ReadOnlyAdmin(admin.ModelAdmin):
    """Versions and audit events are append-only: the admin may look, not change."""

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "owner", "latest_version", "judge_unvalidated_blocks", "updated_at")
    search_fields = ("slug", "name")
    list_select_related = ("owner", "latest_version")
    raw_id_fields = ("owner", "latest_version")


@admin.register(EnvironmentVersion)
class EnvironmentVersionAdmin(ReadOnlyAdmin):
    list_display = ("environment", "number", "author", "created_at", "sha256")
    list_select_related = ("environment", "author")
    search_fields = ("environment__slug",)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("slug", "title", "environment", "status", "owner", "latest_version", "updated_at")
    list_filter = ("status", "environment")
    search_fields = ("slug", "title")
    list_select_related = ("environment", "owner", "latest_version")
    raw_id_fields = ("owner", "latest_version")
    filter_horizontal = ("tags",)
    # What a lab member is shown of the approved version, set by approving (review.services): changed here it
    # would disagree with the version it describes.
    readonly_fields = ("approved_version", "approved_title", "approved_tags", "approved_at")


@admin.register(TaskVersion)
class TaskVersionAdmin(ReadOnlyAdmin):
    list_display = ("task", "number", "author", "created_at", "sha256")
    list_select_related = ("task", "author")
    search_fields = ("task__slug",)


@admin.register(Blob)
class BlobAdmin(ReadOnlyAdmin):
    list_display = ("sha256", "size", "created_at")
    search_fields = ("sha256",)


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ("name",)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "verb", "content_type", "object_id", "summary")
    list_filter = ("verb", "content_type")
    search_fields = ("summary",)
    list_select_related = ("actor", "content_type")
