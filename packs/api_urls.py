from django.urls import path

from packs import apis

urlpatterns = [
    path("packs/", apis.PackListApi.as_view(), name="api-pack-list"),
    path("packs/<slug:slug>/versions/", apis.PackVersionListApi.as_view(), name="api-pack-versions"),
    path("packs/<slug:slug>/versions/<str:version>/", apis.PackVersionDetailApi.as_view(), name="api-pack-version"),
    path(
        "packs/<slug:slug>/versions/<str:version>/download/",
        apis.PackVersionDownloadApi.as_view(),
        name="api-pack-version-download",
    ),
    path("imports/", apis.ImportFileApi.as_view(), name="api-import-file"),
    path("imports/bulk/", apis.ImportBulkApi.as_view(), name="api-import-bulk"),
    # A version's rubric in another format: packs holds the formats (packs.importer.rubric_formats).
    path(
        "tasks/<slug:slug>/versions/<int:number>/rubric/",
        apis.TaskVersionRubricExportApi.as_view(),
        name="api-task-version-rubric",
    ),
]
