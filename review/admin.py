from django.contrib import admin

from review.models import Review


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("task_version", "reviewer", "decision", "created_at")
    list_filter = ("decision",)
    list_select_related = ("task_version__task", "reviewer")
