from django.urls import path

app_name = "grading"
urlpatterns = []
