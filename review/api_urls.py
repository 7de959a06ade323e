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
    path("tasks/<slug:slug>/blind/", apis.BlindFiguresApi.as_view(), name="api-task-blind"),
    path("tasks/<slug:slug>/blind/sample/", apis.BlindSampleApi.as_view(), name="api-task-blind-sample"),
    path(
        "tasks/<slug:slug>/blind/rollouts/<int:rollout_id>/score/",
        apis.BlindScoreApi.as_view(),
        name="api-task-blind-score",
    ),
    path(
        "tasks/<slug:slug>/blind/hacks/<int:rollout_id>/example/",
        apis.BlindHackExampleApi.as_view(),
        name="api-task-blind-hack-example",
    ),
    path(
        "tasks/<slug:slug>/blind/hacks/<int:rollout_id>/probe/",
        apis.BlindHackProbeApi.as_view(),
        name="api-task-blind-hack-probe",
    ),
    path("environments/<slug:slug>/blind/", apis.EnvironmentBlindFiguresApi.as_view(), name="api-environment-blind"),
]
