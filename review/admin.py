from django.contrib import admin

from review.models import BlindRule, Review


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("task_version", "reviewer", "decision", "created_at")
    list_filter = ("decision",)
    list_select_related = ("task_version__task", "reviewer")


@admin.register(BlindRule)
class BlindRuleAdmin(admin.ModelAdmin):
    list_display = ("environment", "min_correlation", "min_scored")
    list_select_related = ("environment",)
