from django.urls import path

from grading import apis

urlpatterns = [
    path("schema/<str:name>.json", apis.format_schema, name="format-schema"),
    path("rubrics/validate/", apis.rubric_validate, name="rubric-validate"),
    path("grades/<int:grade_id>/", apis.grade_detail, name="grade-detail"),
    path("tasks/<slug:slug>/versions/<int:number>/examples/", apis.example_answers, name="api-task-version-examples"),
    path(
        "tasks/<slug:slug>/versions/<int:number>/examples/run/",
        apis.example_answers_run,
        name="api-task-version-examples-run",
    ),
    path("tasks/<slug:slug>/rubric/draft/", apis.rubric_draft, name="api-task-rubric-draft"),
    path("check-results/<int:check_result_id>/labels/", apis.judge_label_create, name="judge-label-create"),
]
