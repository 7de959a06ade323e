from django.contrib import admin

from grading.endpoints import cache_clear
from grading.models import CheckResult, DryRun, Grade, JudgeLabel, ModelEndpoint


class CheckResultInline(admin.TabularInline):
    model = CheckResult
    extra = 0
    can_delete = False
    ordering = ["position"]
    fields = [
        "position",
        "depth",
        "check_id",
        "kind",
        "status",
        "score",
        "points",
        "awarded",
        "explanation",
        "duration_ms",
    ]
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Grade)
class GradeAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "source",
        "task_version",
        "rollout_id",
        "earned",
        "max",
        "reward",
        "passed",
        "complete",
        "created_at",
    ]
    list_filter = ["source", "passed", "complete", "gated"]
    search_fields = ["task_version__task__slug", "=rollout_id", "=id"]
    list_select_related = ["task_version__task"]
    raw_id_fields = ["task_version", "created_by"]
    readonly_fields = [
        "task_version",
        "rollout_id",
        "source",
        "reward",
        "earned",
        "max",
        "passed",
        "gated",
        "complete",
        "document",
        "created_by",
        "created_at",
    ]
    inlines = [CheckResultInline]
    date_hierarchy = "created_at"


@admin.register(CheckResult)
class CheckResultAdmin(admin.ModelAdmin):
    list_display = ["id", "grade", "check_id", "kind", "status", "score", "awarded"]
    list_filter = ["kind", "status"]
    search_fields = ["check_id", "=grade__id"]
    raw_id_fields = ["grade"]
    readonly_fields = [field.name for field in CheckResult._meta.fields]

    def has_add_permission(self, request):
        return False  # a check result is part of its grade, written by the grader (the form saved none: a 500)


@admin.register(JudgeLabel)
class JudgeLabelAdmin(admin.ModelAdmin):
    list_display = ["id", "check_result", "reviewer", "verdict", "score", "agrees", "created_at"]
    list_filter = ["verdict", "agrees"]
    search_fields = ["check_result__check_id", "reviewer__username", "comment"]
    raw_id_fields = ["check_result", "reviewer"]
    list_select_related = ["check_result", "reviewer"]


@admin.register(DryRun)
class DryRunAdmin(admin.ModelAdmin):
    list_display = ["id", "status", "task", "task_version", "created_by", "created_at", "finished_at", "grade"]
    list_filter = ["status"]
    search_fields = ["task__slug", "created_by__username", "error"]
    raw_id_fields = ["task", "task_version", "grade", "created_by"]
    readonly_fields = ["created_at", "started_at", "finished_at"]
    list_select_related = ["task", "task_version", "created_by", "grade"]


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "role", "model", "base_url", "api_key_env", "is_default", "response_format")
    list_filter = ("role", "is_default", "response_format")
    search_fields = ("name", "model", "base_url")

    # Pages and workers read endpoints through a per-process cache (GYMWRIGHT_ENDPOINT_CACHE_S): this
    # process sees a change at once, the others within that many seconds.
    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        cache_clear()

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        cache_clear()

    def delete_queryset(self, request, queryset):
        super().delete_queryset(request, queryset)
        cache_clear()

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "base_url":
            kwargs["assume_scheme"] = "https"
        return super().formfield_for_dbfield(db_field, request, **kwargs)
