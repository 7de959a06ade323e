from django.urls import path

from review import views

app_name = "review"
urlpatterns = [
    path("review/", views.review_queue, name="queue"),
    path("review/tasks/<slug:slug>/", views.review_page, name="review_page"),
    path("review/labels/", views.label_queue, name="label_queue"),
    path("review/environments/<slug:slug>/", views.environment_dashboard, name="environment_dashboard"),
    path("review/environments/<slug:slug>/agreement/", views.agreement_page, name="agreement"),
    path("environments/<slug:slug>/calibration/", views.environment_calibration, name="environment_calibration"),
    path("review/tasks/<slug:slug>/blind/", views.blind_figures, name="blind_figures"),
    path("review/tasks/<slug:slug>/blind/<int:rollout_id>/", views.blind_score, name="blind_score"),
    path(
        "review/tasks/<slug:slug>/blind/hacks/<int:rollout_id>/example/",
        views.blind_hack_example,
        name="blind_hack_example",
    ),
    path(
        "review/tasks/<slug:slug>/blind/hacks/<int:rollout_id>/probe/",
        views.blind_hack_probe,
        name="blind_hack_probe",
    ),
    path("inbox/", views.inbox, name="inbox"),
    path("tasks/<slug:slug>/submit/", views.task_submit, name="task_submit"),
    path("tasks/<slug:slug>/review/", views.task_review, name="task_review"),
    path("tasks/<slug:slug>/gates/run/", views.gates_run, name="gates_run"),
    path("tasks/<slug:slug>/comments/", views.comment_create, name="comment_create"),
    path("tasks/<slug:slug>/comments/<int:comment_id>/resolve/", views.comment_resolve, name="comment_resolve"),
]
