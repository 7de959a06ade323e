from django.urls import path

from review import views

app_name = "review"
urlpatterns = [
    path("tasks/<slug:slug>/submit/", views.task_submit, name="task_submit"),
    path("tasks/<slug:slug>/review/", views.task_review, name="task_review"),
]
