from django.urls import path

from grading import views

app_name = "grading"
urlpatterns = [
    path("dry-run/", views.dry_run_create, name="dry_run"),
    path("dry-runs/<int:dry_run_id>/", views.dry_run_detail, name="dry_run_detail"),
    path("grades/<int:grade_id>/", views.grade_detail, name="grade_detail"),
    path("kinds/", views.kinds_reference, name="kinds_reference"),
    path("tasks/<slug:slug>/versions/<int:number>/examples/", views.example_answers, name="example_answers"),
    path(
        "tasks/<slug:slug>/versions/<int:number>/examples/run/", views.example_answers_run, name="example_answers_run"
    ),
    path("check-results/<int:check_result_id>/label/", views.judge_label_create, name="judge_label"),
    path("environments/<slug:slug>/judge/", views.environment_judge, name="environment_judge"),
]
