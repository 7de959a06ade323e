from django.contrib import admin, messages

from sandbox import services
from sandbox.models import PreviewRun, Rollout


class RolloutInline(admin.TabularInline):
    model = Rollout
    fields = ("index", "status", "attempts", "reward", "passed", "steps", "duration_ms", "worker", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(PreviewRun)
class PreviewRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "task_version",
        "policy",
        "n",
        "backend",
        "status",
        "cancel_requested",
        "created_by",
        "created_at",
    )
    list_filter = ("status", "backend")
    search_fields = ("task_version__task__slug", "policy")
    list_select_related = ("task_version__task", "created_by")
    readonly_fields = (
        "task_version",
        "created_by",
        "policy",
        "n",
        "backend",
        "status",
        "cancel_requested",
        "summary",
        "created_at",
        "finished_at",
    )
    inlines = [RolloutInline]
    actions = ["cancel"]

    def has_add_permission(self, request):
        return False  # previews start from the task page or the API, which enqueue their jobs

    @admin.action(description="Cancel the selected previews")
    def cancel(self, request, queryset):
        for preview_run in queryset:
            services.preview_run_cancel(preview_run=preview_run, user=request.user)
        messages.success(request, f"Cancelled {queryset.count()} preview(s).")


@admin.register(Rollout)
class RolloutAdmin(admin.ModelAdmin):
    list_display = ("id", "preview_run", "index", "status", "attempts", "reward", "passed", "worker", "heartbeat_at")
    list_filter = ("status",)
    search_fields = ("preview_run__task_version__task__slug", "worker", "error")
    list_select_related = ("preview_run",)
    readonly_fields = [field.name for field in Rollout._meta.fields]
    actions = ["reap_stale"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Reap stale rollouts (all, not only the selected)")
    def reap_stale(self, request, queryset):
        result = services.rollouts_reap_stale()
        messages.info(
            request,
            f"Re-queued {len(result['requeued'])}, failed {len(result['failed'])}, "
            f"re-sent {len(result['resent'])} lost message(s), "
            f"removed {result['containers_removed']} container(s).",
        )
