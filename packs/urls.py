from django.urls import path

from packs import views

app_name = "packs"
urlpatterns = [
    path("", views.pack_list, name="pack_list"),
    path("import/", views.task_import, name="task_import"),
    path("health/<int:check_id>/", views.dataset_check_detail, name="dataset_check"),
    path("health/<int:check_id>.json", views.dataset_check_json, name="dataset_check_json"),
    path("<slug:slug>/", views.pack_detail, name="pack_detail"),
    path("<slug:slug>/<str:version>/", views.pack_version_detail, name="pack_version"),
    path("<slug:slug>/<str:version>/progress/", views.pack_version_progress, name="pack_version_progress"),
    path("<slug:slug>/<str:version>/verification/", views.pack_version_verification, name="pack_version_verification"),
    path("<slug:slug>/<str:version>/cancel/", views.pack_version_cancel, name="pack_version_cancel"),
    path("<slug:slug>/<str:version>/download/", views.pack_version_download, name="pack_version_download"),
]
