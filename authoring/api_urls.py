from django.urls import path

from authoring import apis

urlpatterns = [
    path("environments/", apis.EnvironmentListApi.as_view(), name="api-environment-list"),
    path("environments/<slug:slug>/", apis.EnvironmentDetailApi.as_view(), name="api-environment-detail"),
    path(
        "environments/<slug:slug>/versions/", apis.EnvironmentVersionListApi.as_view(), name="api-environment-versions"
    ),
    path("tasks/", apis.TaskListApi.as_view(), name="api-task-list"),
    path("tasks/<slug:slug>/", apis.TaskDetailApi.as_view(), name="api-task-detail"),
    path("tasks/<slug:slug>/versions/", apis.TaskVersionListApi.as_view(), name="api-task-versions"),
    path("tasks/<slug:slug>/versions/<int:number>/", apis.TaskVersionDetailApi.as_view(), name="api-task-version"),
    path("tasks/<slug:slug>/diff/", apis.TaskDiffApi.as_view(), name="api-task-diff"),
    path("blobs/", apis.BlobUploadApi.as_view(), name="api-blob-upload"),
]
