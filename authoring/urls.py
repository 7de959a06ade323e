from django.urls import path

from authoring import views

app_name = "authoring"
urlpatterns = [
    path("", views.task_list, name="task_list"),
    path("tasks/new/", views.task_create, name="task_create"),
    path("tasks/<slug:slug>/", views.task_detail, name="task_detail"),
    path("tasks/<slug:slug>/edit/", views.task_edit, name="task_edit"),
    path("tasks/<slug:slug>/versions/", views.task_versions, name="task_versions"),
    path("tasks/<slug:slug>/versions/<int:number>/", views.task_version_detail, name="task_version_detail"),
    path(
        "tasks/<slug:slug>/versions/<int:number>/files/<path:path>", views.task_version_file, name="task_version_file"
    ),
    path("tasks/<slug:slug>/diff/", views.task_diff, name="task_diff"),
    path("markdown/preview/", views.markdown_preview, name="markdown_preview"),
    path("environments/", views.environment_list, name="environment_list"),
    path("environments/new/", views.environment_create, name="environment_create"),
    path("environments/<slug:slug>/", views.environment_detail, name="environment_detail"),
    path("environments/<slug:slug>/edit/", views.environment_edit, name="environment_edit"),
    path("account/", views.account, name="account"),
]
