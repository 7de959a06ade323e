from django.urls import path

from review import apis

urlpatterns = [
    path("tasks/<slug:slug>/versions/<int:number>/submit/", apis.SubmitApi.as_view(), name="api-task-version-submit"),
    path(
        "tasks/<slug:slug>/versions/<int:number>/reviews/", apis.ReviewsApi.as_view(), name="api-task-version-reviews"
    ),
    path("tasks/<slug:slug>/versions/<int:number>/gates/", apis.GatesApi.as_view(), name="api-task-version-gates"),
    path(
        "tasks/<slug:slug>/versions/<int:number>/gates/run/",
        apis.GatesRunApi.as_view(),
        name="api-task-version-gates-run",
    ),
    path("tasks/<slug:slug>/comments/", apis.CommentsApi.as_view(), name="api-task-comments"),
    path(
        "tasks/<slug:slug>/comments/<int:comment_id>/resolve/",
        apis.CommentResolveApi.as_view(),
        name="api-task-comment-resolve",
    ),
    path("review-queue/", apis.ReviewQueueApi.as_view(), name="api-review-queue"),
    path("inbox/", apis.InboxApi.as_view(), name="api-inbox"),
    path("inbox/read/", apis.InboxReadApi.as_view(), name="api-inbox-read"),
    path("agreement/", apis.AgreementApi.as_view(), name="api-agreement"),
    path(
        "previews/<int:preview_run_id>/calibration/",
        apis.PreviewCalibrationApi.as_view(),
        name="api-preview-calibration",
    ),
]
