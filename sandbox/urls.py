from django.urls import path

from sandbox import views

app_name = "sandbox"
urlpatterns = [
    path("start/<slug:slug>/v<int:number>/", views.preview_start, name="preview_start"),
    path("<int:preview_run_id>/", views.preview_detail, name="preview_detail"),
    path("<int:preview_run_id>/progress/", views.preview_progress, name="preview_progress"),
    path("<int:preview_run_id>/cancel/", views.preview_cancel, name="preview_cancel"),
    path("tasks/<slug:slug>/", views.task_previews, name="task_previews"),
    path("rollouts/<int:rollout_id>/", views.rollout_detail, name="rollout_detail"),
]
