from django.urls import path

from sandbox import apis

urlpatterns = [
    path(
        "tasks/<slug:slug>/versions/<int:number>/previews/",
        apis.TaskVersionPreviewsApi.as_view(),
        name="api-task-version-previews",
    ),
    path("previews/<int:preview_run_id>/", apis.PreviewRunDetailApi.as_view(), name="api-preview-detail"),
    path("previews/<int:preview_run_id>/cancel/", apis.PreviewRunCancelApi.as_view(), name="api-preview-cancel"),
    path("rollouts/<int:rollout_id>/", apis.RolloutDetailApi.as_view(), name="api-rollout-detail"),
]
